"""Hook points, as TransformerLens has them: read or replace any named activation of a forward pass.

    logits, loss = model.run_with_hooks(idx, fwd_hooks=[("blocks.0.attn.hook_pattern", fn)])
    logits, cache = model.run_with_cache(idx)  # every hook point; names_filter= keeps fewer
    cache["blocks.0.attn.hook_pattern"]        # or cache["pattern", 0], cache["attn", 0]

A hook function is fn(activation, hook), with hook.name the hook point's name. A tensor it returns replaces the
activation from there on (ablation, patching); None leaves it as it is. A hook is named by its name or by a
function of the name (name -> bool), which attaches it to every hook point whose name it accepts.

The names are TransformerLens' where the activation is the same: hook_embed, hook_pos_embed, blocks.{i}.hook_resid_pre
/ mid / post, hook_attn_out, hook_mlp_out; attn.hook_q, k, v (before RoPE), hook_rot_q, hook_rot_k, hook_attn_scores
(scaled and masked, before the softmax), hook_pattern, hook_z, hook_result; mlp.hook_pre (w1 x), hook_pre_linear
(w3 x) and hook_post (what enters w2). Ours alone: mlp.hook_act (act(w1 x)) and each norm's output after its gain,
blocks.{i}.hook_ln1_out, hook_ln2_out and hook_ln_f_out (TransformerLens' RMSNorm hook_normalized comes before
the gain). With grouped-query attention hook_k and hook_v hold every query head's copy.
"""
from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import torch
import torch.nn as nn

HookFn = Callable[..., torch.Tensor | None]  # fn(activation, hook)
NamesFilter = str | list[str] | Callable[[str], bool] | None


class HookPoint(nn.Module):
    """Identity with a name: a hook on it reads an activation, or replaces it by returning a tensor.

    Without a hook it returns its input at once, skipping nn.Module's call machinery, so the model pays next to
    nothing for the hook points it does not use.
    """
    name: str | None = None  # set by HookedRootModule.setup

    def __call__(self, x):
        return super().__call__(x) if self._forward_hooks else x

    def forward(self, x):
        return x

    @property
    def active(self) -> bool:
        return bool(self._forward_hooks)

    def add_hook(self, fn: HookFn):
        """Call fn(activation, hook=self) on every forward; returns the handle that removes it."""
        return self.register_forward_hook(lambda module, inputs, out: fn(out, hook=self))


# TransformerLens' other words for the same activations (its utils.get_act_name): cache["attn", 0] is the pattern
ALIASES = {"attn": "pattern", "attn_logits": "attn_scores", "query": "q", "key": "k", "value": "v",
           "mlp_pre": "pre", "mlp_post": "post"}


class ActivationCache(Mapping):
    """{hook name: activation} of one forward pass.

    cache["pattern", 0] is short for cache["blocks.0.attn.hook_pattern"]: a hook's last word and its block, wherever
    in the block (attention, MLP or the block itself) it sits; cache["embed"] for cache["hook_embed"]."""

    def __init__(self, acts: dict[str, torch.Tensor]):
        self.acts = acts

    def __getitem__(self, key) -> torch.Tensor:
        if isinstance(key, tuple):
            word, layer = key
            word = ALIASES.get(word, word)
            key = next((name for name in (f"blocks.{layer}.hook_{word}", f"blocks.{layer}.attn.hook_{word}",
                                          f"blocks.{layer}.mlp.hook_{word}") if name in self.acts), key)
        elif key not in self.acts and f"hook_{key}" in self.acts:  # cache["embed"]
            key = f"hook_{key}"
        return self.acts[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self.acts)

    def __len__(self) -> int:
        return len(self.acts)

    def __repr__(self) -> str:
        return f"ActivationCache with {len(self)} activations: {', '.join(list(self)[:4])}, …"


class HookedRootModule(nn.Module):
    """A model whose HookPoints are named after their place in it; call setup() once its modules exist."""

    def setup(self) -> None:
        for path, module in self.named_modules():
            if isinstance(module, HookPoint):
                module.name = path.replace(".ffn.", ".mlp.")  # TransformerLens calls the feed-forward block "mlp"

    def hook_points(self) -> dict[str, HookPoint]:
        return {m.name: m for m in self.modules() if isinstance(m, HookPoint)}

    def _points(self, names: NamesFilter) -> list[HookPoint]:
        """The hook points a name, a list of names or a filter function (name -> bool) picks; None picks all.
        A name that is no hook point's is an error, not an empty pick: a typo must not read as "no effect"."""
        points = self.hook_points()
        if names is None or callable(names):
            return [point for name, point in points.items() if names is None or names(name)]
        names = [names] if isinstance(names, str) else list(names)
        missing = sorted(set(names) - set(points))
        if missing:
            raise KeyError(f"no hook point named {', '.join(missing)}")
        return [points[name] for name in names]

    @contextmanager
    def hooks(self, fwd_hooks: list[tuple[NamesFilter, HookFn]] = ()):
        """Each (name or filter, fn) of fwd_hooks attached while the context is open, removed after it, also after
        an error."""
        picked = [(self._points(names), fn) for names, fn in fwd_hooks]  # every name checked before any is attached
        handles = [point.add_hook(fn) for points, fn in picked for point in points]
        try:
            yield self
        finally:
            for handle in handles:
                handle.remove()

    def run_with_hooks(self, *args, fwd_hooks: list[tuple[NamesFilter, HookFn]] = (), **kwargs):
        """What the forward pass returns, with fwd_hooks attached for its length."""
        with self.hooks(fwd_hooks):
            return self(*args, **kwargs)

    @torch.no_grad()
    def run_with_cache(self, idx: torch.Tensor, names_filter: NamesFilter = None, **kwargs):
        """(logits, cache): the forward pass's logits and the activation at every hook point names_filter picks (a
        name, a list of names, a function name -> bool; None: every hook point), detached."""
        acts: dict[str, torch.Tensor] = {}

        def keep(activation, hook):
            acts[hook.name] = activation.detach()

        with self.hooks([(names_filter, keep)]):
            logits, _ = self(idx, **kwargs)
        return logits, ActivationCache(acts)
