"""One run over several processes: PyTorch's DistributedDataParallel, started by torchrun.

    torchrun --standalone --nproc_per_node=N -m gptcore train ...

torchrun sets RANK, LOCAL_RANK and WORLD_SIZE in each process; `from_env` sees them and joins the process
group (NCCL between GPUs, Gloo between CPU processes). Every process builds the same model from the same seed
and draws the start positions of the same global batch from the same random stream (a few integers), then reads
and trains on its own rows only: --batch-size stays the global batch, batch / N rows each. DDP averages the
gradients during backward, so every process applies the same update, AdamW or Muon alike, and the run matches
a single process on the same batch and seed to float rounding (tests/test_ddp.py). (nanoGPT instead seeds each
process differently; its N-process run is then a different run from the one-process one, and this project's
tutorial numbers depend on one stream.) Process 0 alone logs, evaluates, samples and writes checkpoints.

Each step ends with one small all-reduce of [loss, stop flag]: the logged loss is the whole batch's, and a
stop asked of any process (torchrun passes Ctrl-C and SIGTERM on to each of them) is seen by all after the
same step, so they stop together and process 0 saves.
"""
from __future__ import annotations

import os
import sys
from dataclasses import dataclass

import torch
import torch.distributed as dist

from .device import resolve
from .errors import UserError


class DistributedError(UserError, RuntimeError):
    """A distributed run that cannot start as asked."""


@dataclass
class Distributed:
    rank: int
    local_rank: int
    world_size: int
    device: torch.device

    @property
    def main(self) -> bool:
        return self.rank == 0

    def rows(self, batch_size: int) -> slice:
        """This process's rows of a global batch."""
        per = self.check_batch(batch_size)
        return slice(self.rank * per, (self.rank + 1) * per)

    def check_batch(self, batch_size: int) -> int:
        if batch_size % self.world_size:
            raise DistributedError("ddp.batch_split", "--batch-size is the global batch, split evenly over the "
                                   "{processes} processes: {batch_size} does not divide by {processes}; use a "
                                   "multiple of {processes}", processes=self.world_size, batch_size=batch_size)
        return batch_size // self.world_size

    def _tensor(self, values: list[float]) -> torch.Tensor:
        # NCCL reduces GPU tensors only; Gloo, CPU ones
        return torch.tensor(values, dtype=torch.float64, device=self.device if self.device.type == "cuda" else "cpu")

    def mean_and_any(self, value: torch.Tensor, flag: bool) -> tuple[float, bool]:
        """(mean of value over the processes, whether any process raised flag): one all-reduce."""
        both = self._tensor([0.0, float(flag)])
        both[0] = value.detach().to(both.device, torch.float64)
        dist.all_reduce(both)
        return both[0].item() / self.world_size, both[1].item() > 0

    def all_ok(self, ok: bool) -> bool:
        """True when every process says ok (a process that failed to start tells the others, so none waits)."""
        flag = self._tensor([0.0 if ok else 1.0])
        dist.all_reduce(flag)
        return flag.item() == 0

    def share(self, obj):
        """Process 0's obj, in every process (a tokenizer's JSON, say)."""
        box = [obj if self.main else None]
        dist.broadcast_object_list(box, src=0, device=self.device if self.device.type == "cuda" else None)
        return box[0]

    def wrap(self, model: torch.nn.Module) -> torch.nn.Module:
        """The model under DDP: gradients are averaged over the processes during backward."""
        from torch.nn.parallel import DistributedDataParallel

        ids = [self.device.index] if self.device.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids)

    def close(self, together: bool = True) -> None:
        """Leave the process group; together, after every process has got here (one that tears its Gloo
        connections down while another still uses them can abort on exit). A failed process leaves alone, and a
        barrier that a failed process has left ends with its error: then there is no one to wait for."""
        if dist.is_initialized():
            if together:
                try:
                    dist.barrier()
                except RuntimeError as e:  # (DistBackendError: the other side has gone)
                    print(f"note: process {self.rank} left without the others, which have gone: {e}",
                          file=sys.stderr)
            dist.destroy_process_group()


def lost_a_process(error: BaseException) -> bool:
    """Is error what a process gets when another process of its run has gone (killed, crashed) in the middle of a
    collective? (Gloo says so in a RuntimeError from its transport; newer versions raise DistBackendError.)"""
    text = str(error)
    return isinstance(error, dist.DistBackendError) or isinstance(error, RuntimeError) and any(
        words in text for words in ("gloo/transport", "Connection reset by peer", "Connection closed by peer"))


def launched() -> bool:
    """Was this process started by torchrun (or another launcher that sets RANK)?"""
    return "RANK" in os.environ


def from_env(device: str = "auto") -> Distributed | None:
    """Join the process group torchrun describes in the environment; None for an ordinary single process."""
    if not launched():
        return None
    try:
        rank, local_rank, world = (int(os.environ[k]) for k in ("RANK", "LOCAL_RANK", "WORLD_SIZE"))
    except (KeyError, ValueError):
        raise DistributedError("ddp.environment", "RANK is set but LOCAL_RANK or WORLD_SIZE is missing or not a "
                               "number: start distributed runs with torchrun") from None
    resolved = resolve(device, local_rank)
    if resolved.type == "mps":
        raise DistributedError("ddp.mps", "several processes cannot share an Apple GPU: run one process, or use "
                               "--device cpu")
    if resolved.type == "cuda":
        torch.cuda.set_device(resolved)
        dist.init_process_group("nccl", rank=rank, world_size=world, device_id=resolved)
    else:
        dist.init_process_group("gloo", rank=rank, world_size=world)
    return Distributed(rank, local_rank, world, resolved)
