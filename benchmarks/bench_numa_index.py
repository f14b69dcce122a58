"""Decisions per second with and without the index over free capacity, departures included, on one core.

Huawei-East-1 (synthetic when absent) from its first request, releases on, Non-Expansion, the whole trace or until
the first unhostable request, on ``N`` uniform double-NUMA machines. For each size and heuristic the compiled episode
runs with the scan (``numa_heuristics.run_episode``) and with the index (``numa_index.run_episode_indexed``), one
after the other, ``--repeats`` times each (median reported; the first run of each also builds the index's trees and
is timed: nothing is excluded but compilation). The placements of both are compared (``same``). The scan is skipped
above ``--scan-max`` machines (it takes minutes there). Peak resident memory of the process is printed at the end.
The "index" column is what ``Heuristic.run`` does with the index allowed: first-fit keeps its scan there.

    python benchmarks/bench_numa_index.py [--sizes 1000 5000 20000 100000] [--policies best-fit first-fit industrial]
        [--clock wall|process]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import statistics
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from dcplace.cluster import NumaCluster
from dcplace.policies import numa_heuristics as H
from dcplace.policies import numa_index as NI
from dcplace.sim import NumaSim, Scenario
from dcplace.sim.episodes import prepare
from dcplace.workload import load_trace, trace_available

CLOCK = time.perf_counter
"""``--clock process``: the process's CPU time instead (less sensitive to other work on a shared machine)."""


def _episode(pol: str, sim: NumaSim, indexed: bool, repeats: int) -> tuple[float, int, np.ndarray]:
    NI.INDEX_MIN_MACHINES = 1 if indexed else 2**62
    h = H.Heuristic(pol)
    walls = []
    for _ in range(repeats):
        sim.reset(0)
        t0 = CLOCK()
        h.run(sim) if indexed else _scan_run(h, sim)
        walls.append(CLOCK() - t0)
    return statistics.median(walls), sim.result().length, sim.pm_of.copy()


def _scan_run(h: H.Heuristic, sim: NumaSim) -> None:
    t = sim.trace
    H.run_episode(
        h.code, h._w(), sim.free, sim.cap, sim.cap_prefix, sim.vm_count, sim.usable, sim.used, sim.pm_of,
        sim.node_of, sim.ctr, sim.acc, sim.chg, sim.ip, sim.fp, t.demand, t.multi, sim.oversize, t.price, t.ev_req,
        t.ev_dep,
    )  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[1000, 5000, 20000, 100000])
    ap.add_argument("--policies", nargs="+", default=["best-fit", "first-fit", "industrial"])
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--scan-max", type=int, default=20000, help="skip the scan above this many machines")
    ap.add_argument("--clock", choices=["wall", "process"], default="wall", help="process: CPU time of this process")
    args = ap.parse_args()
    global CLOCK
    CLOCK = time.process_time if args.clock == "process" else time.perf_counter
    name = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
    table = load_trace(name, synthetic_n=116_313).with_double_numa_threshold(32)
    prepared = prepare(table, 32)
    print(f"trace {name} ({len(table):,} VMs); {platform.processor() or platform.machine()}, python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M')}")  # fmt: skip
    H.warm_up_jit()
    small = NumaSim(NumaCluster.uniform(8), prepared, Scenario(pms=8, start_range=(0, 1), max_requests=50))
    for pol in args.policies:  # compile both paths outside the clock
        _episode(pol, small, True, 1)
        _episode(pol, small, False, 1)
    print("| machines | policy | decisions | scan decisions/s | index decisions/s | index / scan | same |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        sim = NumaSim(NumaCluster.uniform(n), prepared, Scenario(pms=n, start_range=(0, 1), release=True))
        for pol in args.policies:
            wi, di, pi = _episode(pol, sim, True, args.repeats)
            if n <= args.scan_max:
                ws, ds, ps = _episode(pol, sim, False, args.repeats)
                scan, ratio, same = (
                    f"{ds / ws:,.0f}",
                    f"{(di / wi) / (ds / ws):.2f}",
                    str(ds == di and np.array_equal(ps, pi)),
                )
            else:
                scan, ratio, same = "-", "-", "-"
            print(f"| {n:,} | {pol} | {di:,} | {scan} | {di / wi:,.0f} | {ratio} | {same} |", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of this process (imports, full trace, every replay above): {peak:.0f} MB")


if __name__ == "__main__":
    main()
