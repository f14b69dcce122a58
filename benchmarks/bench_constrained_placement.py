"""Placement constraints in the exact models (issue 18): ``flat`` (the paper's formulation, what ``auto`` ran for a
constrained problem before) against ``compact`` with counts per class (what ``auto`` runs now up to 200 PMs), on
seeded constrained variants of the paper's instances.

    OMP_NUM_THREADS=1 python benchmarks/bench_constrained_placement.py [--time-limit 30] [--instances exp1,exp2]
        [--seeds 0,1] [--methods flat,compact]

A variant puts the PMs into racks of ``--rack-size`` (in order) and adds, drawn from the seed over the VM numbers:
two rack-level colocation groups of 3 VMs, one PM-level colocation pair, a PM-level anti-colocation of 4 single
VMs, a rack-level anti-colocation of two sets of 2, and a spread of 4 VMs over at least 2 racks with at most 2 per
rack. One row per instance x seed x method; every answer is checked by the independent checker.
"""

from __future__ import annotations

import argparse
import os
import time
from dataclasses import replace

import numpy as np

from dcplace.placement import Constraint, Deadline, Problem, load_problem, solve


def constrained(problem: Problem, seed: int, rack_size: int) -> Problem:
    """``problem`` with racks of ``rack_size`` PMs and the seeded constraints of the module docstring."""
    rng = np.random.default_rng(seed)
    vms = rng.permutation(problem.n_vms).tolist()
    take = iter(vms)

    def pick(k: int) -> tuple[int, ...]:
        return tuple(next(take) for _ in range(k))

    cons = (
        Constraint("colocate", "rack", (pick(3),)),
        Constraint("colocate", "rack", (pick(3),)),
        Constraint("colocate", "pm", (pick(2),)),
        Constraint("anti-colocate", "pm", tuple((i,) for i in pick(4))),
        Constraint("anti-colocate", "rack", (pick(2), pick(2))),
        Constraint("spread", "rack", (pick(4),), 2, 2),
    )
    racks = tuple(j // rack_size for j in range(problem.n_pms))
    return replace(problem, name=f"{problem.name}-c{seed}", racks=racks, constraints=cons)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=30.0)
    ap.add_argument("--instances", default="exp1,exp2")
    ap.add_argument("--seeds", default="0,1")
    ap.add_argument("--rack-size", type=int, default=5)
    ap.add_argument("--methods", default="flat,compact", help="any of flat, compact, auto, greedy")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f}, one "
          f"worker, time limit {args.time_limit:g} s")  # fmt: skip
    print("| instance | VMs x PMs | method | status | cost | bound | verified | wall s |")
    print("|---|---|---|---|---|---|---|---|")
    for name in args.instances.split(","):
        for seed in (int(s) for s in args.seeds.split(",")):
            problem = constrained(load_problem(name), seed, args.rack_size)
            for method in args.methods.split(","):
                r = solve(problem, method, Deadline(args.time_limit), seed, {"workers": 1})
                cost = "-" if r.cost is None else f"{r.cost:,.0f}"
                bound = "-" if r.bound is None else f"{r.bound:,.0f}"
                print(f"| {problem.name} | {problem.n_vms} x {problem.n_pms} | {method} | {r.status} | {cost} | "
                      f"{bound} | {r.verified} | {r.wall_s:.1f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
