"""Training: the tutorial's loop (same order of random calls) with schedules, evals, samples and checkpoints.

With the tutorial recipe and seed 0 the random stream is consumed exactly as in the tutorial's script:
seed, build the model (PyTorch default init), then one train batch per step and `eval_batches` val
batches at every eval. Samples and anything else use their own generators, so watching a run never
changes it.
"""
from __future__ import annotations

import math
import os
import threading
import time
from collections.abc import Callable
from contextlib import nullcontext
from dataclasses import asdict, dataclass, fields
from pathlib import Path

import torch

from . import checkpoint as ckpt
from .config import GPTConfig
from .data import CharTokenizer, CorpusError, check_trainable, get_batch, split_ids
from .errors import InputError, UserError
from .model import GPT, NonFiniteLogits, check_buildable
from .optim import make_optimizer, set_lr
from .threads import ShardedGrads, use_threads

INIT_LOCK = threading.Lock()  # model init draws from torch's global RNG: one builder at a time
class TrainConfigError(UserError, ValueError):
    """Hyperparameters that cannot train, with a message fit for the UI."""


class Diverged(UserError, RuntimeError):
    """The loss, the weights or the model's outputs became NaN or infinite."""


@dataclass
class TrainConfig:
    steps: int = 1500  # last step index: steps 0..steps run, like the tutorial's range(1501)
    batch_size: int = 32
    lr: float = 3e-3
    seed: int = 0
    eval_every: int = 500
    eval_batches: int = 10
    schedule: str = "constant"  # constant | cosine (linear warmup, cosine decay to min_lr_ratio·lr)
    warmup: int = 0
    min_lr_ratio: float = 0.1
    weight_decay: float = 0.01  # torch's AdamW default, which the tutorial uses
    decay_all: bool = True  # tutorial: decay every parameter; False exempts norms and embeddings
    beta2: float = 0.999
    optimizer: str = "adamw"  # adamw | muon (Muon for the blocks' matrices, AdamW for the rest)
    muon_lr: float = 0.02  # Muon's peak learning rate; the schedule scales it like lr
    grad_clip: float = 0.0  # 0 = off
    sample_every: int = 0  # 0 = only at the end
    sample_chars: int = 200
    checkpoint_every: int = 0  # 0 = only at the end
    snapshot_every: int = 0  # keep intermediate weights for the inspector's training slider
    threads: int = 0  # 0 = every core
    final_eval: bool = True  # loss over the whole val split at the end

    def __post_init__(self):
        self.validate()

    def validate(self):
        ints = {"steps": (0, 1_000_000), "batch_size": (1, 4096), "eval_every": (1, 1_000_000),
                "eval_batches": (1, 10_000), "warmup": (0, 1_000_000), "sample_every": (0, 1_000_000),
                "sample_chars": (1, 100_000), "checkpoint_every": (0, 1_000_000),
                "snapshot_every": (0, 1_000_000), "threads": (0, 256), "seed": (0, 2**63 - 1)}
        for name, (lo, hi) in ints.items():
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or not lo <= v <= hi:
                raise TrainConfigError(f"{name} must be an integer from {lo:,} to {hi:,}, got {v!r}")
        floats = {"lr": (0.0, 10_000.0), "min_lr_ratio": (0.0, 1.0), "weight_decay": (0.0, 10.0),
                  "beta2": (0.0, 0.9999), "grad_clip": (0.0, 1e6), "muon_lr": (0.0, 10.0)}
        for name, (lo, hi) in floats.items():
            v = getattr(self, name)
            if not isinstance(v, (int, float)) or not math.isfinite(v) or not lo <= v <= hi:
                raise TrainConfigError(f"{name} must be a number from {lo} to {hi}, got {v!r}")
        if self.lr <= 0:
            raise TrainConfigError("lr must be greater than 0")
        if self.schedule not in ("constant", "cosine"):
            raise TrainConfigError(f"schedule must be constant or cosine, got {self.schedule!r}")
        if self.optimizer not in ("adamw", "muon"):
            raise TrainConfigError(f"optimizer must be adamw or muon, got {self.optimizer!r}")
        if self.optimizer == "muon" and self.muon_lr <= 0:
            raise TrainConfigError("muon_lr must be greater than 0")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def lr_at(step: int, tc: TrainConfig) -> float:
    if tc.schedule == "constant":
        return tc.lr
    if step < tc.warmup:
        return tc.lr * (step + 1) / tc.warmup
    progress = min(1.0, (step - tc.warmup) / max(1, tc.steps - tc.warmup))
    floor = tc.lr * tc.min_lr_ratio
    return floor + (tc.lr - floor) * 0.5 * (1 + math.cos(math.pi * progress))


def build_model(cfg: GPTConfig, seed: int) -> tuple[GPT, torch.Generator]:
    """Seed, build the model, and hand back a generator that continues the same random stream."""
    check_buildable(cfg)
    with INIT_LOCK, torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = GPT(cfg)
        stream = torch.Generator().manual_seed(0)
        stream.set_state(torch.get_rng_state())
    return model, stream


def step_memory_bytes(cfg: GPTConfig, batch_size: int, n_params: int) -> int:
    """Rough size of one training step: weights, gradients and two optimizer moments, plus the activations
    autograd keeps (about 14·d_model + 4·d_ff floats per token per layer, and the logits twice)."""
    per_token = cfg.n_layer * (14 * cfg.d_model + 4 * cfg.d_ff) + 4 * cfg.d_model + 2 * cfg.vocab_size
    return 4 * (4 * n_params + batch_size * cfg.context * per_token)


def physical_memory() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def check_fits_in_memory(cfg: GPTConfig, batch_size: int) -> None:
    """Refuse, before anything is allocated, a model over the parameter cap (check_buildable, the clearer
    message) or a run whose step would take more than half of this machine's memory."""
    need, have = step_memory_bytes(cfg, batch_size, check_buildable(cfg)), physical_memory()
    if have and need > have // 2:
        raise TrainConfigError(
            f"one training step would need about {need / 1e9:.1f} GB (batch {batch_size} × context {cfg.context}, "
            f"d_model {cfg.d_model}, {cfg.n_layer} layers) and this machine has {have / 1e9:.1f} GB. "
            "Use a smaller batch, context or model.")


@torch.no_grad()
def estimate_loss(model: GPT, data: torch.Tensor, batch_size: int, n_batches: int,
                  generator: torch.Generator) -> float:
    """Mean loss over n random batches: the tutorial's quick val estimate."""
    ctx = model.cfg.context
    return sum(model(*get_batch(data, ctx, batch_size, generator))[1].item() for _ in range(n_batches)) / n_batches


@torch.no_grad()
def evaluate(model: GPT, ids: torch.Tensor, batch_size: int = 64) -> float:
    """Mean cross-entropy of every position 1..N-1 of ids, each predicted from its own window.

    Windows are consecutive and non-overlapping, so each position is scored once with 0..ctx-1
    characters of left context: the same distribution as the tutorial's random-window estimate,
    without its sampling noise.
    """
    ctx = model.cfg.context
    if len(ids) < 2:
        raise InputError("need at least 2 tokens to evaluate")
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    full = (len(ids) - 1) // ctx
    starts = torch.arange(full) * ctx
    offsets = torch.arange(ctx)
    for chunk in starts.split(batch_size) if full else ():  # (an empty tensor still splits into one chunk)
        x, y = ids[chunk[:, None] + offsets], ids[chunk[:, None] + offsets + 1]
        total += model(x, y)[1].item() * y.numel()
        count += y.numel()
    tail = full * ctx
    if tail < len(ids) - 1:
        x, y = ids[None, tail:-1], ids[None, tail + 1:]
        total += model(x, y)[1].item() * y.numel()
        count += y.numel()
    model.train(was_training)
    return total / count


class TrainControl:
    """Thread-safe pause/stop switches for a running Trainer."""

    def __init__(self):
        self.stop, self.running = threading.Event(), threading.Event()
        self.running.set()

    def pause(self):
        self.running.clear()

    def resume(self):
        self.running.set()

    def request_stop(self):
        self.stop.set()
        self.running.set()


Event = Callable[[str, dict], None]


class ActiveClock:
    """Seconds since creation minus the time spent paused, so tokens/s and ETA ignore pauses."""

    def __init__(self):
        self.start, self.paused = time.perf_counter(), 0.0

    def wait_while_paused(self, control: TrainControl) -> None:
        if not control.running.is_set():
            began = time.perf_counter()
            control.running.wait()
            self.paused += time.perf_counter() - began

    def active(self) -> float:
        return time.perf_counter() - self.start - self.paused


class Trainer:
    """Owns model, optimizer, data and history for one run; `run` trains in the calling thread."""

    def __init__(self, model_cfg: GPTConfig, tc: TrainConfig, text: str, corpus_description: str = "",
                 out_dir: Path | None = None, resume_from: Path | None = None):
        self.tc, self.out_dir = tc, Path(out_dir) if out_dir else None
        if resume_from is not None:
            loaded = ckpt.load_checkpoint(resume_from)
            ckpt.resumable_meta(resume_from)
            if tc.steps <= loaded.meta["step"]:
                raise TrainConfigError(f"the run is already at step {loaded.meta['step']:,}: "
                                       "set steps higher to continue it")
            check_fits_in_memory(loaded.model.cfg, tc.batch_size)  # a resumed run may ask for a larger batch
            self.model, self.tokenizer = loaded.model, loaded.tokenizer
            self.model.train()
            self.history = {**new_history(), **loaded.meta["history"]}
            self.start_step = loaded.meta["step"] + 1
            self.stream = torch.Generator().manual_seed(tc.seed + self.start_step)
            self.elapsed_before = float(loaded.meta.get("wall_time", 0.0))
        else:
            self.tokenizer = CharTokenizer.from_text(text)
            if self.tokenizer.vocab_size < 2:
                raise CorpusError(f"the corpus uses a single character ({text[:1]!r}): there is nothing to predict")
            model_cfg = GPTConfig.from_dict({**model_cfg.to_dict(), "vocab_size": self.tokenizer.vocab_size})
            check_fits_in_memory(model_cfg, tc.batch_size)  # before the weights exist
            self.model, self.stream = build_model(model_cfg, tc.seed)
            self.history, self.start_step, self.elapsed_before = new_history(), 0, 0.0
        self.unknown = self.tokenizer.unknown(text)
        ids = torch.tensor(self.tokenizer.encode(text), dtype=torch.long)
        check_trainable(len(ids), self.model.cfg.context)
        self.train_ids, self.val_ids = split_ids(ids)
        self.optimizer = make_optimizer(self.model, tc)
        # Moments of one optimizer mean nothing to another: after a switch, the new one starts fresh.
        self.optimizer_restored = resume_from is not None and \
            loaded.meta["train_config"].get("optimizer", "adamw") == tc.optimizer and \
            ckpt.load_optimizer_state(resume_from, self.model, self.optimizer, self.start_step - 1)
        self.sample_gen = torch.Generator().manual_seed(tc.seed + 1)
        self.corpus_description = corpus_description
        self.step = self.start_step - 1
        self.final_val: float | None = None

    @property
    def cfg(self) -> GPTConfig:
        return self.model.cfg

    def sample(self, n_chars: int, prompt: str = "\n", temperature: float = 1.0) -> str:
        ids = self.tokenizer.encode(prompt) or [0]
        was_training = self.model.training
        self.model.eval()
        out = self.model.stream(torch.tensor([ids]), n_chars, temperature=temperature, generator=self.sample_gen)
        try:
            return prompt + self.tokenizer.decode(out)
        except NonFiniteLogits:
            raise Diverged(f"the outputs became NaN or infinite by step {self.step}") from None
        finally:
            self.model.train(was_training)

    def meta(self, status: str, wall_time: float) -> dict:
        return {"step": self.step, "status": status, "history": self.history, "train_config": self.tc.to_dict(),
                "corpus": self.corpus_description, "wall_time": wall_time, "final_val_loss": self.final_val,
                "params": self.model.num_params()}

    def check_weights(self) -> None:
        """Raise Diverged if an update left a NaN or infinity in the weights (before sampling or saving them)."""
        if not all(torch.isfinite(p).all() for p in self.model.parameters()):
            raise Diverged(f"weights became NaN or infinite by step {self.step}")

    def diverged_message(self, error: Diverged) -> str:
        """Say what blew up, what was kept, and what to try; mark the kept checkpoint as diverged."""
        kept = last_checkpoint_step(self.out_dir) if self.out_dir is not None else None
        if kept is None:
            saved = "No checkpoint had been saved yet, so nothing was written."
        else:
            saved = f"The last good checkpoint (step {kept:,}) is kept in {self.out_dir}."
            ckpt.update_meta(self.out_dir, status="diverged", message=f"diverged: {error}")
        return (f"Training diverged: {error}. {saved} "
                "Try a smaller learning rate, warmup, gradient clipping or less weight decay.")

    def save(self, status: str, wall_time: float) -> None:
        if self.out_dir is None:
            return
        self.check_weights()
        ckpt.save_checkpoint(self.out_dir, self.model, self.tokenizer, self.meta(status, wall_time), self.optimizer)

    def run(self, on_event: Event | None = None, control: TrainControl | None = None,
            after_backward: Callable[[Trainer], None] | None = None) -> str:
        """Train to tc.steps; returns 'finished' or 'stopped'. Raises Diverged on a NaN/inf loss, weights or outputs,
        and CheckpointError if another process is training into out_dir.

        Call it from the thread that should do the work: thread counts are per thread in torch.
        """
        use_threads(self.tc.threads)
        self.model.train()
        with ckpt.training_lock(self.out_dir) if self.out_dir is not None else nullcontext():
            return self._run(on_event or (lambda kind, data: None), control or TrainControl(), after_backward)

    def _run(self, emit: Event, control: TrainControl, after_backward) -> str:
        tc, model = self.tc, self.model
        tokens_per_step = tc.batch_size * self.cfg.context
        clock = ActiveClock()
        wall = lambda: self.elapsed_before + clock.active()  # noqa: E731
        status, sampled_at = "finished", None
        shard_grads = ShardedGrads(model, torch.get_num_threads())
        try:
            for step in range(self.start_step, tc.steps + 1):
                clock.wait_while_paused(control)
                if control.stop.is_set():
                    status = "stopped"
                    break
                loss = self._train_step(step, shard_grads, after_backward)
                self.step = step
                self._record_step(step, loss, emit, wall(), clock.active(), tokens_per_step)
                if step % tc.eval_every == 0 or step == tc.steps:
                    self._eval(step, loss, emit)
                if tc.sample_every and step % tc.sample_every == 0 and step < tc.steps:
                    self.check_weights()
                    emit("sample", {"step": step, "text": self.sample(tc.sample_chars)})
                    sampled_at = step
                if tc.snapshot_every and step % tc.snapshot_every == 0 and self.out_dir is not None:
                    self.check_weights()
                    ckpt.save_snapshot(self.out_dir, model, self.tokenizer, step)
                if tc.checkpoint_every and step % tc.checkpoint_every == 0 and step < tc.steps:
                    self.save("running", wall())
                    emit("checkpoint", {"step": step, "path": str(self.out_dir)})
        finally:
            shard_grads.close()
        if tc.final_eval and self.step >= 0:
            self.final_val = evaluate(model, self.val_ids)
            self.history["final_val"] = self.final_val
            emit("final_eval", {"step": self.step, "val": self.final_val})
        self.check_weights()
        if sampled_at != self.step:  # a run stopped right after a sampling step has its sample already
            emit("sample", {"step": self.step, "text": self.sample(tc.sample_chars)})
        self.save(status, wall())
        emit("done", {"step": self.step, "status": status, "wall_time": wall()})
        return status

    def _train_step(self, step: int, shard_grads: ShardedGrads, after_backward) -> float:
        set_lr(self.optimizer, lr_at(step, self.tc))
        x, y = get_batch(self.train_ids, self.cfg.context, self.tc.batch_size, self.stream)
        loss = shard_grads(x, y)
        if not torch.isfinite(loss):
            raise Diverged(f"loss became {loss.item()} at step {step}")
        if after_backward is not None:
            after_backward(self)
        if self.tc.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.grad_clip)
        self.optimizer.step()
        return loss.item()

    def _record_step(self, step, loss, emit, wall_time, active_time, tokens_per_step):
        done = step - self.start_step + 1
        rate = done * tokens_per_step / max(active_time, 1e-9)
        eta = (self.tc.steps - step) * tokens_per_step / rate
        self.history["step"].append(step)
        self.history["train_loss"].append(loss)
        self.history["lr"].append(self.optimizer.param_groups[0]["lr"])  # AdamW's (under Muon: × muon_lr/lr)
        self.history["time"].append(wall_time)
        emit("step", {"step": step, "loss": loss, "tokens_per_s": rate, "eta_s": eta, "elapsed_s": wall_time,
                      "total_steps": self.tc.steps})

    def _eval(self, step, loss, emit):
        val = estimate_loss(self.model, self.val_ids, self.tc.batch_size, self.tc.eval_batches, self.stream)
        if not math.isfinite(val):
            raise Diverged(f"validation loss became {val} at step {step}")
        self.history["eval_step"].append(step)
        self.history["eval_train"].append(loss)
        self.history["eval_val"].append(val)
        emit("eval", {"step": step, "train": loss, "val": val})


def last_checkpoint_step(directory: Path) -> int | None:
    meta = ckpt.read_meta(directory)
    return int(meta["step"]) if (Path(directory) / "model.safetensors").is_file() and "step" in meta else None


def new_history() -> dict:
    return {"step": [], "train_loss": [], "lr": [], "time": [], "eval_step": [], "eval_train": [], "eval_val": []}
