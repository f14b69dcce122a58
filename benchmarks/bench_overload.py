"""``dcplace serve`` under an open-loop overload, with and without load shedding (``--max-in-flight``).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_overload.py [--rate 2000] [--seconds 15]
        [--pairs 2] [--limit 512]

Each run: a fresh database of 2,000 double-NUMA machines (40 cores / 90 GB per node), ``dcplace serve`` as a
subprocess, then ``--rate`` new connections a second for ``--seconds``, each sending one ``POST /vms`` (a new VM of
1-8 cores) and closing, waiting up to 30 s for its answer, never retrying: an open loop, so arrivals do not slow
down when the service does (clients arrive whether or not others were answered, as pods do). A second task asks
``/healthz`` every 0.25 s; the server's resident memory and open files are read from /proc every 0.25 s. The runs
alternate, shedding at ``--limit`` first, then without it (``--max-in-flight 1000000``), ``--pairs`` times, on this
machine (the clients share its cores with the service).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _serve(tmp: Path, port: int, limit: int) -> subprocess.Popen[bytes]:
    machines = tmp / "m.csv"
    machines.write_text("id,cpu,mem\n" + "".join(f"pm-{i},40,90\n" for i in range(2000)))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", "from dcplace.cli.main import main; main()", "serve", "--db", str(tmp / "c.db"),
           "--machines", str(machines), "--port", str(port), "--max-in-flight", str(limit)]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


async def _request(port: int, method: str, path: str, body: bytes = b"", timeout: float = 30.0) -> int:
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), timeout)
    try:
        head = f"{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
        if body:
            head += "Content-Type: application/json\r\n"
        writer.write(head.encode() + b"\r\n" + body)
        await writer.drain()
        line = await asyncio.wait_for(reader.readline(), timeout)
        if not line:
            raise ConnectionResetError("closed without an answer")
        return int(line.split()[1])
    finally:
        writer.close()
        with contextlib.suppress(Exception):
            await writer.wait_closed()


async def _wait_ready(port: int) -> None:
    for _ in range(1200):
        with contextlib.suppress(OSError, asyncio.TimeoutError, ValueError, IndexError):
            if await _request(port, "GET", "/healthz", timeout=1) == 200:
                return
        await asyncio.sleep(0.1)
    raise RuntimeError("dcplace serve did not start")


def _proc(pid: int) -> tuple[float, int]:
    status = Path(f"/proc/{pid}/status").read_text(encoding="ascii").splitlines()
    rss = next(int(x.split()[1]) for x in status if x.startswith("VmRSS"))
    return rss / 1024, len(os.listdir(f"/proc/{pid}/fd"))


async def _run(port: int, pid: int, rate: float, seconds: float, tag: str) -> dict[str, object]:
    answers: Counter[str] = Counter()
    latency: dict[str, list[float]] = {"201": [], "429": []}
    health: list[float] = []
    peak = [0.0, 0]
    stop = False

    async def one(i: int) -> None:
        t0 = time.perf_counter()
        body = json.dumps({"id": f"{tag}-{i}", "cpu": 1 + i % 8, "mem": 2 + i % 8, "explain": False}).encode()
        try:
            code = await _request(port, "POST", "/vms", body)
        except TimeoutError:
            answers["no answer in 30 s"] += 1
            return
        except (OSError, ValueError, IndexError, asyncio.IncompleteReadError):
            answers["connection reset or refused"] += 1
            return
        answers[str(code)] += 1
        latency.setdefault(str(code), []).append(time.perf_counter() - t0)

    async def watch() -> None:
        while not stop:
            t0 = time.perf_counter()
            with contextlib.suppress(Exception):
                await _request(port, "GET", "/healthz", timeout=30)
            health.append(time.perf_counter() - t0)
            rss, fds = _proc(pid)
            peak[0], peak[1] = max(peak[0], rss), max(peak[1], fds)
            await asyncio.sleep(0.25)

    watcher = asyncio.create_task(watch())
    tasks = []
    t_start = time.perf_counter()
    n = int(rate * seconds)
    for i in range(n):  # arrivals on a fixed schedule, whatever the answers
        delay = t_start + i / rate - time.perf_counter()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i)))
    await asyncio.gather(*tasks)
    took = time.perf_counter() - t_start
    stop = True
    await watcher

    def q(xs: list[float], p: float) -> float:
        return statistics.quantiles(xs, n=100)[p - 1] * 1e3 if len(xs) >= 2 else float("nan")

    return {"sent": n, "sent_per_s": n / seconds, "placed_per_s": answers["201"] / took, "answers": dict(answers),
            "p50_201_ms": q(latency["201"], 50), "p99_201_ms": q(latency["201"], 99),
            "p99_429_ms": q(latency["429"], 99), "health_max_ms": max(health) * 1e3,
            "peak_rss_mb": peak[0], "peak_fds": peak[1]}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=2000.0, help="new connections (POST /vms) per second")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=512, help="--max-in-flight of the shedding runs")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, load {os.getloadavg()[0]:.1f}")
    print("| run | max in flight | placed/s | 201 | 429 | no answer / reset | p50 / p99 of 201, ms | p99 of 429, ms "
          "| /healthz max, ms | peak RSS, MB | peak open files |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for k in range(args.pairs):
        for limit in (args.limit, 1_000_000):
            with tempfile.TemporaryDirectory() as tmp:
                import socket

                with socket.socket() as s:
                    s.bind(("127.0.0.1", 0))
                    port = s.getsockname()[1]
                proc = _serve(Path(tmp), port, limit)
                try:
                    asyncio.run(_wait_ready(port))
                    r = asyncio.run(_run(port, proc.pid, args.rate, args.seconds, f"r{k}"))
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(60)
            a = r["answers"]
            assert isinstance(a, dict)
            lost = a.get("no answer in 30 s", 0) + a.get("connection reset or refused", 0)
            shown = f"{limit:,}" if limit < 1_000_000 else "none"
            print(
                f"| {k + 1} | {shown} | {r['placed_per_s']:,.0f} | {a.get('201', 0):,} | {a.get('429', 0):,} | "
                f"{lost:,} | {r['p50_201_ms']:,.0f} / {r['p99_201_ms']:,.0f} | {r['p99_429_ms']:,.0f} | "
                f"{r['health_max_ms']:,.0f} | {r['peak_rss_mb']:.0f} | {r['peak_fds']:,} |",
                flush=True,
            )


if __name__ == "__main__":
    main()
