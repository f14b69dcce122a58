"""What ``dcplace compare cluster`` costs on a big cluster: reading the state from its database, starting each window
from it, and playing the window.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_compare_cluster.py [--sizes 200:4000 2000:40000]
        [--requests 2000] [--windows 3] [--policies best-fit first-fit] [--json]

For each size ``MACHINES:VMS``: a database of that many double-NUMA machines (40 cores / 90 GB per node) holding that
many VMs (1-8 cores, 2-32 GB, best-fit; those that fit), written with the public API; then timed:
``PlacementEngine.read_snapshot`` (the online backup and its load), ``PlacementEngine.restore`` of the snapshot (once
per comparison), ``PlacementEngine.copy`` of the restored engine (what every window starts from), and
``compare_cluster`` of the policies on ``--windows`` windows of ``--requests`` requests of the synthetic trace (the
whole command's work, the trace read once). Peak memory of the process is printed at the end (``ru_maxrss``).
"""

from __future__ import annotations

import argparse
import json
import platform
import resource
import tempfile
import time
from pathlib import Path

import numpy as np

from dcplace.bench.compare import compare_cluster
from dcplace.engine import MachineSpec, PlacementEngine


def write_cluster(path: Path, machines: int, vms: int, seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    engine = PlacementEngine.open(path)
    engine.add_machines([MachineSpec(f"pm-{m}", 40, 90, rack=f"r{m // 40}") for m in range(machines)])
    cpu = rng.choice([1.0, 2.0, 4.0, 8.0], vms)
    mem = cpu * rng.choice([2.0, 4.0], vms)
    engine.place_arrays([f"vm-{i}" for i in range(vms)], cpu, mem, np.zeros(vms, np.bool_))
    engine.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sizes", nargs="+", default=["200:4000", "2000:40000"], help="MACHINES:VMS")
    ap.add_argument("--requests", type=int, default=2000)
    ap.add_argument("--windows", type=int, default=3)
    ap.add_argument("--policies", nargs="+", default=["best-fit", "first-fit"])
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    rows = []
    for size in a.sizes:
        machines, vms = (int(x) for x in size.split(":"))
        with tempfile.TemporaryDirectory() as tmp:
            db = Path(tmp) / "c.db"
            write_cluster(db, machines, vms)
            t0 = time.perf_counter()
            snap = PlacementEngine.read_snapshot(db)
            read_s = time.perf_counter() - t0
        placed = len(snap["vms"])
        t0 = time.perf_counter()
        start = PlacementEngine.restore(snap)
        restore_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        start.copy()
        copy_s = time.perf_counter() - t0
        t0 = time.perf_counter()
        table = compare_cluster(a.policies, snap, "synthetic", a.requests, a.windows)
        compare_s = time.perf_counter() - t0
        runs = len(a.policies) * a.windows
        rows.append({"machines": machines, "vms": placed, "read_s": read_s, "restore_s": restore_s, "copy_s": copy_s,
                     "compare_s": compare_s, "per_window_s": compare_s / runs,
                     "accepted": {r.policy: r.mean.mean for r in table.rows}})  # fmt: skip
    peak_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    if a.json:
        print(json.dumps({"rows": rows, "peak_mb": peak_mb, "machine": platform.node()}))
        return
    print(f"{len(a.policies)} policies x {a.windows} windows of {a.requests} requests (synthetic trace)")
    print("| machines | VMs | read_snapshot | restore | copy | compare_cluster | per window |")
    print("|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['machines']:,} | {r['vms']:,} | {r['read_s']:.2f} s | {r['restore_s']:.3f} s | "
              f"{r['copy_s'] * 1000:.1f} ms | {r['compare_s']:.1f} s | {r['per_window_s']:.2f} s |")  # fmt: skip
    print(f"peak memory {peak_mb:,.0f} MB")


if __name__ == "__main__":
    main()
