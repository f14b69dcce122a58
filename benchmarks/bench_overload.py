"""``dcplace serve`` under an open-loop overload, with and without load shedding (``--max-in-flight``).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_overload.py [--rate 2000] [--seconds 15]
        [--pairs 2] [--limit 512] [--clients N]

Each run: a fresh database of 2,000 double-NUMA machines (40 cores / 90 GB per node), ``dcplace serve`` as a
subprocess, then ``--rate`` new connections a second for ``--seconds``, each sending one ``POST /vms`` (a new VM of
1-8 cores) and closing, waiting up to 30 s for its answer, never retrying: an open loop, so arrivals do not slow
down when the service does (clients arrive whether or not others were answered, as pods do). A second task asks
``/healthz`` every 0.25 s; the server's resident memory and open files are read from /proc every 0.25 s. The runs
alternate, shedding at ``--limit`` first, then without it (``--max-in-flight 1000000``), ``--pairs`` times, on this
machine (the clients share its cores with the service). ``--clients N``: a closed loop instead, N keep-alive
connections placing one VM after another, a 429 waiting its ``Retry-After`` and sent again.
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
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _serve(tmp: Path, port: int, *flags: str) -> subprocess.Popen[bytes]:
    machines = tmp / "m.csv"
    machines.write_text("id,cpu,mem\n" + "".join(f"pm-{i},40,90\n" for i in range(2000)))
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", "from dcplace.cli.main import main; main()", "serve", "--db", str(tmp / "c.db"),
           "--machines", str(machines), "--port", str(port), *flags]  # fmt: skip
    return subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


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


async def _watch(port: int, pid: int, health: list[float], peak: list[float], stopped: asyncio.Event) -> None:
    """Until ``stopped``: ``/healthz``'s time every 0.25 s into ``health``, the server's peak resident memory (MB)
    and open files and the most requests in flight (``/metrics``, sampled) into ``peak``."""
    while not stopped.is_set():
        t0 = time.perf_counter()
        with contextlib.suppress(Exception):
            await _request(port, "GET", "/healthz", timeout=30)
        health.append(time.perf_counter() - t0)
        rss, fds = _proc(pid)
        peak[0], peak[1] = max(peak[0], rss), max(peak[1], fds)
        with contextlib.suppress(Exception):
            peak[2] = max(peak[2], await _in_flight(port))
        await asyncio.sleep(0.25)


async def _in_flight(port: int) -> float:
    """``dcplace_http_in_flight`` from ``/metrics``."""
    reader, writer = await asyncio.wait_for(asyncio.open_connection("127.0.0.1", port), 30)
    try:
        writer.write(b"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
        text = (await asyncio.wait_for(reader.read(), 30)).decode("latin-1")
    finally:
        writer.close()
    return float(next(x.split()[-1] for x in text.splitlines() if x.startswith("dcplace_http_in_flight ")))


async def _run(port: int, pid: int, rate: float, seconds: float, tag: str) -> dict[str, object]:
    answers: Counter[str] = Counter()
    latency: dict[str, list[float]] = {"201": [], "429": []}
    health: list[float] = []
    peak = [0.0, 0.0, 0.0]

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

    stopped = asyncio.Event()
    watcher = asyncio.create_task(_watch(port, pid, health, peak, stopped))
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
    stopped.set()
    await watcher

    return _summary(answers, latency, health, peak, took, n)


async def _closed_loop(port: int, pid: int, clients: int, seconds: float, tag: str) -> dict[str, object]:
    """``clients`` keep-alive connections, each placing VMs one after another; a 429 waits its Retry-After and
    sends the same request again (as a well-behaved client does)."""
    answers: Counter[str] = Counter()
    latency: dict[str, list[float]] = {"201": [], "429": []}
    health: list[float] = []
    peak = [0.0, 0.0, 0.0]
    deadline = time.perf_counter() + seconds

    async def client(c: int) -> None:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        i = 0
        try:
            while time.perf_counter() < deadline:
                body = json.dumps({"id": f"{tag}-{c}-{i}", "cpu": 1 + i % 8, "mem": 2 + i % 8, "explain": False})
                t0 = time.perf_counter()
                writer.write(f"POST /vms HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                             f"Content-Length: {len(body)}\r\n\r\n{body}".encode())  # fmt: skip
                head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")
                code = head[0].split()[1]
                fields = dict(h.lower().split(": ", 1) for h in head[1:] if ": " in h)
                await reader.readexactly(int(fields.get("content-length", "0")))
                answers[code] += 1
                latency.setdefault(code, []).append(time.perf_counter() - t0)
                if code == "429":
                    await asyncio.sleep(float(fields.get("retry-after", "1")))
                    continue  # the same VM again
                i += 1
        except (OSError, asyncio.IncompleteReadError):
            answers["connection reset"] += 1
        finally:
            writer.close()

    stopped = asyncio.Event()
    watcher = asyncio.create_task(_watch(port, pid, health, peak, stopped))
    t0 = time.perf_counter()
    await asyncio.gather(*(client(c) for c in range(clients)))
    took = time.perf_counter() - t0
    stopped.set()
    await watcher
    return _summary(answers, latency, health, peak, took, 0)


def _summary(answers: Counter[str], latency: dict[str, list[float]], health: list[float], peak: list[float],
             took: float, sent: int) -> dict[str, object]:  # fmt: skip
    def q(xs: list[float], p: int) -> float:
        return statistics.quantiles(xs, n=100)[p - 1] * 1e3 if len(xs) >= 2 else float("nan")

    return {"sent": sent, "placed_per_s": answers["201"] / took, "answers": dict(answers),
            "p50_201_ms": q(latency["201"], 50), "p99_201_ms": q(latency["201"], 99),
            "p99_429_ms": q(latency["429"], 99), "health_max_ms": max(health) * 1e3,
            "peak_rss_mb": peak[0], "peak_fds": peak[1], "peak_in_flight": peak[2]}  # fmt: skip


def served_pairs(pairs: int, flag: str, limit: int) -> Iterator[tuple[int, int, int, subprocess.Popen[bytes]]]:
    """The alternation: ``flag limit`` first, then ``flag 1000000`` (no limit in effect), ``pairs`` times, each a
    fresh service on a fresh database, ready; yields the pair's number, the limit, the port and the process, and
    stops the service after the caller's run."""
    for k in range(pairs):
        for value in (limit, 1_000_000):
            with tempfile.TemporaryDirectory() as tmp:
                port = free_port()
                proc = _serve(Path(tmp), port, flag, str(value))
                try:
                    asyncio.run(_wait_ready(port))
                    yield k, value, port, proc
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.wait(60)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rate", type=float, default=2000.0, help="new connections (POST /vms) per second")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--pairs", type=int, default=2)
    ap.add_argument("--limit", type=int, default=512, help="--max-in-flight of the shedding runs")
    ap.add_argument("--clients", type=int, default=0, help="instead of the open loop: this many keep-alive clients")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.node()}, load {os.getloadavg()[0]:.1f}")
    print("| run | max in flight | placed/s | 201 | 429 | no answer / reset | p50 / p99 of 201, ms | p99 of 429, ms "
          "| /healthz max, ms | peak RSS, MB | peak open files | most in flight seen |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|---|")
    for k, limit, port, proc in served_pairs(args.pairs, "--max-in-flight", args.limit):
        if args.clients:
            r = asyncio.run(_closed_loop(port, proc.pid, args.clients, args.seconds, f"r{k}"))
        else:
            r = asyncio.run(_run(port, proc.pid, args.rate, args.seconds, f"r{k}"))
        a = r["answers"]
        assert isinstance(a, dict)
        lost = sum(v for key, v in a.items() if not key.isdigit())
        shown = f"{limit:,}" if limit < 1_000_000 else "none"
        print(
            f"| {k + 1} | {shown} | {r['placed_per_s']:,.0f} | {a.get('201', 0):,} | {a.get('429', 0):,} | "
            f"{lost:,} | {r['p50_201_ms']:,.0f} / {r['p99_201_ms']:,.0f} | {r['p99_429_ms']:,.0f} | "
            f"{r['health_max_ms']:,.0f} | {r['peak_rss_mb']:.0f} | {r['peak_fds']:,.0f} | "
            f"{r['peak_in_flight']:,.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
