"""What the journal costs: placements and releases per second with it and without it (``journal_keep=0``), alternated
in pairs on the same machine, its size on disk per row, and how long reads take on a full journal.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_journal.py [--pairs 3] [--ops 2000]
        [--bulk 100000] [--rows 1000000]

- ``one at a time``: ``place`` then ``release`` from one caller, each answered once durable (an fsync each);
- ``bulk``: ``place_arrays`` of 1,000 VMs per call, ``--bulk`` VMs in all, then every release in calls of 1,000
  (``release`` one by one under one lock hold is not an API: releases go one call each, so this path times
  placements only);
- ``reads``: on a database whose journal holds ``--rows`` rows (bulk placements), one VM's entries, one machine's
  first 1,000 (a machine filter scans with its index), one event's first 1,000, and a page of 10,000.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dcplace.engine import MachineSpec, PlacementEngine, VmRequest
from dcplace.engine.journal import read_journal


def one_at_a_time(db: Path, keep: int, ops: int) -> float:
    e = PlacementEngine.open(db, journal_keep=keep)
    e.add_machines([MachineSpec(f"m{i}", 64, 256) for i in range(50)])
    e.place(VmRequest("warm", 1, 1))  # compile outside the clock
    e.release("warm")
    t0 = time.perf_counter()
    for i in range(ops // 2):
        e.place(VmRequest(f"v{i}", 1 + i % 4, 2 + i % 8), explain=False)
        e.release(f"v{i}")
    took = time.perf_counter() - t0
    e.close()
    return ops / took


def bulk(db: Path, keep: int, n: int, machines: int = 2000) -> tuple[float, int]:
    e = PlacementEngine.open(db, journal_keep=keep)
    e.add_machines([MachineSpec(f"m{i}", 64, 256) for i in range(machines)])
    e.place_arrays(["warm"], [1.0], [1.0])
    e.release("warm")
    rng = np.random.default_rng(0)
    cpu = rng.integers(1, 5, n).astype(float) / 4
    mem = rng.integers(1, 9, n).astype(float) / 4
    t0 = time.perf_counter()
    for s in range(0, n, 1000):
        e.place_arrays([f"v{i}" for i in range(s, min(n, s + 1000))], cpu[s : s + 1000], mem[s : s + 1000])
    took = time.perf_counter() - t0
    e.close()
    return n / took, db.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--pairs", type=int, default=3)
    ap.add_argument("--ops", type=int, default=2000)
    ap.add_argument("--bulk", type=int, default=100_000)
    ap.add_argument("--rows", type=int, default=1_000_000)
    a = ap.parse_args()
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {when}, {platform.node()}, Python {sys.version.split()[0]}, load {os.getloadavg()[0]:.2f}")
    with tempfile.TemporaryDirectory(dir=os.environ.get("BENCH_DIR")) as d:
        tmp = Path(d)
        rates: dict[str, list[float]] = {"on": [], "off": []}
        bulks: dict[str, list[float]] = {"on": [], "off": []}
        sizes: dict[str, int] = {}
        for p in range(a.pairs):
            for name, keep in (("on", 1_000_000), ("off", 0)) if p % 2 == 0 else (("off", 0), ("on", 1_000_000)):
                rates[name].append(one_at_a_time(tmp / f"one-{name}-{p}.db", keep, a.ops))
                rate, size = bulk(tmp / f"bulk-{name}-{p}.db", keep, a.bulk)
                bulks[name].append(rate)
                sizes[name] = size
        for title, r in (("one at a time (place + release, ops/s)", rates), ("bulk placements (VMs/s)", bulks)):
            ratios = [on / off for on, off in zip(r["on"], r["off"], strict=True)]
            on, off = r["on"], r["off"]
            print(f"{title}: journal on {statistics.median(on):,.0f} [{min(on):,.0f}-{max(on):,.0f}], off "
                  f"{statistics.median(off):,.0f} [{min(off):,.0f}-{max(off):,.0f}]; on/off per pair median "
                  f"{statistics.median(ratios):.3f} [{min(ratios):.3f}-{max(ratios):.3f}]")  # fmt: skip
        rows = a.bulk + 2000  # every placement and the machines added
        print(
            f"size on disk after {a.bulk:,} bulk placements: {sizes['on'] / 1e6:.1f} MB with the journal, "
            f"{sizes['off'] / 1e6:.1f} MB without: {(sizes['on'] - sizes['off']) / rows:.0f} bytes per journal row"
        )
        big = tmp / "big.db"
        t0 = time.perf_counter()
        bulk(big, a.rows + 10_000, a.rows, machines=max(2000, a.rows // 200))
        print(
            f"a journal of {a.rows:,} rows built in {time.perf_counter() - t0:.1f} s, "
            f"{big.stat().st_size / 1e6:.0f} MB on disk"
        )
        for label, kw in (("one VM's entries", {"vm": f"v{a.rows // 2}"}),
                          ("one machine's first 1,000", {"machine": "m7", "limit": 1000}),
                          ("one event's first 1,000", {"event": "placed", "limit": 1000}),
                          ("a page of 10,000 from the middle", {"after": a.rows // 2, "limit": 10_000}),
                          ("a machine with no entries", {"machine": "none", "limit": 1000})):  # fmt: skip
            times = []
            for _ in range(5):
                t0 = time.perf_counter()
                got = read_journal(big, **kw)  # type: ignore[arg-type]
                times.append(time.perf_counter() - t0)
            print(
                f"read {label}: {len(got):,} entries, median {statistics.median(times) * 1000:.1f} ms "
                f"[{min(times) * 1000:.1f}-{max(times) * 1000:.1f}]"
            )


if __name__ == "__main__":
    main()
