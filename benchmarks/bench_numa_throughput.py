"""Decisions per second of the NUMA simulator, departures included, on one core.

For each cluster size: First-Fit and Best-Fit replay Huawei-East-1 (synthetic when absent) from its first
request with releases on, Non-Expansion, until the first unhostable request or the end of the trace. The
compiled kernel is timed after a warm-up: before any clock starts, a short untimed episode of each policy at each
size runs every timed path (the compiled loop, the capacity index from 512 machines, the step API), first in a
child process, which compiles them into numba's cache, then in this one, which only loads them; so a first run
with an empty cache measures what a cached run does (compilation excluded, and no compiler left in this process).
The object-per-machine reference simulator (VMAgent's design, ``dcplace.sim.reference``) replays the same trace for
the same first decisions in the same run, and the ratio is reported. Also: the step-by-step API (what Gymnasium and
Python policies use), and peak memory of the process.

    python benchmarks/bench_numa_throughput.py [--sizes 50 100 500 1000 5000] [--ref-decisions 3000]
"""

from __future__ import annotations

import argparse
import gc
import os
import platform
import resource
import subprocess
import sys
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from dcplace.cluster import NumaCluster
from dcplace.policies import get_policy
from dcplace.policies.numa_heuristics import Heuristic, warm_up_jit
from dcplace.sim import NumaSim, Scenario
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import prepare
from dcplace.sim.numa import PreparedTrace
from dcplace.sim.reference import reference_episode
from dcplace.workload import RequestTable, load_trace, trace_available

WARM_REQUESTS = 2_000
"""Scored placements of each untimed warm-up episode."""


def warm_up(table: RequestTable, prepared: PreparedTrace, sizes: list[int], ref_max_pms: int) -> None:
    """Compile (or load from numba's cache) every timed path outside the clocks: the heuristics' compiled choices,
    then for each size and policy a short episode through the compiled loop (``Policy.run``, which takes the capacity
    index from :data:`~dcplace.policies.numa_index.INDEX_MIN_MACHINES` machines) and through the step API, and a few
    reference decisions. Then a full collection and ``gc.freeze()``, so the collector skips what the warm-up and the
    imports left behind during the timed runs."""
    warm_up_jit()
    for n in sorted(set(sizes)):
        sc = Scenario(pms=n, start_range=(0, 1), release=True, max_requests=WARM_REQUESTS)
        for pol in ("first-fit", "best-fit"):
            sim = NumaSim(NumaCluster.uniform(n), prepared, sc)
            sim.reset(0)
            get_policy(pol).run(sim)
            sim.reset(0)
            h = Heuristic(pol)
            for _ in range(WARM_REQUESTS):
                if sim.step(h.choose(sim.view())) != K.DECIDE:
                    break
            if n <= ref_max_pms:
                reference_episode(table, n, pol, limit=20, vmagent_checks=True)
    gc.collect()
    gc.freeze()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 100, 500, 1000, 5000])
    ap.add_argument("--ref-decisions", type=int, default=3000, help="decisions replayed by the reference")
    ap.add_argument("--ref-max-pms", type=int, default=1000, help="skip the (slow) reference above this size")
    ap.add_argument("--warm-up-only", action="store_true", help=argparse.SUPPRESS)  # the child that fills the cache
    args = ap.parse_args()
    name = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
    table = load_trace(name, synthetic_n=116_313).with_double_numa_threshold(32)
    prepared = prepare(table, 32)
    if args.warm_up_only:
        warm_up(table, prepared, args.sizes, args.ref_max_pms)
        return
    subprocess.run([sys.executable, __file__, *sys.argv[1:], "--warm-up-only"], check=True)
    print(f"trace {name} ({len(table):,} VMs); {platform.processor() or platform.machine()}, python "
          f"{platform.python_version()}, {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    warm_up(table, prepared, args.sizes, args.ref_max_pms)
    head = "PMs | policy | decisions | kernel decisions/s | step API decisions/s | reference decisions/s"
    print(f"| {head} | kernel / reference |")
    print("|---|---|---|---|---|---|---|")
    for n in args.sizes:
        cluster = NumaCluster.uniform(n)
        sc = Scenario(pms=n, start_range=(0, 1), release=True)
        for pol in ("first-fit", "best-fit"):
            sim = NumaSim(cluster, prepared, sc)
            sim.reset(0)
            t0 = time.perf_counter()
            get_policy(pol).run(sim)
            wall = time.perf_counter() - t0
            dec = sim.result().length
            # step API on the first decisions
            sim.reset(0)
            steps = min(dec, 20_000)
            h = Heuristic(pol)
            t0 = time.perf_counter()
            for _ in range(steps):
                if sim.step(h.choose(sim.view())) != K.DECIDE:
                    break
            step_rate = steps / (time.perf_counter() - t0)
            ref_rate = float("nan")
            if n <= args.ref_max_pms:
                t0 = time.perf_counter()
                got = reference_episode(table, n, pol, limit=args.ref_decisions, vmagent_checks=True)
                ref_rate = len(got) / (time.perf_counter() - t0)
            rate = dec / wall
            print(f"| {n} | {pol} | {dec:,} | {rate:,.0f} | {step_rate:,.0f} | "
                  f"{'-' if np.isnan(ref_rate) else f'{ref_rate:,.0f}'} | "
                  f"{'-' if np.isnan(ref_rate) else f'{rate / ref_rate:,.0f}x'} |")  # fmt: skip
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of this process (imports, full trace, all replays): {peak:.0f} MB; "
          f"load average {os.getloadavg()[0]:.2f}")  # fmt: skip


if __name__ == "__main__":
    main()
