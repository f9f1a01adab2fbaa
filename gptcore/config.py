"""One dataclass describes a model; the defaults are the tutorial's GPT."""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields

from .errors import UserError

CHOICES = {
    "norm": ("rms", "layer"),
    "norm_placement": ("pre", "post"),
    "position": ("rope", "learned", "none"),
    "ffn": ("swiglu", "relu", "gelu"),
}
# Generous ceilings: they exist to turn a typo (d_model=1280000) into a message, not an OOM.
LIMITS = {"vocab_size": 100_000, "d_model": 4096, "n_layer": 64, "n_head": 64, "d_ff": 16384, "context": 8192}


class ConfigError(UserError, ValueError):
    """A model configuration that cannot be built, with a message fit for the UI."""


def swiglu_hidden(d_model: int, multiple: int = 8) -> int:
    """8/3·d rounded up to a multiple: keeps a 3-matrix SwiGLU at the 8·d² parameters of a 4·d MLP."""
    return multiple * math.ceil(8 * d_model / 3 / multiple)


@dataclass
class GPTConfig:
    vocab_size: int = 74
    d_model: int = 128
    n_layer: int = 4
    n_head: int = 4
    d_ff: int = 344
    context: int = 128
    norm: str = "rms"
    norm_placement: str = "pre"
    norm_eps: float = 1e-5
    position: str = "rope"
    rope_theta: float = 10000.0
    scale_attention: bool = True  # divide q·k by sqrt(d_head)
    ffn: str = "swiglu"
    causal: bool = True  # False only to demonstrate what leaks without the mask

    def __post_init__(self):
        self.validate()

    @property
    def d_head(self) -> int:
        return self.d_model // self.n_head

    def validate(self) -> None:
        for name, top in LIMITS.items():
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= top:
                raise ConfigError(f"{name} must be an integer from 1 to {top:,}, got {value!r}")
        for name, allowed in CHOICES.items():
            if getattr(self, name) not in allowed:
                raise ConfigError(f"{name} must be one of {', '.join(allowed)}, got {getattr(self, name)!r}")
        if self.d_model % self.n_head:
            raise ConfigError(f"d_model ({self.d_model}) must be divisible by n_head ({self.n_head})")
        if self.position == "rope" and self.d_head % 2:
            raise ConfigError(f"RoPE rotates channel pairs, so d_head ({self.d_head}) must be even")
        for name in ("scale_attention", "causal"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be true or false, got {getattr(self, name)!r}")
        for name in ("rope_theta", "norm_eps"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or not math.isfinite(value):
                raise ConfigError(f"{name} must be a finite number, got {value!r}")
        if not self.rope_theta > 1:
            raise ConfigError(f"rope_theta must be greater than 1, got {self.rope_theta!r}")
        if not 0 < self.norm_eps < 1:
            raise ConfigError(f"norm_eps must be between 0 and 1, got {self.norm_eps!r}")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> GPTConfig:
        if not isinstance(data, dict):
            raise ConfigError("model config must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"unknown model config keys: {', '.join(unknown)}")
        return cls(**data)
