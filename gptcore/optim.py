"""The optimizers a run can use: AdamW (the tutorial's) and Muon (the fast recipe's).

Muon, "MomentUm Orthogonalized by Newton–Schulz" (Keller Jordan, 2024), updates each weight matrix of the
blocks with its momentum after pushing every singular value of that momentum towards 1. The raw gradient of a
matrix is dominated by a few directions; the orthogonalized update moves all of them at the same rate. On this
model it reaches the tutorial's final validation loss after reading about 1.5M characters, against about 2.7M
for the best AdamW schedule we found and 5.5M for the tutorial's recipe (bench/README.md). Vectors (norm
gains) and the embedding and output tables are not hidden matrices, so they stay on AdamW.
"""
from __future__ import annotations

from collections import defaultdict

import torch

from .config import TrainConfig
from .model import GPT

# Coefficients of the quintic x ↦ a·x + b·x³ + c·x⁵ applied to the singular values: tuned (by Jordan) to lift
# small singular values quickly; after five steps those above ~1% of the largest sit in roughly [0.6, 1.2],
# close enough for training (exactly zero directions stay zero).
NEWTON_SCHULZ = (3.4445, -4.7750, 2.0315)


def fast_dtype() -> torch.dtype:
    """bfloat16 where the CPU multiplies it natively (AVX512-BF16 or AMX): half the time of float32 there,
    and many times slower elsewhere."""
    try:
        native = torch.cpu._is_avx512_bf16_supported() or torch.cpu._is_amx_tile_supported()
    except AttributeError:  # private helpers; without them, assume no native bf16
        native = False
    return torch.bfloat16 if native else torch.float32


ORTHO_DTYPE = fast_dtype()


def orthogonalize(G: torch.Tensor, steps: int = 5, dtype: torch.dtype = ORTHO_DTYPE) -> torch.Tensor:
    """About U·Vᵀ for each G = U·S·Vᵀ in a stack of wide matrices (rows ≤ columns), by Newton–Schulz.

    The result is approximate by design, so bfloat16 (where fast) costs nothing that matters.
    """
    a, b, c = NEWTON_SCHULZ
    X = G.to(dtype)
    X = X / (X.norm(dim=(-2, -1), keepdim=True) + 1e-7)  # Frobenius ≥ spectral norm: singular values ≤ 1
    for _ in range(steps):
        A = X @ X.mT  # the small (rows × rows) side, so wide matrices cost least
        X = a * X + (b * A + c * A @ A) @ X
    return X.to(G.dtype)


class Muon(torch.optim.Optimizer):
    """Muon for the param groups marked muon=True, AdamW for the others: one optimizer, one state.

    A muon parameter is a stack of `pieces` matrices along its rows (qkv.weight holds q, k and v: 3 pieces),
    each orthogonalized on its own; all matrices of one shape go through Newton–Schulz as one batch.
    Weight decay is decoupled, as in AdamW: p ← p·(1 − lr·wd) before the update.
    """

    def __init__(self, groups, lr: float, betas=(0.9, 0.99), eps: float = 1e-8, weight_decay: float = 0.0,
                 momentum: float = 0.95, ns_steps: int = 5):
        defaults = dict(lr=lr, betas=betas, eps=eps, weight_decay=weight_decay, momentum=momentum,
                        muon=False, pieces=1)
        super().__init__(groups, defaults)
        self.ns_steps = ns_steps  # one value for all groups: their matrices share batches

    @torch.no_grad()
    def step(self, closure=None):
        loss = None if closure is None else closure()
        batches = defaultdict(list)  # wide shape -> [(wide update, parameter piece, was tall, lr)]
        for group in self.param_groups:
            params = [p for p in group["params"] if p.grad is not None]
            if params and group["weight_decay"]:
                torch._foreach_mul_(params, 1 - group["lr"] * group["weight_decay"])
            if not group["muon"]:
                self._adamw(group, params)
                continue
            for p in params:
                updates = self._nesterov(p, group["momentum"]).chunk(group["pieces"])
                for update, target in zip(updates, p.chunk(group["pieces"])):
                    tall = update.shape[0] > update.shape[1]
                    wide = update.mT if tall else update  # Newton–Schulz multiplies on the short side
                    batches[tuple(wide.shape)].append((wide, target, tall, group["lr"]))
        for items in batches.values():
            ortho = orthogonalize(torch.stack([wide for wide, *_ in items]), self.ns_steps, ORTHO_DTYPE)
            for o, (_, target, tall, lr) in zip(ortho, items):
                rows, cols = target.shape
                # Orthonormal columns of a tall matrix have entries of RMS 1/√rows, orthonormal rows of a
                # wide one 1/√cols: the factor gives both the same 1/√cols (cols = the layer's input width).
                target.add_(o.mT if tall else o, alpha=-lr * max(1.0, rows / cols) ** 0.5)
        return loss

    def _nesterov(self, p: torch.Tensor, momentum: float) -> torch.Tensor:
        buf = self.state[p].setdefault("momentum", torch.zeros_like(p))
        buf.mul_(momentum).add_(p.grad)
        return p.grad.add(buf, alpha=momentum)

    def _adamw(self, group: dict, params: list[torch.Tensor]) -> None:
        beta1, beta2 = group["betas"]
        for p in params:
            state = self.state[p]
            if not state:
                state.update(step=torch.tensor(0.0), exp_avg=torch.zeros_like(p), exp_avg_sq=torch.zeros_like(p))
            state["step"] += 1
            t = float(state["step"])
            state["exp_avg"].lerp_(p.grad, 1 - beta1)
            state["exp_avg_sq"].mul_(beta2).addcmul_(p.grad, p.grad, value=1 - beta2)
            denom = (state["exp_avg_sq"] / (1 - beta2 ** t)).sqrt_().add_(group["eps"])
            p.addcdiv_(state["exp_avg"], denom, value=-group["lr"] / (1 - beta1 ** t))


def adamw_groups(named: list[tuple[str, torch.nn.Parameter]], tc: TrainConfig) -> list[dict]:
    """AdamW groups: every parameter decays (the tutorial), or only matrices that are not embeddings; with
    tc.embed_lr, the embedding tables in groups of their own at that lr (an lr_scale, so the schedule applies)."""
    def is_embedding(name):
        return name.startswith(("emb.", "pos_emb."))

    def is_weight(name, p):  # norm gains and embedding rows are not weights to shrink
        return tc.decay_all or (p.dim() >= 2 and not is_embedding(name))

    def scale(name):
        return tc.embed_lr / tc.lr if tc.embed_lr and is_embedding(name) else 1.0

    groups: dict[tuple[bool, float], list] = {}
    for n, p in named:
        groups.setdefault((is_weight(n, p), scale(n)), []).append(p)
    # the decayed group first, at the plain lr: param_groups[0]["lr"] is the lr a run reports
    order = sorted(groups, key=lambda group: (not group[0], group[1] != 1.0))
    return [{"params": groups[decays, lr_scale], "weight_decay": tc.weight_decay if decays else 0.0,
             "lr_scale": lr_scale} for decays, lr_scale in order]


def make_optimizer(model: GPT, tc) -> torch.optim.Optimizer:
    """tc.optimizer 'adamw': torch's fused AdamW. 'muon': Muon on the blocks' matrices at tc.muon_lr, AdamW on
    the rest at tc.lr (set_lr keeps their ratio through the schedule)."""
    betas = (0.9, tc.beta2)
    named = list(model.named_parameters())
    if tc.optimizer == "adamw":
        return torch.optim.AdamW(adamw_groups(named, tc), lr=tc.lr, betas=betas, weight_decay=tc.weight_decay,
                                 fused=True)
    hidden = {n: p for n, p in named if n.startswith("blocks.") and p.dim() == 2}
    qkv = [p for n, p in hidden.items() if n.endswith("attn.qkv.weight")]  # three matrices each: q, k and v
    single = [p for n, p in hidden.items() if not n.endswith("attn.qkv.weight")]
    muon = {"muon": True, "lr": tc.muon_lr, "lr_scale": tc.muon_lr / tc.lr, "weight_decay": tc.weight_decay}
    groups = adamw_groups([(n, p) for n, p in named if n not in hidden], tc)
    groups += [{**muon, "params": params, "pieces": pieces} for params, pieces in ((single, 1), (qkv, 3)) if params]
    return Muon(groups, lr=tc.lr, betas=betas, weight_decay=tc.weight_decay)


def state_slots(group: dict) -> set[str]:
    """What our optimizers keep for each parameter of `group` once it has stepped: Muon's momentum, or AdamW's
    step count and two moments (torch's and Muon's own AdamW part alike)."""
    if group.get("muon"):
        return {"momentum"}
    return {"step", "exp_avg", "exp_avg_sq"} | ({"max_exp_avg_sq"} if group.get("amsgrad") else set())


def set_lr(optimizer: torch.optim.Optimizer, lr: float) -> None:
    """The scheduled learning rate for every group, times the group's lr_scale (Muon's groups, the embedding's)."""
    for group in optimizer.param_groups:
        group["lr"] = lr * group.get("lr_scale", 1.0)
