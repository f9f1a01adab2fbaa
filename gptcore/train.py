"""Training runs: the tutorial's loop (gptcore.step) with what a run needs around it — evaluations, samples,
checkpoints, pause and stop, and the CPU's or the processes' way of computing the gradients.

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
from collections import Counter, deque
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import replace
from pathlib import Path

import torch

from . import checkpoint as ckpt
from . import failures
from .capacity import check_buildable
from .config import GPTConfig, TrainConfig, TrainConfigError
from .data import Corpus, CorpusError, check_trainable, encode_chars, get_batch, split_ids
from .ddp import Distributed, DistributedError
from .device import autocast, configure, describe, dtype_name, peak_memory, resolve, train_dtype
from .errors import UserError, message
from .events import (
    CheckpointEvent,
    DivergingEvent,
    DoneEvent,
    EvalEvent,
    FinalEvalEvent,
    OnEvent,
    SampleEvent,
    StepEvent,
)
from .failures import Diverged
from .generate import NonFiniteLogits, stream
from .locks import check_new_folder, training_lock
from .model import GPT
from .optim import make_optimizer, set_lr
from .prepare import PreparedCorpus
from .step import LossAndGrads, estimate_loss, evaluate, lr_at, train_step
from .threads import ShardedGrads, use_threads
from .tokenizer import Tokenizer, TokenizerError, make_tokenizer, tokenizer_from_dict

INIT_LOCK = threading.Lock()  # model init draws from torch's global RNG: one builder at a time

TrainingCorpus = Corpus | PreparedCorpus  # a text, or a memory-mapped token file with its own tokenizer
RATE_WINDOW = 20  # steps the speed and ETA are measured over


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


def skip_batches(data, context: int, batch_size: int, n_batches: int, generator: torch.Generator) -> None:
    """Draw from generator exactly what n get_batch calls would, without reading data: a process that leaves
    the evaluation to process 0 stays on the same random stream."""
    for _ in range(n_batches):
        torch.randint(len(data) - context - 1, (batch_size,), generator=generator)


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


class RecentRate:
    """Steps per second over the last `window` steps. The first steps are the slow ones (memory first touched,
    caches cold), so a mean since the start would promise a finish much later than the run's."""

    def __init__(self, start: float, window: int = RATE_WINDOW):
        self.ends = deque([start], maxlen=window + 1)  # active seconds at the end of each recent step

    def step_done(self, at: float) -> float:
        """Record a step ending at `at` active seconds; the steps per second over the recent ones."""
        self.ends.append(at)
        return (len(self.ends) - 1) / max(self.ends[-1] - self.ends[0], 1e-9)


class SinglePass:
    """Loss and gradients of a batch in one forward and backward, in the device's training precision: the step
    on a GPU, under DDP (whose gradient averaging hooks into this backward) and for a compiled model, where the
    CPU's per-core shards (ShardedGrads) have no place."""

    def __init__(self, model: torch.nn.Module, device: torch.device, dtype: torch.dtype):
        self.model, self.device, self.dtype = model, device, dtype

    def __call__(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        with autocast(self.device, self.dtype):
            _, loss = self.model(x, y)
        loss.backward()
        return loss.detach()

    def close(self) -> None:
        pass


class Trainer:
    """Owns model, optimizer, data and history for one run; `run` trains in the calling thread.

    Made by `fresh` (a new model) or `resume` (a saved run). The weights, batches and optimizer state live on
    `device` (auto: CUDA, then MPS, then the CPU); checkpoints are written from CPU copies, so they load
    anywhere. Under torchrun, `dist` makes this process one of several (gptcore.ddp): only process 0 writes into
    out_dir and reports events. extra_meta goes into every meta.json it writes (how to load the corpus again).
    """

    def __init__(self, tc: TrainConfig, corpus: TrainingCorpus, out_dir: Path | None, dist: Distributed | None,
                 extra_meta: dict | None):
        if isinstance(corpus, PreparedCorpus):  # the token file fixes the tokenizer
            tc = replace(tc, tokenizer=corpus.tokenizer.kind)
        self.tc, self.dist, self.corpus_description = tc, dist, corpus.description
        self.extra_meta = dict(extra_meta or {})
        self.device = dist.device if dist else resolve(tc.device)
        self.dtype, self.compile = train_dtype(self.device, tc.dtype), tc.compile
        self.main = dist is None or dist.main
        self.out_dir = Path(out_dir) if out_dir and self.main else None
        self.rows = dist.rows(tc.batch_size) if dist else None
        self.final_val: float | None = None

    @classmethod
    def fresh(cls, model_cfg: GPTConfig, tc: TrainConfig, corpus: TrainingCorpus, out_dir: Path | None = None, *,
              dist: Distributed | None = None, extra_meta: dict | None = None) -> Trainer:
        """A new run: the corpus's tokenizer, then the model model_cfg describes at its vocabulary, from tc.seed."""
        trainer = cls(tc, corpus, out_dir, dist, extra_meta)
        trainer._build(model_cfg, corpus)
        trainer._set_up(corpus, restore_from=None)
        return trainer

    @classmethod
    def resume(cls, folder: Path, tc: TrainConfig, corpus: TrainingCorpus, *, dist: Distributed | None = None,
               extra_meta: dict | None = None) -> Trainer:
        """Take up the run saved in folder, to train it on from its last step to tc.steps (into the same folder).

        It keeps its model and tokenizer, but it is not quite the run it would have been without the break:
        - the learning-rate schedule is laid over the new last step: continuing a cosine or warm-down run past its
          planned end raises the learning rate again, to where the longer schedule stands at the resumed step, and
          lowers it anew;
        - the random stream (batches and validation estimates) starts afresh from tc.seed + the resumed step, so
          the batches differ from those an uninterrupted run would have drawn.
        """
        trainer = cls(tc, corpus, folder, dist, extra_meta)
        saved = trainer._take_up(Path(folder), corpus)
        # Moments of one optimizer mean nothing to another: after a switch, the new one starts fresh.
        same_optimizer = saved["train_config"].get("optimizer", "adamw") == trainer.tc.optimizer
        trainer._set_up(corpus, restore_from=Path(folder) if same_optimizer else None)
        return trainer

    def _take_up(self, directory: Path, corpus: TrainingCorpus) -> dict:
        """The run saved in directory: its model, tokenizer, history and step; returns its meta.json."""
        tc, loaded = self.tc, ckpt.load_checkpoint(directory)
        ckpt.resumable_meta(directory)
        if tc.steps <= loaded.meta["step"]:
            raise TrainConfigError("train.already_there", "the run is already at step {step:,}: set steps higher "
                                   "to continue it", step=loaded.meta["step"])
        if isinstance(corpus, PreparedCorpus) and corpus.tokenizer != loaded.tokenizer:
            raise CorpusError("train.other_tokenizer", "{path} was prepared with another tokenizer than the "
                              "run's ({prepared} against {run})", path=corpus.path,
                              prepared=corpus.tokenizer.describe(), run=loaded.tokenizer.describe())
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
        self.diverging = failures.diverging_record(loaded.meta)
        return loaded.meta

    def _build(self, model_cfg: GPTConfig, corpus: TrainingCorpus) -> None:
        self.tokenizer = corpus_tokenizer(corpus, self.tc, self.dist)
        model_cfg = GPTConfig.from_dict({**model_cfg.to_dict(), "vocab_size": self.tokenizer.vocab_size})
        check_fits_in_memory(model_cfg, self._local_batch(), self.device)  # before the weights exist
        self.model, self.stream = build_model(model_cfg, self.tc.seed)  # on the CPU: the same weights everywhere
        self.history, self.start_step, self.elapsed_before = new_history(), 0, 0.0
        self.diverging = None

    def _set_up(self, corpus: TrainingCorpus, restore_from: Path | None) -> None:
        """The model on its device, the corpus's ids, the optimizer (its saved state restored from restore_from)."""
        self.model.to(self.device).train()
        self.train_ids, self.val_ids, self.unknown = corpus_ids(corpus, self.tokenizer, self.cfg.context)
        self.optimizer = make_optimizer(self.model, self.tc)
        self.optimizer_restored = restore_from is not None and \
            ckpt.load_optimizer_state(restore_from, self.model, self.optimizer, self.start_step - 1)
        self.sample_gen = torch.Generator(self.device).manual_seed(self.tc.seed + 1)
        self.step = self.start_step - 1

    def _local_batch(self) -> int:
        return self.tc.batch_size // (self.dist.world_size if self.dist else 1)

    @property
    def cfg(self) -> GPTConfig:
        return self.model.cfg

    def sample(self, n_tokens: int, prompt: str = "\n", temperature: float = 1.0) -> str:
        ids = self.tokenizer.encode(prompt) or [0]
        was_training = self.model.training
        self.model.eval()
        out = stream(self.model, torch.tensor([ids], device=self.device), n_tokens, temperature=temperature,
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
                "hardware": self.hardware(), **self.extra_meta}

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
        if not outputs_finite(self.model, self.val_ids, self.device, self.dtype):
            raise Diverged("train.outputs_nan", "the outputs became NaN or infinite by step {step}",
                           step=self.step)

    def save(self, status: str, wall_time: float) -> None:
        if self.out_dir is None:
            return
        self.check_weights()
        ckpt.save_checkpoint(self.out_dir, self.model, self.tokenizer, self.meta(status, wall_time), self.optimizer)

    def check_diverging(self, step: int, val: float, emit: OnEvent) -> None:
        """Flag a run whose latest validation loss is far above a uniform guess's; report when that changes."""
        was = self.diverging
        vocab = self.tokenizer.vocab_size
        self.diverging = {"step": step, "loss": val, "vocab": vocab} if val > failures.diverging_above(vocab) else None
        if (self.diverging is None) != (was is None):  # it starts diverging, or it has come back
            emit(DivergingEvent(step, val, vocab, diverging=self.diverging is not None))

    def run(self, on_event: OnEvent | None = None, control: TrainControl | None = None,
            after_backward: Callable[[Trainer], None] | None = None) -> str:
        """Train to tc.steps; returns 'finished' or 'stopped'. Raises Diverged on a NaN/inf loss, weights or outputs,
        and CheckpointError if another process is training into out_dir.

        Call it from the thread that should do the work: thread counts are per thread in torch.
        """
        if self.device.type == "cpu":
            use_threads(self.tc.threads)
        configure(self.device, self.dtype)
        self.model.train()
        emit = on_event if on_event is not None and self.main else (lambda event: None)
        with ExitStack() as stack:
            self._claim_folder(stack)
            try:
                return self._run(emit, control or TrainControl(), after_backward)
            except ckpt.DiskFull as e:
                raise failures.disk_full(e, self.out_dir, self.step) from None

    def _claim_folder(self, stack: ExitStack) -> None:
        """Lock out_dir for this run (a new run: only a free folder), in every process or in none."""
        refused = None
        try:
            if self.out_dir is not None:
                if self.start_step == 0:  # a new run: never over a checkpoint or anyone's files
                    check_new_folder(self.out_dir)
                stack.enter_context(training_lock(self.out_dir))
        except UserError as e:
            refused = e
        # every process takes part in the vote, whatever it found (only process 0 ever refuses)
        all_started = self.dist.all_ok(refused is None) if self.dist is not None else refused is None
        if refused is not None:
            raise refused
        if not all_started:
            raise DistributedError("train.rank0_refused", "process 0 could not start the run (its message says "
                                   "why)")

    def _loss_and_grads(self) -> ShardedGrads | SinglePass:
        """What computes each step's loss and gradients: per-core shards on the CPU, one pass elsewhere."""
        if self.device.type == "cpu" and self.dist is None and not self.compile:
            return ShardedGrads(self.model, torch.get_num_threads())
        model = torch.compile(self.model) if self.compile else self.model
        return SinglePass(self.dist.wrap(model) if self.dist else model, self.device, self.dtype)

    def _run(self, emit: OnEvent, control: TrainControl, after_backward) -> str:
        tc = self.tc
        clock = ActiveClock()
        wall = lambda: self.elapsed_before + clock.active()  # noqa: E731
        rate = RecentRate(clock.active())
        status, sampled_at, agreed_stop = "finished", None, False
        loss_and_grads = self._loss_and_grads()
        try:
            for step in range(self.start_step, tc.steps + 1):
                clock.wait_while_paused(control)
                # under DDP, the stop all processes agreed on at the end of the last step; alone, the switch itself
                stopping = agreed_stop if self.dist else control.stop.is_set()
                if stopping:
                    status = "stopped"
                    break
                loss, agreed_stop = self._update(step, loss_and_grads, after_backward, control)
                self.step = step
                self._record_step(step, loss, emit, wall(), rate.step_done(clock.active()))
                if step % tc.eval_every == 0 or step == tc.steps:
                    self._eval(step, loss, emit)
                if self.main and self._watch(step, emit, wall):
                    sampled_at = step
        finally:
            loss_and_grads.close()
        if self.main:
            self._finish(status, emit, wall, sampled_at)
        return status

    def _update(self, step: int, loss_and_grads: LossAndGrads, after_backward, control: TrainControl):
        """One step on a fresh batch; (the batch's mean loss, whether any process was asked to stop: DDP only)."""
        set_lr(self.optimizer, lr_at(step, self.tc))
        x, y = get_batch(self.train_ids, self.cfg.context, self.tc.batch_size, self.stream, self.rows)
        if self.device.type == "cuda":
            x, y = x.pin_memory().to(self.device, non_blocking=True), y.pin_memory().to(self.device, non_blocking=True)
        elif self.device.type != "cpu":
            x, y = x.to(self.device), y.to(self.device)
        loss = stop = None

        def before_update(batch_loss: torch.Tensor) -> None:
            nonlocal loss, stop
            # one all-reduce: the whole batch's loss, and any process's stop request (so all stop after this step)
            loss, stop = self.dist.mean_and_any(batch_loss, control.stop.is_set()) if self.dist else \
                (batch_loss.item(), False)
            if not math.isfinite(loss):  # raised before the update: the weights stay those of the last step
                raise Diverged("train.loss_nan", "loss became NaN or infinite ({loss}) at step {step}",
                               loss=str(loss), step=step)
            if after_backward is not None:
                after_backward(self)

        train_step(self.model, self.optimizer, x, y, self.tc.grad_clip, loss_and_grads, before_update)
        return loss, stop

    def _record_step(self, step: int, loss: float, emit: OnEvent, wall_time: float, steps_per_s: float) -> None:
        self.history["step"].append(step)
        self.history["train_loss"].append(loss)
        self.history["lr"].append(self.optimizer.param_groups[0]["lr"])  # AdamW's (under Muon: × muon_lr/lr)
        self.history["time"].append(wall_time)
        emit(StepEvent(step, loss, tokens_per_s=steps_per_s * self.tc.batch_size * self.cfg.context,
                       eta_s=(self.tc.steps - step) / steps_per_s, elapsed_s=wall_time, total_steps=self.tc.steps))

    def _eval(self, step: int, loss: float, emit: OnEvent) -> None:
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
        emit(EvalEvent(step, loss, val))

    def _watch(self, step: int, emit: OnEvent, wall: Callable[[], float]) -> bool:
        """The samples, snapshots and checkpoints due at this step (process 0); whether it sampled."""
        tc = self.tc
        sampled = bool(tc.sample_every and step % tc.sample_every == 0 and step < tc.steps)
        if sampled:
            self.check_weights()
            emit(SampleEvent(step, self.sample(tc.sample_chars)))
        if tc.snapshot_every and step % tc.snapshot_every == 0 and self.out_dir is not None:
            self.check_weights()
            ckpt.save_snapshot(self.out_dir, self.model, self.tokenizer, step)
        if tc.checkpoint_every and step % tc.checkpoint_every == 0 and step < tc.steps:
            self.save("running", wall())
            emit(CheckpointEvent(step, str(self.out_dir)))
        return sampled

    def _finish(self, status: str, emit: OnEvent, wall: Callable[[], float], sampled_at: int | None) -> None:
        """The end of a run (process 0): the final evaluation, a last sample, the last checkpoint."""
        if status == "stopped":  # saved before the final evaluation, which a second signal may cut short
            self.save(status, wall())
        if self.tc.final_eval and self.step >= 0:
            with autocast(self.device, self.dtype):
                self.final_val = evaluate(self.model, self.val_ids)
            self.history["final_val"] = self.final_val
            self.check_diverging(self.step, self.final_val, emit)
            emit(FinalEvalEvent(self.step, self.final_val))
        self.check_weights()
        if sampled_at != self.step:  # a run stopped right after a sampling step has its sample already
            emit(SampleEvent(self.step, self.sample(self.tc.sample_chars)))
        self.save(status, wall())
        emit(DoneEvent(self.step, status, wall()))


def corpus_tokenizer(corpus: TrainingCorpus, tc: TrainConfig, dist: Distributed | None) -> Tokenizer:
    """A token file's own tokenizer, or the text's characters, or a BPE trained on the text's training split (by
    process 0, under DDP). A corpus of a single token is refused: there would be nothing to predict."""
    if isinstance(corpus, PreparedCorpus):
        if corpus.tokenizer.vocab_size < 2:
            raise CorpusError("train.single_token", "the corpus uses a single token: there is nothing to predict")
        return corpus.tokenizer
    text, kind, vocab_size = corpus.text, tc.tokenizer, tc.bpe_vocab
    try:
        if kind == "char" or dist is None:
            tokenizer = make_tokenizer(kind, text if kind == "char" else text[:train_chars(text)], vocab_size)
        else:
            learned = make_tokenizer(kind, text[:train_chars(text)], vocab_size) if dist.main else None
            tokenizer = tokenizer_from_dict(dist.share(learned.to_dict() if learned else None))
    except TokenizerError as e:
        raise CorpusError.of(e.message) from None
    if tokenizer.vocab_size < 2:
        raise CorpusError("train.single_char", "the corpus uses a single character ({char}): there is nothing to "
                          "predict", char=repr(text[:1]))
    return tokenizer


def corpus_ids(corpus: TrainingCorpus, tokenizer: Tokenizer, context: int):
    """(train ids, val ids, the characters the tokenizer does not know); both splits must hold a window of the
    model's context."""
    if isinstance(corpus, PreparedCorpus):
        train, val, unknown = corpus.train, corpus.val, Counter()
    else:
        train, val, unknown = encode_split(tokenizer, corpus.text)
    check_trainable(len(train) + len(val), context, chars=tokenizer.kind == "char")
    if len(val) < context + 2:
        raise CorpusError("train.val_too_short", "the validation split has {n:,} tokens: it needs at least one "
                          "window of {window}; use a longer corpus or a shorter context", n=len(val),
                          window=context + 1)
    return train, val, unknown


def outputs_finite(model: GPT, val_ids, device: torch.device, dtype: torch.dtype) -> bool:
    """Are the logits of the first validation window finite? (One forward pass of one window.)"""
    context = model.cfg.context
    window = val_ids[:context].unsqueeze(0) if isinstance(val_ids, torch.Tensor) else \
        val_ids.windows(torch.zeros(1, dtype=torch.long), context)
    was_training = model.training
    model.eval()
    try:
        with torch.no_grad(), autocast(device, dtype):
            logits, _ = model(window.to(device))
        return bool(torch.isfinite(logits).all())
    finally:
        model.train(was_training)


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


def new_history() -> dict:
    return {"step": [], "train_loss": [], "lr": [], "time": [], "eval_step": [], "eval_train": [], "eval_val": []}
