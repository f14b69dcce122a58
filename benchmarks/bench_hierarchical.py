"""The paper's two-level decomposition (Tables VI and IX) against ours and the exact optimum's neighbourhood:
mix1 and mix2 with 25 x 25 random packs / swads over beta, mix1 with 50 x 50, with the paper's first level (fewest
swads) and the cost-aware one; the pattern model's answer and bound for reference. Then the deeper and better
first levels: swads from a topology (PMs shuffled into racks of 20, pods of 5 racks: two assignment levels above the
racks, repaired by pack moves) and the pattern-based first level.

    OMP_NUM_THREADS=1 python benchmarks/bench_hierarchical.py [--workers 2] [--time-limit 300]
"""

from __future__ import annotations

import argparse

from dcplace.bench.hmip import PAPER_TABLE9
from dcplace.placement import Deadline, HierarchicalParams, PatternParams, solve
from dcplace.placement.hierarchical import with_racks
from dcplace.placement.problem import INSTANCES

PAPER = PAPER_TABLE9  # (instance, packs, beta) -> (swads used, PMs used, cost), Tables VI and IX


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--time-limit", type=float, default=300)
    args = ap.parse_args()
    ref = {name: solve(INSTANCES[name], "pattern", Deadline(60), 0, PatternParams()) for name in ("mix1", "mix2")}
    for name, r in ref.items():
        print(f"{name}: pattern model {r.cost:,.0f}, bound {r.bound:,.0f}")
    print()
    print("| instance | packs x swads | beta | first level | swads used (paper) | PMs used (paper) | cost (paper) "
          "| above bound | s | verified |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for (name, packs, beta), (p_swads, p_pms, p_cost) in PAPER.items():
        for objective in ("swads", "cost"):
            opts = HierarchicalParams(workers=args.workers, packs=packs, swads=packs, beta=beta, first_level=objective)
            r = solve(INSTANCES[name], "hierarchical", Deadline(args.time_limit), 0, opts)
            if r.cost is None:
                print(f"| {name} | {packs} x {packs} | {beta} | {objective} | infeasible at this beta | | | | | |")
                continue
            above = r.cost / ref[name].bound - 1 if ref[name].bound else float("nan")
            pms = f"{r.pms_used} ({p_pms})" if p_pms else f"{r.pms_used} (-)"
            print(f"| {name} | {packs} x {packs} | {r.stats['beta']} | {objective} | {r.stats['swads_used']:.0f} "
                  f"({p_swads}) | {pms} | {r.cost:,.0f} ({p_cost:,}) | {above:+.1%} | {r.wall_s:.1f} | "
                  f"{r.verified} |", flush=True)  # fmt: skip

    print()
    print("| instance | decomposition | beta | levels | pack moves | swads used | cost | above bound | s | verified |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in ("mix1", "mix2"):
        for label, opts, problem in (
            ("topology: pods of 5 racks of 20", {"split": "topology", "beta": 0.9, "racks_per_pod": 5},
             with_racks(INSTANCES[name], 20, 0)),
            ("pattern first level, 25 swads", {"first_level": "pattern", "swads": 25}, INSTANCES[name]),
        ):  # fmt: skip
            params = HierarchicalParams.from_dict({"workers": args.workers, **opts})
            r = solve(problem, "hierarchical", Deadline(args.time_limit), 0, params)
            if r.cost is None:
                print(f"| {name} | {label} | no answer | | | | | | {r.wall_s:.1f} | |")
                continue
            above = r.cost / ref[name].bound - 1
            print(f"| {name} | {label} | {r.stats['beta']} | {r.stats.get('levels', 1):.0f} | "
                  f"{r.stats.get('pack_moves', 0):.0f} | {r.stats['swads_used']:.0f} | {r.cost:,.0f} | {above:+.1%} | "
                  f"{r.wall_s:.1f} | {r.verified} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
