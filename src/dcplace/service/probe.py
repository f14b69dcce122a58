"""``GET /healthz`` in plain HTTP on a port of its own (``dcplace serve --probe-port``), for probes that cannot show a
client certificate: with ``--tls-client-ca`` the main port refuses every TLS handshake without one, and a kubelet's
HTTPS probe shows none, so the pod failed every probe and restarted in a loop (a security review, 2026-11-28).

The port answers ``/healthz`` only (the same answer as the main port's: the machine and VM counts, 503 once the
database failed) and 404 to anything else, so it exposes nothing that changes or lists the cluster. It runs in a
thread of its own with its own event loop, started before the main server and stopped after it. Being apart, it
would answer 200 while the main event loop was stuck (a handler that never returns, a deadlock) and the service
answered nothing: the main loop beats a :class:`Heartbeat` every second, and the probe answers 503 once it has not
beaten for ``stale_s`` (10 s; a busy loop still beats, each step being short).
"""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

from dcplace.engine import PlacementEngine
from dcplace.engine.store import StoreError
from dcplace.service.hotpath import send_json


class Heartbeat:
    """The main event loop's pulse: :meth:`run` (a task on that loop, started with the application) notes the time
    every ``every_s``; :meth:`silent_for` says how long it has not, once that is over ``stale_s``."""

    def __init__(self, every_s: float = 1.0, stale_s: float = 10.0) -> None:
        self.every_s = every_s
        self.stale_s = stale_s
        self.last = time.monotonic()

    async def run(self) -> None:
        import asyncio

        while True:
            self.last = time.monotonic()
            await asyncio.sleep(self.every_s)

    def silent_for(self) -> float | None:
        """Seconds since the last beat, where that is over ``stale_s``; else None."""
        age = time.monotonic() - self.last
        return age if age > self.stale_s else None


def probe_app(engine: PlacementEngine, heartbeat: Heartbeat | None = None) -> Any:
    """The probe port's ASGI application: ``GET`` / ``HEAD /healthz``, nothing else; 503 also while ``heartbeat``
    (the main loop's) is silent."""

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        if scope["path"] != "/healthz" or scope["method"] not in ("GET", "HEAD"):
            await send_json(send, (404, {"detail": "this port answers GET and HEAD /healthz only"}))
            return
        silent = None if heartbeat is None else heartbeat.silent_for()
        try:
            answer: tuple[int, dict[str, Any]] = (200, {"status": "ok", **engine.health()})
        except StoreError as e:
            answer = (503, {"detail": str(e)})
        if silent is not None and answer[0] == 200:
            answer = (503, {"detail": f"the service's main event loop has not run for {silent:.0f} s: it answers "
                                      "nothing; restart it"})  # fmt: skip
        await send_json(send, answer)

    return app


class ProbeServer:
    """uvicorn serving :func:`probe_app` on a bound socket in a daemon thread (signals stay the main server's)."""

    def __init__(self, engine: PlacementEngine, socks: list[socket.socket],
                 heartbeat: Heartbeat | None = None) -> None:  # fmt: skip
        """``socks``: bound to the probe's addresses already (``serve`` holds them from its checks on);
        ``heartbeat``: the main loop's (``create_app(heartbeat=...)`` beats it)."""
        import uvicorn

        config = uvicorn.Config(probe_app(engine, heartbeat), log_level="warning", lifespan="off", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": socks}, name="dcplace-probe",
                                       daemon=True)  # fmt: skip

    def start(self, timeout_s: float = 20.0) -> None:
        """Start and wait until it listens (RuntimeError if it does not within ``timeout_s``)."""
        self.thread.start()
        deadline = time.monotonic() + timeout_s
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the probe port did not start listening")
            time.sleep(0.02)

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
