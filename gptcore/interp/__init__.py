"""Inside one prediction: a position's forward pass stage by stage, and four ways to ask what the model relies on.

- capture: one forward pass observing every hook point, and batched partial passes for sweeps (run_batched).
- trace: every intermediate tensor of one position (token id → … → next-token distribution), each with the gptcore
  source line that computed it and keys naming its kind of step (a page words them in its language).
- lens: the logit lens reads the residual stream after the embedding, after each attention sublayer and after each
  block through the final norm and the head, as if the model stopped there.
- attribution: a logit difference (the next token against a foil) split into what the embedding, each head and each
  FFN wrote straight into the stream: the direct path only.
- ablation: heads and FFNs switched off (to zero, or to their mean over a fixed reference text), alone or in a sweep.
- patching: activations copied from a clean prompt into a corrupted one, measuring how much of the clean answer
  comes back. gptcore.circuits builds on these: direct against total effects, a head's output split by source
  position, and patching one side (query, key or value) of a head.

Everything is read or changed through the model's hook points (gptcore.hooks.HookPoint); the model itself is
never special-cased. Pure torch and pandas: no streamlit, no plotly.
"""
from .ablation import (
    ABLATIONS,
    REFERENCE_TEXT,
    Ablation,
    ablate,
    ablated_logits,
    ablation_edits,
    ablation_runs,
    ablation_sweep,
    reference_means,
    text_losses,
)
from .attribution import (
    Attribution,
    Readout,
    logit_attribution,
    readout,
    residual_summands,
    runner_up,
    unembedding,
)
from .capture import (
    UNBATCHED,
    Capture,
    Progress,
    Run,
    as_ids,
    capture,
    capture_bytes,
    check_length,
    components,
    device_of,
    ffn_label,
    head_label,
    parse_component,
    read_logits,
    run_batched,
    run_hooked,
    stream_at,
    traceable_tokens,
)
from .lens import (
    LensColumn,
    LensGrid,
    LogitLens,
    lens_column,
    lens_grid,
    lens_rows,
    logit_lens,
    readable_row,
    residual_rows,
)
from .patching import (
    PATCHING_PAIRS,
    PER_HEAD,
    PER_POSITION,
    WORD_PATCHING_PAIRS,
    Patch,
    PatchingPair,
    PatchingSetup,
    logit_difference,
    patch_heads,
    patch_heads_by_position,
    patch_residual,
    patched_logits,
    patching_pairs,
    patching_setup,
    suffix_sweep,
)
from .trace import (
    ENCODE_LINES,
    FUSED_ATTENTION,
    SECTIONS,
    STAGE_LINES,
    SourceLine,
    Stage,
    Trace,
    code_line,
    rebuild_logits,
    stage_lines,
    trace,
)

__all__ = [
    "ABLATIONS", "ENCODE_LINES", "FUSED_ATTENTION", "PATCHING_PAIRS", "PER_HEAD", "PER_POSITION", "REFERENCE_TEXT",
    "SECTIONS",
    "STAGE_LINES", "UNBATCHED", "WORD_PATCHING_PAIRS", "Ablation", "Attribution", "Capture", "LensColumn", "LensGrid",
    "LogitLens", "Patch", "PatchingPair", "PatchingSetup", "Progress", "Readout", "Run", "SourceLine", "Stage",
    "Trace", "ablate", "ablated_logits", "ablation_edits", "ablation_runs", "ablation_sweep", "as_ids", "capture",
    "capture_bytes", "check_length", "code_line", "components", "device_of", "ffn_label", "head_label", "lens_column",
    "lens_grid", "lens_rows", "logit_attribution", "logit_difference", "logit_lens", "parse_component", "patch_heads",
    "patch_heads_by_position", "patch_residual", "patched_logits", "patching_pairs", "patching_setup", "read_logits",
    "readable_row", "readout", "rebuild_logits", "reference_means", "residual_rows", "residual_summands",
    "run_batched", "run_hooked", "runner_up", "stage_lines", "stream_at", "suffix_sweep", "text_losses", "trace",
    "traceable_tokens", "unembedding",
]
