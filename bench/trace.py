"""What the Trace page costs on the shipped model at full context (128 characters).

    python -m bench.trace [checkpoint folder]

Prints:
- one trace step's update: what a Next click redraws once the forward pass is cached (the pass diagram and the
  stage's figure, built and serialised as st.plotly_chart sends them), per stage, median and slowest; and the
  work done once per text or position (the hooked forward pass, the trace of one position);
- the full ablation sweep: every head switched off on its own, one loss each;
- a head × position patching sweep: every head's output copied from the clean run at every position.
Target (issue 17): a step click under 0.5 s.
"""
from __future__ import annotations

import logging
import sys
import time

from bench.common import median, thread_summary, time_calls
from gptcore import checkpoint as ckpt
from gptcore import folders, interp
from gptcore.inspector import DEFAULT_TEXT
from gptcore.runs import SHIPPED

REPEATS = 5


def full_context(text: str, context: int) -> str:
    """text repeated and cut to `context` characters, so every figure is as large as it gets."""
    return (text + " ") * (context // (len(text) + 1) + 1)


def full_context_pair(pair: interp.PatchingPair, context: int) -> tuple[str, str]:
    """The pair's prompts behind the same story, cut on the left to `context` characters."""
    filler = full_context(DEFAULT_TEXT, context)
    return (filler + pair.clean)[-context:], (filler + pair.corrupted)[-context:]


def step_update_times(model, tokenizer, tr: interp.Trace) -> list[float]:
    """Seconds to build and serialise the diagram and the figure of each stage, as a step click does."""
    from explorer import trace_figures as figs

    labels, pieces = tokenizer.labels(tr.ids.tolist()), tokenizer.pieces(tr.ids.tolist())
    vocab = [tokenizer.display(i) for i in range(model.cfg.vocab_size)]
    titles = [s.key for s in tr.stages]

    def update(index: int):
        figures = [figs.pass_diagram(tr, index, titles)]
        fig, _ = figs.stage_view(tr.stages[index], tr, labels, vocab, pieces, model.cfg.ffn)
        figures += [fig] if fig is not None else []
        return [f.to_json() for f in figures]

    return [time_calls(lambda i=index: update(i), 3) for index in range(len(tr.stages))]


def main(argv: list[str] | None = None) -> int:
    import explorer.trace_figures  # noqa: F401  (streamlit sets up its loggers on import)

    for name in list(logging.root.manager.loggerDict):  # the figures read the language outside a running app
        if name.startswith("streamlit"):
            logging.getLogger(name).setLevel(logging.ERROR)
    args = sys.argv[1:] if argv is None else argv
    folder = args[0] if args else folders.CHECKPOINT_ROOT / SHIPPED
    loaded = ckpt.load_checkpoint(folder)
    model, tokenizer = loaded.model, loaded.tokenizer
    context = model.cfg.context
    print(thread_summary())
    text = full_context(DEFAULT_TEXT, context)
    ids = tokenizer.encode(text)[:context]
    print(f"{folder}: {model.num_params():,} parameters, {model.cfg.n_layer} layers × {model.cfg.n_head} heads, "
          f"T = {len(ids)}")

    forward = time_calls(lambda: interp.capture(model, ids), REPEATS)
    cap = interp.capture(model, ids)
    position = len(ids) - 1
    one_trace = time_calls(lambda: interp.trace(model, cap.ids, position, cap, tokenizer), REPEATS)
    tr = interp.trace(model, cap.ids, position, cap, tokenizer)
    steps = step_update_times(model, tokenizer, tr)
    slowest = max(range(len(steps)), key=steps.__getitem__)
    print(f"once per text: hooked forward pass {forward * 1e3:.0f} ms; once per position: trace "
          f"{one_trace * 1e3:.0f} ms")
    print(f"one step's update ({len(steps)} stages): median {median(steps) * 1e3:.0f} ms, slowest "
          f"{steps[slowest] * 1e3:.0f} ms ({tr.stages[slowest].key}) — "
          f"{'OK' if max(steps) < 0.5 else 'OVER'} the 0.5 s target")

    t0 = time.perf_counter()
    frame = interp.ablation_sweep(model, cap)
    sweep = time.perf_counter() - t0
    print(f"ablation sweep over all {len(frame)} heads: {sweep:.2f} s (largest loss increase: "
          f"{frame.loc[0, 'component']} {frame.loc[0, 'loss increase']:+.3f} nats)")

    pair = interp.PATCHING_PAIRS[0]
    clean, corrupted = full_context_pair(pair, context)
    setup = interp.patching_setup(model, tokenizer, clean, corrupted, pair.clean_answer, pair.corrupted_answer)
    t0 = time.perf_counter()
    shares = interp.patch_heads_by_position(model, setup)
    patching = time.perf_counter() - t0
    rows, T = shares.shape
    print(f"head × position patching sweep ({rows} heads × {T} positions = {rows * T:,} patched runs): "
          f"{patching:.2f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
