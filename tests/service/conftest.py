"""A real uvicorn server on a free port: in a thread (same process) or as a ``dcplace serve`` subprocess."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn
from fastapi import FastAPI

from dcplace.engine import PlacementEngine
from dcplace.service import create_app


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextmanager
def server_thread(engine: PlacementEngine, app: FastAPI | None = None) -> Iterator[str]:
    """Serve ``engine`` (or the given ``app`` over it) with uvicorn in a thread; yield its base URL."""
    sock = socket.socket()  # bound here and handed to uvicorn: no other test process can take the port between
    sock.bind(("127.0.0.1", 0))
    port = int(sock.getsockname()[1])
    app = create_app(engine) if app is None else app
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    t = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    t.start()
    deadline = time.time() + 20
    while not server.started:
        if time.time() > deadline:
            raise RuntimeError("uvicorn did not start")
        time.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        t.join(10)
        sock.close()


def start_serve(
    db: Path, port: int, *flags: str, probe: httpx.Client | None = None, open_files: int | None = None
) -> subprocess.Popen[bytes]:
    """``dcplace serve --db db [flags]`` as a subprocess, answering /healthz (asked with ``probe``, a client whose
    base URL is the server's, for HTTPS; default plain HTTP). It takes SIGINT as a terminal's Ctrl-C sends it,
    whatever this process does with it (a test runner's worker may ignore it, and a child would inherit that).
    ``open_files``: its soft limit on open files (the hard one as this process has it)."""

    def child() -> None:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        if open_files is not None:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (open_files, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    src = str(Path(__file__).resolve().parents[2] / "src")
    # in a zone 5 hours from UTC (a POSIX rule: no tzdata needed), so that a time printed in local time shows
    env = {**os.environ, "PYTHONPATH": src, "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1", "TZ": "EST5EDT"}
    cmd = [sys.executable, "-c", "from dcplace.cli.main import main; main()", "serve", "--db", str(db),
           "--port", str(port), *flags]  # fmt: skip
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, preexec_fn=child)
    deadline = time.time() + 90
    while time.time() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"dcplace serve exited: {proc.stderr.read().decode() if proc.stderr else ''}")
        try:
            answer = probe.get("/healthz", timeout=1) if probe else httpx.get(f"http://127.0.0.1:{port}/healthz",
                                                                                timeout=1)  # fmt: skip
            if answer.status_code == 200:
                return proc
        except httpx.TransportError:
            pass
        time.sleep(0.1)
    proc.send_signal(signal.SIGKILL)
    raise RuntimeError("dcplace serve did not answer /healthz")


@contextmanager
def lock_held(engine: PlacementEngine, seconds: float = 30) -> Iterator[threading.Event]:
    """The engine's lock held by another thread, as a long call (a re-optimisation event) holds it, until the block
    ends or the yielded event is set."""
    held, done = threading.Event(), threading.Event()

    def hold() -> None:
        with engine.lock:
            held.set()
            done.wait(seconds)

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait(5)
    try:
        yield done
    finally:
        done.set()
        holder.join()


def record_threads(engine: PlacementEngine, method: str) -> list[bool]:
    """Wrap ``engine.<method>`` to note, per call, whether it ran on the main thread (the event loop's, in tests
    that ``asyncio.run``); the list it returns fills as it is called."""
    seen: list[bool] = []
    inner = getattr(engine, method)

    def watched(*args: object, **kw: object) -> object:
        seen.append(threading.current_thread() is threading.main_thread())
        return inner(*args, **kw)

    setattr(engine, method, watched)
    return seen
