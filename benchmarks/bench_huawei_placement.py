"""Topology-aware batch placement on the Huawei dataset: servers used against the typed relaxation's bound for
sequences C1-C4, every constraint verified by the independent checker.

    OMP_NUM_THREADS=1 python benchmarks/bench_huawei_placement.py [--time-limit 300] [--sequences 1,2,3,4]
"""

from __future__ import annotations

import argparse
import platform

from dcplace.placement import Deadline, load_numa_batch, solve
from dcplace.placement.numa_batch import summary_of


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--time-limit", type=float, default=300.0)
    ap.add_argument("--sequences", default="1,2,3,4")
    args = ap.parse_args()
    print(f"# {platform.processor() or platform.machine()}, one thread, time limit {args.time_limit:g} s")
    print(
        "| sequence | VMs | affinity / anti-affinity / fault-domain groups | servers used | bound | used / bound "
        "| verified | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for c in args.sequences.split(","):
        r = summary_of(solve(load_numa_batch(f"huawei-c{c}"), "relaxation-guided", Deadline(args.time_limit)))
        g = r["constraints"]
        print(f"| C{c} | {r['vms']:,} | {g['affinity']} / {g['anti-affinity']} / {g['fault_domain']} | "
              f"{r['pms_used']} | {r['bound']}{'' if r['bound_proven'] else ' (not proven)'} | "
              f"{r['pms_used'] / r['bound']:.3f} | {r['verified']} | {r['wall_s']:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
