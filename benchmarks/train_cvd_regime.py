"""A short CVD-RL training run in the paper's regime (``dcplace.bench.cvd_regime.PAPER_REGIME``), evaluated on held-out
starts against the heuristics and the hindsight bound (issue 15, item 4; a first look, not the issue's full item 3).

    python benchmarks/train_cvd_regime.py --loss machine --epochs 40 --out /tmp/cvd-regime-machine

Trains at 50 PMs / 50 % warm start on the training rows (``DQNConfig.train_start_range``), keeps the best
validation, then runs ``--episodes`` episodes from VMAgent's rows [1000, 10000) (never trained on) for every policy,
and writes ``eval.json`` beside the checkpoint. Prints the table.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.learn.config import DQNConfig
from dcplace.learn.cvd_model import CvdConfig
from dcplace.learn.cvd_rl import CvdRlTrainer
from dcplace.policies import get_policy
from dcplace.sim.episodes import run_episodes
from dcplace.sim.hindsight import episode_bounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--loss", choices=("cluster", "machine"), default="machine")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--zero-init", action="store_true", help="start V at 0 (DQNConfig.zero_init)")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    prepared = PAPER_REGIME.prepare("huawei-east-1", args.seed)
    scenario = PAPER_REGIME.scenario(args.warm)
    dqn = replace(DQNConfig(), loss=args.loss, batch=1024 if args.loss == "machine" else 256, zero_init=args.zero_init,
                  eval_every=args.eval_every)  # fmt: skip
    trainer = CvdRlTrainer(prepared, scenario, args.seed, args.out, CvdConfig(kind="cvd"), dqn, "huawei-east-1 paper")
    trainer.train(args.epochs)
    cluster = PAPER_REGIME.cluster(scenario.pms)
    rows = {"hindsight-bound": [float(b) for b in episode_bounds(cluster, prepared, scenario, args.episodes, 0)]}
    for name in ("first-fit", "best-fit", "industrial"):
        res, _, _ = run_episodes(get_policy(name), cluster, prepared, scenario, args.episodes, 0)
        rows[name] = [float(r.length) for r in res]
    res, _, _ = run_episodes(get_policy("cvd-rl", checkpoint=str(args.out / "policy.pt")), cluster, prepared,
                             scenario, args.episodes, 0)  # fmt: skip
    rows[f"trained ({args.loss} loss)"] = [float(r.length) for r in res]
    summary = {
        "regime": PAPER_REGIME.label, "warm": args.warm, "epochs": args.epochs, "loss": args.loss,
        "wall_s": trainer.wall_s, "best_validation": trainer.best_validation,
        "mean_length": {k: float(np.mean(v)) for k, v in rows.items()}, "lengths": rows,
    }  # fmt: skip
    (args.out / "eval.json").write_text(json.dumps(summary, indent=1))
    best = max(summary["mean_length"][h] for h in ("first-fit", "best-fit", "industrial"))
    for k, v in summary["mean_length"].items():
        print(f"{k:28s} {v:8.1f}  {v / best - 1:+.1%} vs the best heuristic")
    print(f"training {trainer.wall_s:.0f} s, best validation {trainer.best_validation:.1f}")


if __name__ == "__main__":
    main()
