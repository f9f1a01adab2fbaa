"""Wall time to the tutorial's final validation loss: the tutorial's own script against gptcore's fast and
speedrun recipes.

    python -m bench.time_to_loss                            tutorial script vs RECIPES["fast"], RECIPES["speedrun"]
                                                            (~17 min)
    python -m bench.time_to_loss --with-gptcore-tutorial    + the tutorial recipe on gptcore's code

All runs train in one process, one step of each in turn, so a burst of load elsewhere hits all of them alike.
Each is evaluated on its whole val split at checkpoints, off the clock. Needs ../shared/data/tinystories-1M.txt;
writes artifacts/time_to_loss.csv and an interactive Plotly figure next to it.
"""
from __future__ import annotations

import argparse
import csv
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

import torch
import torch.nn as nn

from gptcore.data import Corpus, get_batch
from gptcore.events import StepEvent
from gptcore.ladder import Curve
from gptcore.recipes import RECIPES, Recipe
from gptcore.reference import tutorial_step, tutorial_twin
from gptcore.step import evaluate
from gptcore.threads import use_threads
from gptcore.train import Trainer

from .common import ARTIFACTS, TINYSTORIES, load_summary, thread_summary


class TakeTurns:
    """Lets threads run one at a time in rotation, so concurrent training runs see the same machine load."""

    def __init__(self, names: list[str]):
        self.order, self.turn = list(names), 0
        self.cond = threading.Condition()

    def wait(self, name: str) -> None:
        with self.cond:
            self.cond.wait_for(lambda: self.order[self.turn] == name)

    def pass_on(self, name: str) -> None:
        with self.cond:
            self.turn = (self.order.index(name) + 1) % len(self.order)
            self.cond.notify_all()

    def leave(self, name: str) -> None:
        with self.cond:
            i = self.order.index(name)
            self.order.remove(name)
            if self.order:
                self.turn = i % len(self.order)
            self.cond.notify_all()


class TurnClock:
    """One run's side of the rotation: times its steps, evaluates at checkpoints off the clock, yields the CPU."""

    def __init__(self, curve: Curve, turns: TakeTurns, every: int, last_step: int, val_ids: torch.Tensor,
                 report: Callable[[Curve], None]):
        self.curve, self.turns, self.every, self.last_step = curve, turns, every, last_step
        self.val_ids, self.report = val_ids, report
        self.busy = self.resumed = 0.0

    def start(self) -> None:
        self.turns.wait(self.curve.name)
        self.resumed = time.perf_counter()

    def after_step(self, step: int, model: nn.Module) -> None:
        self.busy += time.perf_counter() - self.resumed
        if step % self.every == 0 or step == self.last_step:
            self.curve.step.append(step)
            self.curve.seconds.append(self.busy)
            self.curve.val.append(evaluate(model, self.val_ids))
            model.train()
            self.report(self.curve)
        self.turns.pass_on(self.curve.name)
        self.turns.wait(self.curve.name)
        self.resumed = time.perf_counter()

    def finish(self) -> None:
        self.turns.leave(self.curve.name)


ClockFor = Callable[[Trainer], TurnClock]


def train_recipe(recipe: Recipe, text: str, clock_for: ClockFor, threads: int,
                 make_optimizer: Callable | None = None) -> None:
    """A recipe through gptcore's Trainer, its final whole-split eval left to the checkpoints;
    make_optimizer(model, tc), when given, replaces the optimizer the recipe names."""
    tc = replace(recipe.train, final_eval=False, threads=threads, checkpoint_every=0, snapshot_every=0,
                 device="cpu")  # the comparison with the tutorial's script is a CPU one, on any machine
    trainer = Trainer.fresh(recipe.model, tc, Corpus(text, ""))
    if make_optimizer is not None:
        trainer.optimizer = make_optimizer(trainer.model, tc)
    clock = clock_for(trainer)
    clock.start()
    try:
        trainer.run(lambda event: clock.after_step(event.step, trainer.model) if isinstance(event, StepEvent) else None)
    finally:
        clock.finish()


def train_tutorial_script(recipe: Recipe, text: str, clock_for: ClockFor, threads: int) -> None:
    """The tutorial's own script: its literal model, plain AdamW at a constant lr, a val estimate every
    eval_every steps. Same seed, init, batches and random-call order as gptcore's Trainer."""
    tc = recipe.train
    trainer = Trainer.fresh(recipe.model, replace(tc, device="cpu"), Corpus(text, ""))  # its tokenizer, split, model
    model, gen, ctx = tutorial_twin(trainer.model), trainer.stream, recipe.model.context
    opt = torch.optim.AdamW(model.parameters(), lr=tc.lr)
    use_threads(threads)  # per thread in torch: set it here
    clock = clock_for(trainer)
    clock.start()
    try:
        for step in range(tc.steps + 1):
            tutorial_step(model, opt, *get_batch(trainer.train_ids, ctx, tc.batch_size, gen))
            if step % tc.eval_every == 0:
                with torch.no_grad():
                    sum(model(*get_batch(trainer.val_ids, ctx, tc.batch_size, gen))[1].item()
                        for _ in range(tc.eval_batches))
            clock.after_step(step, model)
    finally:
        clock.finish()


Runner = Callable[[Recipe, str, ClockFor, int], None]


def time_to_loss(text: str, runs: dict[str, tuple[Runner, Recipe]], points: int = 20,
                 report: Callable[[Curve], None] = lambda c: None, threads: int = 0) -> dict[str, Curve]:
    """Train every run, {name: (runner, recipe)}, one step at a time in rotation; a Curve per run."""
    turns, errors = TakeTurns(list(runs)), []
    curves = {name: Curve(name) for name in runs}
    workers = []
    for name, (runner, recipe) in runs.items():
        every = max(1, recipe.train.steps // points)

        def clock_for(trainer, name=name, every=every, last=recipe.train.steps):
            return TurnClock(curves[name], turns, every, last, trainer.val_ids, report)

        def work(runner=runner, recipe=recipe, clock_for=clock_for):
            try:
                runner(recipe, text, clock_for, threads)
            except BaseException as e:  # re-raised in the caller's thread below
                errors.append(e)
        workers.append(threading.Thread(target=work, name=f"time-to-loss-{name}"))
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    if errors:
        raise errors[0]
    return curves


def print_checkpoint(curve: Curve) -> None:
    print(f"  {curve.name:<16} step {curve.step[-1]:5d}  {curve.seconds[-1]:7.1f} s  val {curve.val[-1]:.4f}",
          flush=True)


def write_curves(curves: dict[str, Curve], target: float, out_dir: Path,
                 stem: str = "time_to_loss") -> tuple[Path, Path]:
    """<stem>.csv and an interactive Plotly figure, <stem>.html, in out_dir."""
    import plotly.graph_objects as go

    out_dir.mkdir(parents=True, exist_ok=True)
    csv_path, html_path = out_dir / f"{stem}.csv", out_dir / f"{stem}.html"
    with open(csv_path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["recipe", "step", "seconds", "val_loss"])
        for c in curves.values():
            writer.writerows([c.name, s, f"{t:.2f}", f"{v:.5f}"] for s, t, v in zip(c.step, c.seconds, c.val))
    fig = go.Figure()
    for c in curves.values():
        fig.add_scatter(x=c.seconds, y=c.val, mode="lines+markers", name=c.name,
                        customdata=c.step, hovertemplate="step %{customdata}<br>%{x:.0f} s<br>val %{y:.4f}")
    fig.add_hline(y=target, line_dash="dot", annotation_text=f"tutorial recipe's final val loss {target:.4f}")
    fig.update_layout(title="Validation loss (whole val split) against training wall time",
                      xaxis_title="training wall time (s), checkpoint evals excluded", yaxis_title="val loss",
                      yaxis_range=[min(min(c.val) for c in curves.values()) - 0.05, 2.0], template="plotly_white")
    fig.write_html(html_path, include_plotlyjs=True)
    return csv_path, html_path


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.time_to_loss", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=0, help="torch threads per run (0 = every core)")
    parser.add_argument("--data", default=str(TINYSTORIES))
    parser.add_argument("--points", type=int, default=20, help="checkpoint evals per run")
    parser.add_argument("--out", default=str(ARTIFACTS), help="folder for the CSV and HTML curves")
    parser.add_argument("--with-gptcore-tutorial", action="store_true",
                        help="also train the tutorial recipe through gptcore (separates code from recipe gains)")
    args = parser.parse_args(argv)
    path = Path(args.data)
    if not path.is_file():
        print(f"skipping time-to-loss: {path} is absent (it is benchmark data, not part of the project)")
        return 0
    text = path.read_text(encoding="utf-8")[:1_000_000]
    runs = {"tutorial": (train_tutorial_script, RECIPES["tutorial"]), "fast": (train_recipe, RECIPES["fast"]),
            "speedrun": (train_recipe, RECIPES["speedrun"])}
    if args.with_gptcore_tutorial:
        runs["tutorial-gptcore"] = (train_recipe, RECIPES["tutorial"])
    print(f"{thread_summary()}\n{load_summary()}")
    print(f"Runs on {path.name}, one step each in rotation, whole-val-split loss at ~{args.points} checkpoints:\n"
          "  tutorial          the tutorial's script: its literal model and loop, tutorial recipe\n"
          "  fast              gptcore's Trainer, RECIPES['fast']\n"
          "  speedrun          gptcore's Trainer, RECIPES['speedrun']" +
          ("\n  tutorial-gptcore  gptcore's Trainer, RECIPES['tutorial']" if args.with_gptcore_tutorial else ""),
          flush=True)
    curves = time_to_loss(text, runs, args.points, print_checkpoint, args.threads)
    target = curves["tutorial"].val[-1]
    print(f"\nTarget: the tutorial recipe's final val loss, {target:.4f}")
    reached = {name: c.first_at_or_below(target) for name, c in curves.items()}
    for name, hit in reached.items():
        end = curves[name]
        print(f"  {name:<16} " + (f"reaches it at step {hit[0]:,} after {hit[1]:.0f} s" if hit else "never reaches it")
              + f"  (final val {end.val[-1]:.4f} at step {end.step[-1]:,}, {end.seconds[-1]:.0f} s)")
    for name in reached:
        if name != "tutorial" and reached[name] and reached["tutorial"]:
            print(f"  {name} / tutorial wall time: {reached[name][1] / reached['tutorial'][1]:.2f}")
    csv_path, html_path = write_curves(curves, target, Path(args.out))
    print(f"curves: {csv_path}, {html_path}\n{load_summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
