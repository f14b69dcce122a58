"""Registering a cluster's machines over HTTP: one ``POST /machines`` each (one commit, one fsync each) against one
``POST /machines/batch`` (one commit for all), on a fresh database of ``dcplace serve`` each time, alternating.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_register.py [--machines 2000] [--repeats 3]

One client, in order, as an operator's script registers a cluster; medians over the repeats and their ratio.
"""

from __future__ import annotations

import argparse
import platform
import signal
import statistics
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_service import free_port, start_server


def machines(n: int) -> list[dict[str, object]]:
    return [{"id": f"pm{i}", "cpu": 32, "mem": [128, 128], "rack": f"r{i // 40}"} for i in range(n)]


def one_by_one(url: str, rows: list[dict[str, object]]) -> None:
    with httpx.Client(base_url=url, timeout=60) as c:
        for row in rows:
            assert c.post("/machines", json=row).status_code == 201


def batch(url: str, rows: list[dict[str, object]]) -> None:
    with httpx.Client(base_url=url, timeout=600) as c:
        for k in range(0, len(rows), 10_000):  # the most one request takes
            r = c.post("/machines/batch", json={"machines": rows[k : k + 10_000]})
            assert r.status_code == 201 and r.json()["registered"] == len(rows[k : k + 10_000]), r.text


def timed(how: str, rows: list[dict[str, object]]) -> float:
    with tempfile.TemporaryDirectory() as d:
        port = free_port()
        proc = start_server(Path(d) / "c.db", port)
        try:
            url = f"http://127.0.0.1:{port}"
            t0 = time.perf_counter()
            (one_by_one if how == "one-by-one" else batch)(url, rows)
            took = time.perf_counter() - t0
            assert len(httpx.get(f"{url}/machines", timeout=60).json()) == len(rows)
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    return took


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--machines", type=int, default=2000)
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    rows = machines(args.machines)
    times: dict[str, list[float]] = {"one-by-one": [], "batch": []}
    for _ in range(args.repeats):
        for how in times:
            times[how].append(timed(how, rows))
    med = {how: statistics.median(t) for how, t in times.items()}
    print(f"{args.machines} machines, {args.repeats} repeats, {platform.node()} ({platform.processor() or 'cpu'}):")
    for how, t in times.items():
        print(f"  {how:10s} median {med[how]:.2f} s ({', '.join(f'{x:.2f}' for x in t)}): "
              f"{args.machines / med[how]:,.0f} machines/s")  # fmt: skip
    print(f"  one-by-one / batch: {med['one-by-one'] / med['batch']:.1f}x")


if __name__ == "__main__":
    main()
