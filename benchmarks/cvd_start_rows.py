"""Episode lengths by start row in CVD-RL's paper regime (``PAPER_REGIME``, 50 PMs, 50 % warm start): why the
regime's learned schedulers train on rows [10000, 15000) (docs/cvd-rl.md, "Tables 2-4 in the paper's regime").

    OMP_NUM_THREADS=1 python benchmarks/cvd_start_rows.py [--episodes 10]

The regime's trace has 35,512 events, so ``DQNConfig.train_start_range`` [10000, 220000) is in fact
[10000, 35512); prints Best-Fit's and industrial's mean length (and Best-Fit's median and standard deviation) over
``--episodes`` episodes from each range of start rows, VMAgent's held-out [1000, 10000) first.
"""

from __future__ import annotations

import argparse
from dataclasses import replace

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME, START_ROWS
from dcplace.policies import get_policy
from dcplace.sim.episodes import run_episodes

RANGES = (START_ROWS, (10000, 15000), (15000, 20000), (20000, 25000), (25000, 30000), (30000, 35512))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=10)
    args = ap.parse_args()
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    cluster = PAPER_REGIME.cluster(50)
    print(f"# events: {p.events}\n| start rows | best-fit mean | industrial mean | best-fit median | best-fit s.d. |")
    print("|---|---|---|---|---|")
    for rows in RANGES:
        sc = replace(PAPER_REGIME.scenario(0.5), start_range=rows)
        bf, ind = (np.array([r.length for r in run_episodes(get_policy(h), cluster, p, sc, args.episodes, 0)[0]])
                   for h in ("best-fit", "industrial"))  # fmt: skip
        print(f"| [{rows[0]}, {rows[1]}) | {bf.mean():.1f} | {ind.mean():.1f} | {np.median(bf):.1f} | {bf.std():.0f} |")


if __name__ == "__main__":
    main()
