"""The JSON of a listing of many VMs, two ways, in one run: a dictionary per VM and ``json.dumps`` (the service until
2026-11-28) against the rows written as text directly (``dcplace.service.answers.vm_rows_json``, today's).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_listing_json.py [--vms 100000] [--repeats 7]

The VMs' columns are taken as the service takes them (``VmListing.columns``, 1,000 at a time); both ways are timed
alternately, ``--repeats`` times each, and the medians and the median of the paired ratios printed. Both must give
the same bytes (checked).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import time

import numpy as np

from dcplace.engine import MachineSpec, PlacementEngine
from dcplace.service.answers import vm_rows_json


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vms", type=int, default=100_000)
    ap.add_argument("--repeats", type=int, default=7)
    a = ap.parse_args()
    e = PlacementEngine(2)
    e.add_machines([MachineSpec(f"pm{i}", 4096, 1 << 20) for i in range(max(1, a.vms // 1000))])
    e.place_arrays([f"ns/vm-{i:07d}" for i in range(a.vms)], np.full(a.vms, 0.5), np.full(a.vms, 2.25),
                   np.arange(a.vms) % 9 == 0)  # fmt: skip
    chunks = list(e.vm_listing().columns(1000))

    def dicts() -> str:
        return ", ".join(json.dumps([{"id": i, "machine": m, "node": k, "cpu": x, "mem": g, "multi": z, "pinned": p,
                                      "uid": u} for i, m, k, x, g, z, p, u in zip(*c, strict=True)])[1:-1]
                         for c in chunks)  # fmt: skip

    def text() -> str:
        return ", ".join(vm_rows_json(c) for c in chunks)

    assert dicts() == text()
    times: dict[str, list[float]] = {"dicts": [], "text": []}
    for _ in range(a.repeats):
        for name, f in (("dicts", dicts), ("text", text)):
            t0 = time.perf_counter()
            f()
            times[name].append(time.perf_counter() - t0)
    ratio = statistics.median(d / t for d, t in zip(times["dicts"], times["text"], strict=True))
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, load {os.getloadavg()[0]:.1f}")
    print(f"{a.vms:,} VMs: dictionaries + json.dumps {statistics.median(times['dicts']):.3f} s, text "
          f"{statistics.median(times['text']):.3f} s (medians of {a.repeats}); paired ratio {ratio:.2f}x")  # fmt: skip


if __name__ == "__main__":
    main()
