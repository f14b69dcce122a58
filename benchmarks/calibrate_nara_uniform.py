"""How the uniform request set's size bounds were chosen under the average load read as the larger of the CPU and
memory shares (the ``uniform-max`` set, the ``paper`` setting's before the load was read as a mean; the current
calibration: ``benchmarks/calibrate_nara_load.py``; docs/netalloc.md, "Calibration"): for each upper bound
``hi`` (sizes uniform on 1..hi CPU and memory units, independently; holding periods recalibrated to the 95 % load),
the paper's four baselines on alpha and beta (5 x 128 test requests, seed 0, the ``paper`` setting), with section
5.3's statistics for Tetris and Random: the share of accepted requests kept in one rack (locality 0 or 1) and the
share spread over more than 5 servers. The shipped bound minimises the largest distance of Tetris's and Random's
acceptance to Table 1 on alpha and beta.

    OMP_NUM_THREADS=1 python benchmarks/calibrate_nara_uniform.py [--his 15 18 20 22 25 30 40 100]
"""

from __future__ import annotations

import argparse

import numpy as np

from dcplace.bench.nara_baselines import PAPER_ACCEPTANCE, TOPOLOGIES
from dcplace.bench.netalloc_runner import run_policy
from dcplace.cluster.topology import preset
from dcplace.workload import netreq

POLICIES = ("tetris", "random", "nalb", "nulb")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--his", type=int, nargs="+", default=[15, 18, 20, 22, 25, 30, 40, 100])
    ap.add_argument("--episodes", type=int, default=5)
    args = ap.parse_args()
    shipped = netreq.UNIFORM_BOUNDS["uniform-max"]
    stats = "Tetris rack-local | Tetris > 5 servers | Random rack-local | Random > 5 servers | max dist T/R"
    print("| hi | topology | " + " | ".join(f"{p} (paper)" for p in POLICIES) + f" | {stats} |")
    print("|---" * 11 + "|")
    try:
        for hi in args.his:
            netreq.UNIFORM_BOUNDS["uniform-max"] = (1, hi)
            netreq.calibrate_hold.cache_clear()
            for topo in ("alpha", "beta"):
                cells, stats, dist = [], [], 0.0
                for p in POLICIES:
                    run = run_policy(preset(topo), "uniform-max", p, 128, args.episodes, 0, setting="paper-reject")
                    acc = run.summary()["acceptance_mean"]
                    paper = PAPER_ACCEPTANCE["uniform"][p][TOPOLOGIES.index(topo)]
                    assert paper is not None
                    cells.append(f"{acc:.2f} ({paper:.2f})")
                    if p in ("tetris", "random"):
                        dist = max(dist, abs(acc - paper))
                        loc = np.concatenate([np.array(r.locality) for r in run.results])
                        spa = np.concatenate([np.array(r.servers_per_allocation) for r in run.results])
                        stats += [f"{(loc <= 1).mean():.2f}", f"{(spa > 5).mean():.3f}"]
                print(f"| {hi} | {topo} | " + " | ".join(cells) + " | " + " | ".join(stats) + f" | {dist:.3f} |",
                      flush=True)  # fmt: skip
    finally:
        netreq.UNIFORM_BOUNDS["uniform-max"] = shipped
        netreq.calibrate_hold.cache_clear()


if __name__ == "__main__":
    main()
