"""Reconciling a big cluster's records with its inventory (drift), in the engine and over HTTP.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_reconcile.py [--machines 2000] [--vms 100000]
        [--drift 0.01] [--runs 3]

The cluster: ``--machines`` double-NUMA machines (2 x 64 cores, 2 x 256 GB) holding ``--vms`` VMs (one core and
2 GB each), in a SQLite database. The inventory: the records with ``--drift`` of the VMs released, as many moved to
another machine, half as many recorded anew with another size, and as many new ones.

- ``engine``: ``PlacementEngine.reconcile`` as a dry run and applied (the database's commit included), each run on
  a fresh copy of the same database; the medians and ranges of ``--runs`` runs, and the rows per second.
- ``http``: ``dcplace serve``'s ``POST /allocations/reconcile?dry_run=true`` with the same inventory (JSON), while a
  client asks ``GET /healthz`` every 20 ms: the request's time and the probe's worst and 99th-percentile answer,
  beside the probe's alone (the body is read and checked off the event loop; the engine's lock is held for the
  reconcile itself).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import tempfile
import threading
import time
from pathlib import Path

import httpx
import numpy as np

from dcplace.engine import MachineSpec, PlacementEngine


def build(db: Path, machines: int, vms: int) -> None:
    e = PlacementEngine.open(db, policy="first-fit")
    e.add_machines([MachineSpec(f"m{i}", 64, 256) for i in range(machines)])
    for s in range(0, vms, 10_000):
        n = min(vms, s + 10_000) - s
        e.place_arrays([f"v{i}" for i in range(s, s + n)], [1.0] * n, [2.0] * n)
    e.close()


def inventory(db: Path, drift: float, seed: int = 0) -> list[dict[str, object]]:
    e = PlacementEngine.open(db)
    rows = e.export_allocations()
    free = {m.id for m in e.machines() if m.free_cpu[0] >= 4}
    e.close()
    rng = np.random.default_rng(seed)
    n = len(rows)
    k = max(1, int(drift * n))
    pick = rng.permutation(n)
    gone, moved, resized = set(pick[:k].tolist()), pick[k : 2 * k], pick[2 * k : 2 * k + k // 2]
    targets = sorted(free)
    for i in moved:
        rows[i] = {**rows[i], "machine": targets[int(rng.integers(0, len(targets)))], "node": 1}
    for i in resized:
        rows[i] = {**rows[i], "cpu": 0.5}
    out = [r for i, r in enumerate(rows) if i not in gone]
    out += [{"vm": f"new{i}", "machine": targets[i % len(targets)], "node": 0, "cpu": 1.0, "mem": 2.0}
            for i in range(k)]  # fmt: skip
    return out


def engine_runs(db: Path, rows: list[dict[str, object]], runs: int) -> dict[str, list[float]]:
    out: dict[str, list[float]] = {"dry": [], "apply": []}
    for _ in range(runs):
        for kind in ("dry", "apply"):
            with tempfile.TemporaryDirectory() as tmp:
                copy = Path(tmp) / "c.db"
                shutil.copy(db, copy)
                e = PlacementEngine.open(copy)
                t0 = time.perf_counter()
                rep = e.reconcile(rows, execute=kind == "apply")
                out[kind].append(time.perf_counter() - t0)
                e.close()
    print(f"report: {len(rep.added)} added, {len(rep.removed)} removed, {len(rep.moved)} moved, "
          f"{len(rep.replaced)} recorded anew, {rep.unchanged} unchanged")  # fmt: skip
    return out


def http_run(db: Path, rows: list[dict[str, object]]) -> dict[str, float]:
    import uvicorn

    from dcplace.service import create_app

    e = PlacementEngine.open(db)
    server = uvicorn.Server(uvicorn.Config(create_app(e), host="127.0.0.1", port=0, log_level="warning"))
    sock = __import__("socket").socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    while not server.started:
        time.sleep(0.02)
    base = f"http://127.0.0.1:{port}"
    body = json.dumps(rows).encode()
    probes: list[float] = []
    stop = threading.Event()

    def probe() -> None:
        with httpx.Client(base_url=base, timeout=60) as c:
            while not stop.is_set():
                t0 = time.perf_counter()
                c.get("/healthz")
                probes.append(time.perf_counter() - t0)
                time.sleep(0.02)

    th = threading.Thread(target=probe)
    th.start()
    time.sleep(2.0)
    alone = list(probes)
    t0 = time.perf_counter()
    r = httpx.post(f"{base}/allocations/reconcile?dry_run=true", content=body,
                   headers={"content-type": "application/json"}, timeout=600)  # fmt: skip
    took = time.perf_counter() - t0
    during = probes[len(alone) :]
    stop.set()
    th.join()
    server.should_exit = True
    t.join(10)
    e.close()
    assert r.status_code == 200, r.text[:300]
    during_sorted = sorted(during)
    return {"request_s": took, "body_mb": len(body) / 1e6, "probe_alone_max_ms": 1000 * max(alone),
            "probe_during_p99_ms": 1000 * during_sorted[int(0.99 * (len(during_sorted) - 1))],
            "probe_during_max_ms": 1000 * max(during), "probes_during": len(during)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--machines", type=int, default=2000)
    ap.add_argument("--vms", type=int, default=100_000)
    ap.add_argument("--drift", type=float, default=0.01)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}, {platform.node()}, load "
          f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "big.db"
        t0 = time.perf_counter()
        build(db, a.machines, a.vms)
        rows = inventory(db, a.drift)
        print(f"{a.machines:,} machines, {a.vms:,} VMs built in {time.perf_counter() - t0:.1f} s; inventory of "
              f"{len(rows):,} rows, drift {a.drift:.1%}")  # fmt: skip
        runs = engine_runs(db, rows, a.runs)
        for kind, xs in runs.items():
            print(f"engine {kind}: median {statistics.median(xs):.2f} s [{min(xs):.2f}-{max(xs):.2f}], "
                  f"{len(rows) / statistics.median(xs):,.0f} rows/s")  # fmt: skip
        h = http_run(db, rows)
        print(f"http dry run: {h['request_s']:.2f} s for {h['body_mb']:.1f} MB; /healthz alone at most "
              f"{h['probe_alone_max_ms']:.1f} ms, during it p99 {h['probe_during_p99_ms']:.1f} ms, at most "
              f"{h['probe_during_max_ms']:.1f} ms ({h['probes_during']} probes)")  # fmt: skip
    print(f"load after: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")


if __name__ == "__main__":
    main()
