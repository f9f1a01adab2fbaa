"""A class on one server, through the Train page (AppTest): each session is a learner of its own
(GPTCORE_CLASSROOM=1: as on a LAN), who changes only their own runs; the teacher signs in and changes every run.

Runs use a tiny model on 20,000 built-in characters; a learner's "long" run trains until it is stopped.
"""
import pytest
from streamlit.testing.v1 import AppTest
from test_page_training import PAGE, TINY, finish, start, texts, wait_for_step

from explorer import classroom
from explorer.ui import job_registry
from gptcore import checkpoint as ckpt
from gptcore import folders
from gptcore.config import GPTConfig, TrainConfig
from gptcore.queue import DATABASE, JOBS, QueuedRun, RunQueue

PASSWORD = "chalk and cheese"


@pytest.fixture(autouse=True)
def root(tmp_path, monkeypatch, runs_in_threads):
    monkeypatch.setattr(folders, "CHECKPOINT_ROOT", tmp_path)
    monkeypatch.setenv("GPTCORE_DATA", str(tmp_path))
    monkeypatch.setenv(classroom.CLASSROOM_VARIABLE, "1")
    monkeypatch.setenv(classroom.PASSWORD_VARIABLE, PASSWORD)
    job_registry.clear()
    classroom._address_tries.clear()
    yield tmp_path
    registry = job_registry()
    registry.waiting.clear()
    for name in registry.live():
        registry.get(name).stop()
    for job in list(registry.jobs.values()):
        job.join(60)
    job_registry.clear()


def learner(**settings) -> AppTest:
    """A browser of its own: a new session, so a learner of its own."""
    at = AppTest.from_file(PAGE, default_timeout=60)
    at.session_state["tr_builtin_chars"] = 20_000
    for key, value in {**TINY, **settings}.items():
        at.query_params[key] = value
    return at.run()


def teacher() -> AppTest:
    at = learner()
    at.text_input(key="tr_teacher_password").set_value(PASSWORD).run()
    at.button(key="tr_teacher_in").click().run()
    assert "You are signed in as the teacher: you can change every run and clear the queue." in texts(at.caption)
    return at


def drawn_as_teacher(at: AppTest) -> AppTest:
    """The page as the teacher saw it, every button on; the next click comes from a learner again (a page drawn
    before a sign-out, or a message crafted to click a button the page has turned off)."""
    at.session_state["classroom_teacher"] = True
    at.run()
    at.session_state["classroom_teacher"] = False
    return at


def manage(at: AppTest, name: str) -> AppTest:
    at.selectbox(key="tr_manage").set_value(name).run()
    return at


def test_a_second_learner_can_neither_stop_continue_rename_nor_delete_the_firsts_run_and_the_teacher_can(root):
    first = start(learner(tr_t_steps=1_000_000), "firsts")
    wait_for_step("firsts", 2)
    second = learner()
    assert second.button(key="tr_stop").disabled and second.button(key="tr_pause").disabled
    assert "It is another learner's run: only they and the teacher can change it." in texts(second.caption)
    drawn_as_teacher(second).button(key="tr_stop").click().run()  # (a click the page had not turned off)
    assert job_registry().get("firsts").state.status == "running"
    assert any("It is another learner's run" in w for w in texts(second.warning))
    first.run().button(key="tr_stop").click().run()  # its owner may
    finish("firsts")
    owner = ckpt.read_meta(root / "firsts")["owner"]
    assert owner == classroom.learner_id(first.session_state["classroom_token"])

    second = manage(second.run(), "firsts")
    table = second.dataframe[0].value
    assert table.loc[table["run"] == "firsts", "owner"].item().startswith("learner ")
    assert manage(first.run(), "firsts").dataframe[0].value.loc[0, "owner"] == "you"
    assert second.button(key="tr_continue").disabled and second.button(key="tr_rename").disabled
    assert second.checkbox(key="tr_delete_sure").disabled
    assert "It is another learner's run: only they and the teacher can change it." in texts(second.caption)
    drawn_as_teacher(second).text_input(key="tr_new_name_firsts").set_value("mine-now")
    second.button(key="tr_rename").click().run()
    assert texts(second.error) == ["Cannot rename 'firsts'. It is another learner's run: only they and the teacher "
                                   "can change it."]
    second.session_state["classroom_teacher"] = True
    second.run().checkbox(key="tr_delete_sure").check().run()  # (the teacher's page: Delete is on)
    second.session_state["classroom_teacher"] = False
    second.button(key="tr_delete").click().run()
    assert "Cannot delete 'firsts'" in texts(second.error)[0]
    drawn_as_teacher(second).button(key="tr_continue").click().run()
    assert "Cannot continue 'firsts'" in texts(second.error)[0]
    assert (root / "firsts" / "model.safetensors").is_file() and not (root / "mine-now").exists()
    assert set(job_registry().live()) == set() and job_registry().waiting.runs() == []

    boss = manage(teacher(), "firsts")
    assert not boss.button(key="tr_rename").disabled
    boss.text_input(key="tr_new_name_firsts").set_value("renamed").run()
    boss.button(key="tr_rename").click().run()
    assert not boss.error and (root / "renamed").is_dir()
    assert ckpt.read_meta(root / "renamed")["owner"] == owner  # still the learner's
    boss.checkbox(key="tr_delete_sure").check().run()
    boss.button(key="tr_delete").click().run()
    assert not boss.error and not (root / "renamed").exists()


def test_a_learner_may_have_one_run_waiting_cancel_it_and_the_teacher_clears_the_queue(root):
    start(learner(tr_t_steps=1_000_000), "long")
    second = start(learner(), "waits")
    [note] = [i for i in texts(second.info) if "waiting to train" in i]
    assert note.startswith("**waits** is waiting to train: place 1 of 1 in the queue")
    assert second.button(key="tr_start").disabled  # one waiting run each
    assert any("You have a run waiting to train already (waits)" in w for w in texts(second.warning))
    [waiting] = job_registry().waiting.runs()
    assert second.button(key=f"tr_cancel_{waiting.id}")  # its own
    assert not [b for b in learner().button if b.key == f"tr_cancel_{waiting.id}"]  # nobody else's
    second.button(key=f"tr_cancel_{waiting.id}").click().run()
    assert job_registry().waiting.runs() == [] and not second.button(key="tr_start").disabled

    start(second, "again")
    third = learner(lang="zh")
    start(third, "third")
    assert "**third** 正在排队等待训练：队列中第 2 位，共 2 个" in " ".join(texts(third.info))
    assert third.button(key=f"tr_cancel_{job_registry().waiting.runs()[1].id}")
    assert [run.name for run in job_registry().waiting.runs()] == ["again", "third"]
    assert not [b for b in third.button if b.key == "tr_clear_queue"]
    boss = teacher()
    boss.button(key="tr_clear_queue").click().run()
    assert job_registry().waiting.runs() == [] and set(job_registry().live()) == {"long"}


def test_a_wrong_password_is_a_sentence_and_no_password_says_how_to_set_one(monkeypatch):
    at = learner()
    at.text_input(key="tr_teacher_password").set_value("guess").run()
    at.button(key="tr_teacher_in").click().run()
    assert texts(at.error) == ["That is not the teacher password."]
    monkeypatch.delenv(classroom.PASSWORD_VARIABLE)
    assert any("No teacher password is set on this server" in c for c in texts(learner().caption))


def test_wrong_passwords_make_each_next_try_wait_longer_even_the_right_one_and_the_page_says_so(monkeypatch):
    now = [1000.0]
    monkeypatch.setattr(classroom.time, "monotonic", lambda: now[0])
    at = learner()
    assert "After 3 wrong passwords, each try waits twice as long as the one before, counted for this browser and " \
           "for its network." in texts(at.caption)

    def sign_in(password: str) -> list[str]:
        at.text_input(key="tr_teacher_password").set_value(password).run()
        return texts(at.button(key="tr_teacher_in").click().run().error)

    assert [sign_in("guess") for _ in range(2)] == [["That is not the teacher password."]] * 2
    assert sign_in("guess") == ["That is not the teacher password. Too many wrong tries: the next is heard in 1 s."]
    assert sign_in(PASSWORD) == ["Too many wrong passwords from this browser or its network: try again in 1 s."]
    now[0] += 1
    assert sign_in("guess") == ["That is not the teacher password. Too many wrong tries: the next is heard in 2 s."]
    now[0] += 1.5
    assert sign_in(PASSWORD) == ["Too many wrong passwords from this browser or its network: try again in 1 s."]
    now[0] += 0.5
    assert sign_in(PASSWORD) == [] and "You are signed in as the teacher: you can change every run and clear the " \
                                       "queue." in texts(at.caption)


def test_an_address_past_its_free_tries_waits_in_every_new_session():
    tries = classroom.Tries(free=classroom.FREE_TRIES_ADDRESS)
    for second in range(10):
        assert tries.wait(second) == 0
        tries.failed(second)
    assert [tries.wait(9 + t) for t in (0, 0.5, 1)] == [1, 0.5, 0]  # 1 s after the tenth, then 2, 4, …
    tries.failed(10)
    assert tries.wait(10) == 2
    for _ in range(20):
        tries.failed(100)
    assert tries.wait(100) == classroom.MAX_WAIT_S  # at most ten minutes a try


def test_on_localhost_the_one_user_is_the_teacher_and_nothing_asks(monkeypatch, root):
    monkeypatch.delenv(classroom.CLASSROOM_VARIABLE)
    at = start(learner(), "mine")
    finish("mine")
    assert not [e for e in at.run().text_input if e.key == "tr_teacher_password"]
    assert "owner" not in ckpt.read_meta(root / "mine")  # the teacher's, as a run of the command line
    assert manage(at, "mine").dataframe[0].value.loc[0, "owner"] == "you"


def test_a_damaged_queue_store_is_said_on_the_page_once_and_rebuilt_with_its_waiting_run(root):
    tiny = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=48, context=16)
    RunQueue(root).add(QueuedRun(name="waited", action="new", model=tiny.to_dict(), work=1.0, owner="x", queued_by="x",
                                 train=TrainConfig(steps=5, batch_size=4, threads=1).to_dict(),
                                 source={"kind": "builtin", "chars": 20_000}), per_learner=1)
    (root / JOBS / DATABASE).write_bytes(b"not a database" * 100)
    job_registry.clear()
    at = learner()
    assert not at.exception
    [said] = [w for w in texts(at.warning) if w.startswith("The queue's database")]
    assert "was damaged (file is not a database)" in said and "with 1 waiting run(s)" in said
    job_registry().get("waited").join(60)  # (it waited, and it started once the store was rebuilt)
    assert job_registry().get("waited").state.status == "finished"
    assert not [w for w in texts(at.run().warning) if w.startswith("The queue's database")]
