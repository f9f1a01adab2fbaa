"""The assembled GPT: where the parameters live, the tensor shapes of a forward pass, view against reshape.

Counts and shapes are checked on, or read from, the real gptcore GPT built on the meta device: every op
runs its shape logic but no memory is allocated and nothing is computed, so any config is instant.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import pandas as pd
import torch

from ..capacity import meta_model
from ..config import GPTConfig, TrainConfig, settings, swiglu_hidden
from ..data import Corpus, get_batch
from ..errors import InputError, message
from ..events import EvalEvent, StepEvent
from ..hooks import HookPoint
from ..model import GPT
from ..step import estimate_loss
from ..texts import builtin_corpus
from ..train import Trainer
from .frames import message_frame, messages


@dataclass(frozen=True)
class ModelShape:
    """What decides a parameter count. Unlike GPTConfig it has no size limits (GPT-3 fits) and knows
    about Linear biases and a head tied to the embedding, which gptcore's model does not use."""
    vocab_size: int
    d_model: int
    n_layer: int
    n_head: int
    d_ff: int
    context: int
    ffn: str = "swiglu"  # swiglu | relu | gelu | relu2
    norm: str = "rms"  # rms | layer
    norm_placement: str = "pre"
    position: str = "rope"  # rope | learned | none
    bias: bool = False
    tied_head: bool = False
    qk_norm: bool = False

    @classmethod
    def from_config(cls, cfg: GPTConfig) -> ModelShape:
        return cls(cfg.vocab_size, cfg.d_model, cfg.n_layer, cfg.n_head, cfg.d_ff, cfg.context, cfg.ffn,
                   cfg.norm, cfg.norm_placement, cfg.position, qk_norm=cfg.qk_norm)

    @property
    def d_head(self) -> float:
        return self.d_model / self.n_head


def parameter_parts(s: ModelShape) -> pd.DataFrame:
    """One row per kind of parameter: the formula with this model's numbers, and the count.

    Rows marked per_block repeat in every block; the 'total' row adds n_layer blocks and the rest once. Part
    names, and formulas that are words, are Messages: English text that the app can translate.
    """
    d, V, L = s.d_model, s.vocab_size, s.n_layer
    if s.norm == "rms":
        norm_name, norm_size, norm_formula = "RMSNorm", d, f"{d} (γ)"
    else:
        norm_name, norm_size, norm_formula = "LayerNorm", 2 * d, f"2 · {d} (γ, β)"
    ffn_mats = 3 if s.ffn == "swiglu" else 2
    ffn_name = settings(GPTConfig)["ffn"].choices.get(s.ffn, s.ffn)  # SwiGLU, GELU…, as the pages name them
    ffn_bias = (ffn_mats - 1) * s.d_ff + d if s.bias else 0
    ffn_formula = f"{ffn_mats} · {d} · {s.d_ff:,}"
    if s.bias:
        ffn_formula = message("anatomy.formula.biases", "{matrices} + biases", matrices=ffn_formula)
    rows = [(message("anatomy.part.embedding", "token embedding"), f"{V:,} × {d}", V * d, False)]
    if s.position == "learned":
        rows.append((message("anatomy.part.positions", "position embedding"), f"{s.context:,} × {d}", s.context * d,
                     False))
    qk_gains = 2 * (d // s.n_head) if s.qk_norm else 0  # QK-norm's gains for q and k, d_head each
    rows += [
        (message("anatomy.part.attention", "attention: qkv + proj"), f"4 · {d}²" + (f" + 4 · {d}" if s.bias else "")
         + (f" + 2 · {d // s.n_head}" if s.qk_norm else ""), 4 * d * d + (4 * d if s.bias else 0) + qk_gains, True),
        (message("anatomy.part.ffn", "FFN ({ffn})", ffn=ffn_name), ffn_formula, ffn_mats * d * s.d_ff + ffn_bias, True),
        (message("anatomy.part.norms", "two {norm}s", norm=norm_name), f"2 · {norm_formula}", 2 * norm_size, True),
    ]
    block = sum(count for _, _, count, per_block in rows if per_block)
    rows.append((message("anatomy.part.block", "one block"), message("anatomy.formula.block", "sum of the three above"),
                 block, True))
    rows.append((message("anatomy.part.blocks", "all {n} blocks", n=L), f"{L} × {block:,}", L * block, False))
    if s.norm_placement == "pre":
        rows.append((message("anatomy.part.final_norm", "final {norm}", norm=norm_name), norm_formula, norm_size,
                     False))
    head = message("anatomy.part.head", "output head")
    if s.tied_head:
        rows.append((head, message("anatomy.formula.tied", "tied to the token embedding"), 0, False))
    else:
        rows.append((head, f"{d} × {V:,}" + (f" + {V:,}" if s.bias else ""), d * V + (V if s.bias else 0), False))
    summed = [(part, count) for part, _, count, per_block in rows if not per_block and count]  # (a tied head adds 0)
    rows.append((message("anatomy.part.total", "total"), sum_of([part for part, _ in summed]),
                 sum(count for _, count in summed), False))
    return message_frame(rows, columns=["part", "formula", "parameters", "per block"])


def sum_of(parts: list) -> str:
    """'a + b + c' as nested Messages, so each name stays translatable."""
    total = parts[-1]
    for part in reversed(parts[:-1]):
        total = message("anatomy.formula.plus", "{a} + {b}", a=part, b=total)
    return total


def default_d_ff(d_model: int, ffn: str) -> int:
    """The usual FFN width: 4·d for a ReLU/GELU MLP; 8/3·d (rounded up to a multiple of 8) for SwiGLU, whose
    third matrix would otherwise add half again — both come to about 8·d² parameters."""
    return swiglu_hidden(d_model) if ffn == "swiglu" else 4 * d_model


def total_parameters(s: ModelShape) -> int:
    parts = parameter_parts(s)
    return int(parts.loc[parts["part"] == "total", "parameters"].iloc[0])


def parameter_shares(parts: pd.DataFrame, n_layer: int) -> pd.DataFrame:
    """Where the parameters live: per-block parts multiplied by the depth, the rest as they are."""
    skip = parts["part"].str.startswith(("one block", "all ", "total"))
    shares = parts.loc[~skip, ["part", "parameters", "per block"]].copy()
    shares.loc[shares["per block"], "parameters"] *= n_layer
    shares["part"] = messages((message("anatomy.part.times", "{part} × {n}", part=part, n=n_layer) if repeats else part
                               for part, repeats in zip(shares["part"], shares["per block"])), shares.index)
    shares["share"] = shares["parameters"] / shares["parameters"].sum()
    return shares.drop(columns="per block").reset_index(drop=True)


def counted_parts(model: GPT) -> dict[str, int]:
    """Parameters of the real model grouped like parameter_parts (per-block groups are from block 0)."""
    def size(module) -> int:
        return sum(p.numel() for p in module.parameters())

    b0 = model.blocks[0]
    counts = {"token embedding": size(model.emb),
              "position embedding": 0 if model.pos_emb is None else size(model.pos_emb),
              "attention: qkv + proj": size(b0.attn), "FFN": size(b0.ffn), "norms": size(b0.ln1) + size(b0.ln2),
              "one block": size(b0), "all blocks": size(model.blocks), "final norm": size(model.ln_f),
              "output head": size(model.head), "total": model.num_params()}
    return counts


def breakdown(cfg: GPTConfig) -> pd.DataFrame:
    """parameter_parts for cfg next to the same groups counted on the real model."""
    parts = parameter_parts(ModelShape.from_config(cfg))
    counted = counted_parts(meta_model(cfg))

    def key(part: str) -> str:
        for prefix in ("FFN", "two ", "all ", "final "):
            if part.startswith(prefix):
                return {"FFN": "FFN", "two ": "norms", "all ": "all blocks", "final ": "final norm"}[prefix]
        return part

    parts["counted in GPT"] = [counted[key(p)] for p in parts["part"]]
    return parts


def forward_shapes(cfg: GPTConfig, batch: int = 2, T: int = 16, all_blocks: bool = False) -> pd.DataFrame:
    """Output shape of every module, in the order the forward pass calls them, caught with forward hooks.

    The pass runs on the meta device. Attention pattern hook points are observed too, which makes the
    model take its explicit softmax path, so the (B, heads, T, T) weights show up. Unless all_blocks,
    blocks after the first are folded into one row (they repeat block 0's shapes).
    """
    if not 1 <= T <= cfg.context:
        raise InputError("anatomy.sequence_length", "sequence length must be between 1 and the context ({context}), "
                         "got {T}", context=cfg.context, T=T)
    model = meta_model(cfg)
    rows = [{"module": "idx", "type": "LongTensor", "output shape": (batch, T), "own parameters": 0}]

    def record(name, module, output):
        rows.append({"module": name, "type": type(module).__name__, "output shape": tuple(output.shape),
                     "own parameters": sum(p.numel() for p in module.parameters(recurse=False))})

    # a hook point is listed by its hook name (blocks.0.mlp.hook_pre), every other module by its path
    handles = [m.register_forward_hook(lambda m, i, out, n=m.name if isinstance(m, HookPoint) else n: record(n, m, out))
               for n, m in model.named_modules() if n]
    try:
        model(torch.zeros(batch, T, dtype=torch.long, device="meta"))
    finally:
        for h in handles:
            h.remove()
    table = pd.DataFrame(rows)
    if not all_blocks and cfg.n_layer > 1:
        later = table["module"].str.match(r"blocks\.[1-9]")
        first = later.idxmax()
        table = table[~later]
        fold = pd.DataFrame([{"module": f"blocks.1 … blocks.{cfg.n_layer - 1}", "type": "Block",
                              "output shape": table.loc[first - 1, "output shape"], "own parameters": 0}])
        table = pd.concat([table.loc[:first - 1], fold, table.loc[first:]])
    table["output shape"] = table["output shape"].map(lambda s: "(" + ", ".join(map(str, s)) + ")")
    return table.reset_index(drop=True)


def block_diagram(cfg: GPTConfig) -> dict:
    """The model as a chain for a diagram: nodes in data-flow order (labels are Messages with <br> line breaks),
    the residual skips (from, to) as node indices, and which nodes form the block that repeats n_layer times."""
    norm = "RMSNorm" if cfg.norm == "rms" else "LayerNorm"
    kind = settings(GPTConfig)["ffn"].choices[cfg.ffn]
    V, d = cfg.vocab_size, cfg.d_model
    if cfg.position == "learned":
        embed = message("anatomy.diagram.embedding_positions", "embedding<br>{V} × {d}<br>+ positions<br>{T} × {d}",
                        V=V, d=d, T=cfg.context)
    else:
        embed = message("anatomy.diagram.embedding", "embedding<br>{V} × {d}", V=V, d=d)
    if cfg.position == "rope":
        attn = message("anatomy.diagram.attention_rope", "attention<br>{n} heads × {d_head}<br>causal, RoPE",
                       n=cfg.n_head, d_head=cfg.d_head)
    else:
        attn = message("anatomy.diagram.attention", "attention<br>{n} heads × {d_head}<br>causal", n=cfg.n_head,
                       d_head=cfg.d_head)
    ffn = message("anatomy.diagram.ffn", "{kind} FFN<br>{d}→{d_ff}→{d}", kind=kind, d=d, d_ff=cfg.d_ff)
    add = ("+", "add")
    if cfg.norm_placement == "pre":  # norm on the branch; the trunk is embedding → + → + → final norm
        block = [(norm, "norm"), (attn, "attention"), add, (norm, "norm"), (ffn, "ffn"), add]
        tail = [(message("anatomy.diagram.final_norm", "final<br>{norm}", norm=norm), "norm")]
        residuals = [(1, 4), (4, 7)]
        block_label = message("anatomy.diagram.block_pre", "block × {n} (pre-norm)", n=cfg.n_layer)
    else:  # norm after each add, on the trunk itself
        block = [(attn, "attention"), add, (norm, "norm"), (ffn, "ffn"), add, (norm, "norm")]
        tail = []
        residuals = [(1, 3), (4, 6)]
        block_label = message("anatomy.diagram.block_post", "block × {n} (post-norm)", n=cfg.n_layer)
    nodes = ([(message("anatomy.diagram.ids", "token ids<br>(B, T)"), "io"), (embed, "embedding")] + block + tail
             + [(message("anatomy.diagram.head", "head<br>{d} × {V}", d=d, V=V), "embedding"),
                ("logits<br>(B, T, V)", "io")])
    return {"nodes": [{"label": label, "kind": k} for label, k in nodes], "residuals": residuals,
            "block": (2, 2 + len(block) - 1), "block_label": block_label}


def view_vs_reshape(batch: int = 1, n_head: int = 4, T: int = 3, d_head: int = 2) -> dict:
    """Merge per-head outputs (B, H, T, d_head) back to (B, T, H·d_head), the way attention must.

    The tensor's values record where each number came from (head h, position t), so the result shows which
    head and position lands in every slot. Returns the error torch raises for .view after transpose, the
    facts behind it, and the correct (transpose + reshape) and wrong (reshape without transpose) layouts.
    """
    B, H, hd = batch, n_head, d_head
    head = torch.arange(H).view(1, H, 1, 1).expand(B, H, T, hd)
    pos = torch.arange(T).view(1, 1, T, 1).expand(B, H, T, hd)
    y = (100 * head + pos).float().contiguous()  # 100·h + t: both sources readable from one number
    moved = y.transpose(1, 2)
    try:
        moved.view(B, T, H * hd)
        error = None
    except RuntimeError as e:
        error = str(e)
    merged = moved.reshape(B, T, H * hd)
    wrong = y.reshape(B, T, H * hd)  # skips the transpose: contiguous, so even .view would accept it
    return {
        "shape before": tuple(y.shape), "strides before": y.stride(), "strides after transpose": moved.stride(),
        "contiguous after transpose": moved.is_contiguous(), "view error": error,
        "reshape copied": merged.data_ptr() != y.data_ptr(),
        "reshape equals contiguous().view": torch.equal(merged, moved.contiguous().view(B, T, H * hd)),
        "correct": merged[0], "wrong": wrong[0], "wrong equals correct": torch.equal(wrong, merged),
    }


# --- the first line of the training log ------------------------------------------------------------------

@torch.no_grad()
def initial_logit_spread(model, ids: torch.Tensor) -> float:
    """Standard deviation of the logits across the vocabulary, averaged over the positions of ids (B, T)."""
    logits, _ = model(ids)
    return logits.std(-1).mean().item()


def first_log_line(text: str, cfg: GPTConfig | None = None, tc: TrainConfig | None = None) -> dict:
    """The tutorial's `step 0` log line, measured on `text` with gptcore's own Trainer.

    The loop trains first and evaluates after: at step 0 the train loss belongs to the untrained model (its
    batch is scored before the update), while the validation estimate comes after one AdamW update. Here the
    validation loss is also estimated *before* that update, on separate batches from a private generator (so
    the run itself is untouched), to show what the single update did. An untrained model's loss sits near
    ln V, plus about σ²/2 for logits that spread with standard deviation σ across the vocabulary.
    """
    cfg = cfg or GPTConfig()
    tc = tc or TrainConfig(steps=0, eval_every=1, final_eval=False, sample_chars=1)
    trainer = Trainer.fresh(cfg, tc, Corpus(text, ""))
    model, V = trainer.model, trainer.tokenizer.vocab_size
    probe = torch.Generator().manual_seed(tc.seed + 12345)
    model.eval()
    sigma = initial_logit_spread(model, get_batch(trainer.val_ids, model.cfg.context, tc.batch_size, probe)[0])
    val_before = estimate_loss(model, trainer.val_ids, tc.batch_size, tc.eval_batches, probe)
    model.train()
    logged: dict = {}
    trainer.run(on_event=lambda event: logged.update({type(event): event}))
    return {"vocab": V, "ln V": math.log(V), "logit std at init": sigma,
            "ln V + σ²/2": math.log(V) + sigma ** 2 / 2, "train loss, step 0": logged[StepEvent].loss,
            "val before the update": val_before, "val, step 0 (after one update)": logged[EvalEvent].val}


def builtin_vocab(n_chars: int = 1_000_000, seed: int = 0) -> int:
    """Distinct characters of the built-in stories the Train page starts from."""
    return len(set(builtin_corpus(n_chars, seed).text))
