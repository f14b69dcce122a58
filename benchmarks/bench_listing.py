"""How long listing every VM, or a re-optimisation event, holds placements up: ``PlacementEngine.vms()``,
``export_allocations()`` and ``snapshot()`` on a large in-memory cluster while another thread places and releases
one VM after another; with ``--reopt S``, then every other VM released and one ``reoptimise(ReoptPolicy(improve_s=S,
migration_weight=0))`` timed the same way.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_listing.py [--machines 2000] [--vms 300000]
        [--repeats 3] [--reopt S] [--json]

For each operation: its wall time and the longest single ``place`` + ``release`` the other thread saw while it ran
(the time a placement waited for the engine's lock, plus its own few microseconds and the interpreter's switches).
Only the public API is used, so the same file times any version of the code: run it with ``PYTHONPATH`` pointing at
each version's ``src`` in turn and compare in one session (docs/benchmarks.md).
"""

from __future__ import annotations

import argparse
import json
import statistics
import threading
import time
from collections.abc import Callable

import numpy as np

from dcplace.engine import PlacementEngine, ReoptPolicy, VmRequest


def build(machines: int, vms: int) -> PlacementEngine:
    e = PlacementEngine()
    for m in range(machines):
        e.add_machine(f"m{m}", [64, 64], [256, 256])
    ids = [f"ns/vm-{i}" for i in range(vms)]
    e.place_arrays(ids, np.full(vms, 0.25), np.full(vms, 0.5), np.zeros(vms, bool))
    return e


def stalls(e: PlacementEngine, operation: Callable[[], object]) -> tuple[float, float]:
    """(the operation's wall seconds, the longest place + release meanwhile, seconds)."""
    done, worst = threading.Event(), [0.0]

    def prober() -> None:
        i = 0
        while not done.is_set():
            t0 = time.perf_counter()
            e.place(VmRequest(f"probe-{i}", 0.25, 0.5), explain=False)
            e.release(f"probe-{i}")
            worst[0] = max(worst[0], time.perf_counter() - t0)
            i += 1
            time.sleep(0.001)

    t = threading.Thread(target=prober)
    t.start()
    time.sleep(0.05)
    t0 = time.perf_counter()
    operation()
    wall = time.perf_counter() - t0
    done.set()
    t.join()
    return wall, worst[0]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", type=int, default=2_000)
    ap.add_argument("--vms", type=int, default=300_000)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--reopt", type=float, default=None, metavar="S", help="also time a re-optimisation event")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    e = build(a.machines, a.vms)
    e.place(VmRequest("warm", 0.25, 0.5), explain=False)  # compiled before the clock
    e.release("warm")
    out = {}
    for listing in ("vms", "export_allocations", "snapshot"):
        runs = [stalls(e, getattr(e, listing)) for _ in range(a.repeats)]
        out[listing] = {
            "wall_s": statistics.median(w for w, _ in runs),
            "stall_s": statistics.median(s for _, s in runs),
        }
    if a.reopt is not None:  # one event: it changes the cluster, so it is not repeated
        for i in range(0, a.vms, 2):
            e.release(f"ns/vm-{i}")
        wall, stall = stalls(e, lambda: e.reoptimise(ReoptPolicy(migration_weight=0.0, improve_s=a.reopt)))
        out["reoptimise"] = {"wall_s": wall, "stall_s": stall}
    if a.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:20s} wall {v['wall_s']:.2f} s   longest placement meanwhile {v['stall_s'] * 1000:.0f} ms")


if __name__ == "__main__":
    main()
