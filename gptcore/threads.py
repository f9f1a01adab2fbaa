"""Threads: how the CPU's cores are shared out, between the app, its jobs and one training step.

torch keeps a thread count per thread, and `torch.set_num_threads` also sets the count that threads created
later start with. So code that wants every core asks for `CORES` explicitly instead of reading
`torch.get_num_threads()` in a fresh thread, which would inherit whatever the last caller chose.
"""
from __future__ import annotations

import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

import torch

CORES = torch.get_num_threads()  # torch's default: every physical core. Read once; see use_threads.


def use_threads(n: int) -> None:
    """Run the calling thread's torch ops on n threads (0 = every core).

    torch.set_num_threads also makes n the count that threads created later start with, so code that wants every
    core asks for CORES explicitly: reading torch.get_num_threads() in a new thread would inherit whatever the last
    caller chose (a one-thread demo, a shard worker).
    """
    # torch sets a thread's count lazily, on its first get_num_threads or parallel op, to the count set last
    # anywhere; left for later, that would undo this call (a shard worker would run on every core).
    torch.get_num_threads()
    torch.set_num_threads(n or CORES)


def single_core_pool(workers: int, name: str) -> ThreadPoolExecutor:
    """A thread pool whose `workers` threads are all started and each run torch ops on a single thread."""
    pool = ThreadPoolExecutor(workers, thread_name_prefix=name, initializer=use_threads, initargs=(1,))
    all_started = threading.Barrier(workers)  # blocks each worker until every one exists
    for started in [pool.submit(all_started.wait) for _ in range(workers)]:
        started.result()
    # the workers' 1 also became new threads' default: undo, so a thread started later (in the server: a page's
    # rerun, another job, while a demo trains) does not begin on one core
    torch.set_num_threads(torch.get_num_threads())
    return pool


class ShardedGrads:
    """Loss and gradients of a batch, computed as one shard of the batch per core.

    Each shard runs forward and backward on its own thread with a single OpenMP thread; their gradients are
    averaged (weighted by shard size) into `.grad`. At this model's size that beats one two-thread pass by about
    1.2x: every small GEMM and elementwise op of a two-thread pass splits its work and then waits for both cores,
    while independent shards never synchronise until the end of the step (`python -m bench.step`).
    Shards are summed in a fixed order, so a run is reproducible for a given number of shards.
    The workers inherit the creating thread's nice value (on Linux a thread's own: a run's process lowers it for
    all its threads, a concept page's job in the server for its thread), but not its thread-local torch state:
    grad mode, inference mode or autocast must be entered inside the model's forward to reach them.
    """

    def __init__(self, model: torch.nn.Module, shards: int):
        self.model, self.shards = model, max(1, shards)
        self.params = [p for p in model.parameters() if p.requires_grad]
        self.pool = single_core_pool(self.shards, "grad-shard") if self.shards > 1 else None
        self._shutdown = weakref.finalize(self, self.pool.shutdown) if self.pool else None

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        """Forward and backward of (x, y); sets every parameter's .grad and returns the batch's mean loss."""
        if self.pool is None or len(x) < 2:
            for p in self.params:
                p.grad = None
            _, loss = self.model(x, y)
            loss.backward()
            return loss.detach()
        pieces = [(xs, ys) for xs, ys in zip(x.tensor_split(self.shards), y.tensor_split(self.shards)) if len(xs)]
        results = [f.result() for f in [self.pool.submit(self._shard, xs, ys) for xs, ys in pieces]]
        weights = [len(xs) / len(x) for xs, _ in pieces]
        for p, g in zip(self.params, self._combine(weights, [grads for _, grads in results])):
            p.grad = g
        return sum(w * loss for w, (loss, _) in zip(weights, results))

    def _shard(self, x, y):
        _, loss = self.model(x, y)
        return loss.detach(), list(torch.autograd.grad(loss, self.params))

    @staticmethod
    def _combine(weights: list[float], shard_grads: list[list[torch.Tensor]]) -> list[torch.Tensor]:
        """Σ weight · gradient over shards, in shard order (into the first shard's tensors)."""
        total = shard_grads[0]
        torch._foreach_mul_(total, weights[0])
        for w, grads in zip(weights[1:], shard_grads[1:]):
            torch._foreach_add_(total, grads, alpha=w)
        return total

    def close(self) -> None:
        if self._shutdown is not None:
            self._shutdown()
