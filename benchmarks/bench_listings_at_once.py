"""Many listings of a big cluster at once, with and without ``serve --max-listings``.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_listings_at_once.py [--vms 100000] [--listings 20]
        [--limit 4] [--pairs 2]

Each run: ``dcplace serve`` on a fresh database of 2,000 double-NUMA machines holding ``--vms`` VMs (placed by
``POST /vms/batch``, one core and 1 GB each), then 50 clients placing and releasing VMs one after another (a
connection per call) while ``--listings`` clients each ask ``GET /vms`` (every VM, one answer) at the same moment;
a refused listing (429) waits its ``Retry-After`` and asks again, until every listing has been answered. Measured:
the time until then, the placements per second meanwhile, the server's peak resident memory, and ``/healthz``'s
worst time (every 0.25 s). Runs alternate, ``--max-listings --limit`` first, then ``1000000`` (no limit in effect).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_overload import _proc, _watch, served_pairs


async def _call(port: int, method: str, path: str, body: bytes = b"") -> tuple[int, dict[str, str], bytes]:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
        writer.write(head.encode() + b"Content-Type: application/json\r\n\r\n" + body)
        lines = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
        fields = dict(h.lower().split(": ", 1) for h in lines[1:] if ": " in h)
        if fields.get("transfer-encoding") != "chunked":
            return int(lines[0].split()[1]), fields, await reader.readexactly(int(fields.get("content-length", "0")))
        body = bytearray()  # a listing sent as it is built: chunks, each its size in hex, until one of size 0
        while size := int((await reader.readline()).strip().split(b";")[0], 16):
            body += await reader.readexactly(size)
            await reader.readexactly(2)
        await reader.readline()
        return int(lines[0].split()[1]), fields, bytes(body)
    finally:
        writer.close()


async def _fill(port: int, vms: int) -> None:
    for start in range(0, vms, 10_000):
        batch = [{"id": f"fill-{i}", "cpu": 1, "mem": 1} for i in range(start, min(vms, start + 10_000))]
        code, _, _ = await _call(port, "POST", "/vms/batch", json.dumps({"vms": batch}).encode())
        assert code == 200, code


async def _run(port: int, pid: int, listings: int, vms: int) -> dict[str, float]:
    health: list[float] = []
    peak = [0.0, 0.0, 0.0]
    stopped = asyncio.Event()
    watcher = asyncio.create_task(_watch(port, pid, health, peak, stopped))
    placed = 0
    refused = 0

    async def writer(c: int) -> None:
        nonlocal placed
        i = 0
        while not stopped.is_set():
            body = json.dumps({"id": f"w-{c}-{i}", "cpu": 1, "mem": 1, "explain": False}).encode()
            code, _, _ = await _call(port, "POST", "/vms", body)
            placed += code == 201
            i += 1
            if code == 201:
                await _call(port, "DELETE", f"/vms/w-{c}-{i - 1}")

    async def lister() -> None:
        nonlocal refused
        while True:
            code, fields, body = await _call(port, "GET", "/vms")
            if code == 200:
                assert body.count(b'"id"') >= vms, "a listing came short"
                return
            refused += 1
            await asyncio.sleep(float(fields.get("retry-after", "1")))

    writers = [asyncio.create_task(writer(c)) for c in range(50)]
    await asyncio.sleep(1.0)
    t0 = time.perf_counter()
    await asyncio.gather(*(lister() for _ in range(listings)))
    took = time.perf_counter() - t0
    stopped.set()
    await asyncio.gather(watcher, *writers)
    return {"took_s": took, "placed_per_s": placed / (took + 1.0), "refused": refused,
            "health_max_ms": max(health) * 1e3, "peak_rss_mb": peak[0]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--vms", type=int, default=100_000)
    ap.add_argument("--listings", type=int, default=20)
    ap.add_argument("--limit", type=int, default=4, help="--max-listings of the limited runs")
    ap.add_argument("--pairs", type=int, default=2)
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, load {os.getloadavg()[0]:.1f}")
    print("| run | max listings | all listings answered after, s | 429s | placements/s meanwhile | /healthz max, ms "
          "| peak RSS, MB |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for k, limit, port, proc in served_pairs(args.pairs, "--max-listings", args.limit):
        asyncio.run(_fill(port, args.vms))
        base = _proc(proc.pid)[0]
        r = asyncio.run(_run(port, proc.pid, args.listings, args.vms))
        shown = f"{limit:,}" if limit < 1_000_000 else "none"
        print(
            f"| {k + 1} | {shown} | {r['took_s']:.1f} | {r['refused']:,.0f} | {r['placed_per_s']:,.0f} | "
            f"{r['health_max_ms']:,.0f} | {r['peak_rss_mb']:.0f} (before: {base:.0f}) |",
            flush=True,
        )


if __name__ == "__main__":
    main()
