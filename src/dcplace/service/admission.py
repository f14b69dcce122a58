"""Load shedding: a listing beyond ``serve --max-listings`` listings being built at once (default 4), or, when asked
for, a request beyond ``--max-in-flight`` requests in flight, is answered at once with 429, one sentence and
``Retry-After``, instead of waiting (kube-apiserver answers the same past ``--max-requests-inflight``).

A listing (``GET /vms``, ``/allocations``, ``/machines``, ``/state/snapshot``, ``/journal``) grows with the cluster:
at 100,000 VMs 12.6 MB of JSON and about half a second of a core. Twenty at once grew the service by about 600 MB
when each was built in one piece, and by 80 MB since ``/vms`` and ``/allocations`` are sent as they are built (18 MB
with the limit); the limit keeps the health check's worst wait beside them at about 1.3 s instead of 5.5-6 s
(benchmarks/bench_listings_at_once.py).
The in-flight limit is off by default because it cost throughput here: a placement in flight is mostly waiting
for its group commit, and more of them make bigger commits, while what a client waits under overload is mostly
before its request reaches the application (the kernel's accept queue, the event loop reading requests), which the
limit does not shorten (benchmarks/bench_overload.py; docs/engine.md, "Overload"). It bounds the requests held, and
so memory and open files, for an operator who needs that.

A listing whose client takes nothing for :data:`LISTING_STALL_S` (nothing left the connection's buffer in that
time, while the next chunk waited for room, or after the last was written) is cut off: the connection is aborted
(its buffers dropped) and its place freed (``dcplace_http_listings_cut_total``, a warning at most every 10 s).
Before, a client that asked for ``--max-listings`` listings and read none held every place for as long as it kept
its connections open, and every other listing was answered 429; a listing sent in one piece (``/machines``, the
snapshot) freed its place at once while its bytes sat in the connection's buffer. The connection is uvicorn's
transport, which the application finds through the ``send`` uvicorn gives it (:func:`remember_transport`, called
by the service's app for every request): where that is not there (another server, a test client) the deadline is
per chunk and a cut connection is closed as the server closes it.

``/healthz`` and ``/metrics`` are never shed: a probe that fails under load would have the orchestrator restart the
one process that is serving. 429 rather than 503, which here means the database failed (restart the service): a
429 says retry this same request after ``Retry-After`` seconds, and a retry is safe (a placement already made is
answered ``replayed``). Everything runs on the event loop, so the counts need no lock.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import socket
import struct
import time
from contextvars import ContextVar
from typing import Any

from dcplace.service.hotpath import send_json

log = logging.getLogger(__name__)

try:
    import fcntl
    import termios

    _OUTQ: int | None = termios.TIOCOUTQ  # the unsent bytes of a socket's send queue, on Linux
except (ImportError, AttributeError):  # pragma: no cover - not on Linux
    _OUTQ = None

LISTINGS = frozenset({"/vms", "/allocations", "/machines", "/state/snapshot", "/journal"})
"""``GET`` paths whose answer grows with the cluster (100,000 VMs: 12.6 MB, about 1 s of a core, 22 MB of memory
while it is built), limited apart from the rest."""
UNSHED = frozenset({"/healthz", "/metrics"})
RETRY_AFTER_S = 1
MAX_LISTINGS = 4
LISTING_STALL_S = 60.0
"""Seconds a listing's client may take nothing of it before the listing is cut off (module docstring)."""
UNFINISHED = (
    "ASGI callable returned without completing response.",
    "ASGI callable returned without starting response.",
)
"""What uvicorn logs, as an error, when an application returns with its answer unfinished or not started: which a
cut listing does on purpose (:class:`_QuietCut`; not started: a listing pipelined behind an answer not read)."""
HOLD_BYTES = 1 << 18
"""An answer written whose untaken rest is below this (256 KiB) no longer holds its listing's place."""
TRANSPORT = "dcplace.transport"
"""The scope key of the request's connection (:func:`remember_transport`)."""

_cut: ContextVar[bool] = ContextVar("dcplace_listing_cut", default=False)
"""Set in the request's task when its listing was cut (uvicorn logs its line in that same task, after it)."""


class Stalled(Exception):
    """A listing's client read nothing for :data:`LISTING_STALL_S`."""


class _QuietCut(logging.Filter):
    """Drops uvicorn's :data:`UNFINISHED` errors for a listing cut on purpose (the service's own warning says what
    happened); the same lines for any other request stay (they are bugs there)."""

    def filter(self, record: logging.LogRecord) -> bool:
        return not (_cut.get() and record.getMessage() in UNFINISHED)


def _quiet_cuts() -> None:
    logger = logging.getLogger("uvicorn.error")
    if not any(isinstance(f, _QuietCut) for f in logger.filters):
        logger.addFilter(_QuietCut())


def remember_transport(scope: dict[str, Any], send: Any) -> None:
    """Keep the request's connection in ``scope`` where ``send`` is uvicorn's (a bound method of its request cycle,
    which holds the connection's transport, for its h11 and httptools protocols alike)."""
    transport = getattr(getattr(send, "__self__", None), "transport", None)
    if transport is not None and callable(getattr(transport, "get_write_buffer_size", None)):
        scope[TRANSPORT] = transport


def _buffered(transport: Any) -> int | None:
    """Bytes written to the connection that the client has not taken yet: asyncio's buffer and, on Linux, the
    kernel's send queue (``TIOCOUTQ``; the kernel takes more from asyncio only once a third or so of its queue,
    megabytes, has gone, so asyncio's buffer alone stood still for seconds while a slow client read). None: closed."""
    try:
        pending = int(transport.get_write_buffer_size())
    except Exception:  # closed meanwhile
        return None
    sock = transport.get_extra_info("socket")
    if sock is not None and _OUTQ is not None:
        with contextlib.suppress(OSError, ValueError):
            pending += struct.unpack("i", fcntl.ioctl(sock.fileno(), _OUTQ, b"\0\0\0\0"))[0]
    return pending


def _with_deadline(send: Any, transport: Any, stall_s: float) -> Any:
    """``send`` that sends each message while the connection's buffer keeps emptying: Stalled once nothing has left
    it for ``stall_s`` (per message where the transport is unknown). A slow reader is not cut: a chunk of 1,000 VMs
    with the longest ids is megabytes, which a client taking 100 kB a second needs more than 60 s for. The send is
    awaited in the request's task (a task of its own for it let a keep-alive client's next request in before this
    one had given back its place, and met it: a 429); a send cut short by the timeout was waiting for room and had
    written nothing (uvicorn waits before it writes), so it is sent again, from a copy of the message as given."""

    async def sending(message: dict[str, Any]) -> None:
        last = None if transport is None else _buffered(transport)
        while True:
            try:
                async with asyncio.timeout(stall_s):
                    await send({**message})  # a copy each time: an outer layer may add to it (a header)
                return
            except TimeoutError:
                now = None if transport is None else _buffered(transport)
                if now is None or last is None or now >= last:
                    raise Stalled from None
                last = now

    return sending


async def _drained(transport: Any, stall_s: float) -> None:
    """Wait while the connection's buffer holds more than :data:`HOLD_BYTES` of an answer already written (one in a
    piece sits there whole), as long as it keeps emptying; Stalled once nothing has left it for ``stall_s``. Below
    that, at once: the kernel counts bytes sent but not yet acknowledged too, and waiting for those held every
    answer's place for a poll's 50 ms, so a client listing again at once on its connection (whose next request
    runs while this one waits) met its own listings and a 429 (a CI run's poller)."""
    last = _buffered(transport)
    waited = 0.0
    while last is not None and last > HOLD_BYTES:
        await asyncio.sleep(0.05)
        now = _buffered(transport)
        if now is None:
            return
        waited = 0.0 if now < last else waited + 0.05
        if waited >= stall_s:
            raise Stalled
        last = now


def _abort(transport: Any) -> None:
    """Drop the connection and everything queued on it: a reset (``SO_LINGER`` 0), so that neither asyncio's buffer
    nor the kernel's send queue (megabytes) waits for a client that reads nothing."""
    if transport is None:
        return
    sock = transport.get_extra_info("socket")
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.abort()


class Gate:
    """What :class:`Admission` admits: at most ``limit`` requests in flight (all but :data:`UNSHED`; None: any
    number), ``listings`` of them listings (:data:`LISTINGS`), and how many are in flight now (the
    ``dcplace_http_in_flight`` gauge reads it). ``shed``: a Prometheus counter of the refusals by reason
    (``in_flight``, ``listings``). A warning is logged for the first refusal and then at most once per
    ``log_every_s``, with the count since (one line per refusal flooded the log at 1,000 a second)."""

    def __init__(self, limit: int | None, listings: int, shed: Any = None, log_every_s: float = 10.0,
                 cut: Any = None, stall_s: float = LISTING_STALL_S) -> None:  # fmt: skip
        self.limit = limit
        self.listings = listings
        self.shed = shed
        self.cut = cut
        """A Prometheus counter of the listings cut off (module docstring)."""
        self.stall_s = stall_s
        self.log_every_s = log_every_s
        self.in_flight = 0
        self.listing = 0
        self._unlogged = 0
        self._logged_at = -float("inf")
        self._uncut = 0
        self._cut_logged_at = -float("inf")

    def refusal(self, listing: bool) -> tuple[str, str] | None:
        """Why a request (a listing or not) is refused now, with the reason's label; None to admit it."""
        if self.limit is not None and self.in_flight >= self.limit:
            return "in_flight", (f"the service has {self.in_flight} requests in flight, its limit (serve "
                                 "--max-in-flight)")  # fmt: skip
        if listing and self.listing >= self.listings:
            return "listings", (f"the service is building {self.listing} listings, its limit (serve "
                                "--max-listings); page with ?limit= to make each one short")  # fmt: skip
        return None

    def count(self, reason: str, why: str) -> None:
        if self.shed is not None:
            self.shed.labels(reason).inc()
        self._unlogged += 1
        now = time.monotonic()
        if now - self._logged_at >= self.log_every_s:
            log.warning("dcplace serve: overloaded: %d request(s) refused with 429 since the last such line (%s)",
                        self._unlogged, why)  # fmt: skip
            self._unlogged = 0
            self._logged_at = now

    def count_cut(self, method: str, path: str) -> None:
        if self.cut is not None:
            self.cut.inc()
        self._uncut += 1
        now = time.monotonic()
        if now - self._cut_logged_at >= self.log_every_s:
            log.warning("dcplace serve: %d listing(s) cut off since the last such line: the client took nothing of "
                        "it for %g s (the last: %s %s); its connection was closed", self._uncut, self.stall_s, method,
                        path)  # fmt: skip
            self._uncut = 0
            self._cut_logged_at = now


class Admission:
    """ASGI middleware: each request through ``gate`` (:class:`Gate`), or a 429 with one sentence and
    ``Retry-After``, its body unread."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate
        _quiet_cuts()

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["path"] in UNSHED:
            await self.app(scope, receive, send)
            return
        gate = self.gate
        listing = scope["method"] in ("GET", "HEAD") and scope["path"] in LISTINGS
        refused = gate.refusal(listing)
        if refused is not None:
            reason, why = refused
            gate.count(reason, why)
            said = f"{why}: retry in {RETRY_AFTER_S} s, nothing was done"
            await send_json(send, (429, {"detail": said}), [(b"retry-after", str(RETRY_AFTER_S).encode())])
            return
        gate.in_flight += 1
        gate.listing += listing
        try:
            if listing:
                transport = scope.get(TRANSPORT)
                await self.app(scope, receive, _with_deadline(send, transport, gate.stall_s))
                if transport is not None:  # an answer in one piece may sit in the buffer whole: its place held
                    await _drained(transport, gate.stall_s)
            else:
                await self.app(scope, receive, send)
        except Stalled:  # returned unfinished: uvicorn would close the connection once its buffer emptied, never
            _cut.set(True)
            _abort(scope.get(TRANSPORT))
            gate.count_cut(scope["method"], scope["path"])
        finally:
            gate.in_flight -= 1
            gate.listing -= listing
