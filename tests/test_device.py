"""Devices: the choice, its message where the hardware is missing, the CPU path kept as the tutorial's, and
checkpoints that load anywhere. CI has no GPU, so the GPU paths are checked by what the code chooses."""
import contextlib
import json

import pytest
import torch
from safetensors import safe_open

from gptcore import checkpoint as ckpt
from gptcore import cli, device
from gptcore.config import PLACE, GPTConfig, TrainConfig
from gptcore.data import Corpus
from gptcore.device import DeviceError
from gptcore.threads import ShardedGrads
from gptcore.train import SinglePass, Trainer

TINY = GPTConfig(d_model=16, n_layer=1, n_head=2, d_ff=32, context=16)
CORPUS = Corpus("the cat sat on the mat. the dog ate the log. " * 100, "toy")
SMALL = ["--d-model", "16", "--n-layer", "1", "--n-head", "2", "--d-ff", "32", "--context", "16",
         "--batch-size", "4", "--eval-every", "2", "--eval-batches", "1", "--steps", "2"]
no_cuda = pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA")


@no_cuda
def test_asking_for_cuda_without_it_is_a_clear_message(tmp_path, capsys):
    code = cli.main(["train", "--data", "builtin", "--builtin-chars", "20000", "--out", str(tmp_path / "run"),
                     *SMALL, "--device", "cuda"])
    err = capsys.readouterr().err
    assert code == 2
    assert "error: --device cuda was asked for, but this PyTorch build has no CUDA support: use --device cpu or " \
           "auto" in err or "no CUDA GPU is visible" in err
    assert "Traceback" not in err and not (tmp_path / "run").exists()
    with pytest.raises(DeviceError) as refused:
        device.resolve("cuda")
    assert refused.value.message.key == "device.no_cuda"


def test_auto_takes_the_best_device_here_and_unknown_names_are_refused():
    best = (device.accelerators() or ["cpu"])[0]
    assert device.resolve("auto").type == best
    assert device.resolve("cpu") == torch.device("cpu")
    with pytest.raises(DeviceError, match="device must be one of auto, cpu, cuda, mps, got 'tpu'"):
        device.resolve("tpu")
    assert device.choices_here()[:2] == ["auto", "cpu"]


def test_the_cpu_trains_in_float32_and_bf16_is_for_gpus():
    cpu = torch.device("cpu")
    assert device.train_dtype(cpu, "auto") == torch.float32 and device.train_dtype(cpu, "fp32") == torch.float32
    with pytest.raises(DeviceError, match="bf16 autocast is for GPUs"):
        device.train_dtype(cpu, "bf16")
    assert device.train_dtype(torch.device("mps"), "auto") == torch.float32  # (no MPS needed to decide)
    assert isinstance(device.autocast(cpu, torch.float32), contextlib.nullcontext)
    assert str(device.describe(cpu)).startswith("CPU (") and device.describe(cpu).key == "device.cpu"


def test_the_tutorial_path_on_the_cpu_shards_the_step_and_a_gpu_takes_one_autocast_pass(tmp_path):
    trainer = Trainer.fresh(TINY, TrainConfig(steps=1, batch_size=4, device="cpu"), CORPUS)
    assert trainer.device.type == "cpu" and trainer.dtype == torch.float32 and trainer.rows is None
    gradients = trainer._loss_and_grads()
    assert isinstance(gradients, ShardedGrads)  # the per-core shards, as every CPU run has them
    gradients.close()
    # What a CUDA device gets (decided without moving anything there): one forward under bf16 autocast, no
    # thread pool of shards.
    trainer.device, trainer.dtype = torch.device("cuda", 0), torch.bfloat16
    gradients = trainer._loss_and_grads()
    assert isinstance(gradients, SinglePass) and gradients.dtype == torch.bfloat16
    assert gradients.model is trainer.model


def test_checkpoints_hold_cpu_tensors_and_the_hardware_they_were_trained_on(tmp_path):
    Trainer.fresh(TINY, TrainConfig(steps=2, batch_size=4, device="cpu", final_eval=False), CORPUS,
                  out_dir=tmp_path / "run").run()
    with safe_open(str(tmp_path / "run" / "model.safetensors"), framework="pt", device="cpu") as f:
        assert all(f.get_tensor(name).device.type == "cpu" for name in f.keys())
    meta = json.loads((tmp_path / "run" / "meta.json").read_text())
    assert meta["hardware"] == {"device": str(device.describe(torch.device("cpu"))), "precision": "fp32",
                                "processes": 1, "compiled": False}
    loaded = ckpt.load_checkpoint(tmp_path / "run")
    assert next(loaded.model.parameters()).device.type == "cpu"


def test_a_resumed_run_takes_its_device_from_the_new_command(tmp_path, capsys):
    out = str(tmp_path / "run")
    assert cli.main(["train", "--data", "builtin", "--builtin-chars", "20000", "--out", out, *SMALL,
                     "--device", "cpu", "--dtype", "fp32"]) == 0
    assert json.loads((tmp_path / "run" / "meta.json").read_text())["train_config"]["device"] == "cpu"
    assert cli.main(["train", "--data", "builtin", "--builtin-chars", "20000", "--out", out, "--resume",
                     "--steps", "4"]) == 0
    resumed = json.loads((tmp_path / "run" / "meta.json").read_text())["train_config"]
    assert {k: resumed[k] for k in PLACE} == {"device": "auto", "dtype": "auto", "compile": False}
    assert resumed["steps"] == 4 and resumed["batch_size"] == 4


def test_eval_and_sample_take_a_device(tmp_path, capsys):
    out = str(tmp_path / "run")
    assert cli.main(["train", "--data", "builtin", "--builtin-chars", "20000", "--out", out, *SMALL]) == 0
    capsys.readouterr()
    assert cli.main(["eval", "--checkpoint", out, "--data", "builtin", "--builtin-chars", "20000",
                     "--device", "cpu"]) == 0
    assert "on CPU (" in capsys.readouterr().out
    assert cli.main(["sample", "--checkpoint", out, "--prompt", "the", "--chars", "12", "--device", "cpu"]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("the") and len(printed) == len("the") + 12 + 1  # 12 characters and a newline
