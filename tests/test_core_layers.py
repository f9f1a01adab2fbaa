"""The teaching core stands on its own: the model and the training step import nothing of the layers around them
(run folders, locks, jobs, the CPU's thread policy, DDP), gptcore has no import cycle and never imports the app,
and the step alone trains."""
import ast
from pathlib import Path

import pytest
import torch

from gptcore.config import GPTConfig
from gptcore.step import train_step
from gptcore.threads import ShardedGrads
from gptcore.train import build_model

GPTCORE = Path(__file__).resolve().parent.parent / "gptcore"
TINY = GPTConfig(d_model=32, n_layer=2, n_head=2, d_ff=88, context=16, vocab_size=20)

# What the core may import: torch and the standard library's basics, and the core's own modules. config.py and
# data.py also refuse what a person typed or gave with a sentence (errors), as every user-facing check does.
CORE_IMPORTS = {
    "model.py": {"__future__", "math", "torch", "torch.nn", "torch.nn.functional", ".config", ".hooks"},
    "hooks.py": {"__future__", "collections.abc", "contextlib", "torch", "torch.nn"},
    "config.py": {"__future__", "math", "dataclasses", "functools", "typing", ".errors"},
    "data.py": {"__future__", "collections", "dataclasses", "typing", "torch", ".errors", ".tokenizer"},
    "step.py": {"__future__", "math", "collections.abc", "torch", ".config", ".data", ".model"},
}


def module_name(path: Path) -> str:
    parts = path.relative_to(GPTCORE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imported(path: Path, top_level_only: bool) -> set[str]:
    """The modules a file imports, relative ones as written (.config) and absolute ones by name."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else ast.walk(tree)
    found = set()
    for node in nodes:
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            found.add("." * node.level + (node.module or ""))
    return found


def absolute(path: Path, name: str) -> str:
    """gptcore.x.y for a relative import in path (from . import x counts as the package)."""
    if not name.startswith("."):
        return name
    level = len(name) - len(name.lstrip("."))
    package = module_name(path).split(".")
    package = package if path.name == "__init__.py" else package[:-1]
    base = package[:len(package) - level + 1]
    return ".".join(base + ([name.lstrip(".")] if name.lstrip(".") else []))


def test_the_model_and_the_training_step_import_only_torch_and_the_core():
    for file, allowed in CORE_IMPORTS.items():
        extra = imported(GPTCORE / file, top_level_only=False) - allowed
        assert not extra, f"gptcore/{file} imports {sorted(extra)}"


def test_gptcore_never_imports_the_app():
    for path in GPTCORE.rglob("*.py"):
        roots = {name.split(".")[0] for name in imported(path, top_level_only=False)}
        assert not roots & {"explorer", "streamlit", "plotly"}, path


def test_gptcore_has_no_import_cycle():
    paths = {module_name(p): p for p in GPTCORE.rglob("*.py")}
    graph = {name: {dep for dep in (absolute(path, n) for n in imported(path, top_level_only=True))
                    if dep in paths and dep != name}
             for name, path in paths.items()}
    done: set[str] = set()

    def visit(name: str, chain: list[str]) -> None:
        if name in chain:
            pytest.fail("import cycle: " + " -> ".join(chain[chain.index(name):] + [name]))
        if name in done:
            return
        for dep in sorted(graph[name]):
            visit(dep, chain + [name])
        done.add(name)

    for name in sorted(graph):
        visit(name, [])
    assert graph["gptcore.train"] >= {"gptcore.step", "gptcore.model"}  # (the graph sees relative imports)


def toy_batch(seed: int = 0, rows: int = 4) -> tuple[torch.Tensor, torch.Tensor]:
    ids = torch.randint(TINY.vocab_size, (rows, TINY.context + 1), generator=torch.Generator().manual_seed(seed))
    return ids[:, :-1], ids[:, 1:]


def test_train_step_alone_lowers_the_loss_of_a_tiny_model():
    model, _ = build_model(TINY, seed=0)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-2)
    x, y = toy_batch()
    losses = [train_step(model, optimizer, x, y, grad_clip=1.0).item() for _ in range(20)]
    assert losses[-1] < losses[0] - 1.0


def test_the_sharded_gradients_the_trainer_passes_in_equal_the_plain_backward():
    plain, _ = build_model(TINY, seed=0)
    sharded, _ = build_model(TINY, seed=0)
    x, y = toy_batch(seed=1)
    grads = {}

    def keep(model):
        return lambda loss: grads.setdefault(model, [p.grad.clone() for p in model.parameters()])

    loss = train_step(plain, torch.optim.SGD(plain.parameters(), lr=0.0), x, y, before_update=keep(plain))
    shards = ShardedGrads(sharded, 2)
    try:
        sharded_loss = train_step(sharded, torch.optim.SGD(sharded.parameters(), lr=0.0), x, y,
                                  loss_and_grads=shards, before_update=keep(sharded))
    finally:
        shards.close()
    assert sharded_loss.item() == pytest.approx(loss.item(), rel=1e-6)
    for a, b in zip(grads[plain], grads[sharded]):
        torch.testing.assert_close(b, a, rtol=1e-5, atol=1e-7)
