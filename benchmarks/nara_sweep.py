"""Train many Nara agents at once, one core each, under one wall-clock limit, and tabulate their best validations.

Issue 16's alibaba margin plateaued under the paper's hyperparameters (docs/nara.md, "The alibaba plateau"): every
run peaks within 5-25 iterations of 150 and drifts down after, which points at the paper's learning rate (5e-3,
section 3.3's "Nara was trained with a learning rate of 5x10^-3") rather than the budget. This script runs a grid
of ``--config`` variants (learning rates x seeds) as parallel ``dcplace train nara`` processes, each stopped at
``--wall`` seconds (its ``policy.pt`` is the best validation so far, written as it goes), and writes ``sweep.json``
with every run's best validation and the iteration it came at. Meant for a machine with many cores (the lent
device machine's 16, docs/benchmarks.md); on 2 cores use ``--jobs 2``.

    python benchmarks/nara_sweep.py --out results/sweep --lrs 0.005 0.001 --seeds 0 1 --jobs 4 --wall 300

Then judge the best-validating agents on episodes no run saw (never the test split):

    python benchmarks/nara_full_cluster.py --nara --checkpoint results/sweep/lr0.001-s0/policy.pt --episodes 40 \
        --split train --settings paper --sets alibaba --topologies alpha
"""

from __future__ import annotations

import argparse
import csv
import json
import math
import os
import subprocess
import sys
import time
from pathlib import Path

from dcplace.atomic import write_text

ROOT = Path(__file__).resolve().parent.parent


def config_text(args: argparse.Namespace, lr: float, seed: int) -> str:
    """A ``dcplace train nara --config`` file: the paper's settings except the learning rate and the flags below."""
    return "\n".join(
        [
            f'topology = "{args.topology}"',
            f'dataset = "{args.dataset}"',
            f"iterations = {args.iterations}",
            f"seed = {seed}",
            "",
            "[ppo]",
            f"lr = {lr!r}",
            f"epochs = {args.ppo_epochs}",
            f'on_full = "{args.on_full}"',
            f"eval_every = {args.eval_every}",
            f"eval_episodes = {args.eval_episodes}",
            "",
        ]
    )


def best_validation(run: Path) -> tuple[float, int, int]:
    """(best validation acceptance, its iteration, iterations done) from a run's curves.csv; NaN where none."""
    path = run / "curves.csv"
    if not path.exists():
        return math.nan, 0, 0
    with path.open(encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    best, at = math.nan, 0
    for r in rows:
        v = float(r["validation_acceptance"])
        if not math.isnan(v) and (math.isnan(best) or v > best):
            best, at = v, int(r["iteration"])
    return best, at, len(rows)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", type=Path, required=True, help="folder for one sub-folder per run and sweep.json")
    p.add_argument("--topology", default="alpha")
    p.add_argument("--dataset", default="alibaba")
    p.add_argument("--lrs", type=float, nargs="+", default=[5e-3, 2e-3, 1e-3, 5e-4])
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--iterations", type=int, default=150)
    p.add_argument("--ppo-epochs", type=int, default=30)
    p.add_argument("--on-full", default="wait", choices=["wait", "reject"])
    p.add_argument("--eval-every", type=int, default=5)
    p.add_argument("--eval-episodes", type=int, default=20)
    p.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="runs at a time, one core each")
    p.add_argument("--wall", type=float, default=600.0, help="seconds each run may take before it is stopped")
    args = p.parse_args()
    if args.jobs < 1 or args.wall <= 0:
        p.error("--jobs must be at least 1 and --wall positive")
    args.out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    grid = [(lr, s) for lr in args.lrs for s in args.seeds]
    pending = list(grid)
    running: list[tuple[str, subprocess.Popen[bytes], float]] = []
    t0 = time.monotonic()
    while pending or running:
        while pending and len(running) < args.jobs:
            lr, seed = pending.pop(0)
            name = f"lr{lr:g}-s{seed}"
            run = args.out / name
            run.mkdir(exist_ok=True)
            write_text(run / "sweep-config.toml", config_text(args, lr, seed))
            cmd = [
                sys.executable,
                "-m",
                "dcplace.cli.main",
                "train",
                "nara",
                "--config",
                str(run / "sweep-config.toml"),
            ]
            cmd += ["--out", str(run), "--force"]
            with (run / "log.txt").open("wb") as log:
                proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT)
            running.append((name, proc, time.monotonic()))
            print(f"{time.monotonic() - t0:6.0f} s  started {name}", flush=True)
        time.sleep(2)
        for item in list(running):
            name, proc, start = item
            if proc.poll() is None and time.monotonic() - start > args.wall:
                proc.terminate()  # dcplace stops between iterations: policy.pt is the best validation so far
                try:
                    proc.wait(60)
                except subprocess.TimeoutExpired:
                    proc.kill()
            if proc.poll() is not None:
                running.remove(item)
                best, at, done = best_validation(args.out / name)
                print(
                    f"{time.monotonic() - t0:6.0f} s  {name}: best validation {best:.4f} at {at} of {done}", flush=True
                )
    rows = []
    for lr, seed in grid:
        best, at, done = best_validation(args.out / f"lr{lr:g}-s{seed}")
        rows.append({"lr": lr, "seed": seed, "best_validation": best, "at_iteration": at, "iterations_done": done})
    meta = {"command": " ".join(sys.argv), "wall_s": time.monotonic() - t0, "cpus": os.cpu_count(), "runs": rows}
    write_text(args.out / "sweep.json", json.dumps(meta, indent=1))  # atomically: an interrupted sweep leaves none
    for r in sorted(rows, key=lambda r: -r["best_validation"] if not math.isnan(r["best_validation"]) else 0):
        print(
            f"lr {r['lr']:g} seed {r['seed']}: {r['best_validation']:.4f} (iteration {r['at_iteration']} of "
            f"{r['iterations_done']})"
        )


if __name__ == "__main__":
    main()
