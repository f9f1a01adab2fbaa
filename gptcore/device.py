"""Where the tensors live: choosing a device, its training precision, and a one-line description of it.

The CPU path is the tutorial's: float32 everywhere, so its exact numbers come out. On CUDA, training runs its
matmuls in bfloat16 under autocast (weights, optimizer state and the loss stay float32) and lets the remaining
float32 matmuls use TF32; both are on by default and `--dtype fp32` turns them off. MPS (Apple GPUs) trains in
float32 unless bf16 is asked for.
"""
from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext

import torch

from .errors import UserError

DEVICES = ("auto", "cpu", "cuda", "mps")
DTYPES = ("auto", "fp32", "bf16")


class DeviceError(UserError, ValueError):
    """A device or precision this machine cannot provide."""


def mps_available() -> bool:
    backend = getattr(torch.backends, "mps", None)
    return bool(backend and backend.is_available())


def accelerators() -> list[str]:
    """The accelerator kinds this machine offers, best first (empty on a CPU-only machine)."""
    return [kind for kind, ok in (("cuda", torch.cuda.is_available()), ("mps", mps_available())) if ok]


def resolve(name: str = "auto", local_rank: int | None = None) -> torch.device:
    """The torch.device for `name`: auto picks CUDA, then MPS, then the CPU. Under torchrun each process
    takes the GPU of its local rank."""
    if name not in DEVICES:
        raise DeviceError(f"device must be one of {', '.join(DEVICES)}, got {name!r}")
    kind = (accelerators() or ["cpu"])[0] if name == "auto" else name
    if kind == "cuda":
        if not torch.cuda.is_available():
            reason = "this PyTorch build has no CUDA support" if torch.version.cuda is None else \
                "no CUDA GPU is visible (check the driver and CUDA_VISIBLE_DEVICES)"
            raise DeviceError(f"--device cuda was asked for, but {reason}: use --device cpu or auto")
        index = local_rank or 0
        if index >= torch.cuda.device_count():
            raise DeviceError(f"process {index} needs GPU {index}, but only {torch.cuda.device_count()} are "
                              "visible: start at most that many processes per node")
        return torch.device("cuda", index)
    if kind == "mps" and not mps_available():
        raise DeviceError("--device mps was asked for, but no Apple GPU (MPS) is available here: "
                          "use --device cpu or auto")
    return torch.device(kind)


def train_dtype(device: torch.device, dtype: str = "auto") -> torch.dtype:
    """The autocast dtype for training on device (float32 = no autocast): auto is bf16 on a CUDA GPU that
    supports it, float32 elsewhere."""
    if dtype not in DTYPES:
        raise DeviceError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype!r}")
    if dtype == "fp32" or (dtype == "auto" and device.type != "cuda"):
        return torch.float32
    if device.type == "cpu":
        raise DeviceError("bf16 autocast is for GPUs; on the CPU training stays in float32 "
                          "(use --dtype auto or fp32)")
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        if dtype == "bf16":
            raise DeviceError(f"{torch.cuda.get_device_name(device)} does not support bfloat16: use --dtype fp32")
        return torch.float32
    return torch.bfloat16


def configure(device: torch.device, dtype: torch.dtype) -> None:
    """TF32 for the float32 matmuls left under autocast, on CUDA when training in bf16 (the default); off when
    fp32 was asked for, so fp32 means fp32."""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = dtype != torch.float32
        torch.backends.cudnn.allow_tf32 = dtype != torch.float32


def autocast(device: torch.device, dtype: torch.dtype) -> AbstractContextManager:
    """The forward pass's precision context: autocast to dtype, or nothing for float32."""
    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def describe(device: torch.device) -> str:
    """'CPU (2 cores)', 'CUDA GPU 0: NVIDIA H200 (139 GiB)' or 'Apple GPU (MPS)'."""
    if device.type == "cuda":
        index = device.index or 0
        props = torch.cuda.get_device_properties(index)
        return f"CUDA GPU {index}: {props.name} ({props.total_memory / 2**30:.0f} GiB)"
    if device.type == "mps":
        return "Apple GPU (MPS)"
    return f"CPU ({os.cpu_count()} cores)"


def dtype_name(dtype: torch.dtype) -> str:
    return {torch.float32: "fp32", torch.bfloat16: "bf16", torch.float16: "fp16"}.get(dtype, str(dtype))


def synchronize(device: torch.device) -> None:
    """Wait for the device's queued work, so a timer measures it (a no-op on the CPU)."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    elif device.type == "mps":
        torch.mps.synchronize()


def peak_memory(device: torch.device) -> int | None:
    """Bytes of device memory the process has held at most since the start (None off CUDA)."""
    return torch.cuda.max_memory_allocated(device) if device.type == "cuda" else None
