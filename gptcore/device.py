"""Where the tensors live: choosing a device, its training precision, and a short description of it.

The CPU path is the tutorial's: float32 everywhere, so its exact numbers come out. On CUDA, training runs its
matmuls in bfloat16 under autocast (weights, optimizer state and the loss stay float32) and lets the remaining
float32 matmuls use TF32; both are on by default and `--dtype fp32` turns them off. MPS (Apple GPUs) trains in
float32 unless bf16 is asked for.
"""
from __future__ import annotations

import os
from contextlib import AbstractContextManager, nullcontext

import torch

from .errors import Message, UserError, message

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
        raise DeviceError("device.unknown", "device must be one of {choices}, got {name!r}",
                          choices=", ".join(DEVICES), name=name)
    kind = (accelerators() or ["cpu"])[0] if name == "auto" else name
    if kind == "cuda":
        if not torch.cuda.is_available():
            reason = message("device.no_cuda_build", "this PyTorch build has no CUDA support") \
                if torch.version.cuda is None else \
                message("device.no_cuda_gpu", "no CUDA GPU is visible (check the driver and CUDA_VISIBLE_DEVICES)")
            raise DeviceError("device.no_cuda", "--device cuda was asked for, but {reason}: use --device cpu or auto",
                              reason=reason)
        index, visible = local_rank or 0, torch.cuda.device_count()
        if index >= visible:
            raise DeviceError("device.too_few_gpus", "process {index} needs GPU {index}, but only {visible} are "
                              "visible: start at most that many processes per node", index=index, visible=visible)
        return torch.device("cuda", index)
    if kind == "mps" and not mps_available():
        raise DeviceError("device.no_mps", "--device mps was asked for, but no Apple GPU (MPS) is available here: "
                          "use --device cpu or auto")
    return torch.device(kind)


def train_dtype(device: torch.device, dtype: str = "auto") -> torch.dtype:
    """The autocast dtype for training on device (float32 = no autocast): auto is bf16 on a CUDA GPU that
    supports it, float32 elsewhere."""
    if dtype not in DTYPES:
        raise DeviceError("device.unknown_dtype", "dtype must be one of {choices}, got {dtype!r}",
                          choices=", ".join(DTYPES), dtype=dtype)
    if dtype == "fp32" or (dtype == "auto" and device.type != "cuda"):
        return torch.float32
    if device.type == "cpu":
        raise DeviceError("device.bf16_on_cpu", "bf16 autocast is for GPUs; on the CPU training stays in float32 "
                          "(use --dtype auto or fp32)")
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        if dtype == "bf16":
            raise DeviceError("device.no_bf16", "{gpu} does not support bfloat16: use --dtype fp32",
                              gpu=torch.cuda.get_device_name(device))
        return torch.float32
    return torch.bfloat16


def configure(device: torch.device, dtype: torch.dtype) -> None:
    """TF32 for the float32 matmuls left under autocast, on CUDA when training in bf16 (the default); off when
    fp32 was asked for, so fp32 means fp32. (The CUDA-only switches: the CPU's matmuls are never touched.)"""
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = dtype != torch.float32
        torch.backends.cudnn.allow_tf32 = dtype != torch.float32


def autocast(device: torch.device, dtype: torch.dtype) -> AbstractContextManager:
    """The forward pass's precision context: autocast to dtype, or nothing for float32."""
    if dtype == torch.float32:
        return nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def describe(device: torch.device) -> Message:
    """'CPU (2 cores)', 'CUDA GPU 0: NVIDIA H200 (139 GiB)' or 'Apple GPU (MPS)'."""
    if device.type == "cuda":
        index = device.index or 0
        props = torch.cuda.get_device_properties(index)
        return message("device.cuda", "CUDA GPU {index}: {name} ({memory} GiB)", index=index, name=props.name,
                       memory=round(props.total_memory / 2**30))
    if device.type == "mps":
        return message("device.mps", "Apple GPU (MPS)")
    return message("device.cpu", "CPU ({cores} cores)", cores=os.cpu_count())


def described(name: str) -> Message:
    """describe(resolve(name)), or why this machine cannot give that device."""
    try:
        return describe(resolve(name))
    except DeviceError as e:
        return e.message


def choices_here() -> list[str]:
    """The device choices worth offering on this machine: auto and the CPU, plus each accelerator it has."""
    return ["auto", "cpu", *accelerators()]


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
