"""Load test of the HTTP service: Huawei-East-1 with releases replayed through ``dcplace serve`` by concurrent httpx
clients; durable placements per second, p50 / p99 latency, and acceptance against the in-process engine.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_service.py [--machines 1000] [--requests 20000]
        [--clients 32] [--explain] [--token]

The server is a subprocess (one uvicorn worker, SQLite in WAL mode, synchronous=FULL, group commit) on a fresh
database; the clients run in this process. Events are taken in trace order by ``--clients`` workers: a creation is a
``POST /vms``, a deletion waits for its creation's answer and is a ``DELETE /vms/{id}``. Latency is the client's, per
``POST`` (connection reuse, JSON both ways, the fsync included).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import json as _json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
import numpy as np

from dcplace.cluster.numa import NumaCluster
from dcplace.engine.stream import engine_for, run_stream
from dcplace.sim.episodes import prepare
from dcplace.sim.numa import PreparedTrace
from dcplace.workload.traces import load_trace, trace_available


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


AUTH: dict[str, str] = {}
"""The header every request sends (``--token``: ``Authorization: Bearer ...``; empty: none)."""


def start_server(db: Path, port: int, http: str = "auto", *flags: str) -> subprocess.Popen[bytes]:
    src = str(Path(__file__).resolve().parents[1] / "src")
    env = {**os.environ, "PYTHONPATH": src, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    cmd = [sys.executable, "-c", "from dcplace.cli.main import main; main()", "serve", "--db", str(db), "--port",
           str(port), "--http", http, *flags]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env)
    for _ in range(600):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                return proc
        except httpx.TransportError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start")


class RawClient:
    """A minimal HTTP/1.1 keep-alive client over one asyncio connection (JSON bodies, Content-Length answers), to
    measure the server with less client cost than httpx on a small, shared machine. Same interface as the part of
    ``httpx.AsyncClient`` used here."""

    def __init__(self, url: str) -> None:
        host, port = url.removeprefix("http://").split(":")
        self.host, self.port = host, int(port)
        self.conn: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None

    async def _send(self, method: str, path: str, body: bytes = b"") -> RawResponse:
        if self.conn is None:
            self.conn = await asyncio.open_connection(self.host, self.port)
        r, w = self.conn
        head = f"{method} {path} HTTP/1.1\r\nHost: {self.host}\r\nContent-Length: {len(body)}\r\n"
        head += "".join(f"{k}: {v}\r\n" for k, v in AUTH.items())
        if body:
            head += "Content-Type: application/json\r\n"
        w.write(head.encode() + b"\r\n" + body)
        await w.drain()
        lines = (await r.readuntil(b"\r\n\r\n")).split(b"\r\n")
        status = int(lines[0].split()[1])
        n = next((int(x.split(b":")[1]) for x in lines if x.lower().startswith(b"content-length")), 0)
        return RawResponse(status, await r.readexactly(n))

    async def post(self, path: str, json: object) -> RawResponse:
        return await self._send("POST", path, _json.dumps(json).encode())

    async def delete(self, path: str) -> RawResponse:
        return await self._send("DELETE", path)

    async def aclose(self) -> None:
        if self.conn is not None:
            self.conn[1].close()


class RawResponse:
    def __init__(self, status: int, body: bytes) -> None:
        self.status_code = status
        self.text = body.decode()


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process ``pid`` so far (Linux ``/proc/PID/stat``), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text(encoding="utf-8").rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def commit_latency(folder: Path, n: int = 200) -> dict[str, float]:
    """Latency of one durable SQLite commit (WAL, synchronous=FULL, one small row) on the disk holding ``folder``:
    the floor under every durable answer. A request that arrives while a group commit is under way waits for it
    and then for its own, so its latency is at least two commits."""
    import sqlite3

    con = sqlite3.connect(folder / "fsync-probe.db", isolation_level=None)
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA synchronous=FULL")
    con.execute("CREATE TABLE t (id INTEGER PRIMARY KEY)")
    lat = []
    for i in range(n):
        t0 = time.perf_counter()
        con.execute("BEGIN")
        con.execute("INSERT INTO t VALUES (?)", (i,))
        con.execute("COMMIT")
        lat.append(time.perf_counter() - t0)
    con.close()
    a = np.asarray(lat) * 1e3
    return {"commit_p50_ms": float(np.percentile(a, 50)), "commit_p90_ms": float(np.percentile(a, 90)),
            "commit_p99_ms": float(np.percentile(a, 99))}  # fmt: skip


def make_clients(url: str, n: int, kind: str) -> list[httpx.AsyncClient | RawClient]:
    """One client (one connection) per worker: httpx's shared pool is several times slower with many workers."""
    return [RawClient(url) if kind == "raw" else httpx.AsyncClient(base_url=url, timeout=60, headers=AUTH)
            for _ in range(n)]  # fmt: skip


async def register(url: str, machines: int, clients: int) -> None:
    pool = make_clients(url, clients, "raw")
    it = iter(range(machines))

    async def worker(http: httpx.AsyncClient | RawClient) -> None:
        for m in it:
            r = await http.post("/machines", json={"id": f"pm-{m:05d}", "cpu": 40, "mem": 90})
            assert r.status_code == 201, r.text

    await asyncio.gather(*(worker(h) for h in pool))
    for h in pool:
        await h.aclose()


async def replay(
    url: str, trace: PreparedTrace, creations: int, clients: int, explain: bool, kind: str
) -> dict[str, float]:
    ev = [(int(r), bool(d)) for r, d in zip(trace.ev_req, trace.ev_dep, strict=True)]
    done: dict[int, asyncio.Future[bool]] = {}
    lat: list[float] = []
    rel_lat: list[float] = []
    counts = {"created": 0, "accepted": 0, "released": 0}
    pos = 0
    loop = asyncio.get_running_loop()
    pool = make_clients(url, clients, kind)

    async def worker(http: httpx.AsyncClient | RawClient) -> None:
        nonlocal pos
        while pos < len(ev):
            r, dep = ev[pos]
            pos += 1
            if dep:
                fut = done.get(r)
                if fut is None or not await fut:
                    continue
                t0 = time.perf_counter()
                resp = await http.delete(f"/vms/{r}")
                rel_lat.append(time.perf_counter() - t0)
                assert resp.status_code == 200, resp.text
                counts["released"] += 1
                continue
            if counts["created"] >= creations:
                pos = len(ev)
                return
            counts["created"] += 1
            fut = done[r] = loop.create_future()
            d, m = trace.demand[r], bool(trace.multi[r])
            t0 = time.perf_counter()
            resp = await http.post("/vms", json={"id": str(r), "cpu": float(d[0]), "mem": float(d[1]),
                                                 "multi_numa": m, "explain": explain})  # fmt: skip
            lat.append(time.perf_counter() - t0)
            assert resp.status_code in (201, 409), resp.text
            ok = resp.status_code == 201
            counts["accepted"] += ok
            fut.set_result(ok)

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(h) for h in pool))
    wall = time.perf_counter() - t0
    for h in pool:
        await h.aclose()
    a = np.asarray(lat)
    return {
        "creations": counts["created"], "accepted": counts["accepted"], "releases": counts["released"],
        "wall_s": wall, "placements_per_s": counts["created"] / wall,
        "operations_per_s": (counts["created"] + counts["released"]) / wall,
        "p50_ms": float(np.percentile(a, 50) * 1e3), "p99_ms": float(np.percentile(a, 99) * 1e3),
        "release_p99_ms": float(np.percentile(rel_lat, 99) * 1e3) if rel_lat else 0.0,
    }  # fmt: skip


async def bulk(url: str, trace: PreparedTrace, creations: int, clients: int, batch: int) -> dict[str, float]:
    """Bulk admission: the first ``creations`` requests (no releases) in ``POST /vms/batch`` calls of ``batch``."""
    chunks = [list(range(i, min(i + batch, creations))) for i in range(0, creations, batch)]
    lat: list[float] = []
    placed = 0
    pool = make_clients(url, clients, "raw")
    it = iter(chunks)

    async def worker(http: httpx.AsyncClient | RawClient) -> None:
        nonlocal placed
        for chunk in it:
            vms = [{"id": str(r), "cpu": float(trace.demand[r, 0]), "mem": float(trace.demand[r, 1]),
                    "multi_numa": bool(trace.multi[r])} for r in chunk]  # fmt: skip
            t0 = time.perf_counter()
            resp = await http.post("/vms/batch", json={"vms": vms})
            lat.append(time.perf_counter() - t0)
            assert resp.status_code == 200, resp.text
            placed += _json.loads(resp.text)["placed"]

    t0 = time.perf_counter()
    await asyncio.gather(*(worker(h) for h in pool))
    wall = time.perf_counter() - t0
    for h in pool:
        await h.aclose()
    a = np.asarray(lat)
    return {"creations": creations, "accepted": placed, "releases": 0, "wall_s": wall,
            "placements_per_s": creations / wall, "operations_per_s": creations / wall, "batch": batch,
            "p50_ms": float(np.percentile(a, 50) * 1e3), "p99_ms": float(np.percentile(a, 99) * 1e3)}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", type=int, default=1_000)
    ap.add_argument("--requests", type=int, default=20_000)
    ap.add_argument("--clients", type=int, default=32)
    ap.add_argument("--explain", action="store_true", help="ask for the explanation of every placement")
    ap.add_argument("--client", choices=["httpx", "raw"], default="httpx", help="httpx.AsyncClient or a minimal one")
    ap.add_argument("--batch", type=int, default=0, help="bulk admission: N VMs per POST /vms/batch, no releases")
    ap.add_argument(
        "--http",
        choices=["auto", "h11", "httptools"],
        default="auto",
        help="the server's HTTP parser (`dcplace serve --http`)",
    )
    ap.add_argument("--token", action="store_true", help="serve with --token-file; every request sends the token")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    name = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
    trace = prepare(load_trace(name), 32.0)
    port = free_port()
    url = f"http://127.0.0.1:{port}"
    with tempfile.TemporaryDirectory() as tmp:
        disk = commit_latency(Path(tmp))
        flags: list[str] = []
        if args.token:
            token = "bench-" + os.urandom(16).hex()
            (Path(tmp) / "tokens").write_text(token + "\n", encoding="utf-8")
            (Path(tmp) / "tokens").chmod(0o600)
            AUTH["Authorization"] = f"Bearer {token}"
            flags = ["--token-file", str(Path(tmp) / "tokens")]
        proc = start_server(Path(tmp) / "bench.db", port, args.http, *flags)
        try:
            asyncio.run(register(url, args.machines, args.clients))
            cpu0 = cpu_seconds(proc.pid)
            if args.batch:
                res = asyncio.run(bulk(url, trace, args.requests, args.clients, args.batch))
            else:
                res = asyncio.run(replay(url, trace, args.requests, args.clients, args.explain, args.client))
            # the server's CPU per HTTP request (placements and releases): 1 / this is what one worker could serve
            # with a whole core to itself, whatever the client and the other processes on this machine take
            res["server_cpu_ms_per_request"] = (
                (cpu_seconds(proc.pid) - cpu0) * 1e3 / (res["creations"] / (args.batch or 1) + res["releases"])
            )
            metrics = httpx.get(f"{url}/metrics", headers=AUTH).text
            commits = next(float(x.split()[-1]) for x in metrics.splitlines()
                           if x.startswith("dcplace_store_commits_total"))  # fmt: skip
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(30)
    engine = engine_for(NumaCluster.uniform(args.machines), "best-fit")
    inproc = run_stream(engine, trace, max_requests=args.requests, samples=0, release=not args.batch)
    res.update(disk)
    res.update({"machines": args.machines, "clients": args.clients, "explain": args.explain, "trace": name,
                "client": args.client, "http": args.http, "token": args.token,
                "commits": commits, "in_process_accepted": inproc.accepted, "host": platform.node(),
                "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                "load_avg": os.getloadavg()[0]})  # fmt: skip
    print(json.dumps(res))
    ops = res["creations"] + res["releases"] + args.machines
    print(f"{args.machines} machines, {args.clients} {args.client} clients, explain={args.explain}, "
          f"token={args.token}: "
          f"{res['placements_per_s']:,.0f} "
          f"durable placements/s ({res['operations_per_s']:,.0f} operations/s with releases), p50 "
          f"{res['p50_ms']:.1f} ms, p99 {res['p99_ms']:.1f} ms; accepted {res['accepted']} of {res['creations']} "
          f"(in process: {inproc.accepted}); {commits:.0f} commits for {ops:,} "
          f"operations; server CPU {res['server_cpu_ms_per_request']:.3f} ms per HTTP request; one durable commit on "
          f"this disk p50 {res['commit_p50_ms']:.1f} ms, p90 {res['commit_p90_ms']:.1f} ms; load "
          f"{res['load_avg']:.1f}", flush=True)  # fmt: skip
    if args.out is not None:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        with args.out.open("a") as f:
            f.write(json.dumps(res) + "\n")


if __name__ == "__main__":
    main()
