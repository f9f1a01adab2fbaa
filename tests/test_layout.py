"""The project's layers: the library runs without the app's packages, and each setting is defined once.

gptcore is a library: every module imports with streamlit and plotly blocked, and a command-line training run
needs neither them nor pandas. The config field tables are the one definition of each setting: the CLI's
flags, the Train page's widgets and the validation all agree with them, field by field.
"""
from __future__ import annotations

import argparse
import ast
import subprocess
import sys
import textwrap
from pathlib import Path

from page_helpers import app_page

from gptcore import cli
from gptcore.config import GPTConfig, TrainConfig, settings

ROOT = Path(__file__).resolve().parent.parent


def run_python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code), *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)


BLOCK = """
import sys
for name in {blocked!r}:
    sys.modules[name] = None  # `import name` now raises ImportError
"""


def test_every_library_module_imports_without_streamlit_or_plotly():
    result = run_python(BLOCK.format(blocked=["streamlit", "plotly"]) + """
import importlib, pkgutil
import gptcore
names = [i.name for i in pkgutil.walk_packages(gptcore.__path__, "gptcore.") if not i.name.endswith("__main__")]
for name in names:
    importlib.import_module(name)
print(len(names))
""")
    assert result.returncode == 0, result.stderr
    assert int(result.stdout) >= 20


def test_a_command_line_training_run_needs_neither_pandas_nor_the_app(tmp_path):
    result = run_python(BLOCK.format(blocked=["streamlit", "plotly", "pandas"]) + """
from gptcore.cli import main
raise SystemExit(main(sys.argv[1:]))
""", "train", "--data", "builtin", "--builtin-chars", "20000", "--out", str(tmp_path / "run"), "--steps", "2",
        "--d-model", "16", "--n-layer", "1", "--n-head", "2", "--d-ff", "32", "--context", "16",
        "--batch-size", "2", "--eval-every", "1", "--eval-batches", "1", "--no-final-eval")
    assert result.returncode == 0, result.stderr
    assert (tmp_path / "run" / "model.safetensors").is_file()


FIELDS = [(cls, s) for cls in (GPTConfig, TrainConfig) for s in settings(cls).values()]


def out_of_range(s):
    """A value the field refuses: past its upper bound, below its lower one, or not one of its choices."""
    if s.kind is bool:
        return "yes"
    if s.choices:
        return "no-such-choice"
    if s.high is not None:
        return s.kind(s.high * 2 + 1) if s.high > 0 else s.kind(s.high + 1)
    return s.kind(s.low - 1)


def field_problems(check, fields) -> list[str]:
    """Run check(cls, s) on every field; each problem it returns, or each assertion it fails, is listed by field."""
    problems = []
    for cls, s in fields:
        try:
            problem = check(cls, s)
        except AssertionError as failed:
            problem = str(failed) or "assertion failed"
        if problem:
            problems.append(f"{cls.__name__}.{s.name}: {problem}")
    return problems


def refused_with_own_message(cls, s) -> str | None:
    bad = out_of_range(s)
    message = s.problem(bad)
    if message is None or s.problem(s.default) is not None:
        return f"problem({bad!r}) is {message!r}, problem(default {s.default!r}) is {s.problem(s.default)!r}"
    try:
        cls(**{s.name: bad})
    except ValueError as refused:
        return None if str(refused) == str(message) else f"refused {bad!r} with {str(refused)!r}, not {message!r}"
    return f"accepted {bad!r}"


def test_validation_refuses_a_value_outside_each_field_with_the_fields_own_message():
    problems = field_problems(refused_with_own_message, FIELDS)
    assert problems == [], "\n".join(problems)


def train_parser_actions() -> dict:
    [commands] = [a for a in cli.build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return {a.dest: a for a in commands.choices["train"]._actions}


def test_each_cli_flag_is_generated_from_its_field():
    actions = train_parser_actions()

    def check(cls, s):
        action = actions.get(s.name)
        assert action is not None, "no flag of `train`"
        assert s.flag in action.option_strings and action.default is None, (action.option_strings, action.default)
        assert s.help.replace("%", "%%") in action.help and str(s.range_text()) in action.help, action.help
        if s.choices:
            assert list(action.choices) == list(s.choices), action.choices
        elif s.kind is not bool:
            assert action.type is s.kind, action.type

    problems = field_problems(check, [f for f in FIELDS if f[1].cli])
    assert problems == [], "\n".join(problems)


def test_the_cli_refuses_each_out_of_range_number_flag_with_the_fields_message(tmp_path, capsys):
    def check(cls, s):
        bad = out_of_range(s)
        code = cli.main(["train", "--data", "builtin", "--builtin-chars", "20000", "--out", str(tmp_path / "x"),
                         s.flag, str(bad)])
        err = capsys.readouterr().err
        assert code != 0 and str(s.problem(bad)) in err, f"{s.flag} {bad}: exit code {code}, stderr {err!r}"
        assert not (tmp_path / "x").exists(), f"{s.flag} {bad}: the run folder was made"

    problems = field_problems(check, [f for f in FIELDS if f[1].cli and f[1].kind in (int, float)])
    assert problems == [], "\n".join(problems)


def widget_of(at, key):
    for kind in ("number_input", "selectbox", "toggle"):
        for w in at.get(kind):
            if w.key == key:
                return kind, w
    return None, None


def test_each_train_page_widget_is_generated_from_its_field():
    from explorer.forms import PREFIX

    at = app_page("training")

    def check(cls, s):
        kind, widget = widget_of(at, PREFIX[cls] + s.name)
        assert widget is not None, "no widget"
        assert kind == ("toggle" if s.kind is bool else "selectbox" if s.choices else "number_input"), kind
        assert widget.label == s.label and s.help in widget.help, (widget.label, widget.help)
        if s.choices:
            assert list(widget.options) == list(s.choices.values()), widget.options

    problems = field_problems(check, [f for f in FIELDS if f[1].widget and not f[1].only_with])
    assert problems == [], "\n".join(problems)


def test_the_start_page_and_the_sidebar_draw_without_torch():
    """A cold server shows the start page before torch has loaded; torch then loads in the background."""
    result = run_python("""
        import sys
        from streamlit.testing.v1 import AppTest
        import explorer.ui
        started = []
        explorer.ui.load_torch_in_background = lambda: started.append(True)  # recorded, not started
        at = AppTest.from_file("app.py", default_timeout=60).run()
        assert not at.exception, at.exception
        assert at.title[0].value.startswith("GPT"), at.title
        print("torch loaded:", "torch" in sys.modules, "background load asked:", started)
    """)
    assert result.returncode == 0, result.stderr
    assert "torch loaded: False background load asked: [True]" in result.stdout, result.stdout + result.stderr


def import_graph(packages: tuple[str, ...]) -> dict[str, set[str]]:
    """{module: the project modules it imports}, from every import statement, inside functions too."""
    paths = {}
    for package in packages:
        for path in (ROOT / package).rglob("*.py"):
            parts = path.relative_to(ROOT).with_suffix("").parts
            paths[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in paths.items():
        package = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
        found = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom):
                base = ".".join(package[:len(package) - node.level + 1] + [node.module or ""]) if node.level \
                    else node.module
                base = base.rstrip(".")
                found |= {base} | {f"{base}.{alias.name}" for alias in node.names}
        deps = set()
        for dep in found:  # the module itself, or the package that holds the imported name
            while dep and dep not in paths:
                dep = dep.rpartition(".")[0]
            if dep and dep != name:
                deps.add(dep)
        graph[name] = deps
    return graph


def test_no_module_of_the_library_the_app_or_the_benchmarks_is_part_of_an_import_cycle():
    graph = import_graph(("gptcore", "explorer", "bench"))
    assert "gptcore.model" in graph["gptcore.train"]
    done: set[str] = set()

    def visit(name: str, chain: list[str]) -> None:
        if name in chain:
            raise AssertionError("import cycle: " + " -> ".join(chain[chain.index(name):] + [name]))
        if name not in done:
            for dep in sorted(graph[name]):
                visit(dep, chain + [name])
            done.add(name)

    for name in sorted(graph):
        visit(name, [])


def test_the_library_never_imports_the_benchmarks():
    graph = import_graph(("gptcore", "bench"))
    assert not [name for name, deps in graph.items()
                if name.startswith("gptcore") and any(dep.startswith("bench") for dep in deps)]
