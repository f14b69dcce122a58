"""The compiled episode loop before the policy refactor (commit 077df60) against today's, in ONE process.

Both versions run interleaved on the same arrays, so machine load affects both alike (the only fair comparison on a
shared 2-core machine); CPU-time rates, median of 4 runs after a warm-up, and a check that both place every request
on the same machine and node. Needs the git history (a clone, not an archive).

    .venv/bin/python benchmarks/ab_kernel_refactor.py
"""

from __future__ import annotations

import importlib.util
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
    path.write_text(src)
    spec = importlib.util.spec_from_file_location("old_numa_kernel", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["old_numa_kernel"] = module
    spec.loader.exec_module(module)
    return module


def main() -> None:
    old = old_kernel()
    trace = prepare(load_trace("synthetic", seed=0), 32.0)
    print(f"before = {BEFORE}; CPU-time decisions/s, median of 4; {time.strftime('%Y-%m-%d')}")
    print("| PMs | policy | before | now | now / before | same placements |")
    print("|---|---|---|---|---|---|")
    for n in (100, 1000, 5000):
        sim = NumaSim(NumaCluster.uniform(n), trace, Scenario(pms=n, start_range=(0, 1), release=True))
        ip_old = np.zeros(old.N_IP, np.int64)
        ip_old[old.P_RELEASE] = 1
        ip_old[old.P_MAX_ACTIVE] = n
        ip_old[old.P_EXPAND_STEP] = 10
        fp_old = np.array([0.0, 1.0, 0.5, 0.25])  # warm ratio, then the industrial weights (the defaults)
        for policy in ("first-fit", "best-fit", "industrial"):
            code = H.CODES[policy]
            rates: dict[str, list[float]] = {"old": [], "new": []}
            placed: dict[str, np.ndarray] = {}
            for rep in range(5):
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


if __name__ == "__main__":
    main()
