"""Does each rule of the ``industrial`` heuristic help? Scheduled length with one rule switched off at a time.

Scenario: Huawei-East-1 (synthetic when absent), 50 and 100 PMs, Non-Expansion, releases off, warm start 0 and
50 %, double-NUMA above 32 GB (the reproduction's settings), plus the same with releases on and a 10 GB threshold
on 20 PMs (a harder, fragmentation-prone setting). Same starts for every variant (common random numbers).

    python benchmarks/bench_industrial_ablation.py [--episodes 30]
"""

from __future__ import annotations

import argparse

import numpy as np

from dcplace.cluster import NumaCluster
from dcplace.policies.numa_heuristics import Heuristic, IndustrialWeights, warm_up_jit
from dcplace.sim import Scenario
from dcplace.sim.episodes import prepare, run_episodes
from dcplace.workload import load_trace, trace_available

VARIANTS = {
    "industrial (all rules)": IndustrialWeights(),
    "- consolidate": IndustrialWeights(consolidate=0.0),
    "- anti-stranding": IndustrialWeights(strand=0.0),
    "- NUMA balance": IndustrialWeights(numa=0.0),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=30)
    args = ap.parse_args()
    name = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
    table = load_trace(name, synthetic_n=60_000)
    settings = [
        (50, 0.0, False, 32.0), (50, 0.5, False, 32.0), (100, 0.0, False, 32.0), (100, 0.5, False, 32.0),
        (20, 0.0, True, 10.0), (20, 0.5, True, 10.0),
    ]  # fmt: skip
    cols = ["best-fit", *VARIANTS]
    print(f"trace {name}, {args.episodes} episodes per cell; scheduled length, mean over episodes")
    print("| PMs | warm | releases | threshold | " + " | ".join(cols) + " |")
    print("|---" * (4 + len(cols)) + "|")
    for pms, warm, release, thr in settings:
        prepared = prepare(table, thr)
        warm_up_jit()
        sc = Scenario(pms=pms, warm_start=warm, release=release)
        cells = []
        for col in cols:
            pol = Heuristic("best-fit") if col == "best-fit" else Heuristic("industrial", VARIANTS[col])
            res, _, _ = run_episodes(pol, NumaCluster.uniform(pms), prepared, sc, args.episodes, 0)
            cells.append(f"{np.mean([r.length for r in res]):.1f}")
        print(f"| {pms} | {warm:.0%} | {'on' if release else 'off'} | {thr:g} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
