"""Re-optimising from a current placement (issue 14 part 1): machine cost against migrations for migration-cost
weights 0, 1 and 10 (weight x the default cost, a VM's memory in GiB rounded up).

The current placement is the best of 5 greedy runs (seed 0) with 20% of its VMs each moved to a random PM with
room (seed 1), so that it wastes machines. Each weight is solved by ``auto`` (compact from greedy runs that start
from the current placement) within the time limit; every answer is verified by the independent checker.

    OMP_NUM_THREADS=1 python benchmarks/bench_reopt.py [--instances exp2,mix1] [--time-limit 60]
"""

from __future__ import annotations

import argparse
import platform

import numpy as np

from dcplace.placement import Deadline, solve
from dcplace.placement.greedy import GreedyParams, cost_of, perturbed
from dcplace.placement.problem import load_problem, with_current


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--instances", default="exp2,mix1")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--weights", default="0,1,10")
    ap.add_argument("--fraction", type=float, default=0.2)
    args = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, 1 CP-SAT worker, time limit {args.time_limit:g} s")
    print("| instance | weight | current machine cost | machine cost | migration cost | migrations | total | bound "
          "| status | verified | wall s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for name in args.instances.split(","):
        problem = load_problem(name)
        start = solve(problem, "greedy", 60, 0, GreedyParams(runs=5))
        assert start.vm_pm is not None and start.vm_disks is not None
        vm_pm, vm_disks = perturbed(problem, start.vm_pm, [list(d) for d in start.vm_disks], args.fraction,
                                    np.random.default_rng(1))  # fmt: skip
        for w in (int(x) for x in args.weights.split(",")):
            base = with_current(problem, vm_pm, vm_disks)
            cur = with_current(problem, vm_pm, vm_disks, (w * base.migration_costs()).tolist())
            now = cost_of(cur, vm_pm)
            r = solve(cur, "auto", Deadline(args.time_limit), 0, {"workers": 1}).summary()
            parts = f"{r['machine_cost']:,} | {r['migration_cost']:,} | {r['migrations']}"
            print(f"| {name} | {w} | {now:,} | {parts} | {r['cost']:,.0f} | {r['bound']:,.0f} | {r['status']} | "
                  f"{r['verified']} | {r['wall_s']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
