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
from collections import Counter
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import torch

from . import checkpoint as ckpt
from .config import GPTConfig, TrainConfig, TrainConfigError
from .data import CorpusError, check_trainable, encode_chars, get_batch, split_ids
from .ddp import Distributed, DistributedError
from .device import autocast, configure, describe, dtype_name, peak_memory, resolve, train_dtype
from .errors import InputError, Message, UserError, message, message_record
from .model import GPT, NonFiniteLogits, check_buildable
from .optim import make_optimizer, set_lr
from .prepare import PreparedCorpus
from .threads import ShardedGrads, use_threads
from .tokenizer import Tokenizer, TokenizerError, make_tokenizer, tokenizer_from_dict

INIT_LOCK = threading.Lock()  # model init draws from torch's global RNG: one builder at a time


class Diverged(UserError, RuntimeError):
    """The loss, the weights or the model's outputs became NaN or infinite."""


def diverging_above(vocab_size: int) -> float:
    """The loss past which a run is diverging: twice ln V, the loss of a uniform guess, and at least one nat above
    it. A fresh model starts near ln V and training only lowers it; the tutorial's run ends near 1.0 (ln 74 = 4.30)."""
    uniform = math.log(vocab_size)
    return uniform + max(1.0, uniform)


def diverging_message(info: dict) -> Message:
    """What a run's `diverging` record (step, loss, vocab) means, and what to try."""
    return message("train.diverging", "the run is diverging: its validation loss is {loss:,.1f} at step {step:,}, far "
                   "above ln V = {uniform:.2f}, the loss of a uniform guess over its {vocab:,} tokens. Try a smaller "
                   "learning rate, warmup or gradient clipping.", loss=info["loss"], step=info["step"],
                   uniform=math.log(info["vocab"]), vocab=info["vocab"])


def diverging_record(meta: dict) -> dict | None:
    """A run's meta.json `diverging` record when it is one diverging_message can say, else None."""
    info = meta.get("diverging")
    ok = isinstance(info, dict) and all(isinstance(info.get(k), int) and not isinstance(info.get(k), bool)
                                        for k in ("step", "vocab")) and info["vocab"] >= 1 and \
        isinstance(info.get("loss"), int | float) and not isinstance(info.get("loss"), bool) and \
        (isinstance(info["loss"], float) or abs(info["loss"]) <= 1e308)  # (10**400 cannot be formatted as a float)
    return info if ok else None


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
        stream = torch.Generator()
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


def check_fits_in_memory(cfg: GPTConfig, batch_size: int, device: torch.device | None = None) -> None:
    """Refuse, before anything is allocated, a model over the parameter cap (check_buildable, the clearer
    message) or a run whose step would take more than half of this machine's memory (on a CUDA device: 90% of
    the GPU's, which holds nothing else of ours)."""
    need = step_memory_bytes(cfg, batch_size, check_buildable(cfg))
    if device is not None and device.type == "cuda":
        have, share = torch.cuda.get_device_properties(device).total_memory, 0.9
        where = message("train.this_gpu", "this GPU")
    else:
        have, share, where = physical_memory(), 0.5, message("train.this_machine", "this machine")
    if have and need > have * share:
        raise TrainConfigError("train.too_much_memory", "one training step would need about {need:.1f} GB (batch "
                               "{batch} × context {context}, d_model {d_model}, {n_layer} layers) and {where} has "
                               "{have:.1f} GB. Use a smaller batch, context or model.", need=need / 1e9,
                               batch=batch_size, context=cfg.context, d_model=cfg.d_model, n_layer=cfg.n_layer,
                               where=where, have=have / 1e9)


def model_device(model: torch.nn.Module) -> torch.device:
    return next(model.parameters()).device


@torch.no_grad()
def estimate_loss(model: GPT, data, batch_size: int, n_batches: int, generator: torch.Generator) -> float:
    """Mean loss over n random batches: the tutorial's quick val estimate. Batches are drawn on the CPU (the same
    random stream on every device) and moved to the model's device."""
    ctx, device = model.cfg.context, model_device(model)
    batches = (get_batch(data, ctx, batch_size, generator) for _ in range(n_batches))
    return sum(model(x.to(device), y.to(device))[1].item() for x, y in batches) / n_batches


def skip_batches(data, context: int, batch_size: int, n_batches: int, generator: torch.Generator) -> None:
    """Draw from generator exactly what n get_batch calls would, without reading data: a process that leaves
    the evaluation to process 0 stays on the same random stream."""
    for _ in range(n_batches):
        torch.randint(len(data) - context - 1, (batch_size,), generator=generator)


@torch.no_grad()
def evaluate(model: GPT, ids: torch.Tensor, batch_size: int = 64) -> float:
    """Mean cross-entropy of every position 1..N-1 of ids, each predicted from its own window.

    Windows are consecutive and non-overlapping, so each position is scored once with 0..ctx-1
    characters of left context: the same distribution as the tutorial's random-window estimate,
    without its sampling noise.
    """
    ctx, device = model.cfg.context, model_device(model)
    if len(ids) < 2:
        raise InputError("train.evaluate_too_short", "need at least 2 tokens to evaluate")
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    full = (len(ids) - 1) // ctx
    # contiguous spans, so ids may be a tensor or a memory-mapped TokenArray (read one span at a time)
    for first in range(0, full, batch_size):
        rows = min(batch_size, full - first)
        span = ids[first * ctx:(first + rows) * ctx + 1].to(device)
        x, y = span[:-1].view(rows, ctx), span[1:].view(rows, ctx)
        total += model(x, y)[1].item() * y.numel()
        count += y.numel()
    tail = full * ctx
    if tail < len(ids) - 1:
        span = ids[tail:len(ids)].to(device)
        x, y = span[None, :-1], span[None, 1:]
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


class SinglePass:
    """Loss and gradients of a batch in one forward and backward, in the device's training precision: the step
    on a GPU, under DDP (whose gradient averaging hooks into this backward) and for a compiled model, where the
    CPU's per-core shards (ShardedGrads) have no place."""

    def __init__(self, model: torch.nn.Module, device: torch.device, dtype: torch.dtype):
        self.model, self.device, self.dtype = model, device, dtype

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        for p in self.model.parameters():
            p.grad = None
        with autocast(self.device, self.dtype):
            _, loss = self.model(x, y)
        loss.backward()
        return loss.detach()

    def close(self) -> None:
        pass


class Trainer:
    """Owns model, optimizer, data and history for one run; `run` trains in the calling thread.

    text is the corpus's text, or a PreparedCorpus (a memory-mapped token file, with its own tokenizer). The
    weights, batches and optimizer state live on `device` (auto: CUDA, then MPS, then the CPU); checkpoints are
    written from CPU copies, so they load anywhere. Under torchrun, `dist` makes this process one of several
    (gptcore.ddp): only process 0 writes into out_dir and reports events.

    A new run builds the model model_cfg describes (at the tokenizer's vocabulary). A resumed run (resume_from:
    its folder; model_cfg None) keeps its model and tokenizer and trains from its last step to tc.steps, which is
    not quite the run it would have been without the break:
    - the learning-rate schedule is laid over the new last step: continuing a cosine run past its planned end
      raises the learning rate again, to where the longer schedule stands at the resumed step, and decays it anew;
    - the random stream (batches and validation estimates) starts afresh from tc.seed + the resumed step, so the
      batches differ from those an uninterrupted run would have drawn.
    """

    def __init__(self, model_cfg: GPTConfig | None, tc: TrainConfig, text: str | PreparedCorpus,
                 corpus_description: str = "", out_dir: Path | None = None, resume_from: Path | None = None, *,
                 dist: Distributed | None = None):
        prepared = text if isinstance(text, PreparedCorpus) else None
        if prepared is not None:  # the token file fixes the tokenizer
            tc = replace(tc, tokenizer=prepared.tokenizer.kind)
        self.tc, self.dist = tc, dist
        self.device = dist.device if dist else resolve(tc.device)
        self.dtype, self.compile = train_dtype(self.device, tc.dtype), tc.compile
        self.main = dist is None or dist.main
        self.out_dir = Path(out_dir) if out_dir and self.main else None
        self.rows = dist.rows(tc.batch_size) if dist else None
        if resume_from is not None:
            saved = self._resume(resume_from, prepared)
        else:
            saved = None
            self._fresh(model_cfg, text, prepared)
        self.model.to(self.device).train()
        self._data(text, prepared)
        self.optimizer = make_optimizer(self.model, tc)
        # Moments of one optimizer mean nothing to another: after a switch, the new one starts fresh.
        self.optimizer_restored = saved is not None and \
            saved["train_config"].get("optimizer", "adamw") == tc.optimizer and \
            ckpt.load_optimizer_state(resume_from, self.model, self.optimizer, self.start_step - 1)
        self.sample_gen = torch.Generator(self.device).manual_seed(tc.seed + 1)
        self.corpus_description = corpus_description
        self.step = self.start_step - 1
        self.final_val: float | None = None

    def _resume(self, directory: Path, prepared: PreparedCorpus | None) -> dict:
        """Take up the run saved in directory: its model, tokenizer, history and step; returns its meta.json."""
        tc, loaded = self.tc, ckpt.load_checkpoint(directory)
        ckpt.resumable_meta(directory)
        if tc.steps <= loaded.meta["step"]:
            raise TrainConfigError("train.already_there", "the run is already at step {step:,}: set steps higher "
                                   "to continue it", step=loaded.meta["step"])
        if prepared is not None and prepared.tokenizer != loaded.tokenizer:
            raise CorpusError("train.other_tokenizer", "{path} was prepared with another tokenizer than the "
                              "run's ({prepared} against {run})", path=prepared.path,
                              prepared=prepared.tokenizer.describe(), run=loaded.tokenizer.describe())
        if tc.tokenizer != loaded.tokenizer.kind:
            raise TrainConfigError("tokenizer.resume_other", "the run was trained with the {run} tokenizer and "
                                   "keeps it: leave out --tokenizer to continue it", run=loaded.tokenizer.kind)
        # a resumed run may ask for a larger batch
        check_fits_in_memory(loaded.model.cfg, self._local_batch(), self.device)
        self.model, self.tokenizer = loaded.model, loaded.tokenizer
        self.history = {**new_history(), **loaded.meta["history"]}
        self.start_step = loaded.meta["step"] + 1
        self.stream = torch.Generator().manual_seed(tc.seed + self.start_step)
        self.elapsed_before = float(loaded.meta.get("wall_time", 0.0))
        self.diverging = diverging_record(loaded.meta)
        return loaded.meta

    def _fresh(self, model_cfg: GPTConfig, text: str | PreparedCorpus, prepared: PreparedCorpus | None) -> None:
        """Start a new run: the tokenizer, then the model model_cfg describes at its vocabulary, from tc.seed."""
        self.tokenizer = prepared.tokenizer if prepared else self._new_tokenizer(text)
        if self.tokenizer.vocab_size < 2:
            if prepared:
                raise CorpusError("train.single_token", "the corpus uses a single token: there is nothing to "
                                  "predict")
            raise CorpusError("train.single_char", "the corpus uses a single character ({char}): there is "
                              "nothing to predict", char=repr(text[:1]))
        model_cfg = GPTConfig.from_dict({**model_cfg.to_dict(), "vocab_size": self.tokenizer.vocab_size})
        check_fits_in_memory(model_cfg, self._local_batch(), self.device)  # before the weights exist
        self.model, self.stream = build_model(model_cfg, self.tc.seed)  # on the CPU: the same weights everywhere
        self.history, self.start_step, self.elapsed_before = new_history(), 0, 0.0
        self.diverging = None

    def _data(self, text: str | PreparedCorpus, prepared: PreparedCorpus | None) -> None:
        """The training and validation ids, which must hold windows of the model's context."""
        if prepared is not None:
            self.unknown, self.train_ids, self.val_ids = Counter(), prepared.train, prepared.val
        else:
            self.train_ids, self.val_ids, self.unknown = encode_split(self.tokenizer, text)
        context = self.model.cfg.context
        check_trainable(len(self.train_ids) + len(self.val_ids), context, chars=self.tokenizer.kind == "char")
        if len(self.val_ids) < context + 2:
            raise CorpusError("train.val_too_short", "the validation split has {n:,} tokens: it needs at least one "
                              "window of {window}; use a longer corpus or a shorter context", n=len(self.val_ids),
                              window=context + 1)

    def _local_batch(self) -> int:
        return self.tc.batch_size // (self.dist.world_size if self.dist else 1)

    def _new_tokenizer(self, text: str) -> Tokenizer:
        """The corpus's characters, or a BPE trained on its training split (by process 0, under DDP)."""
        kind, vocab_size = self.tc.tokenizer, self.tc.bpe_vocab
        try:
            if kind == "char" or self.dist is None:
                return make_tokenizer(kind, text if kind == "char" else text[:train_chars(text)], vocab_size)
            learned = make_tokenizer(kind, text[:train_chars(text)], vocab_size) if self.dist.main else None
            return tokenizer_from_dict(self.dist.share(learned.to_dict() if learned else None))
        except TokenizerError as e:
            raise CorpusError.of(e.message) from None

    @property
    def cfg(self) -> GPTConfig:
        return self.model.cfg

    def sample(self, n_tokens: int, prompt: str = "\n", temperature: float = 1.0) -> str:
        ids = self.tokenizer.encode(prompt) or [0]
        was_training = self.model.training
        self.model.eval()
        out = self.model.stream(torch.tensor([ids], device=self.device), n_tokens, temperature=temperature,
                                generator=self.sample_gen)
        try:
            return prompt + self.tokenizer.decode(out)
        except NonFiniteLogits:
            raise Diverged("train.outputs_nan", "the outputs became NaN or infinite by step {step}",
                           step=self.step) from None
        finally:
            self.model.train(was_training)

    def meta(self, status: str, wall_time: float) -> dict:
        return {"step": self.step, "status": status, "history": self.history, "train_config": self.tc.to_dict(),
                "corpus": self.corpus_description, "wall_time": wall_time, "final_val_loss": self.final_val,
                "params": self.model.num_params(), "tokenizer": self.tokenizer.describe(), "diverging": self.diverging,
                "hardware": self.hardware()}

    def hardware(self) -> dict:
        """Where the run computes, as meta.json records it (peak_memory: bytes of GPU memory at most, on CUDA)."""
        found = {"device": describe(self.device), "precision": dtype_name(self.dtype),
                 "processes": self.dist.world_size if self.dist else 1, "compiled": self.compile}
        if (peak := peak_memory(self.device)) is not None:
            found["peak_memory"] = peak
        return found

    def check_weights(self) -> None:
        """Raise Diverged if an update left a NaN or infinity in the weights, or in what they compute (before
        sampling or saving them). Weights can all be finite and still so large that the forward pass overflows:
        RMSNorm's backward keeps the gradients finite while they grow, so only the outputs show it."""
        if not all(torch.isfinite(p).all() for p in self.model.parameters()):
            raise Diverged("train.weights_nan", "weights became NaN or infinite by step {step}", step=self.step)
        if not self._outputs_finite():
            raise Diverged("train.outputs_nan", "the outputs became NaN or infinite by step {step}",
                           step=self.step)

    def _outputs_finite(self) -> bool:
        """Are the logits of the first validation window finite? (One forward pass of one window.)"""
        context, data = self.cfg.context, self.val_ids
        window = data[:context].unsqueeze(0) if isinstance(data, torch.Tensor) else \
            data.windows(torch.zeros(1, dtype=torch.long), context)
        was_training = self.model.training
        self.model.eval()
        try:
            with torch.no_grad(), autocast(self.device, self.dtype):
                logits, _ = self.model(window.to(self.device))
            return bool(torch.isfinite(logits).all())
        finally:
            self.model.train(was_training)

    def diverged_message(self, error: Diverged) -> Message:
        """Say what blew up, what was kept, and what to try; mark the kept checkpoint as diverged."""
        kept = last_checkpoint_step(self.out_dir) if self.out_dir is not None else None
        if kept is None:
            saved = message("train.nothing_saved", "No checkpoint had been saved yet, so nothing was written.")
        else:
            saved = message("train.kept_good", "The last good checkpoint (step {step:,}) is kept in {path}.",
                            step=kept, path=self.out_dir)
        said = message("train.diverged", "Training diverged: {error}. {saved} Try a smaller learning rate, warmup, "
                       "gradient clipping or less weight decay.", error=error.message, saved=saved)
        if kept is not None:
            ckpt.update_meta(self.out_dir, status="diverged", message=message_record(said))
        return said

    def disk_full(self, error: ckpt.DiskFull) -> ckpt.DiskFull:
        """The run cannot save: say so and what was kept, and mark what was kept as failed."""
        kept = last_checkpoint_step(self.out_dir)
        if kept is None:
            saved = message("train.full_nothing_kept", "No checkpoint had been saved yet, so nothing was kept.")
        else:
            saved = message("train.full_kept", "The checkpoint of step {step:,} is kept whole in {path}.", step=kept,
                            path=self.out_dir)
        said = message("train.disk_full", "The disk is full: the run stopped at step {step:,}, whose checkpoint "
                       "could not be written ({error}). {saved} Free some space, then continue the run.",
                       step=self.step, error=error.message, saved=saved)
        if kept is not None:
            try:
                ckpt.update_meta(self.out_dir, status="failed", message=message_record(said))
            except ckpt.CheckpointError:  # no space even for meta.json: the run stays listed as interrupted
                said = message("train.disk_full_unmarked", "{said} (There was no space left to mark it as failed "
                               "either: it is listed as interrupted.)", said=said)
        return ckpt.DiskFull.of(said)

    def save(self, status: str, wall_time: float) -> None:
        if self.out_dir is None:
            return
        self.check_weights()
        ckpt.save_checkpoint(self.out_dir, self.model, self.tokenizer, self.meta(status, wall_time), self.optimizer)

    def check_diverging(self, step: int, val: float, emit: Event) -> None:
        """Flag a run whose latest validation loss is far above a uniform guess's; report when that changes (the
        event's data is the record, or None once the loss has come back)."""
        was = self.diverging
        vocab = self.tokenizer.vocab_size
        self.diverging = {"step": step, "loss": val, "vocab": vocab} if val > diverging_above(vocab) else None
        if (self.diverging is None) != (was is None):  # it starts diverging, or it has come back
            emit("diverging", dict(self.diverging) if self.diverging else None)

    def run(self, on_event: Event | None = None, control: TrainControl | None = None,
            after_backward: Callable[[Trainer], None] | None = None) -> str:
        """Train to tc.steps; returns 'finished' or 'stopped'. Raises Diverged on a NaN/inf loss, weights or outputs,
        and CheckpointError if another process is training into out_dir.

        Call it from the thread that should do the work: thread counts are per thread in torch.
        """
        if self.device.type == "cpu":
            use_threads(self.tc.threads)
        configure(self.device, self.dtype)
        self.model.train()
        emit = on_event if on_event is not None and self.main else (lambda kind, data: None)
        with ExitStack() as stack:
            refused = None
            try:
                if self.out_dir is not None:
                    if self.start_step == 0:  # a new run: never over a checkpoint or anyone's files
                        ckpt.check_new_folder(self.out_dir)
                    stack.enter_context(ckpt.training_lock(self.out_dir))
            except UserError as e:
                refused = e
            # every process takes part in the vote, whatever it found (only process 0 ever refuses)
            all_started = self.dist.all_ok(refused is None) if self.dist is not None else refused is None
            if refused is not None:
                raise refused
            if not all_started:
                raise DistributedError("train.rank0_refused", "process 0 could not start the run (its message says "
                                       "why)")
            try:
                return self._run(emit, control or TrainControl(), after_backward)
            except ckpt.DiskFull as e:
                raise self.disk_full(e) from None

    def _gradients(self):
        """What computes each step's loss and gradients: per-core shards on the CPU, one pass elsewhere."""
        if self.device.type == "cpu" and self.dist is None and not self.compile:
            return ShardedGrads(self.model, torch.get_num_threads())
        model = torch.compile(self.model) if self.compile else self.model
        return SinglePass(self.dist.wrap(model) if self.dist else model, self.device, self.dtype)

    def _run(self, emit: Event, control: TrainControl, after_backward) -> str:
        tc, model = self.tc, self.model
        tokens_per_step = tc.batch_size * self.cfg.context
        clock = ActiveClock()
        wall = lambda: self.elapsed_before + clock.active()  # noqa: E731
        status, sampled_at, agreed_stop = "finished", None, False
        gradients = self._gradients()
        try:
            for step in range(self.start_step, tc.steps + 1):
                clock.wait_while_paused(control)
                # under DDP, the stop all processes agreed on at the end of the last step; alone, the switch itself
                stopping = agreed_stop if self.dist else control.stop.is_set()
                if stopping:
                    status = "stopped"
                    break
                loss, agreed_stop = self._train_step(step, gradients, after_backward, control)
                self.step = step
                self._record_step(step, loss, emit, wall(), clock.active(), tokens_per_step)
                if step % tc.eval_every == 0 or step == tc.steps:
                    self._eval(step, loss, emit)
                if not self.main:
                    continue
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
            gradients.close()
        if not self.main:
            return status
        if status == "stopped":  # saved before the final evaluation, which a second signal may cut short
            self.save(status, wall())
        if tc.final_eval and self.step >= 0:
            with autocast(self.device, self.dtype):
                self.final_val = evaluate(model, self.val_ids)
            self.history["final_val"] = self.final_val
            self.check_diverging(self.step, self.final_val, emit)
            emit("final_eval", {"step": self.step, "val": self.final_val})
        self.check_weights()
        if sampled_at != self.step:  # a run stopped right after a sampling step has its sample already
            emit("sample", {"step": self.step, "text": self.sample(tc.sample_chars)})
        self.save(status, wall())
        emit("done", {"step": self.step, "status": status, "wall_time": wall()})
        return status

    def _train_step(self, step: int, gradients, after_backward, control: TrainControl) -> tuple[float, bool]:
        """One update; (the batch's mean loss, whether any process was asked to stop: DDP only)."""
        set_lr(self.optimizer, lr_at(step, self.tc))
        x, y = get_batch(self.train_ids, self.cfg.context, self.tc.batch_size, self.stream, self.rows)
        if self.device.type == "cuda":
            x, y = x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        elif self.device.type != "cpu":
            x, y = x.to(self.device), y.to(self.device)
        loss = gradients(x, y)
        # one all-reduce: the whole batch's loss, and any process's stop request (so all stop after this step)
        loss, stop = self.dist.mean_and_any(loss, control.stop.is_set()) if self.dist else (loss.item(), False)
        if not math.isfinite(loss):
            raise Diverged("train.loss_nan", "loss became NaN or infinite ({loss}) at step {step}", loss=str(loss),
                           step=step)
        if after_backward is not None:
            after_backward(self)
        if self.tc.grad_clip:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.tc.grad_clip)
        self.optimizer.step()
        return loss, stop

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
        tc = self.tc
        if not self.main:  # process 0 evaluates; the others draw the same numbers to stay on its random stream
            skip_batches(self.val_ids, self.cfg.context, tc.batch_size, tc.eval_batches, self.stream)
            return
        with autocast(self.device, self.dtype):
            val = estimate_loss(self.model, self.val_ids, tc.batch_size, tc.eval_batches, self.stream)
        if not math.isfinite(val):
            raise Diverged("train.val_nan", "validation loss became {val} at step {step}", val=str(val), step=step)
        self.history["eval_step"].append(step)
        self.history["eval_train"].append(loss)
        self.history["eval_val"].append(val)
        self.check_diverging(step, val, emit)
        emit("eval", {"step": step, "train": loss, "val": val})


def train_chars(text: str) -> int:
    """Where the training part of a text ends: its first 90% of characters."""
    return int(0.9 * len(text))


def encode_split(tokenizer: Tokenizer, text: str) -> tuple[torch.Tensor, torch.Tensor, Counter]:
    """(train ids, val ids, the characters the tokenizer does not know). Characters as in the tutorial: encode,
    then the first 90% of the ids. A BPE encodes the first 90% of the characters (the text it was trained on) and
    the rest apart, so no validation text leaks into the training split through a token that straddles the cut."""
    if tokenizer.kind == "char":
        ids, unknown = encode_chars(tokenizer, text)
        return *split_ids(ids), unknown
    cut = train_chars(text)
    train, val = (torch.tensor(tokenizer.encode(part), dtype=torch.long) for part in (text[:cut], text[cut:]))
    return train, val, tokenizer.unknown(text)


def last_checkpoint_step(directory: Path) -> int | None:
    meta = ckpt.read_meta(directory)
    return int(meta["step"]) if (Path(directory) / "model.safetensors").is_file() and "step" in meta else None


def new_history() -> dict:
    return {"step": [], "train_loss": [], "lr": [], "time": [], "eval_step": [], "eval_train": [], "eval_val": []}
