"""Training runs as processes of their own: started from the queue, watched and steered through their job folder.

    python -m gptcore worker [--checkpoints DIR] [--slots N]     train the queue's runs, N at a time, until Ctrl-C

A process with a free slot (an app server, or the command above) takes the next waiting run from the queue
(gptcore.queue) and starts `python -m gptcore worker --job .jobs/<id>`, at a lower CPU priority, which trains that
one run and exits. The run's process and whoever watches it share only files in the job folder:
  events.jsonl   what the run reports, one JSON object a line, appended as it trains (its set-up, each step,
                 evaluation, sample and checkpoint, and how it ended); read by offset, so each look reads only
                 what is new
  control.json   {"pause": bool, "stop": bool}, written whole by whoever may steer the run, read by the run
                 every POLL_S
  output.log     its standard output and error (a crash's traceback)
The process holds the job's lock for as long as it lives. A run whose process dies without saying how it ended
(a kill -9, the out-of-memory killer, a crash in native code) has ended all the same: it is interrupted, and its
folder keeps its last checkpoint, from which it continues.

The server imports this module to start and watch runs, before torch has loaded; what only a run's process needs
(the Trainer, torch) is imported inside the functions that train.
"""
from __future__ import annotations

import faulthandler
import json
import os
import signal
import subprocess
import sys
import threading
import time
import traceback
from collections.abc import Callable
from pathlib import Path

from . import fs
from .errors import Message, UserError, message, message_record
from .queue import Claim, QueuedRun, QueueError, RunQueue

NICENESS = 10  # a run's CPU priority: 0 is normal, 19 the lowest; the server answering its learners comes first
POLL_S = 0.2  # how often a run reads its control file, and a worker looks for a run to start
EVENTS, CONTROL, OUTPUT = "events.jsonl", "control.json", "output.log"
ENDINGS = ("done", "failed", "interrupted", "exit")  # the events after which a run says nothing more


# ---------------------------------------------------------------- the job folder's files

class EventLog:
    """The run's side of events.jsonl: one JSON object a line, each written out at once (a few microseconds
    against a step's milliseconds: a paused or killed run has told everything it did)."""

    def __init__(self, path: Path):
        self.file = open(path, "a", encoding="utf-8")

    def write(self, event: str, **values) -> None:
        self.file.write(json.dumps({"event": event, **values}) + "\n")
        self.file.flush()

    def close(self) -> None:
        self.file.close()


def read_events(path: Path, offset: int = 0) -> tuple[list[dict], int]:
    """The whole events written after byte offset, and the offset to read on from (a line still being written
    waits for the next look; a line that is not JSON is skipped)."""
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            chunk = f.read()
    except FileNotFoundError:
        return [], offset
    end = chunk.rfind(b"\n") + 1
    events = []
    for line in chunk[:end].splitlines():
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and isinstance(found.get("event"), str):
            events.append(found)
    return events, offset + end


def write_control(folder: Path, pause: bool, stop: bool) -> None:
    fs.atomic_write(Path(folder) / CONTROL, json.dumps({"pause": pause, "stop": stop}))


def read_control(folder: Path) -> dict:
    """{"pause": bool, "stop": bool} as last written; both False when nothing was."""
    try:
        found = json.loads((Path(folder) / CONTROL).read_text())
    except (OSError, ValueError):
        found = {}
    found = found if isinstance(found, dict) else {}
    return {key: found.get(key) is True for key in ("pause", "stop")}


def stored(value):
    """A Message as JSON (message_record); anything else as it is."""
    return message_record(value) if isinstance(value, Message) else value


# ---------------------------------------------------------------- starting a run's process

def launch(claim: Claim, on_end: Callable[[], None] | None = None) -> threading.Thread:
    """Start the process that trains a claimed run, handing it the claim's job lock; the thread that waits for it
    to end (its `process`), says how it ended if it could not (`exit`: killed, crashed), then calls on_end (a slot
    is free)."""
    import gptcore

    try:
        with open(claim.folder / OUTPUT, "ab") as output:
            process = subprocess.Popen(
                [sys.executable, "-m", "gptcore", "worker", "--job", str(claim.folder)], pass_fds=(claim.lock,),
                stdin=subprocess.DEVNULL, stdout=output, stderr=subprocess.STDOUT,
                cwd=Path(gptcore.__file__).resolve().parent.parent)
    finally:
        os.close(claim.lock)  # (the process holds it now; nobody does when it could not start)

    def wait():
        code = process.wait()
        events, _ = read_events(claim.folder / EVENTS)
        if not any(event["event"] in ENDINGS for event in events):
            with open(claim.folder / EVENTS, "a", encoding="utf-8") as f:
                f.write(json.dumps({"event": "exit", "code": code, "time": time.time()}) + "\n")
        if on_end is not None:
            on_end()

    waiter = threading.Thread(target=wait, name=f"run-{claim.run.name}", daemon=True)
    waiter.process = process
    waiter.start()
    return waiter


def exit_message(code: int | None) -> Message:
    """How a run's process that said nothing of its end ended, in words."""
    if code is not None and code < 0:
        try:
            name = signal.Signals(-code).name
        except ValueError:
            name = str(-code)
        return message("worker.killed", "its process was killed by the signal {signal} (a kill -9, or the system "
                       "ran out of memory)", signal=name)
    if code is None:
        return message("worker.gone", "its process ended without a word")
    return message("worker.exit", "its process ended with exit status {code} without saying why", code=code)


# ---------------------------------------------------------------- the run's process

class ControlFile(threading.Thread):
    """Reads control.json every POLL_S into a TrainControl (a daemon thread of the run's process) until `done`. A
    run whose starter has gone (a server that stopped or crashed) stops too, saved, rather than train on unseen."""

    def __init__(self, folder: Path, control):
        super().__init__(name="control", daemon=True)
        self.folder, self.control, self.parent = folder, control, os.getppid()
        self.done = threading.Event()

    def run(self):
        paused = False
        while not self.done.wait(POLL_S):
            wanted = read_control(self.folder)
            if wanted["stop"] or os.getppid() != self.parent:
                self.control.request_stop()
            elif wanted["pause"] != paused:
                paused = wanted["pause"]
                self.control.pause() if paused else self.control.resume()


def trainer_for(run: QueuedRun, upload: bytes | None, root: Path):
    """The Trainer of a waiting run, made when its turn comes, to train into root/<name>: its corpus is read again
    then (the app's folders only), so a corpus that has gone since it was queued fails this run with the reason."""
    from . import folders, runs
    from .config import GPTConfig, TrainConfig
    from .sources import CorpusSource
    from .tokenizer import CharTokenizer

    if (source := CorpusSource.from_dict(run.source)) is None:
        raise QueueError("queue.bad_source", "the record of the corpus '{name}' waited to train on cannot be "
                         "understood: {source}", name=run.name, source=str(run.source)[:200])
    corpus = source.load(upload, confine=True)
    tc = TrainConfig.from_dict(run.train)
    out_dir = folders.checkpoint_dir(run.name, root)
    if run.action == "continue":
        trainer = runs.continued_run(out_dir, tc, corpus, source)
    else:
        vocab = tc.bpe_vocab if tc.tokenizer == "bpe" else CharTokenizer.from_text(corpus.text).vocab_size
        trainer = runs.new_run(GPTConfig.from_dict({**run.model, "vocab_size": vocab}), tc, corpus, source,
                               runs.new_run_dir(run.name, root))
    if run.owner is not None:  # (no owner: the teacher's, as every run made before owners or by the command line)
        trainer.extra_meta["owner"] = run.owner
    return trainer


def set_up(trainer) -> dict:
    """What the live panel shows before the first step: the model, the settings, the baselines, the history so
    far (a continued run's)."""
    from .baselines import bigram_val_loss, uniform_loss
    from .data import unknown_warning
    from .describe import describe_model, describe_training

    tc, history, vocab = trainer.tc, trainer.history, trainer.tokenizer.vocab_size
    return {"params": trainer.model.num_params(), "model": trainer.cfg.to_dict(), "train": tc.to_dict(),
            "corpus": stored(trainer.corpus_description), "device": trainer.hardware()["device"],
            "model_summary": stored(describe_model(trainer.cfg)), "train_summary": stored(describe_training(tc)),
            "total_steps": tc.steps, "start_step": trainer.start_step, "step": trainer.start_step - 1,
            "curve_step": list(history["step"]), "curve_loss": list(history["train_loss"]),
            "evals": [{"step": s, "train": t, "val": v} for s, t, v in
                      zip(history["eval_step"], history["eval_train"], history["eval_val"])],
            "unknown": stored(unknown_warning(trainer.unknown)), "uniform": uniform_loss(vocab),
            "bigram": bigram_val_loss(trainer.train_ids, trainer.val_ids, vocab), "diverging": trainer.diverging}


def reporter(log_: EventLog, trainer) -> Callable:
    """The Trainer's on_event: each event a line of events.jsonl."""
    from .events import (
        CheckpointEvent,
        DivergingEvent,
        DoneEvent,
        EvalEvent,
        FinalEvalEvent,
        SampleEvent,
        StepEvent,
    )

    def on_event(event) -> None:
        match event:
            case StepEvent():
                log_.write("step", step=event.step, loss=event.loss, tokens_per_s=event.tokens_per_s,
                           eta_s=event.eta_s, elapsed_s=event.elapsed_s)
            case EvalEvent():
                log_.write("eval", step=event.step, train=event.train, val=event.val, diverging=trainer.diverging)
            case SampleEvent():
                log_.write("sample", step=event.step, text=event.text)
            case CheckpointEvent():
                log_.write("checkpoint", step=event.step)
            case FinalEvalEvent():
                log_.write("final_eval", step=event.step, val=event.val, diverging=trainer.diverging)
            case DivergingEvent():
                log_.write("diverging", diverging=trainer.diverging)
            case DoneEvent():
                log_.write("done", step=event.step, status=event.status, elapsed_s=event.wall_time, time=time.time())
    return on_event


def out_of_memory(error: BaseException) -> bool:
    """Did the run ask for more memory than there was? (torch says so with its own errors on the CPU and GPUs.)"""
    if isinstance(error, MemoryError):
        return True
    import torch

    said = str(error)
    return isinstance(error, torch.OutOfMemoryError) or isinstance(error, RuntimeError) and any(
        words in said for words in ("can't allocate memory", "not enough memory", "Cannot allocate memory"))


def train_job(folder: Path) -> int:
    """Train the run of job folder .jobs/<id> as the process of its own it is (the command `worker --job`), at a
    lower priority; its exit status."""
    os.setpriority(os.PRIO_PROCESS, 0, max(os.getpriority(os.PRIO_PROCESS, 0), NICENESS))  # (before torch starts
    # its threads, which inherit it)
    faulthandler.enable()  # a crash in native code leaves its Python traceback in output.log
    return train_folder(folder)


def train_folder(folder: Path) -> int:
    """Train the run of job folder .jobs/<id> in the calling thread, reporting into its events.jsonl."""
    folder = Path(folder).resolve()
    events = EventLog(folder / EVENTS)
    events.write("started", pid=os.getpid(), time=time.time())
    try:
        return _train(folder, events)
    finally:
        events.close()


def _train(folder: Path, events: EventLog) -> int:
    """Make the run's Trainer and train it, steered by control.json; how it ended is the last event written."""
    from .failures import Diverged, diverged_message
    from .train import TrainControl

    queue, control, trainer = RunQueue(folder.parent.parent), TrainControl(), None
    if threading.current_thread() is threading.main_thread():  # (a Ctrl-C at the server's terminal reaches its
        for sig in (signal.SIGINT, signal.SIGTERM):             # runs too: each stops, saved)
            signal.signal(sig, lambda *_: control.request_stop())
    watcher = ControlFile(folder, control)
    watcher.start()
    try:
        run = QueuedRun.from_dict(json.loads((folder / "run.json").read_text(encoding="utf-8")))
        trainer = trainer_for(run, queue.upload_of(run), queue.root)
        queue.drop_upload(run)
        events.write("setup", **set_up(trainer))
        trainer.run(reporter(events, trainer), control)
        return 0
    except Diverged as e:
        said = diverged_message(e, trainer.out_dir) if trainer is not None else e.message
        events.write("failed", message=message_record(said), diverged=True, time=time.time())
        return 3
    except UserError as e:  # bad corpus, a busy folder, a full disk...: the message is for the user
        events.write("failed", message=message_record(e.message), time=time.time())
        return 2
    except BaseException as e:
        if out_of_memory(e):
            said = message("worker.out_of_memory", "it ran out of memory at step {step:,} ({error})",
                           step=trainer.step + 1 if trainer is not None else 0, error=f"{type(e).__name__}: {e}"[:200])
            events.write("interrupted", message=message_record(said), time=time.time())
            return 4
        events.write("failed", message=message_record(message(
            "jobs.bug", "An unexpected error stopped it: {error}", error=f"{type(e).__name__}: {e}")),
            traceback=traceback.format_exc(), time=time.time())
        traceback.print_exc()  # (into output.log)
        return 1
    finally:
        watcher.done.set()


# ---------------------------------------------------------------- a worker: the queue's runs, N at a time

SLOTS_VARIABLE = "GPTCORE_TRAINING_SLOTS"  # training runs at once (1 when unset): each more shares the same cores


def training_slots() -> int:
    """How many training runs may train at once, from the environment (at least 1)."""
    text = os.environ.get(SLOTS_VARIABLE, "").strip() or "1"
    if not text.isdigit() or int(text) < 1:
        raise QueueError("jobs.bad_slots", "{variable} must be a whole number of training runs at once, 1 or more; "
                         "it is '{value}'", variable=SLOTS_VARIABLE, value=text)
    return int(text)


def serve(root: Path | None, slots: int, say: Callable[[str], None] = print) -> int:
    """Start the queue's runs as slots free, until Ctrl-C, which also stops the runs it started (each saves)."""
    queue = RunQueue(root)
    say(f"training the queue of {queue.root}, {slots} run(s) at a time; Ctrl-C stops it and its runs, saved")
    started: list[threading.Thread] = []
    try:
        while True:
            claim = queue.claim(slots)
            if claim is None:
                time.sleep(POLL_S * 5)
                continue
            say(f"starting {claim.run.name} ({claim.run.action})")
            started.append(launch(claim))
    except KeyboardInterrupt:  # (the runs got the Ctrl-C too: each saves and stops)
        for waiter in started:
            waiter.join()
        say("stopped")
        return 0
