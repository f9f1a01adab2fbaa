"""The two configurations, a model (GPTConfig: the tutorial's GPT by default) and a training run (TrainConfig:
the tutorial's recipe by default), each with one table of settings.

Every field carries a `Setting`: its label and help for a person, the values it takes, and whether it is a
command-line flag and a widget in the app. Validation (here), the CLI's flags (cli.py) and the Train page's
widgets (explorer/forms.py) are all generated from it, so a range or a help text is written only once.
"""
from __future__ import annotations

import math
from dataclasses import asdict, dataclass, fields, replace
from dataclasses import field as dataclass_field
from functools import cache
from typing import Any

from .errors import Message, UserError, message

KINDS = {"int": int, "float": float, "str": str, "bool": bool}


@dataclass(frozen=True)
class Setting:
    """What one config field means and which values it takes."""
    label: str
    help: str
    low: float | None = None  # smallest allowed number (inclusive unless low_open)
    high: float | None = None  # largest allowed number (inclusive unless high_open)
    low_open: bool = False
    high_open: bool = False
    choices: dict[str, str] | None = None  # allowed value → its name for a person
    step: float | None = None  # the widget's −/+ increment
    # (field, values): the setting matters only when that field takes one of those values (warmup: a ramping schedule)
    only_with: tuple[str, tuple[str, ...]] | None = None
    cli: bool = True  # a flag of `python -m gptcore train`
    widget: bool = True  # a widget on the Train page
    option: str = ""  # the flag when it is not --<field-name> (bpe_vocab's is --vocab-size)
    # filled in from the dataclass field by settings()
    name: str = ""
    kind: type = object
    default: Any = None

    @property
    def flag(self) -> str:
        return self.option or "--" + self.name.replace("_", "-")

    def range_text(self) -> Message:
        """The allowed values in words: 'from 1 to 4,096', 'greater than 0 and at most 10,000', 'rms or layer'."""
        if self.kind is bool:
            return message("range.bool", "true or false")
        if self.choices:
            names = list(self.choices)
            if len(names) == 2:
                return message("range.either", "{first} or {second}", first=names[0], second=names[1])
            return message("range.choices", "one of {choices}", choices=", ".join(names))
        low, high = (None if v is None else number_text(v) for v in (self.low, self.high))
        if low is not None and high is not None and not (self.low_open or self.high_open):
            return message("range.between", "from {low} to {high}", low=low, high=high)
        lower = None if low is None else (message("range.above", "greater than {low}", low=low) if self.low_open
                                          else message("range.at_least", "at least {low}", low=low))
        upper = None if high is None else (message("range.below", "less than {high}", high=high) if self.high_open
                                           else message("range.at_most", "at most {high}", high=high))
        if lower and upper:
            return message("range.both", "{lower} and {upper}", lower=lower, upper=upper)
        return lower or upper or message("range.any", "any value")

    def problem(self, value) -> Message | None:
        """Why `value` is not allowed, as a sentence naming the field and its range; None when it is."""
        allowed = dict(name=self.name, range=self.range_text(), value=repr(value))
        if self.kind is bool:
            return None if isinstance(value, bool) else message("setting.not_bool", "{name} must be {range}, got "
                                                                "{value}", **allowed)
        if self.choices:  # (a value read from a file may be a list, which `in` cannot look up)
            return None if isinstance(value, str) and value in self.choices else \
                message("setting.not_choice", "{name} must be {range}, got {value}", **allowed)
        is_number = isinstance(value, (int, float)) and not isinstance(value, bool)
        if self.kind is int:
            if not (isinstance(value, int) and is_number and self.within(value)):
                return message("setting.not_int", "{name} must be an integer {range}, got {value}", **allowed)
            return None
        # (an int is finite, and may be too large to become a float: 10**400 from a JSON file)
        if not is_number or isinstance(value, float) and not math.isfinite(value):
            return message("setting.not_finite", "{name} must be a finite number, got {value}", **allowed)
        if not self.within(value):
            return message("setting.out_of_range", "{name} must be a number {range}, got {value}", **allowed)
        return None

    def within(self, value) -> bool:
        above = self.low is None or (value > self.low if self.low_open else value >= self.low)
        below = self.high is None or (value < self.high if self.high_open else value <= self.high)
        return above and below


def number_text(value: float) -> str:
    """1,000,000 for a whole number (int or float), 0.9999 or 1e-06 otherwise."""
    return f"{value:,.0f}" if float(value).is_integer() else f"{value:g}"


def setting(default, label: str, help: str, **details) -> Any:
    """A dataclass field with its default and its Setting (label, help, range or choices, …)."""
    return dataclass_field(default=default, metadata={"setting": Setting(label, help, **details)})


@cache
def settings(cls) -> dict[str, Setting]:
    """{name: Setting} of a config class, in field order, each completed with its name, type and default."""
    return {f.name: replace(f.metadata["setting"], name=f.name, kind=KINDS[f.type], default=f.default)
            for f in fields(cls)}


def check_fields(config, error: type[Exception]) -> None:
    """Raise `error` with the first field's problem, in field order."""
    for s in settings(type(config)).values():
        if (problem := s.problem(getattr(config, s.name))) is not None:
            raise error.of(problem)


class ConfigError(UserError, ValueError):
    """A model configuration that cannot be built, with a message fit for the UI."""


class TrainConfigError(UserError, ValueError):
    """Hyperparameters that cannot train, with a message fit for the UI."""


def swiglu_hidden(d_model: int, multiple: int = 8) -> int:
    """8/3·d rounded up to a multiple: keeps a 3-matrix SwiGLU at the 8·d² parameters of a 4·d MLP."""
    return multiple * math.ceil(8 * d_model / 3 / multiple)


# The ceilings are generous: they turn a typo (d_model=1280000) into a message rather than an out-of-memory crash.
@dataclass
class GPTConfig:
    vocab_size: int = setting(74, "Vocabulary", "Distinct tokens (the corpus's characters for the char tokenizer): "
                              "one row of the embedding and one of the output head each.", low=1, high=262_144,
                              cli=False, widget=False)
    d_model: int = setting(128, "Width d_model", "Size of every token vector in the residual stream.",
                           low=1, high=4096, step=8)
    n_layer: int = setting(4, "Layers", "Transformer blocks stacked on the residual stream.", low=1, high=64, step=1)
    n_head: int = setting(4, "Heads", "Attention heads per layer; each works on its own d_model / n_head channels "
                          "of the projected queries, keys and values.", low=1, high=64, step=1)
    n_kv_head: int = setting(0, "Key/value heads", "Grouped-query attention: the query heads share this many key and "
                             "value heads, a group of n_head / n_kv_head queries reading one key and one value (a "
                             "smaller KV cache). 0 = one per query head, plain multi-head attention.",
                             low=0, high=64, step=1)
    head_dim: int = setting(0, "Head width d_head", "Channels per head; 0 = d_model / n_head. Some real models "
                            "(Qwen3) choose it freely, so the heads together need not be d_model wide.",
                            low=0, high=1024, step=8, widget=False)
    d_ff: int = setting(344, "FFN width d_ff", "Hidden width of the feed-forward block (SwiGLU keeps 8·d² "
                        "parameters at 8/3·d_model).", low=1, high=65536, step=8)
    context: int = setting(128, "Context (tokens)", "How many previous tokens (characters for the char tokenizer) "
                           "the model can see.",
                           low=1, high=131_072, step=8)  # Llama 3.x's 128k (gptcore.published)
    norm: str = setting("rms", "Norm", "RMSNorm rescales each vector by its root mean square; LayerNorm also "
                        "subtracts its mean and adds a bias.", choices={"rms": "RMSNorm", "layer": "LayerNorm"})
    norm_placement: str = setting("pre", "Norm placement", "pre-norm: x + f(norm(x)), the residual stream itself is "
                                  "never normed; post-norm: norm(x + f(x)), as in the original Transformer.",
                                  choices={"pre": "pre-norm", "post": "post-norm"})
    norm_eps: float = setting(1e-5, "Norm ε", "Added under the square root (to the mean square in RMSNorm, to the "
                              "variance in LayerNorm), so a zero vector does not divide by zero.", low=0.0, high=1.0,
                              low_open=True, high_open=True, widget=False)
    position: str = setting("rope", "Positions", "How the model knows where a token sits: RoPE rotates queries "
                            "and keys by their position, learned adds a trained vector per position (GPT-2), none "
                            "leaves only the causal mask.",
                            choices={"rope": "RoPE", "learned": "learned (GPT-2)", "none": "none"})
    rope_theta: float = setting(10000.0, "RoPE θ", "Base of the rotation frequencies θ_i = θ^(−2i/d_head).",
                                low=1.0, high=1e9, low_open=True, step=1000.0, only_with=("position", ("rope",)))
    rope_scaling: str = setting("none", "RoPE scaling", "Stretches the rotations for contexts longer than the model "
                                "was first trained on: linear divides every frequency by the factor; llama3 (Llama "
                                "3.1) divides only the slow ones, blending in between.",
                                choices={"none": "none", "linear": "linear", "llama3": "Llama 3"},
                                only_with=("position", ("rope",)), widget=False)
    rope_factor: float = setting(1.0, "RoPE scaling factor", "How much longer the context is than the original.",
                                 low=1.0, high=1024.0, only_with=("rope_scaling", ("linear", "llama3")), widget=False)
    rope_low_freq_factor: float = setting(1.0, "RoPE low-frequency factor", "llama3 scaling: wavelengths above "
                                          "original context / this are divided by the factor.", low=0.0,
                                          high=1024.0, low_open=True, only_with=("rope_scaling", ("llama3",)),
                                          widget=False)
    rope_high_freq_factor: float = setting(4.0, "RoPE high-frequency factor", "llama3 scaling: wavelengths below "
                                           "original context / this keep their frequency.", low=0.0, high=1024.0,
                                           low_open=True, only_with=("rope_scaling", ("llama3",)), widget=False)
    rope_original_context: int = setting(8192, "RoPE original context", "llama3 scaling: the context the model "
                                         "was first trained with.", low=1, high=1 << 20,
                                         only_with=("rope_scaling", ("llama3",)), widget=False)
    scale_attention: bool = setting(True, "Divide q·k by √d_head", "Keeps the attention scores' spread independent "
                                    "of the head width.")
    ffn: str = setting("swiglu", "Feed-forward", "SwiGLU: a gated MLP with three matrices; ReLU and GELU: the "
                       "classic two-matrix MLP, and ReLU² squares ReLU's output.",
                       choices={"swiglu": "SwiGLU", "relu": "ReLU", "gelu": "GELU", "relu2": "ReLU²"})
    qkv_bias: bool = setting(False, "q/k/v biases", "Add a learned bias to the query, key and value projections "
                             "(Qwen2 does; LLaMA does not).", widget=False)
    qk_norm: bool = setting(False, "QK-norm", "RMS-normalize each head's queries and keys (each with a learned gain) "
                            "before their dot product, so the attention scores cannot drift large as training goes "
                            "on; it lets the learning rate go higher.")
    zero_init: bool = setting(False, "Zero-init output matrices", "Start W_O and the FFN's output matrix at zero: "
                              "every block begins by adding nothing to the residual stream, and training grows its "
                              "contribution.")
    tie_embeddings: bool = setting(False, "Tie embeddings", "The output head reuses the embedding matrix "
                                   "(transposed) instead of its own: vocab_size · d_model fewer weights, which is a "
                                   "large share of a small model with a big vocabulary (SmolLM2).")
    causal: bool = setting(True, "Causal mask", "False only to demonstrate what leaks without the mask.",
                           cli=False, widget=False)

    def __post_init__(self):
        self.validate()

    @property
    def d_head(self) -> int:
        return self.head_dim or self.d_model // self.n_head

    @property
    def kv_heads(self) -> int:
        return self.n_kv_head or self.n_head

    @property
    def n_params(self) -> int:
        """How many weights GPT(self) has, from the shapes alone (the Assembled GPT page derives it term by term;
        a test checks it against the built model)."""
        d, norm = self.d_model, self.d_model * (1 if self.norm == "rms" else 2)  # LayerNorm adds a bias β
        qkv = (self.n_head + 2 * self.kv_heads) * self.d_head  # queries, then the shared keys and values
        attention = d * qkv + self.n_head * self.d_head * d + (qkv if self.qkv_bias else 0)
        qk_gains = 2 * self.d_head if self.qk_norm else 0
        block = attention + (3 if self.ffn == "swiglu" else 2) * d * self.d_ff + 2 * norm + qk_gains
        positions = self.context * d if self.position == "learned" else 0
        final_norm = norm if self.norm_placement == "pre" else 0
        head = 0 if self.tie_embeddings else self.vocab_size * d
        return self.vocab_size * d + head + positions + self.n_layer * block + final_norm

    def validate(self) -> None:
        check_fields(self, ConfigError)
        if not self.head_dim and self.d_model % self.n_head:
            raise ConfigError("config.heads_divide", "d_model ({d_model}) must be divisible by n_head ({n_head})",
                              d_model=self.d_model, n_head=self.n_head)
        if self.n_head % self.kv_heads:
            raise ConfigError("config.kv_heads_divide", "n_head ({n_head}) must be a multiple of n_kv_head "
                              "({n_kv_head}): each key/value head serves a whole group of query heads",
                              n_head=self.n_head, n_kv_head=self.kv_heads)
        if self.position == "rope" and self.d_head % 2:
            raise ConfigError("config.rope_odd", "RoPE rotates channel pairs, so d_head ({d_head}) must be even",
                              d_head=self.d_head)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> GPTConfig:
        if not isinstance(data, dict):
            raise ConfigError("config.not_object", "model config must be a JSON object")
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError("config.unknown_keys", "unknown model config keys: {keys}", keys=", ".join(unknown))
        return cls(**data)


CHOICES = {name: tuple(s.choices) for name, s in settings(GPTConfig).items() if s.choices}

EVERY = 1_000_000  # ceiling of the step counts and intervals


@dataclass
class TrainConfig:
    steps: int = setting(1500, "Last step", "Steps 0…N run, like the tutorial's range(N + 1): 1500 means 1,501 "
                         "updates.", low=0, high=EVERY, step=100)
    batch_size: int = setting(32, "Batch size", "Random windows of `context` tokens per step; under torchrun "
                              "the whole step's, split evenly over the processes.",
                              low=1, high=4096, step=1)
    lr: float = setting(3e-3, "Learning rate", "AdamW's peak learning rate (with Muon: for the embeddings, the head "
                        "and the norm gains).", low=0.0, high=10_000.0, low_open=True, step=1e-3)
    seed: int = setting(0, "Seed", "Seeds the initial weights and the batches: the same seed gives the same run.",
                        low=0, high=2**31 - 1, step=1)
    eval_every: int = setting(500, "Evaluate every", "Each evaluation draws validation batches from the training "
                              "random stream, so changing this changes the run itself.", low=1, high=EVERY, step=50)
    eval_batches: int = setting(10, "Batches per evaluation", "Validation batches averaged into each loss estimate "
                                "(drawn from the training random stream).", low=1, high=10_000, step=1)
    schedule: str = setting("constant", "Learning-rate schedule", "constant: the tutorial's; cosine: a linear warmup, "
                            "then a cosine decay to the final lr ratio; warm-down: a linear warmup, the peak held, "
                            "then a straight line down to the final lr ratio over the last part of the run.",
                            choices={"constant": "constant", "cosine": "cosine", "warmdown": "warm-down"})
    warmup: int = setting(0, "Warmup steps", "Linear ramp from 0 to the peak at the start of the schedule.", low=0,
                          high=EVERY, step=10, only_with=("schedule", ("cosine", "warmdown")))
    min_lr_ratio: float = setting(0.1, "Final lr ratio", "The schedule ends at this fraction of the peak.",
                                  low=0.0, high=1.0, step=0.05, only_with=("schedule", ("cosine", "warmdown")))
    warmdown: float = setting(0.5, "Warm-down share", "The last part of the run, as a share of its steps, over which "
                              "the warm-down schedule lowers the lr.", low=0.0, high=1.0, low_open=True, step=0.05,
                              only_with=("schedule", ("warmdown",)))
    weight_decay: float = setting(0.01, "Weight decay", "Decoupled decay, p ← p·(1 − lr·wd); 0.01 is torch's AdamW "
                                  "default, which the tutorial uses. Under Muon it also shrinks the blocks' matrices, "
                                  "at Muon's larger lr.", low=0.0, high=10.0, step=0.01)
    decay_all: bool = setting(True, "Decay every parameter", "On: decay every parameter, as the tutorial does; "
                              "off: leave the norm gains and the embedding alone.")
    beta2: float = setting(0.999, "Adam β₂", "Decay of Adam's running mean of squared gradients; 0.999 is torch's "
                           "default, the fast recipe uses 0.99.", low=0.0, high=0.9999, step=0.001)
    optimizer: str = setting("adamw", "Optimizer", "Muon orthogonalizes the momentum of each weight matrix in the "
                             "blocks (every direction moves at the same rate); embeddings, head and norm gains stay "
                             "on AdamW at the learning rate. The fast and quick presets use it.",
                             choices={"adamw": "AdamW", "muon": "Muon"})
    muon_lr: float = setting(0.02, "Muon lr", "Peak learning rate of the blocks' weight matrices under Muon; the "
                             "schedule scales it like AdamW's.", low=0.0, high=10.0, step=0.005,
                             only_with=("optimizer", ("muon",)))
    embed_lr: float = setting(0.0, "Embedding lr", "Peak AdamW learning rate of the token embedding (and its "
                              "position table); 0 = the learning rate. A row gets a gradient only when its token is in "
                              "the batch, so it can take a much larger step.", low=0.0, high=10.0, step=0.01)
    grad_clip: float = setting(0.0, "Gradient clip", "Clip the global gradient norm to this; 0 = off.",
                               low=0.0, high=1e6, step=0.5)
    sample_every: int = setting(0, "Sample every", "0 = only at the end. Samples never change the run.",
                                low=0, high=EVERY, step=50)
    sample_chars: int = setting(200, "Tokens per sample", "Length of each generated sample, in tokens (characters "
                                "for the char tokenizer).",
                                low=1, high=100_000, step=50)
    checkpoint_every: int = setting(0, "Checkpoint every", "0 = only at stop or end. Checkpoints never change the "
                                    "run.", low=0, high=EVERY, step=50)
    snapshot_every: int = setting(0, "Snapshot every", "Keep intermediate weights for the inspector's training "
                                  "slider; 0 = none.", low=0, high=EVERY, step=50)
    threads: int = setting(0, "CPU threads", "0 = every core. Each thread computes the gradients of its own slice "
                           "of each batch.", low=0, high=256, step=1)
    final_eval: bool = setting(True, "Score the whole validation split", "At the end, the loss over every "
                               "validation window, without the sampling noise of the estimates.", widget=False)
    # where and how the run computes; a resumed run takes these from its new command, not from the run
    device: str = setting("auto", "Device", "Where training runs: auto takes a CUDA GPU, then an Apple GPU, then "
                          "the CPU. Checkpoints load on any device.",
                          choices={"auto": "auto", "cpu": "CPU", "cuda": "CUDA GPU", "mps": "Apple GPU (MPS)"})
    dtype: str = setting("auto", "Precision", "auto: bfloat16 autocast and TF32 matmuls on a CUDA GPU, float32 "
                         "elsewhere (the tutorial's numbers are float32's); fp32: float32 on every device; bf16: "
                         "bfloat16 autocast on a GPU.", choices={"auto": "auto", "fp32": "float32", "bf16": "bfloat16"},
                         widget=False)
    compile: bool = setting(False, "torch.compile", "Compile the model before training: a minute more to start, "
                            "faster steps on a GPU.", widget=False)
    # the tokens of a new run (a resumed run keeps its own, which its checkpoint holds)
    tokenizer: str = setting("char", "Tokenizer", "char: one token per distinct character, as in the tutorial; bpe: a "
                             "byte-level BPE (GPT-2's recipe) learned from the training split, where a frequent word "
                             "becomes one token.", choices={"char": "characters", "bpe": "byte-level BPE"})
    bpe_vocab: int = setting(4096, "BPE vocabulary", "Tokens the BPE learns: the 256 bytes, the marker between "
                             "stories, then the most frequent merges up to this many.", low=257, high=100_000, step=256,
                             only_with=("tokenizer", ("bpe",)), option="--vocab-size")

    def __post_init__(self):
        self.validate()

    def validate(self):
        check_fields(self, TrainConfigError)
        if self.optimizer == "muon" and self.muon_lr <= 0:
            raise TrainConfigError("config.muon_lr", "muon_lr must be greater than 0")

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> TrainConfig:
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


PLACE = ("device", "dtype", "compile")  # where and how a run computes: a resumed run takes them from its new command
