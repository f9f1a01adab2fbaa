"""Hyperparameters: the shapes public models agree on, what a shape costs, and the patches that keep softmax stable
(QK-norm and soft-capping on the attention logits, z-loss on the output layer's log-sum-exp)."""
from __future__ import annotations

import math

import pandas as pd
import torch

from ..config import GPTConfig
from ..errors import InputError, message
from ..inspector import MODEL_LOCK
from ..model import GPT, RMSNorm
from ..tokenizer import CharTokenizer
from .anatomy import ModelShape, parameter_parts, total_parameters
from .frames import message_frame

OURS = "this app's GPT"
PUBLISHED = {
    "GPT-3 175B": ModelShape(vocab_size=50257, d_model=12288, n_layer=96, n_head=96, d_ff=4 * 12288, context=2048,
                             ffn="gelu", norm="layer", position="learned", bias=True, tied_head=True),
    "LLaMA-2-7B": ModelShape(vocab_size=32000, d_model=4096, n_layer=32, n_head=32, d_ff=11008, context=4096),
    OURS: ModelShape.from_config(GPTConfig()),
}


def model_name(name: str) -> str:
    """A model's name for a person: published models go by their names, this app's model is described."""
    return message("hyperparams.ours", "this app's GPT") if name == OURS else name


def shape_ratios(s: ModelShape) -> dict:
    """The ratios the consensus talks about, computed from a config."""
    return {"d_model": s.d_model, "n_layer": s.n_layer, "n_head": s.n_head, "d_head": s.d_model / s.n_head,
            "d_model / n_layer": s.d_model / s.n_layer, "d_ff": s.d_ff, "d_ff / d_model": s.d_ff / s.d_model}


def published_table() -> pd.DataFrame:
    rows = [{"model": model_name(name), **shape_ratios(s), "parameters": total_parameters(s)}
            for name, s in PUBLISHED.items()]
    return message_frame(rows)


def consensus_check(s: ModelShape) -> pd.DataFrame:
    """Each rule of thumb applied to one config: the value and whether it sits in the usual range."""
    r = shape_ratios(s)
    glu = s.ffn == "swiglu"
    target = 8 / 3 if glu else 4.0
    ffn_rule = (message("hyperparams.rule.gated", "d_ff / d_model ≈ {target} (gated FFN)", target=f"{target:.3g}")
                if glu else message("hyperparams.rule.plain", "d_ff / d_model ≈ {target} (plain FFN)",
                                    target=f"{target:.3g}"))
    return message_frame([
        (message("hyperparams.rule.heads", "n_head × d_head = d_model"), f"{s.n_head} × {r['d_head']:g}",
         s.d_model % s.n_head == 0),
        (message("hyperparams.rule.d_head", "d_head is 64 or 128"), f"{r['d_head']:g}", r["d_head"] in (64, 128)),
        (message("hyperparams.rule.aspect", "d_model / n_layer in 100–200"), f"{r['d_model / n_layer']:.1f}",
         100 <= r["d_model / n_layer"] <= 200),
        (ffn_rule, f"{r['d_ff / d_model']:.3f}", abs(r["d_ff / d_model"] - target) / target < 0.05),
    ], columns=["rule", "value", "usual?"])


def compute_parameters(s: ModelShape) -> int:
    """Parameters that cost a multiply-add per token: everything except embedding lookups, plus the head's
    matmul even when it is tied to the embedding."""
    parts = parameter_parts(s).set_index("part")["parameters"]
    lookups = parts.get("token embedding", 0) + parts.get("position embedding", 0)
    return int(total_parameters(s) - lookups + (s.vocab_size * s.d_model if s.tied_head else 0))


def flops_per_token(s: ModelShape, context: int | None = None) -> dict:
    """Forward ≈ 2·N + 2·n_layer·context·d_model; training ≈ 3× forward (the backward costs about twice the
    forward).

    The attention term counts the q·k scores and the weighted sum of the values, 2·T·d_model FLOPs each per
    token and layer for a query that sees all T positions. A causal query sees on average about half of
    them, which halves the sum: 4·n_layer·T·d_model becomes 2·n_layer·T·d_model (the convention of Kaplan
    et al. 2020). Kernels that skip the masked half reach this; a plain masked matmul does the full work.
    """
    T = s.context if context is None else context
    n = compute_parameters(s)
    attention = 2 * s.n_layer * T * s.d_model  # causal: half of the full 4·n_layer·T·d_model
    return {"N (matmul parameters)": n, "inference: 2N": 2 * n, "inference: attention": attention,
            "inference total": 2 * n + attention, "training: 6N": 6 * n, "training: attention": 3 * attention,
            "training total": 6 * n + 3 * attention}


def flops_vs_context(s: ModelShape, contexts) -> pd.DataFrame:
    """Training FLOPs per token against context length: 6N stays, the (causal) attention term grows with T.

    In floats: a huge config's counts pass 2⁶³, and a column of such ints cannot be sent to a chart."""
    six_n = 6.0 * compute_parameters(s)
    attention = [6.0 * s.n_layer * int(T) * s.d_model for T in contexts]
    return pd.DataFrame({"context": [int(T) for T in contexts], "6N": six_n, "attention": attention,
                         "training total": [six_n + a for a in attention]})


# bytes per parameter: (weights, gradients, AdamW m and v, fp32 master weights)
PRECISIONS = {
    "fp32": (4, 4, 8, 0),
    message("hyperparams.bf16_mixed", "bf16 mixed"): (2, 2, 8, 4),  # bf16 compute copy, fp32 master weights and moments
    message("hyperparams.pure_bf16", "pure bf16"): (2, 2, 4, 0),
}


def memory_table(n_params: int) -> pd.DataFrame:
    """Bytes for weights, gradients and AdamW state (two moments per weight), per precision, in GB.

    Inference needs the weights alone. Activations, the KV cache and framework overhead come on top and
    depend on batch and context.
    """
    rows = []
    for name, (w, g, adam, master) in PRECISIONS.items():
        rows.append({"precision": name, "weights": w * n_params / 1e9, "gradients": g * n_params / 1e9,
                     "AdamW m + v": adam * n_params / 1e9, "master weights": master * n_params / 1e9,
                     "training total": (w + g + adam + master) * n_params / 1e9,
                     "bytes / param": w + g + adam + master})
    return message_frame(rows)


def human_count(n: float) -> str:
    """1234567 -> '1.23 M': k, M, B and T suffixes, scientific notation (4.00e+21) from 10¹⁵ on."""
    if abs(n) >= 1e15:
        return f"{n:.2e}"
    for size, suffix in ((1e12, " T"), (1e9, " B"), (1e6, " M"), (1e3, " k")):
        if abs(n) >= size:
            return f"{n / size:.2f}{suffix}"
    return f"{n:,.0f}"


def human_bytes(n_bytes: float) -> str:
    """Decimal units from kB to PB with four significant digits, scientific notation beyond."""
    if n_bytes >= 1e18:
        return f"{n_bytes:.2e} bytes"
    for size, unit in ((1e15, "PB"), (1e12, "TB"), (1e9, "GB"), (1e6, "MB"), (1e3, "kB")):
        if n_bytes >= size:
            return f"{n_bytes / size:.4g} {unit}"
    return f"{n_bytes:.0f} bytes"


def format_gb(gb: float) -> str:
    """A memory-table cell: three decimals, or scientific notation once the digits would widen the table."""
    return f"{gb:,.3f}" if gb < 1e6 else f"{gb:.3e}"


# --- stability patches on the attention logits -----------------------------------------------------------

def attention_sample(n_keys: int = 16, d: int = 64, seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """One query and n_keys keys ~ N(0, 1) from a private generator."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(d, generator=g), torch.randn(n_keys, d, generator=g)


NO_PATCH = message("hyperparams.no_patch", "no patch")


def soft_cap_name(cap: float) -> str:
    return message("hyperparams.soft_cap", "soft-cap {cap:g}", cap=cap)


def entropy(p: torch.Tensor) -> float:
    return float(-(p * p.clamp_min(1e-30).log()).sum())


@torch.no_grad()
def patched_logits(q: torch.Tensor, k: torch.Tensor, scale: float, cap: float) -> dict[str, torch.Tensor]:
    """Attention logits after the weights have drifted so that q·k/√d is `scale` times larger.

    The drift is modelled as q and k each growing by √scale. QK-norm passes q and k through RMSNorm
    (gain 1) before the dot product, which removes the drift; soft-capping squashes the logits into
    (−cap, cap).
    """
    d = q.shape[-1]
    grow = math.sqrt(scale)
    raw = (grow * k) @ (grow * q) / math.sqrt(d)
    norm = RMSNorm(d)
    return {NO_PATCH: raw, "QK-norm": norm(grow * k) @ norm(grow * q) / math.sqrt(d),
            soft_cap_name(cap): cap * torch.tanh(raw / cap)}


def stability_table(scale: float, cap: float, seed: int = 0) -> pd.DataFrame:
    """Largest logit, max probability and entropy of one attention row for each patch."""
    q, k = attention_sample(seed=seed)
    rows = []
    for name, logits in patched_logits(q, k, scale, cap).items():
        p = logits.softmax(-1)
        rows.append({"patch": name, "largest logit": logits.max().item(), "max prob": p.max().item(),
                     "entropy (nats)": entropy(p)})
    return message_frame(rows)


def stability_curves(scales, cap: float, seed: int = 0) -> pd.DataFrame:
    """stability_table over a range of drift scales, long format."""
    frames = [stability_table(float(s), cap, seed).assign(scale=float(s)) for s in scales]
    return pd.concat(frames, ignore_index=True)


def patched_probabilities(scale: float, cap: float, seed: int = 0) -> pd.DataFrame:
    """softmax of each patch's logits, one column per patch, one row per key."""
    q, k = attention_sample(seed=seed)
    patched = patched_logits(q, k, scale, cap)
    return pd.DataFrame(torch.stack([logits.softmax(-1) for logits in patched.values()], 1).numpy(),
                        columns=pd.Index(list(patched), dtype=object))  # the patch names stay Messages


# --- z-loss on the output layer --------------------------------------------------------------------------

Z_LOSS_WEIGHT = 1e-4  # PaLM's coefficient


def split_target(tokenizer: CharTokenizer, text: str) -> tuple[str, int]:
    """A text's last character as the target, and the characters before it as what the model reads."""
    if len(text) < 2 or text[-1] not in tokenizer.stoi:
        raise InputError("hyperparams.z_text", "give at least two characters and end with one the model knows")
    return text[:-1], tokenizer.stoi[text[-1]]


@torch.no_grad()
def next_char_logits(model: GPT, tokenizer: CharTokenizer, prefix: str) -> torch.Tensor:
    """The output layer's logits (vocab,) for the character after `prefix` (its last `context` characters)."""
    ids = tokenizer.encode(prefix)[-model.cfg.context:]
    if not ids:
        raise InputError("hyperparams.unknown_text", "the text has no character the model knows")
    with MODEL_LOCK:  # the model may be shared with a session that has hooks on it
        logits, _ = model(torch.tensor(ids)[None])
    return logits[0, -1].float()


def z_loss_terms(logits: torch.Tensor, target: int, shift: float = 0.0, weight: float = Z_LOSS_WEIGHT) -> dict:
    """Cross-entropy and z-loss of one row of output logits after adding `shift` to every logit.

    With z = logits + shift and log Z = logsumexp(z): cross-entropy = log Z − z[target] and
    z-loss = weight · (log Z)². Each term's gradient with respect to z comes from autograd: the
    cross-entropy's is softmax(z) − onehot(target), whose entries sum to 0, so the loss has no say in a shift
    of all the logits together; the z-loss's is 2·weight·log Z·softmax(z), all of one sign, the sign of log Z.
    """
    z = (logits.detach().float() + shift).requires_grad_()
    log_z = torch.logsumexp(z, -1)
    cross_entropy = log_z - z[target]
    z_loss = weight * log_z ** 2
    ce_grad, = torch.autograd.grad(cross_entropy, z, retain_graph=True)  # log Z is shared with the z-loss
    z_grad, = torch.autograd.grad(z_loss, z)
    p = z.detach().softmax(-1)
    return {"log Z": log_z.item(), "cross-entropy": cross_entropy.item(), "z-loss": z_loss.item(),
            "p(target)": p[target].item(), "max prob": p.max().item(), "probs": p,
            "cross-entropy gradient": ce_grad, "z-loss gradient": z_grad}


def z_loss_sweep(logits: torch.Tensor, target: int, shifts, weight: float = Z_LOSS_WEIGHT) -> pd.DataFrame:
    """z_loss_terms for several common shifts: the probabilities and the cross-entropy never move, log Z
    moves one for one with the shift, and the z-loss is a parabola that is 0 where log Z = 0."""
    rows = []
    for shift in shifts:
        t = z_loss_terms(logits, target, float(shift), weight)
        rows.append({"shift": float(shift), "log Z": t["log Z"], "cross-entropy": t["cross-entropy"],
                     "p(target)": t["p(target)"], "z-loss": t["z-loss"],
                     "Σ ∂cross-entropy/∂zᵢ": t["cross-entropy gradient"].sum().item(),
                     "Σ ∂z-loss/∂zᵢ": t["z-loss gradient"].sum().item()})
    return pd.DataFrame(rows)
