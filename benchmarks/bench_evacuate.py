"""One evacuation of one machine (a drain, then a failure) on a large in-memory cluster, after a third of its VMs
left (fragmented):

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 [PYTHONPATH=<version>/src] python benchmarks/bench_evacuate.py 4000 1000000

(machines, VMs placed; the cluster is ``bench_listing.build``'s). Run it against two versions alternately to compare.
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_listing import build


def main() -> None:
    e = build(int(sys.argv[1]), int(sys.argv[2]))
    for v in [r.id for r in e.vms()][::3]:
        e.release(v)
    for name, failed in (("m5", False), ("m7", True)):
        t = time.perf_counter()
        e.evacuate(name, failed=failed)
        print(f"evacuate {name} failed={failed}: {time.perf_counter() - t:.2f} s")


if __name__ == "__main__":
    main()
