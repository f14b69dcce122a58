"""Speed and memory of the network-aware allocation simulator with every baseline, on one core.

For each baseline: one uniform episode on delta (2,560 servers, 4,096 requests, the paper's length) and one on a
topology ten times delta (25,600 servers, 40,960 requests); wall time of the episode (request generation and hold
calibration excluded), decisions per second, and the process's peak resident memory after the delta runs. Also the
structural fabric routing against the generic networkx routing on the same gamma episode (same picks, same result),
as a ratio measured in one run.

    python benchmarks/bench_netalloc.py [--scale 10] [--policies random tetris nalb nulb nalb-strict]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dcplace.bench.netalloc_runner import run_policy
from dcplace.cluster.topology import preset, scaled_delta
from dcplace.policies import get_net_policy
from dcplace.sim.netalloc import NetAllocSim
from dcplace.sim.netalloc_episodes import episode_requests, run_episode
from dcplace.sim.routing import FabricRouting, GraphRouting


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=10, help="the large topology is delta with this many times the racks")
    ap.add_argument("--policies", nargs="+", default=["random", "tetris", "nalb", "nulb", "nalb-strict"])
    args = ap.parse_args()
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d')}")  # fmt: skip
    delta = preset("delta")
    big = scaled_delta(args.scale)
    print("| topology | servers | requests | policy | acceptance | episode wall s | decisions/s |")
    print("|---|---|---|---|---|---|---|")
    for top, n in ((delta, 4096), (big, 4096 * args.scale)):
        for pol in args.policies:
            run = run_policy(top, "uniform", pol, n, episodes=1, seed=0)
            s = run.summary()
            print(f"| {top.name} | {top.n_servers:,} | {n:,} | {pol} | {s['acceptance_mean']:.3f} | "
                  f"{run.wall_s:.2f} | {s['decisions_per_s']:,.0f} |", flush=True)  # fmt: skip
        if top is delta:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"| (peak resident memory after every delta run: {peak:.0f} MB) | | | | | | |")
    gamma = preset("gamma")
    req = episode_requests(gamma, "uniform", 896, 0, 0)
    walls = {}
    results = {}
    for name, routing in (("fabric", FabricRouting(gamma)), ("networkx", GraphRouting(gamma))):
        sim = NetAllocSim(gamma, req, routing=routing)
        t0 = time.perf_counter()
        results[name] = run_episode(sim, get_net_policy("nalb-strict", 0))
        walls[name] = time.perf_counter() - t0
    same = results["fabric"].accepted_ids == results["networkx"].accepted_ids
    print(
        f"\ngamma, nalb-strict, 896 requests: fabric routing {walls['fabric']:.2f} s, networkx routing "
        f"{walls['networkx']:.2f} s ({walls['networkx'] / walls['fabric']:.1f}x); identical decisions: {same}"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of the whole process: {peak:.0f} MB")


if __name__ == "__main__":
    main()
