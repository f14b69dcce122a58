"""Re-optimisation through the live engine at the issue's size: 10,000 live VMs on 1,000 machines.

The cluster: 1,000 machines of 2 NUMA nodes x (40 cores, 90 GB); VMs drawn from the synthetic Huawei-shaped trace
(VMs above 32 GB span both nodes), placed by first-fit until 20,000 are live, then a random half released (a
fragmented cluster of 10,000 VMs). Then, on a copy of that state for each row:

* one re-optimisation event (``PlacementEngine.reoptimise``) at migration-cost weights 0 and 1, with the covering
  bound and with the typed relaxation's bound (SCIP): the optimiser's target, the migration plan, both independent
  checks and the execution, timed as one call;
* draining and failing the machine with the most VMs (``PlacementEngine.evacuate``).

    OMP_NUM_THREADS=1 python benchmarks/bench_reopt_engine.py [--machines 1000] [--vms 10000]
"""

from __future__ import annotations

import argparse
import platform
import time

import numpy as np

from dcplace.engine import PlacementEngine, ReoptPolicy, VmRequest
from dcplace.workload.traces import load_trace


def build(machines: int, vms: int, seed: int = 0) -> PlacementEngine:
    """First-fit until ``2 vms`` VMs are live (or nothing fits), then release a random half: a fragmented
    cluster of ``vms`` VMs."""
    table = load_trace("synthetic", seed=seed, synthetic_n=4 * vms)
    rng = np.random.default_rng(seed)
    e = PlacementEngine(2, "first-fit")
    for m in range(machines):
        e.add_machine(f"pm{m}", 40, 90)
    live: list[str] = []
    for i in range(len(table.cpu)):
        if len(live) == 2 * vms:
            break
        mem = float(table.mem[i])
        d = e.place(VmRequest(f"v{i}", float(table.cpu[i]), mem, mem > 32), explain=False)
        if d.accepted:
            live.append(d.vm)
    for j in rng.permutation(len(live))[: len(live) - vms]:
        e.release(live[int(j)])
    return e


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", type=int, default=1000)
    ap.add_argument("--vms", type=int, default=10_000)
    args = ap.parse_args()
    base = build(args.machines, args.vms)
    snap = base.snapshot()
    s = base.stats()
    print(f"# {platform.processor() or platform.machine()}, {s['vms']:,} VMs on {s['machines_in_use']:,} of "
          f"{args.machines:,} machines (first-fit, then half released)")  # fmt: skip
    print("| event | machines before -> after | bound | moves | staging | GB moved | solve s | plan s | check s "
          "| whole call s | verified |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    rows = [(f"re-optimise, weight {w:g}, {'relaxation' if b else 'covering'} bound",
             ReoptPolicy(migration_weight=w, bound=b, time_limit_s=30.0))
            for w in (0.0, 1.0) for b in (False, True)]  # fmt: skip
    for name, pol in rows:
        e = PlacementEngine.restore(snap, "first-fit")
        t0 = time.perf_counter()
        r = e.reoptimise(pol)
        wall = time.perf_counter() - t0
        e.check_invariants()
        print(f"| {name} | {r.machines_before} -> {r.machines_after} | {r.bound} | {r.applied:,} | {r.staging} | "
              f"{r.gb_moved:,.0f} | {r.solve_s:.2f} | {r.plan_s:.2f} | {r.check_s:.2f} | {wall:.2f} "
              f"| {r.verified} |")  # fmt: skip
    busy = max(base.machines(), key=lambda m: m.vms)
    for failed in (False, True):
        e = PlacementEngine.restore(snap, "first-fit")
        t0 = time.perf_counter()
        r = e.evacuate(busy.id, failed=failed)
        wall = time.perf_counter() - t0
        e.check_invariants()
        what = f"{'fail' if failed else 'drain'} {busy.id} ({busy.vms} VMs)"
        print(f"| {what} | {r.machines_before} -> {r.machines_after} | - | {r.applied:,} | {r.staging} | "
              f"{r.gb_moved:,.0f} | - | {r.plan_s:.2f} | {r.check_s:.2f} | {wall:.2f} | {r.verified} |")  # fmt: skip


if __name__ == "__main__":
    main()
