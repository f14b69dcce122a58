"""The compiled episode loop before the policy refactor (commit 077df60) against today's, in ONE process.

Both versions run interleaved on the same arrays, so machine load affects both alike (the only fair comparison on a
shared 2-core machine); CPU-time rates, median of ``--repeats`` runs after a warm-up, and a check that both place
every request on the same machine and node. Needs the git history (a clone, not an archive).

Rates are decisions per second (higher is faster); "now / before" is today's rate over 077df60's, so below 1 means
today's loop is slower. Both sides run the scan loop (``run_episode``) at every size: today's compiled episodes from
512 machines go through the capacity index instead (``Heuristic.run``, benchmarks/bench_numa_index.py), which this
script does not time.

    .venv/bin/python benchmarks/ab_kernel_refactor.py [--sizes 100 1000 5000] [--repeats 4]
        [--policies first-fit best-fit industrial]
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.cluster import NumaCluster
from dcplace.policies import numa_heuristics as H
from dcplace.sim import NumaSim, Scenario
from dcplace.sim.episodes import prepare
from dcplace.workload.traces import load_trace

BEFORE = "077df60"


def old_kernel() -> Any:
    src = subprocess.run(["git", "show", f"{BEFORE}:src/dcplace/sim/numa_kernel.py"], capture_output=True,
                         text=True, check=True, cwd=Path(__file__).parent).stdout  # fmt: skip
    path = Path(tempfile.mkdtemp()) / "old_numa_kernel.py"
    path.write_text(src, encoding="utf-8")
    spec = importlib.util.spec_from_file_location("old_numa_kernel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_numa_kernel"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000], help="cluster sizes (machines)")
    ap.add_argument("--repeats", type=int, default=4, help="timed runs per version (after one untimed warm-up)")
    ap.add_argument("--policies", nargs="+", choices=["first-fit", "best-fit", "industrial"],
                    default=["first-fit", "best-fit", "industrial"])  # fmt: skip
    args = ap.parse_args()
    if args.repeats < 1:
        ap.error("--repeats must be at least 1")
    old = old_kernel()
    trace = prepare(load_trace("synthetic", seed=0), 32.0)
    print(f"before = {BEFORE}; CPU-time decisions/s (higher is faster), median of {args.repeats}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print("| PMs | policy | before | now | now / before | same placements |")
    print("|---|---|---|---|---|---|")
    for n in args.sizes:
        sim = NumaSim(NumaCluster.uniform(n), trace, Scenario(pms=n, start_range=(0, 1), release=True))
        ip_old = np.zeros(old.N_IP, np.int64)
        ip_old[old.P_RELEASE] = 1
        ip_old[old.P_MAX_ACTIVE] = n
        ip_old[old.P_EXPAND_STEP] = 10
        fp_old = np.array([0.0, 1.0, 0.5, 0.25])  # warm ratio, then the industrial weights (the defaults)
        for policy in args.policies:
            code = H.CODES[policy]
            rates: dict[str, list[float]] = {"old": [], "new": []}
            placed: dict[str, np.ndarray] = {}
            for rep in range(args.repeats + 1):
                for which in ("old", "new"):
                    sim.reset(0)
                    free, count, used, pm_of, node_of, ctr, acc = (
                        x.copy() for x in (sim.free, sim.vm_count, sim.used, sim.pm_of, sim.node_of, sim.ctr, sim.acc)
                    )
                    t = trace
                    t0 = time.process_time()
                    if which == "old":
                        old.run_episode(code, free, sim.cap, sim.cap_prefix, count, used, pm_of, node_of, ctr,
                                        acc, ip_old, fp_old, t.demand, t.multi, sim.oversize, t.price, t.ev_req,
                                        t.ev_dep)  # fmt: skip
                    else:
                        H.run_episode(code, H.DEFAULT_WEIGHTS, free, sim.cap, sim.cap_prefix, count, sim.usable, used,
                                      pm_of, node_of, ctr, acc, sim.chg.copy(), sim.ip, sim.fp, t.demand, t.multi,
                                      sim.oversize, t.price, t.ev_req, t.ev_dep)  # fmt: skip
                    dt = time.process_time() - t0
                    if rep > 0:
                        rates[which].append(ctr[old.C_LENGTH] / dt)
                    placed[which] = np.stack([pm_of, node_of])
            o, w = float(np.median(rates["old"])), float(np.median(rates["new"]))
            same = np.array_equal(placed["old"], placed["new"])
            print(f"| {n:,} | {policy} | {o:,.0f} | {w:,.0f} | {w / o:.2f} | {'yes' if same else 'NO'} |", flush=True)
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
