"""Speed and memory of the network-aware allocation simulator with every baseline, on one core.

For each baseline: one uniform episode on delta (2,560 servers, 4,096 requests, the paper's length) and one on a
topology ten times delta (25,600 servers, 40,960 requests); wall time of the episode (request generation and hold
calibration excluded), decisions per second, and the process's peak resident memory after the delta runs. Also the
structural fabric routing against the generic networkx routing on the same gamma episode (same picks, same result),
as a ratio measured in one run. ``--setting`` names the environment's reading
(:data:`dcplace.sim.netalloc_episodes.SETTINGS`: candidate paths, what ``uniform`` and a policy name draw, whether
NALB / NULB route on their own paths, what happens when the cluster is full), for the episodes and for the routing
comparison alike; ``paper`` is the library's default.

    python benchmarks/bench_netalloc.py [--setting paper] [--scale 10] [--policies random tetris nalb nulb nalb-strict]

``--scale 0`` runs delta only.
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
from dcplace.sim.netalloc_episodes import SETTINGS, episode_requests, get_setting, run_episode
from dcplace.sim.routing import FabricRouting, GraphRouting


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--setting", choices=list(SETTINGS), default="paper", help="the environment's reading")
    ap.add_argument("--scale", type=int, default=10,
                    help="the large topology is delta with this many times the racks (0: delta only)")  # fmt: skip
    ap.add_argument("--policies", nargs="+", default=["random", "tetris", "nalb", "nulb", "nalb-strict"])
    args = ap.parse_args()
    env = get_setting(args.setting)
    print(f"{platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, setting {env.name}, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    delta = preset("delta")
    tops = [(delta, 4096)] + ([(scaled_delta(args.scale), 4096 * args.scale)] if args.scale > 0 else [])
    print("| topology | servers | requests | policy | acceptance | episode wall s | decisions/s |")
    print("|---|---|---|---|---|---|---|")
    for top, n in tops:
        for pol in args.policies:
            run = run_policy(top, "uniform", pol, n, episodes=1, seed=0, setting=env.name)
            s = run.summary()
            print(f"| {top.name} | {top.n_servers:,} | {n:,} | {pol} | {s['acceptance_mean']:.3f} | "
                  f"{run.wall_s:.2f} | {s['decisions_per_s']:,.0f} |", flush=True)  # fmt: skip
        if top is delta:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
            print(f"| (peak resident memory after every delta run: {peak:.0f} MB) | | | | | | |")
    gamma = preset("gamma")
    req = episode_requests(gamma, env.dataset("uniform"), 896, 0, 0)
    walls = {}
    results = {}
    for name, routing in (
        ("fabric", FabricRouting(gamma, paths=env.paths)),
        ("networkx", GraphRouting(gamma, paths=env.paths)),
    ):
        sim = NetAllocSim(gamma, req, routing=routing, on_full=env.on_full)
        t0 = time.perf_counter()
        results[name] = run_episode(sim, get_net_policy(env.policy("nalb-strict"), 0))
        walls[name] = time.perf_counter() - t0
    same = results["fabric"].accepted_ids == results["networkx"].accepted_ids
    print(
        f"\ngamma, nalb-strict, 896 requests, {env.paths} paths: fabric routing {walls['fabric']:.2f} s, networkx "
        f"routing {walls['networkx']:.2f} s ({walls['networkx'] / walls['fabric']:.1f}x); identical decisions: {same}"
    )
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"peak resident memory of the whole process: {peak:.0f} MB; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
