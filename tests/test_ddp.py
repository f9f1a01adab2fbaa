"""Several processes, one run: torchrun with Gloo on the CPU trains exactly what one process trains on the same
global batch and seed, process 0 alone prints and writes, SIGTERM stops every process with a saved checkpoint,
and --resume continues under DDP."""
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

from gptcore import checkpoint as ckpt
from gptcore import cli
from gptcore.ddp import Distributed, DistributedError

ROOT = Path(__file__).resolve().parent.parent
DATA = ["--data", "builtin", "--builtin-chars", "20000"]
MODEL = ["--d-model", "16", "--n-layer", "1", "--n-head", "2", "--d-ff", "32", "--context", "16"]
# Muon for the blocks' matrices, AdamW for the rest: both optimizers step on DDP's averaged gradients
TRAIN = ["--batch-size", "4", "--eval-every", "1", "--eval-batches", "2", "--sample-chars", "20", "--optimizer", "muon"]
NEW = [*DATA, *MODEL, *TRAIN]
ONE_CHECKPOINT = {"config.json", "meta.json", "model.safetensors", "optimizer.safetensors"}


def torchrun(*args: str) -> subprocess.Popen:
    """Two Gloo processes training with the given flags; stdout and stderr together, line by line."""
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2", "-m", "gptcore",
               "train", *args]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONUNBUFFERED": "1"}
    return subprocess.Popen(command, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)


class Lines:
    """A process's output, read in a thread, so a test can wait for a line without blocking forever."""

    def __init__(self, process: subprocess.Popen):
        self.lines, self.process, self.grew = [], process, threading.Condition()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.process.stdout:
            with self.grew:
                self.lines.append(line)
                self.grew.notify_all()

    def wait_for(self, pattern: str, timeout: float = 120) -> None:
        deadline = time.monotonic() + timeout
        with self.grew:
            while not any(re.search(pattern, line) for line in self.lines):
                assert self.process.poll() is None, "".join(self.lines)
                assert self.grew.wait(deadline - time.monotonic()), "".join(self.lines)

    def text(self) -> str:
        return "".join(self.lines)


def history(folder: Path) -> dict:
    return json.loads((folder / "meta.json").read_text())["history"]


def assert_same_run(ddp_folder: Path, single_folder: Path) -> None:
    two, one = history(ddp_folder), history(single_folder)
    assert two["step"] == one["step"] and two["eval_step"] == one["eval_step"]
    for key in ("train_loss", "eval_val"):
        assert two[key] == pytest.approx(one[key], abs=2e-5), key
    a, b = ckpt.load_checkpoint(ddp_folder).model, ckpt.load_checkpoint(single_folder).model
    for (name, p), q in zip(a.named_parameters(), b.parameters()):
        assert torch.allclose(p, q, atol=2e-5), name


@pytest.fixture(scope="module")
def stopped(tmp_path_factory):
    """A two-process run stopped by SIGTERM after a few steps: (its folder, its output, the step it stopped at)."""
    folder = tmp_path_factory.mktemp("ddp") / "run"
    process = torchrun(*NEW, "--out", str(folder), "--steps", "100000")
    lines = Lines(process)
    try:
        lines.wait_for(r"^step +3 ")
        process.send_signal(signal.SIGTERM)  # torchrun passes it on to both processes
        process.wait(timeout=120)
    finally:
        process.kill()
    return folder, lines.text(), ckpt.read_meta(folder)["step"]


def test_sigterm_stops_every_process_and_process_0_alone_saves(stopped):
    folder, output, step = stopped
    meta = ckpt.read_meta(folder)
    assert meta["status"] == "stopped" and step >= 3
    assert meta["hardware"]["processes"] == 2 and meta["train_config"]["batch_size"] == 4
    assert {p.name for p in folder.iterdir()} == ONE_CHECKPOINT  # no second writer's files, no lock left
    assert output.count("step    0  train") == 1 and output.count("checkpoint saved to") == 1
    assert f"stopped at step {step:,} of 100,000; checkpoint saved to {folder}" in output


def test_two_processes_train_the_run_one_process_trains_on_the_same_global_batch(stopped, tmp_path, capsys):
    folder, _, step = stopped
    assert cli.main(["train", *NEW, "--out", str(tmp_path / "one"), "--steps", str(step)]) == 0
    assert_same_run(folder, tmp_path / "one")


def test_a_run_resumed_under_ddp_continues_as_one_process_would(stopped, tmp_path, capsys):
    folder, _, step = stopped
    single = tmp_path / "one"
    assert cli.main(["train", *NEW, "--out", str(single), "--steps", str(step)]) == 0
    assert cli.main(["train", *DATA, "--out", str(single), "--resume", "--steps", str(step + 3)]) == 0
    process = torchrun(*DATA, "--out", str(folder), "--resume", "--steps", str(step + 3))
    output = Lines(process)
    assert process.wait(timeout=180) == 0, output.text()
    assert f"resuming from step {step} in {folder}, with the saved optimizer state" in output.text()
    assert output.text().count(f"step {step + 1:4d}  train") == 1
    assert ckpt.read_meta(folder)["status"] == "finished" and ckpt.read_meta(folder)["step"] == step + 3
    assert_same_run(folder, single)


def test_each_process_takes_its_rows_of_the_global_batch_which_must_split_evenly():
    cpu = torch.device("cpu")
    assert [Distributed(rank, rank, 4, cpu).rows(32) for rank in range(4)] == \
        [slice(0, 8), slice(8, 16), slice(16, 24), slice(24, 32)]
    with pytest.raises(DistributedError) as refused:
        Distributed(0, 0, 3, cpu).rows(32)
    assert str(refused.value) == ("--batch-size is the global batch, split evenly over the 3 processes: 32 does not "
                                  "divide by 3; use a multiple of 3")
