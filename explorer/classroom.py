"""Who is at this browser, on a server a class shares: a learner, who changes only their own runs, or the teacher,
who changes every run and may clear the queue of waiting runs. Everyone may view, inspect, trace and download
every run.

A learner is a random token this browser keeps in a cookie (written by the Train page's script on the first visit;
Streamlit hands the page the cookies its websocket was opened with), so a reload or another tab of the same
browser is the same learner. A run records only a hash of the token (meta.json's "owner"), since anyone may
download a run's files. The teacher is whoever gives the teacher password, read from the environment
(GPTCORE_TEACHER_PASSWORD) or from .streamlit/secrets.toml (teacher_password), never from the repository; a
second cookie, a key made of the password and this browser's token, keeps them the teacher over a reload. On a
server only this machine can reach (server.address localhost, the default) the one user is the teacher and
nothing asks; GPTCORE_CLASSROOM=1 makes every browser a learner there too, to see the app as a learner does.
A run without an owner (made before runs had one, by the command line, or by the teacher) is the teacher's.
"""
from __future__ import annotations

import hashlib
import hmac
import math
import os
import re
import secrets
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import streamlit as st

from gptcore import runs
from gptcore.describe import format_duration
from gptcore.errors import Message, message
from gptcore.queue import QueuedRun, QueueError

from . import training
from .i18n import say, t
from .jobs import JobRegistry
from .ui import job_registry

ss = st.session_state
COOKIE, TEACHER_COOKIE = "gptcore_learner", "gptcore_teacher"
COOKIE_AGE_S = 180 * 24 * 3600  # a school term and then some
PASSWORD_VARIABLE, SECRET = "GPTCORE_TEACHER_PASSWORD", "teacher_password"
CLASSROOM_VARIABLE = "GPTCORE_CLASSROOM"  # 1: every browser is a learner, on localhost too
PER_LEARNER_VARIABLE = "GPTCORE_QUEUE_PER_LEARNER"  # runs a learner may have waiting at once (1 when unset)
LOOPBACK = ("localhost", "127.0.0.1", "::1")
FORWARDED = {"x-forwarded-for", "forwarded", "x-real-ip", "x-forwarded-host"}  # what proxies and tunnels add
TOKEN = re.compile(r"^[A-Za-z0-9_-]{32}$")  # secrets.token_urlsafe(24)
FREE_TRIES, FREE_TRIES_ADDRESS = 3, 10  # wrong teacher passwords before each next try waits (a browser; an address,
# which a classroom behind one router shares)
MAX_WAIT_S = 600.0


@dataclass(frozen=True)
class Visitor:
    learner: str  # this browser's learner id: the hash of its token
    teacher: bool

    @property
    def owner(self) -> str | None:
        """What a run this visitor starts records as its owner (None: the teacher's)."""
        return None if self.teacher else self.learner


def learner_id(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()[:16]


def teacher_key(token: str, password: str) -> str:
    """The teacher cookie's value for this browser: worthless without its token, and no clue to the password."""
    return hmac.new(password.encode(), token.encode(), hashlib.sha256).hexdigest()


def teacher_password() -> str | None:
    """The teacher password from the environment, else from .streamlit/secrets.toml; None when neither sets one
    (or the secrets file cannot be read: secrets_problem says why)."""
    if password := os.environ.get(PASSWORD_VARIABLE):
        return password
    try:
        password = st.secrets.get(SECRET)
    except FileNotFoundError:  # (Streamlit's StreamlitSecretNotFoundError: no secrets file, or one it cannot read)
        return None
    return str(password) if password else None


def secrets_problem() -> Message | None:
    """Why the secrets file that exists cannot give the teacher password (a TOML mistake, say); None when it can
    or when there is none."""
    if os.environ.get(PASSWORD_VARIABLE):
        return None
    try:
        st.secrets.get(SECRET)
    except FileNotFoundError as e:
        if any(Path(path).is_file() for path in st.get_option("secrets.files")):
            return message("classroom.bad_secrets", "The secrets file cannot be read, so no teacher password is set: "
                           "{reason}", reason=str(e)[:300])
    return None


def connection(value) -> str:
    """A text of the browser's connection (a cookie, its address), '' when it has none. (Streamlit's AppTest stands
    mocks in for the connection: a test is a browser on this machine without cookies.)"""
    return value if isinstance(value, str) else ""


def cookie(name: str) -> str:
    return connection(st.context.cookies.get(name))


def local_only() -> bool:
    """Does only this machine reach the server (its default address), from this machine? Its one user is the
    teacher then. (Streamlit gives no address for a browser on this machine.)"""
    if os.environ.get(CLASSROOM_VARIABLE, "").strip() not in ("", "0"):
        return False
    headers = {name.lower() for name in (st.context.headers or {})}
    if headers & FORWARDED:  # (a proxy or tunnel on this machine: the browser behind it may be anyone's)
        return False
    return str(st.get_option("server.address") or "") in LOOPBACK and not connection(st.context.ip_address)


def per_learner() -> int:
    """How many runs a learner may have waiting at once (the teacher: any number)."""
    text = os.environ.get(PER_LEARNER_VARIABLE, "").strip() or "1"
    if not text.isdigit() or int(text) < 1:
        raise QueueError("classroom.bad_limit", "{variable} must be a whole number of waiting runs per learner, 1 or "
                         "more; it is '{value}'", variable=PER_LEARNER_VARIABLE, value=text)
    return int(text)


def token() -> str:
    """This browser's learner token: the cookie's, or a new one (which keep_in_browser then writes)."""
    if "classroom_token" not in ss:
        kept = cookie(COOKIE)
        ss.classroom_token = kept if TOKEN.match(kept) else secrets.token_urlsafe(24)
    return ss.classroom_token


def visitor() -> Visitor:
    mine, password = token(), teacher_password()
    if local_only():
        return Visitor(learner_id(mine), teacher=True)
    if "classroom_teacher" in ss:  # (signed in or out in this session: the cookie sent at its start is old news)
        signed_in = ss.classroom_teacher
    else:
        signed_in = hmac.compare_digest(cookie(TEACHER_COOKIE).encode(), teacher_key(mine, password or "").encode())
    return Visitor(learner_id(mine), teacher=bool(password and signed_in))


def refusal(owner: str | None, who: Visitor) -> Message | None:
    """Why this visitor may not change a run or a training of owner's; None when they may."""
    return runs.owner_blocker(owner, who.owner)


def whose(owner: str | None, who: Visitor) -> str:
    """The owner as the runs table names them, in the tab's language."""
    if owner == who.owner:
        return t("training.owner.you")
    return t("training.owner.teacher") if owner is None else t("training.owner.learner", id=owner[:4])


def is_waiting(run: runs.RunInfo, registry: JobRegistry) -> bool:
    return any(waiting.name == run.name for waiting in training.waiting_runs(registry))


def blocker(run: runs.RunInfo, action: str, who: Visitor, registry: JobRegistry) -> Message | None:
    """Why this visitor cannot continue, rename or delete a run now, as runs.RunInfo.blocker decides; None when they
    can. The action itself refuses with the same sentence: run.refuse(action, who.owner, is_waiting(...))."""
    return run.blocker(action, who.owner, is_waiting(run, registry))


def may_cancel(run: QueuedRun, who: Visitor) -> bool:
    return who.teacher or who.learner in (run.owner, run.queued_by)


def mine(registry: JobRegistry, who: Visitor) -> list[tuple[int, QueuedRun]]:
    """(place, run) of the runs this visitor has waiting."""
    return [(place, run) for place, run in enumerate(training.waiting_runs(registry), 1)
            if run.queued_by == who.owner]


# ---------------------------------------------------------------- the browser's cookies

def keep_in_browser() -> None:
    """Write this browser's cookies where they differ from what it holds: the learner token on a first visit, the
    teacher key after a sign-in (emptied after a sign-out). A script in the page writes them (Streamlit itself
    sets no cookie); the page calls this last."""
    wanted = {COOKIE: token()}
    if "classroom_teacher" in ss:
        password = teacher_password()
        wanted[TEACHER_COOKIE] = teacher_key(token(), password) if ss.classroom_teacher and password else ""
    held = ss.get("classroom_cookies") or {name: cookie(name) for name in wanted}
    if all(held.get(name) == value for name, value in wanted.items()):
        return
    script = "".join(f'document.cookie = "{name}={value}; path=/; max-age={COOKIE_AGE_S if value else 0}; '
                     f'SameSite=Strict";' for name, value in wanted.items())
    st.html(f"<script>{script}</script>", unsafe_allow_javascript=True)
    ss.classroom_cookies = wanted


@dataclass
class Tries:
    """Wrong teacher passwords from one browser or one address: past the free ones, each makes the next try wait
    twice as long as the last (1 s, 2 s, 4 s … at most MAX_WAIT_S), so guessing it takes hours, not seconds."""
    free: int
    failures: int = 0
    last: float = 0.0  # time.monotonic() of the last wrong password

    def wait(self, now: float) -> float:
        """Seconds until the next try is heard (0: now)."""
        if self.failures < self.free:
            return 0.0
        return max(0.0, self.last + min(MAX_WAIT_S, 2.0 ** (self.failures - self.free)) - now)

    def failed(self, now: float) -> None:
        self.failures, self.last = self.failures + 1, now


@st.cache_resource(show_spinner=False)
def _address_tries() -> tuple[threading.Lock, dict[str, Tries]]:
    """Every address's wrong passwords, for the whole server (a new session of the same browser counts on)."""
    return threading.Lock(), {}


def sign_in() -> None:
    """Check the password given; wrong ones slow the next try, per session and per address (wait_for_password)."""
    password = teacher_password()
    given = ss.get("tr_teacher_password", "")
    ss.tr_teacher_password = ""
    now, lock, addresses = time.monotonic(), *_address_tries()
    with lock:
        tries = [ss.setdefault("classroom_tries", Tries(FREE_TRIES)),
                 addresses.setdefault(connection(st.context.ip_address), Tries(FREE_TRIES_ADDRESS))]
        if (wait := max(each.wait(now) for each in tries)) > 0:
            ss.tr_teacher_feedback = wait_message(wait)
            return
        ss.classroom_teacher = bool(password) and hmac.compare_digest(given.encode(), password.encode())
        if ss.classroom_teacher:
            ss.classroom_tries, ss.tr_teacher_feedback = Tries(FREE_TRIES), None
            return
        for each in tries:
            each.failed(now)
        wait = max(each.wait(now) for each in tries)
    ss.tr_teacher_feedback = message("classroom.wrong_password", "That is not the teacher password.") if not wait \
        else message("classroom.wrong_password_wait", "That is not the teacher password. Too many wrong tries: the "
                     "next is heard in {seconds:,} s.", seconds=math.ceil(wait))


def wait_message(wait: float) -> Message:
    return message("classroom.password_wait", "Too many wrong passwords from this browser or its network: try again "
                   "in {seconds:,} s.", seconds=math.ceil(wait))


def sign_out() -> None:
    ss.classroom_teacher, ss.tr_teacher_feedback = False, None


# ---------------------------------------------------------------- the queue and the teacher, on the page

def cancel_waiting(run_id: str) -> None:
    registry, who = job_registry(), visitor()
    ss.tr_queue_feedback = None
    run = next((r for r in registry.waiting.runs() if r.id == run_id), None)
    if run is not None and not may_cancel(run, who):
        ss.tr_queue_feedback = message("classroom.not_yours", "'{name}' is another learner's: only they and the "
                                       "teacher can cancel it.", name=run.name) if run.queued_by else \
            message("classroom.not_yours_teacher", "'{name}' was queued by the teacher: only the teacher can cancel "
                    "it.", name=run.name)
    elif run is None or registry.waiting.cancel(run_id) is None:  # (gone, or started a moment ago)
        ss.tr_queue_feedback = message("classroom.not_waiting", "That run is no longer waiting: it has started, or "
                                       "was cancelled.")


def clear_queue() -> None:
    ss.tr_queue_feedback = None
    if not visitor().teacher:
        ss.tr_queue_feedback = message("classroom.teacher_only", "Only the teacher can clear the queue.")
        return
    job_registry().waiting.clear()


def starts_in(seconds: float | None) -> str:
    if seconds is None:
        return t("training.queue.not_known")
    return t("training.queue.next") if seconds < 1 else t("training.queue.in", time=say(format_duration(seconds)))


def queue_panel(registry: JobRegistry) -> None:
    """The runs waiting to train, next first, each with its owner, expected start and duration; Cancel beside
    those this visitor may cancel, and Clear the queue for the teacher."""
    who = visitor()
    try:
        waiting = registry.waiting.runs()
        if waiting and registry.slot_free():  # (the queue was mended, or a start failed: try again now)
            registry.start_waiting()
            waiting = registry.waiting.runs()
    except QueueError as e:
        st.error(say(e))
        waiting = None
    if (notice := registry.waiting.notice) is not None and ss.get("tr_queue_notice") != notice:
        st.warning(say(notice))  # (once a session: the queue works on)
        ss.tr_queue_notice = notice
    if said := ss.get("tr_queue_feedback"):
        st.warning(say(said))
    if waiting == []:
        return
    # each button as wide as its words, beside its line where there is room, else under it
    head = st.container(horizontal=True, vertical_alignment="bottom")
    head.markdown(t("training.queue.heading", n=len(waiting or [])), width="stretch")
    if who.teacher:  # (who may also mend a queue file that cannot be read)
        head.button(t("training.queue.clear"), key="tr_clear_queue", on_click=clear_queue)
    waiting = waiting or []
    for place, (run, (starts, lasts)) in enumerate(zip(waiting, training.waiting_times(registry, waiting)), 1):
        row = st.container(horizontal=True, vertical_alignment="center")
        row.markdown(t("training.queue.row", place=place, name=run.name, owner=whose(run.owner, who),
                       starts=starts_in(starts), lasts=say(format_duration(lasts)) if lasts else "–"), width="stretch")
        if may_cancel(run, who):
            row.button(t("training.queue.cancel"), key=f"tr_cancel_{run.id}", on_click=cancel_waiting,
                       args=(run.id,))


def waiting_note(registry: JobRegistry) -> None:
    """Under Start: where this visitor's waiting runs stand (queue_panel says when they start), or that a Start now
    would wait."""
    who = visitor()
    waiting = training.waiting_runs(registry)
    for place, run in mine(registry, who):
        st.info(t("training.queue.yours", name=run.name, place=place, of=len(waiting)))
    busy = registry.live(training.JOB_KIND)
    if busy and not registry.slot_free() and not mine(registry, who):
        st.caption(t("training.queue.would_wait", names=", ".join(busy), place=len(waiting) + 1))


def teacher_box() -> None:
    """Sign in as the teacher (nothing to sign in to where only this machine reaches the server)."""
    if local_only():
        return
    who, password = visitor(), teacher_password()
    with st.expander(t("training.teacher.heading")):
        if who.teacher:
            st.caption(t("training.teacher.signed_in"))
            st.button(t("training.teacher.sign_out"), key="tr_teacher_out", on_click=sign_out)
            return
        st.caption(t("training.teacher.learner"))
        if password is None:
            if problem := secrets_problem():
                st.error(say(problem))
            st.caption(t("training.teacher.no_password", variable=PASSWORD_VARIABLE, secret=SECRET))
            return
        st.text_input(t("training.teacher.password"), type="password", key="tr_teacher_password")
        st.button(t("training.teacher.sign_in"), key="tr_teacher_in", on_click=sign_in)
        st.caption(t("training.teacher.slowed", free=FREE_TRIES))
        if said := ss.get("tr_teacher_feedback"):
            st.error(say(said))
