"""Topology-aware batch placement on the Huawei dataset: servers used against the proven bound for sequences C1-C4
and the held-out sequences (``huawei-heldout-1`` .. ``-4``, drawn by ``dcplace.placement.numa_generator`` and never
tuned on), every constraint verified by the independent checker.

    OMP_NUM_THREADS=1 python benchmarks/bench_huawei_placement.py [--method auto] [--time-limit 60]
        [--instances huawei-c1,...,huawei-heldout-4] [--records out.jsonl]

One row per instance; ``--records`` also writes one JSON record per instance (the ``solve --json`` record plus the
method's stats: the pattern model's LP value, the unconstrained integer optimum, phase timings).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

from dcplace.placement import Deadline, load_numa_batch, solve
from dcplace.placement.numa_batch import summary_of
from dcplace.placement.numa_generator import describe

DEFAULT = ",".join([f"huawei-c{c}" for c in (1, 2, 3, 4)] + [f"huawei-heldout-{n}" for n in (1, 2, 3, 4)])


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--method", default="auto", help="auto (the pattern model), pattern or relaxation-guided")
    ap.add_argument("--time-limit", type=float, default=60.0)
    ap.add_argument("--instances", default=DEFAULT)
    ap.add_argument("--records", default=None, help="a JSON-lines file for the records")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.2f}, one thread, method {args.method}, "
          f"time limit {args.time_limit:g} s")  # fmt: skip
    print(
        "| instance | servers | VMs | double-NUMA | constrained | aff / anti / fd groups | servers used | bound "
        "| above bound | unconstrained optimum | verified | wall s |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    out = open(args.records, "a", encoding="utf-8") if args.records else None
    for spec in args.instances.split(","):
        batch = load_numa_batch(spec)
        d = describe(batch)
        res = solve(batch, args.method, Deadline(args.time_limit))
        r = summary_of(res)
        g = r["constraints"]
        above = r["pms_used"] / r["bound"] - 1 if r["bound"] else float("nan")
        print(f"| {spec} | {d['servers']:,} | {r['vms']:,} | {d['double_numa']:.2f} | {d['constrained']:.2f} | "
              f"{g['affinity']} / {g['anti-affinity']} / {g['fault_domain']} | {r['pms_used']} | "
              f"{r['bound']}{'' if r['bound_proven'] else ' (not proven)'} | {above:+.2%} | "
              f"{res.stats.get('unconstrained_servers', '-')} | {r['verified']} | {r['wall_s']:.1f} |",
              flush=True)  # fmt: skip
        if out is not None:
            stats = {k: v for k, v in res.stats.items() if k not in r}
            out.write(json.dumps({**r, **stats, "sequence": d, "load": os.getloadavg()[0]}) + "\n")
            out.flush()
    if out is not None:
        out.close()


if __name__ == "__main__":
    main()
