"""The speedrun ladder, measured: every rung of gptcore.ladder trained in one process, one step of each in turn.

    python -m bench.ladder                  the table (~40 min on two cores)
    python -m bench.ladder --ship           also write the curves the Faster training page shows

Each rung's whole-val loss is taken at checkpoints, off the clock; its time to the target (the first rung's final
loss, the tutorial recipe through gptcore) is the training wall time at the first checkpoint at or below it. Needs
../shared/data/tinystories-1M.txt; writes artifacts/ladder.csv and a Plotly figure beside it.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import pandas as pd

from gptcore.demos.speedrun import LadderRuns, ladder_table, rung_settings
from gptcore.ladder import LADDER, LADDER_CURVES, RUNGS, Curve
from gptcore.recipes import Recipe
from gptcore.threads import CORES

from .common import ARTIFACTS, TINYSTORIES, cpu_name, load_summary, thread_summary
from .time_to_loss import print_checkpoint, time_to_loss, train_recipe, write_curves


def print_table(table: pd.DataFrame, target: float) -> None:
    """The ladder (gptcore.demos.speedrun.ladder_table) as a markdown table."""
    print(f"\nTarget: the tutorial rung's final whole-val loss, {target:.4f}\n")
    print("| rung | builds on | kept | last step | reaches the target | × tutorial | final val loss |")
    print("| --- | --- | --- | ---: | ---: | ---: | ---: |")
    for row in table.to_dict("records"):
        if pd.notna(row["seconds to target"]):
            reach = f"step {row['step to target']:,.0f}, {row['seconds to target']:.0f} s"
            ratio = f"{row['× tutorial']:.2f}"
        else:
            reach, ratio = "never", "—"
        before = row["builds on"] if pd.notna(row["builds on"]) else ""
        print(f"| {row['rung']} | {before} | {'yes' if row['adopted'] else 'no'} | {row['steps']:,} "
              f"| {reach} | {ratio} | {row['final val loss']:.4f} ({row['final seconds']:.0f} s) |")


def ship(curves: dict[str, Curve], target: float) -> None:
    """Write the curves, and the settings each rung was measured with, for the Faster training page."""
    LADDER_CURVES.write_text(json.dumps({
        "cpu": cpu_name(), "cores": CORES, "command": "python -m bench.ladder --ship", "target": round(target, 5),
        "settings": {r.key: rung_settings(r) for r in LADDER},
        "curves": {k: {"step": c.step, "seconds": [round(s, 2) for s in c.seconds], "val": [round(v, 5) for v in c.val]}
                   for k, c in curves.items()}}, indent=1) + "\n")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ladder", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=0, help="torch threads per run (0 = every core)")
    parser.add_argument("--data", default=str(TINYSTORIES))
    parser.add_argument("--points", type=int, default=20, help="checkpoint evals per rung")
    parser.add_argument("--rungs", nargs="*", choices=list(RUNGS), help="only these rungs (the first rung, which sets "
                        "the target, is always trained)")
    parser.add_argument("--ship", action="store_true", help=f"write every rung's curves to {LADDER_CURVES.name} for "
                        "the page (needs every rung)")
    args = parser.parse_args(argv)
    if args.ship and args.rungs:
        parser.error("--ship writes every rung's curves: leave out --rungs")
    path = Path(args.data)
    if not path.is_file():
        print(f"skipping the ladder: {path} is absent (it is benchmark data, not part of the project)")
        return 0
    text = path.read_text(encoding="utf-8")[:1_000_000]
    keep = {LADDER[0].key, *(args.rungs or RUNGS)}
    runs = {r.key: (train_recipe, Recipe(r.key, "", r.model, r.train)) for r in LADDER if r.key in keep}
    print(f"{cpu_name()}\n{thread_summary()}\n{load_summary()}\nRungs, one step each in rotation: {', '.join(runs)}",
          flush=True)
    curves = time_to_loss(text, runs, args.points, print_checkpoint, args.threads)
    target = curves[LADDER[0].key].val[-1]
    print_table(ladder_table(LadderRuns(cpu_name(), CORES, "", target, curves)), target)
    csv_path, html_path = write_curves(curves, target, ARTIFACTS, "ladder")
    print(f"curves: {csv_path}, {html_path}")
    if args.ship:
        ship(curves, target)
        print(f"wrote {LADDER_CURVES}")
    print(load_summary())
    return 0


if __name__ == "__main__":
    sys.exit(main())
