"""The linear layers' matrix products on the kernel that is faster for their shape on this CPU.

nn.Linear's fp32 products on the CPU go to MKL. On AMD x86 CPUs (where it was measured) oneDNN, also part of torch's
x86 builds, is faster for most of this model's: for its 2,048-row products, x·Wᵀ and the input gradient g·W run
1.05–1.8× faster; for the weight gradient gᵀ·x, a sum over the 2,048 rows, MKL is the faster in four layers of five.
Below a few hundred rows oneDNN's ~20 µs of set-up per call loses (generation feeds one row at a time).
`python -m bench.linear` measures each case; GPTCORE_ONEDNN=0 in the environment leaves every product to torch.
"""
from __future__ import annotations

import os
import platform
from pathlib import Path

import torch
import torch.nn as nn
import torch.nn.functional as F


def _amd_x86() -> bool:
    """An AMD x86 CPU (Linux's /proc/cpuinfo, else the processor string Windows gives)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        info = Path("/proc/cpuinfo").read_text()
    except OSError:
        info = platform.processor()
    return "AuthenticAMD" in info


_onednn = getattr(torch.ops.mkldnn, "_linear_pointwise", None) \
    if torch.backends.mkldnn.is_available() and _amd_x86() else None
ONEDNN_AVAILABLE = _onednn is not None
ONEDNN_LINEAR = ONEDNN_AVAILABLE and os.environ.get("GPTCORE_ONEDNN", "1") != "0"
ONEDNN_MIN_ROWS = 256


def onednn_linear(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """x·Wᵀ by oneDNN (any leading dimensions; weight may be a transposed view)."""
    return _onednn(x, weight, None, "none", [], "")


def uses_onednn(x: torch.Tensor, weight: torch.Tensor) -> bool:
    """Whether x·Wᵀ goes to oneDNN: fp32 on the CPU, enough rows, and not under torch.compile or autocast (which
    pick their own kernels). The compile check comes first, so torch.compile never guards on the row count."""
    return ONEDNN_LINEAR and not torch.compiler.is_compiling() and x.device.type == "cpu" and \
        x.dtype == weight.dtype == torch.float32 and x.shape[-1] > 0 and \
        x.numel() >= ONEDNN_MIN_ROWS * x.shape[-1] and not torch.is_autocast_enabled("cpu")


class OneDNNLinearFunction(torch.autograd.Function):
    """x·Wᵀ with oneDNN computing the output and the input gradient, MKL (torch.mm) the weight gradient: the
    products nn.Linear computes, each by the kernel that is faster for its shape. Its backward is not itself
    differentiable (no create_graph=True through it)."""

    @staticmethod
    def forward(ctx, x, weight):
        ctx.save_for_backward(x, weight)
        return onednn_linear(x, weight)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, grad):
        x, weight = ctx.saved_tensors
        grad = grad.contiguous()
        grad_x = onednn_linear(grad, weight.t()) if ctx.needs_input_grad[0] else None
        grad_weight = grad.flatten(0, -2).t() @ x.flatten(0, -2) if ctx.needs_input_grad[1] else None
        return grad_x, grad_weight


class Linear(nn.Linear):
    """nn.Linear (same weight, same init) whose products run on oneDNN where uses_onednn says so."""

    def forward(self, x):
        if self.bias is None and uses_onednn(x, self.weight):
            return OneDNNLinearFunction.apply(x, self.weight)
        return F.linear(x, self.weight, self.bias)
