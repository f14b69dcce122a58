"""``nalb-learned`` against ``nalb-strict`` (and optionally the paper's ``nara``) on the TEST requests of every
topology x request set (issue 16, item 6's target: ``nalb-learned`` >= ``nalb-strict`` + 2 % acceptance everywhere).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/eval_nalb_learned.py [--checkpoint FILE] [--nara]

Same episodes for every policy (``run_policy(..., split="test")``, seed ``--seed``; the search trains on
``split="train"`` requests only): ``--episodes`` per cell on alpha and beta (128 requests each, the paper's test
length), ``--big-episodes`` on gamma (896) and delta (4,096). One Markdown row per cell: mean acceptance of each
policy, ``nalb-learned``'s relative difference to ``nalb-strict`` (mean of the per-episode ratios - 1, with its
standard error), and whether the cell meets +2 %.
"""

from __future__ import annotations

import argparse
import os
import time

import numpy as np

from dcplace.bench.netalloc_runner import run_policy
from dcplace.policies.netalloc_scored import SHIPPED
from dcplace.sim.netalloc_episodes import SETTINGS


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--checkpoint", default=str(SHIPPED), help="nalb-learned's rule file (default: the shipped one)")
    ap.add_argument("--topologies", nargs="+", default=["alpha", "beta", "gamma", "delta"])
    ap.add_argument("--datasets", nargs="+", default=["uniform", "azure", "alibaba"])
    ap.add_argument("--episodes", type=int, default=10, help="test episodes per cell on alpha and beta")
    ap.add_argument("--big-episodes", type=int, default=3, help="test episodes per cell on gamma and delta")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--nara", action="store_true", help="also the paper's Nara (the shipped agents)")
    ap.add_argument("--setting", default="paper", choices=list(SETTINGS), help="the environment's reading")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load {os.getloadavg()[0]:.1f}, "
          f"rule file {args.checkpoint}")  # fmt: skip
    cols = ["nalb-strict", "nalb-learned"] + (["nara"] if args.nara else [])
    print("| topology | request set | episodes | " + " | ".join(cols) + " | learned vs strict (± s.e.) | >= +2 % |")
    print("|---|---|---|" + "---|" * len(cols) + "---|---|")
    met = 0
    t0 = time.perf_counter()
    for top in args.topologies:
        eps = args.episodes if top in ("alpha", "beta") else args.big_episodes
        for d in args.datasets:
            acc = {}
            for p in cols:
                ck = args.checkpoint if p == "nalb-learned" else None
                run = run_policy(top, d, p, None, eps, args.seed, checkpoint=ck, setting=args.setting)
                acc[p] = np.array([r.acceptance for r in run.results])
            ratio = acc["nalb-learned"] / np.maximum(acc["nalb-strict"], 1e-9) - 1
            se = ratio.std(ddof=1) / np.sqrt(len(ratio)) if len(ratio) > 1 else float("nan")
            ok = ratio.mean() >= 0.02
            met += ok
            print(f"| {top} | {d} | {eps} | " + " | ".join(f"{acc[p].mean():.3f}" for p in cols)
                  + f" | {ratio.mean():+.1%} ± {se:.1%} | {'yes' if ok else 'no'} |", flush=True)  # fmt: skip
    n = len(args.topologies) * len(args.datasets)
    print(f"\n{met} of {n} cells at >= +2 %; {time.perf_counter() - t0:.0f} s, load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
