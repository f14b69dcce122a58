"""The network journal's job filter, with and without the index on ``journal.job``, and what the index costs a write.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_network_journal.py [--entries 1000000] [--runs 5]
        [--writes 2000]

A network database (alpha) gets ``--entries`` journal entries written straight into its table in one transaction
(a placement and a release per job, half of them each, as a busy engine leaves them; the engine itself writes one
commit per change, which would take minutes to fill). Then, in the same run:

* a job's entries (``read_network_journal(path, job=...)``, as ``cluster journal --job`` and
  ``GET /network/journal?job=`` read them) and an event's first 1,000, median of ``--runs`` reads of jobs spread
  over the file, with the index the engine makes (``journal_job``) and after dropping it;
* ``--writes`` single-entry commits (the engine's unit: one commit per placement or release) on the full file, in six
  blocks, with and without the index in turn (the median of each block's median).

Prints medians and the ratios, with date, machine and load.
"""

from __future__ import annotations

import argparse
import os
import platform
import sqlite3
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from dcplace.engine import NetworkEngine
from dcplace.engine.network import read_network_journal


def _median_ms(runs: int, fn: Callable[[int], object]) -> float:
    times = []
    for i in range(runs):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def _writes(path: Path, n: int, start: int) -> float:
    """Median ms of ``n`` one-entry commits, as the engine makes them (WAL, synchronous=FULL)."""
    conn = sqlite3.connect(path, isolation_level=None)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=FULL")
    times = []
    for i in range(n):
        t = time.perf_counter()
        conn.execute("BEGIN IMMEDIATE")
        conn.execute("INSERT INTO journal (at, event, job, cpu, mem, bw, hold) VALUES (?, 'placed', ?, 1, 1, 1, 1)",
                     (time.time(), f"j{((start + i) * 7919) % 1_000_003}w"))  # fmt: skip  # anywhere in the index
        conn.execute("COMMIT")
        times.append(time.perf_counter() - t)
    conn.close()
    return statistics.median(times) * 1e3


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--entries", type=int, default=1_000_000)
    ap.add_argument("--runs", type=int, default=5)
    ap.add_argument("--writes", type=int, default=2000)
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.entries:,} entries")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "cluster.network.db"
        NetworkEngine.open(path, "alpha").close()  # the engine's schema, index included
        jobs = args.entries // 2
        with sqlite3.connect(path) as conn:
            conn.executemany(
                "INSERT INTO journal (at, event, job, cpu, mem, bw, hold) VALUES (?, ?, ?, 1, 1, 1, 1)",
                ((1e9 + i, "placed" if i % 2 == 0 else "released", f"j{(i // 2) % jobs}") for i in range(args.entries)),
            )
        picks = [f"j{(k * 7919) % jobs}" for k in range(args.runs)]  # spread over the file

        def by_job(i: int) -> None:
            got = read_network_journal(path, job=picks[i], limit=None)
            assert len(got) == 2, got

        def by_event(_i: int) -> None:
            assert len(read_network_journal(path, event="released", limit=1000)) == 1000

        reads = [(_median_ms(args.runs, by_job), _median_ms(args.runs, by_event))]
        writes: dict[bool, list[float]] = {True: [], False: []}
        for block in range(6):  # writes in alternating blocks, so a drift of the machine hits both alike
            indexed = block % 2 == 0
            writes[indexed].append(_writes(path, args.writes // 6, block * args.writes))
            with sqlite3.connect(path) as conn:
                conn.execute("DROP INDEX journal_job" if indexed else "CREATE INDEX journal_job ON journal (job)")
            if block == 0:
                reads.append((_median_ms(args.runs, by_job), _median_ms(args.runs, by_event)))
        labels = (("with the index", True), ("without", False))
        rows = [
            (label, job, event, statistics.median(writes[indexed]))
            for (label, indexed), (job, event) in zip(labels, reads, strict=True)
        ]
    print("| journal | a job's entries, ms | an event's first 1,000, ms | one-entry commit, ms |")
    print("|---|---|---|---|")
    for label, job, event, write in rows:
        print(f"| {label} | {job:.2f} | {event:.2f} | {write:.3f} |")
    (_, j1, e1, w1), (_, j0, e0, w0) = rows
    print(f"| ratio (with / without) | {j1 / j0:.4f} | {e1 / e0:.2f} | {w1 / w0:.2f} |")


if __name__ == "__main__":
    main()
