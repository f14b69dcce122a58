"""Load shedding: a request beyond ``serve --max-in-flight`` requests in flight, or a listing beyond
``--max-listings`` listings at once, is answered at once with 429, one sentence and ``Retry-After``, instead of
waiting in a queue that has no end (kube-apiserver's ``--max-requests-inflight`` does the same, with the same code).

Without it an overload review (2026-11-28) measured, with clients opening 1,580 new VMs a second against a service
that decides about 1,100: 15,228 requests in flight, 8,000 open file descriptors, placements answered in 4.6-8.2 s
(p50) and 27-29 s (p99), hundreds of connections reset and requests never answered; clients that gave up after
0.3 s and retried got 31 answers a second while the service placed 98 % of its work for clients that had hung up.
Twenty listings of 100,000 VMs at once took 19.5 s, grew the process by 450 MB and held the liveness check 3 s.

``/healthz`` and ``/metrics`` are never shed: a probe that fails under load would have the orchestrator restart the
one process that is serving. 429 rather than 503, which here means the database failed (restart the service): a
429 says retry this same request after ``Retry-After`` seconds, and a retry is safe (a placement already made is
answered ``replayed``). Everything runs on the event loop, so the counts need no lock.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from dcplace.service.hotpath import send_json

log = logging.getLogger(__name__)

LISTINGS = frozenset({"/vms", "/allocations", "/machines", "/state/snapshot"})
"""``GET`` paths whose answer grows with the cluster (100,000 VMs: 12.6 MB, about 1 s of a core, 22 MB of memory
while it is built), limited apart from the rest."""
UNSHED = frozenset({"/healthz", "/metrics"})
RETRY_AFTER_S = 1
MAX_IN_FLIGHT = 512
"""The default limit: about half a second of placements queued at the 1,100 a second measured on 2 cores."""
MAX_LISTINGS = 4


class Gate:
    """What :class:`Admission` admits: at most ``limit`` requests in flight (all but :data:`UNSHED`), ``listings``
    of them listings (:data:`LISTINGS`), and how many are in flight now (the ``dcplace_http_in_flight`` gauge reads
    it). ``shed``: a Prometheus counter of the refusals by reason (``in_flight``, ``listings``). A warning is logged
    for the first refusal and then at most once per ``log_every_s``, with the count since (one line per refusal
    flooded the log at 1,000 a second)."""

    def __init__(self, limit: int, listings: int, shed: Any = None, log_every_s: float = 10.0) -> None:
        self.limit = limit
        self.listings = listings
        self.shed = shed
        self.log_every_s = log_every_s
        self.in_flight = 0
        self.listing = 0
        self._unlogged = 0
        self._logged_at = -float("inf")

    def refusal(self, listing: bool) -> tuple[str, str] | None:
        """Why a request (a listing or not) is refused now, with the reason's label; None to admit it."""
        if self.in_flight >= self.limit:
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


class Admission:
    """ASGI middleware: each request through ``gate`` (:class:`Gate`), or a 429 with one sentence and
    ``Retry-After``, its body unread."""

    def __init__(self, app: Any, gate: Gate) -> None:
        self.app = app
        self.gate = gate

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
            await self.app(scope, receive, send)
        finally:
            gate.in_flight -= 1
            gate.listing -= listing
