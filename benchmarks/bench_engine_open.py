"""What opening a cluster database and one placement cost: the checks at open (2026-11-28: read-only look at an
existing file, schema version, SQLite's integrity check, one write) and the id rule on every placement.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_engine_open.py [--vms 200000] [--places 20000]
        [--db PATH] [--json]

Builds (once, at ``--db``, default a file in the temp folder named by the sizes) a database of ``--machines``
double-NUMA machines and ``--vms`` live VMs, then times ``PlacementEngine.open`` + ``close`` of it, and
``--places`` in-memory ``place`` + ``release`` pairs (best-fit, no explanation) with ids like ``ns/pod-123``. Only
the public API is used, so the same file times any version of the code: run it with ``PYTHONPATH`` pointing at
each version's ``src`` in turn and compare the medians as ratios measured in one session (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import tempfile
import time
from pathlib import Path

from dcplace.engine import PlacementEngine, VmRequest


def build(path: Path, machines: int, vms: int) -> None:
    e = PlacementEngine.open(path)
    for m in range(machines):
        e.add_machine(f"m{m}", [64, 64], [256, 256])
    for start in range(0, vms, 10_000):
        e.place_batch([VmRequest(f"ns/vm-{i}", 0.25, 0.5) for i in range(start, min(start + 10_000, vms))])
    e.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", type=int, default=2_000)
    ap.add_argument("--vms", type=int, default=200_000)
    ap.add_argument("--places", type=int, default=20_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--db", type=Path, default=None)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    db = a.db or Path(tempfile.gettempdir()) / f"dcplace-open-{a.machines}-{a.vms}.db"
    if not db.exists():
        build(db, a.machines, a.vms)
    opens = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        PlacementEngine.open(db).close()
        opens.append(time.perf_counter() - t0)
    e = PlacementEngine()
    for m in range(64):
        e.add_machine(f"m{m}", [64, 64], [256, 256])
    reqs = [VmRequest(f"ns/pod-{i}", 1.0, 2.0) for i in range(a.places)]
    e.place(VmRequest("warm", 1.0, 2.0), explain=False)  # compiled before the clock
    e.release("warm")
    rates = []
    for _ in range(a.repeats):
        t0 = time.perf_counter()
        for r in reqs:
            e.place(r, explain=False)
            e.release(r.id)
        rates.append(a.places / (time.perf_counter() - t0))
    out = {"db": str(db), "db_mb": round(db.stat().st_size / 2**20, 1), "open_s": round(statistics.median(opens), 3),
           "place_release_per_s": round(statistics.median(rates))}  # fmt: skip
    print(json.dumps(out) if a.json else "  ".join(f"{k} {v}" for k, v in out.items()))


if __name__ == "__main__":
    main()
