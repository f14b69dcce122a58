"""A short CVD-RL / SchedRL training run in the paper's regime (``dcplace.bench.cvd_regime.PAPER_REGIME``), evaluated on
held-out starts against the heuristics and the hindsight bound (issue 15).

    python benchmarks/train_cvd_regime.py --loss machine --epochs 40 --out /tmp/cvd-regime-machine
    python benchmarks/train_cvd_regime.py --kind schedrl --rows 10000 15000 --epochs 10 --out DIR --skip-eval

Trains at 50 PMs / 50 % warm start on the training rows (``--rows``, default ``DQNConfig.train_start_range``;
validation uses fixed starts of the same rows), keeps the best validation, then (unless ``--skip-eval``) runs
``--episodes`` episodes from VMAgent's rows [1000, 10000) (never trained on) for every policy, and writes
``eval.json`` beside the checkpoint. Prints the table.

``--rows 10000 15000``: the rows nearest to the held-out ones. In this regime (35,512 events in all) episodes from
rows [10000, 15000) run a median 490 requests (Best-Fit, 10 episodes), those of VMAgent's rows 680, those of the
default training rows (clipped to [10000, 35512)) 1,700-2,500 (rows 15,000-25,000) or 0-300 (rows 30,000 on).
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.learn.config import TRAIN_START_RANGE, DQNConfig
from dcplace.learn.cvd_model import CvdConfig
from dcplace.learn.cvd_rl import CvdRlTrainer
from dcplace.learn.schedrl import SchedRlTrainer
from dcplace.policies import get_policy
from dcplace.sim.episodes import run_episodes
from dcplace.sim.hindsight import episode_bounds


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    ap.add_argument("--kind", choices=("cvd", "schedrl"), default="cvd")
    ap.add_argument("--loss", choices=("cluster", "machine"), default="machine")
    ap.add_argument("--epochs", type=int, default=40)
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--zero-init", action="store_true", help="start V at 0 (DQNConfig.zero_init)")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--lr", type=float, default=DQNConfig().lr)
    ap.add_argument("--batch", type=int, default=None, help="default: 1024 for the per-machine loss, else 256")
    ap.add_argument("--rows", type=int, nargs=2, default=TRAIN_START_RANGE, metavar=("LO", "HI"))
    ap.add_argument("--skip-eval", action="store_true", help="train only (evaluate with eval_cvd_regime.py)")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()

    prepared = PAPER_REGIME.prepare("huawei-east-1", args.seed)
    scenario = PAPER_REGIME.scenario(args.warm)
    loss = "cluster" if args.kind == "schedrl" else args.loss
    batch = args.batch or (1024 if loss == "machine" else 256)
    dqn = replace(DQNConfig(), loss=loss, batch=batch, zero_init=args.zero_init,
                  eval_every=args.eval_every, lr=args.lr, train_start_range=tuple(args.rows))  # fmt: skip
    trainer_cls = SchedRlTrainer if args.kind == "schedrl" else CvdRlTrainer
    model = CvdConfig(kind="schedrl", filter_k=(), machines=scenario.pms) if args.kind == "schedrl" else CvdConfig()
    trainer = trainer_cls(prepared, scenario, args.seed, args.out, model, dqn, "huawei-east-1 paper")
    refs = {h: trainer.validate_heuristic(h) for h in ("best-fit", "industrial")}
    trainer.train(args.epochs)
    print(
        f"training {trainer.wall_s:.0f} s, best validation {trainer.best_validation:.1f} (validation best-fit "
        f"{refs['best-fit']:.1f}, industrial {refs['industrial']:.1f})",
        flush=True,
    )
    info = dict(wall_s=trainer.wall_s, best_validation=trainer.best_validation, curves=trainer.curves,
                rows=args.rows, lr=args.lr, kind=args.kind, loss=loss, zero_init=args.zero_init, epochs=args.epochs,
                **refs)  # fmt: skip
    (args.out / "validation.json").write_text(json.dumps(info, indent=1), encoding="utf-8")
    if args.skip_eval:
        return
    cluster = PAPER_REGIME.cluster(scenario.pms)
    rows = {"hindsight-bound": [float(b) for b in episode_bounds(cluster, prepared, scenario, args.episodes, 0)]}
    for name in ("first-fit", "best-fit", "industrial"):
        res, _, _ = run_episodes(get_policy(name), cluster, prepared, scenario, args.episodes, 0)
        rows[name] = [float(r.length) for r in res]
    policy = "schedrl" if args.kind == "schedrl" else "cvd-rl"
    res, _, _ = run_episodes(get_policy(policy, checkpoint=str(args.out / "policy.pt")), cluster, prepared,
                             scenario, args.episodes, 0)  # fmt: skip
    rows[f"trained ({args.kind}, {loss} loss)"] = [float(r.length) for r in res]
    summary = {
        "regime": PAPER_REGIME.label, "warm": args.warm, "epochs": args.epochs, "loss": loss,
        "wall_s": trainer.wall_s, "best_validation": trainer.best_validation,
        "mean_length": {k: float(np.mean(v)) for k, v in rows.items()}, "lengths": rows,
    }  # fmt: skip
    (args.out / "eval.json").write_text(json.dumps(summary, indent=1), encoding="utf-8")
    best = max(summary["mean_length"][h] for h in ("first-fit", "best-fit", "industrial"))
    for k, v in summary["mean_length"].items():
        print(f"{k:28s} {v:8.1f}  {v / best - 1:+.1%} vs the best heuristic")


if __name__ == "__main__":
    main()
