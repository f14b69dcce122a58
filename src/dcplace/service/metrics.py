"""Prometheus metrics of the service: the latency of decisions (measured as they happen); the engine's counters, the
cluster's state and the store's commits (read from the engine at each scrape, one source of truth with ``/state``)."""

from __future__ import annotations

import logging
import re
import time
import uuid
from collections.abc import Iterator
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info, PlatformCollector, ProcessCollector
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.registry import Collector

import dcplace
from dcplace.engine import NetworkEngine, PlacementEngine
from dcplace.engine.engine import REJECTION_COUNTER
from dcplace.engine.network import tier_shares

LATENCY_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0)
HTTP_BUCKETS = (*LATENCY_BUCKETS, 2.5, 5.0, 10.0, 60.0)
"""Every route: a batch, an import or a call waiting behind one takes seconds (in +Inf with ``LATENCY_BUCKETS``)."""

log = logging.getLogger(__name__)
access = logging.getLogger("dcplace.service.access")
"""One INFO line per HTTP request: method, path, status, milliseconds, request id (``serve --log-level info``)."""


class EngineCollector(Collector):
    """Gauges read from the engine when Prometheus scrapes (no bookkeeping on the request path)."""

    def __init__(self, engine: PlacementEngine) -> None:
        self.engine = engine

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | HistogramMetricFamily]:
        s = self.engine.stats(wait_s=0.0)  # the lock if free, else a read without it: scrapes run on the event loop
        g = GaugeMetricFamily("dcplace_machines", "Machines by status", labels=["status"])
        for status, n in s["machines"].items():
            g.add_metric([status], n)
        yield g
        yield GaugeMetricFamily(
            "dcplace_machines_in_use", "Machines hosting at least one VM", value=s["machines_in_use"]
        )
        yield GaugeMetricFamily("dcplace_vms", "VMs placed", value=s["vms"])
        # one family per quantity, its unit in a label, as kube-state-metrics' kube_node_status_capacity{resource,
        # unit} does: a sum over resources is meaningless and a query names its resource anyway
        cap = GaugeMetricFamily("dcplace_capacity", "Capacity of registered machines", labels=["resource", "unit"])
        used = GaugeMetricFamily("dcplace_allocated", "Allocated", labels=["resource", "unit"])
        for r, unit in (("cpu", "core"), ("mem", "GB")):
            cap.add_metric([r, unit], s["capacity"][r])
            used.add_metric([r, unit], s["allocated"][r])
        yield cap
        yield used
        # the engine's own counters, so Prometheus and /state agree whatever placed or removed a VM (the extender's
        # bind, a failure's re-placements, an evacuation's drops)
        c = s["counters"]
        decisions = CounterMetricFamily("dcplace_decisions", "Placement decisions by result", labels=["result"])
        for result in ("placed", "rejected"):
            decisions.add_metric([result], c[result])
        yield decisions
        why = CounterMetricFamily("dcplace_rejections", "Placements rejected, by code: no-fit (no machine can host "
                                  "it), declined (the policy said no although one could), invalid (the policy chose "
                                  "an infeasible action)", labels=["code"])  # fmt: skip
        for code, key in REJECTION_COUNTER.items():
            why.add_metric([code], c[key])
        yield why
        yield CounterMetricFamily("dcplace_releases", "VMs released by a client", value=c["released"])
        for name, what in (("dropped", "VMs lost with their failed machine (they fit nowhere else)"),
                           ("imported", "Existing allocations recorded"), ("migrated", "VMs moved"),
                           ("reoptimisations", "Re-optimisation events applied")):  # fmt: skip
            yield CounterMetricFamily(f"dcplace_{name}", what, value=c[name])
        store = self.engine.store
        stats = getattr(store, "stats", None)
        if callable(stats):
            st = stats()
            yield CounterMetricFamily("dcplace_store_commits", "Transactions committed (one fsync each)",
                                      value=st["commits"])  # fmt: skip
            yield CounterMetricFamily("dcplace_store_changes", "Operations made durable", value=st["durable"])
            yield GaugeMetricFamily("dcplace_store_pending_operations", "Operations submitted, not yet durable",
                                    value=st["submitted"] - st["durable"])  # fmt: skip
            yield GaugeMetricFamily("dcplace_store_healthy", "1 while the database takes commits, 0 after a failure "
                                    "(fail-stop: restart the service)", value=int(st["healthy"]))  # fmt: skip
            if "journal_seq" in st:
                yield GaugeMetricFamily("dcplace_journal_entries", "Journal entries kept (GET /journal); the oldest "
                                        "go past --journal-keep and a tenth", value=st["journal_entries"])  # fmt: skip
                yield GaugeMetricFamily("dcplace_journal_keep", "Journal entries kept at most (--journal-keep; 0: "
                                        "off)", value=st["journal_keep"])  # fmt: skip
                yield CounterMetricFamily("dcplace_journal_written", "Journal entries written (the last seq)",
                                          value=st["journal_seq"])  # fmt: skip
            if "commit_seconds" in st:
                h = st["commit_seconds"]
                yield HistogramMetricFamily("dcplace_store_commit_seconds", "Time to write and commit one "
                                            "transaction (its fsync included): a slow disk shows here first",
                                            buckets=[(_le(b), n) for b, n in h["buckets"]],
                                            sum_value=h["sum"])  # fmt: skip


def _le(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(bound)


class NetworkCollector(Collector):
    """The network-aware engine's gauges and counters (``serve --network``), read without its lock at each scrape
    (plain numbers, each read at once)."""

    def __init__(self, net: NetworkEngine) -> None:
        self.net = net

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        net, sim, top = self.net, self.net.sim, self.net.topology
        yield GaugeMetricFamily("dcplace_network_jobs", "Network jobs running", value=net.job_count)
        yield GaugeMetricFamily("dcplace_network_store_healthy", "1 while the network database takes changes, 0 "
                                "after a failure (fail-stop: restart the service)",
                                value=int(net.failed is None))  # fmt: skip
        c, by_reason = dict(net.counters), dict(net.rejections)
        decisions = CounterMetricFamily("dcplace_network_decisions", "Network jobs decided, by result",
                                        labels=["result"])  # fmt: skip
        decisions.add_metric(["placed"], c["placed"])
        decisions.add_metric(["rejected"], sum(by_reason.values()))  # one read with the reasons: they always sum
        yield decisions
        why = CounterMetricFamily("dcplace_network_rejections", "Network jobs rejected, by reason: capacity (the free "
                                  "CPU or memory cannot hold it), network (no path with its bandwidth), invalid (a "
                                  "pick it could not use)", labels=["reason"])  # fmt: skip
        for reason, n in by_reason.items():
            why.add_metric([reason], n)
        yield why
        yield CounterMetricFamily("dcplace_network_releases", "Network jobs released", value=c["released"])
        yield CounterMetricFamily("dcplace_network_moves", "Network jobs moved (a make-room plan executed, or moves "
                                  "told)", value=c["moved"])  # fmt: skip
        used = GaugeMetricFamily("dcplace_network_allocated", "Allocated to network jobs, in server units",
                                 labels=["resource"])  # fmt: skip
        cap = GaugeMetricFamily("dcplace_network_capacity", "The network's servers' capacity, in server units",
                                labels=["resource"])  # fmt: skip
        drained = GaugeMetricFamily("dcplace_network_drained", "Free on drained servers (held apart from new jobs), in "
                                    "server units", labels=["resource"])  # fmt: skip
        cpu_used, mem_used, cpu_held, mem_held = net.in_use  # one read: a consistent moment
        for resource, total, in_use, held in (("cpu", int(top.server_cpu.sum()), cpu_used, cpu_held),
                                              ("mem", int(top.server_mem.sum()), mem_used, mem_held)):  # fmt: skip
            cap.add_metric([resource], total)
            used.add_metric([resource], in_use)
            drained.add_metric([resource], held)
        yield cap
        yield used
        yield drained
        yield GaugeMetricFamily("dcplace_network_servers_drained", "Servers drained: no new job is given any of them",
                                value=int(sim.drained.sum()))  # fmt: skip
        bw = GaugeMetricFamily("dcplace_network_bandwidth_share", "Bandwidth in use over the tier's capacity",
                               labels=["tier"])  # fmt: skip
        for tier, share in tier_shares(top, sim.free_bw.copy()).items():
            bw.add_metric([tier], share)
        yield bw


class ServiceMetrics:
    """The service's registry (one per app, so several apps in one process do not collide): the engine's
    collector, the process's (CPU seconds, resident memory, open file descriptors: what a soak watches), the
    platform's (Python version) and ``dcplace_build_info{version}``."""

    def __init__(self, engine: PlacementEngine, network: NetworkEngine | None = None) -> None:
        self.registry = CollectorRegistry()
        if network is not None:
            self.registry.register(NetworkCollector(network))
        ProcessCollector(registry=self.registry)
        PlatformCollector(registry=self.registry)
        Info("dcplace_build", "The dcplace version serving", registry=self.registry).info(
            {"version": dcplace.__version__}
        )
        self.latency = Histogram(
            "dcplace_request_seconds",
            "Time to answer a place or release call, durability included",
            ["operation"],
            buckets=LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(EngineCollector(engine))
        # the labelled children the hot calls use, looked up once (``labels()`` takes a lock and a dict lookup)
        self.place_latency = self.latency.labels("place")
        self.release_latency = self.latency.labels("release")
        self.http_requests = Counter(
            "dcplace_http_requests",
            "HTTP requests by route (the path's first segment), method and status code",
            ["route", "method", "code"],
            registry=self.registry,
        )
        self.http_seconds = Histogram("dcplace_http_request_duration_seconds", "Time to answer an HTTP request, by "
                                      "route and method", ["route", "method"], buckets=HTTP_BUCKETS,
                                      registry=self.registry)  # fmt: skip
        self.http_shed = Counter("dcplace_http_shed", "Requests refused with 429 by load shedding, by reason: "
                                 "in_flight (serve --max-in-flight), listings (--max-listings)", ["reason"],
                                 registry=self.registry)  # fmt: skip
        self.http_in_flight = Gauge("dcplace_http_in_flight", "HTTP requests in flight (all but /healthz and "
                                    "/metrics)", registry=self.registry)  # fmt: skip
        self.http_listings_cut = Counter("dcplace_http_listings_cut", "Listings whose client took nothing of them "
                                         "for the stall limit (60 s by default; the connection aborted, the "
                                         "listing's place freed)", registry=self.registry)  # fmt: skip


def _printable(path: str) -> str:
    """A request's path for a log line: percent-decoded, it is the client's, and a newline in it would forge a line."""
    return path if path.isprintable() else ascii(path)


_REQUEST_ID = re.compile(r"[A-Za-z0-9._:-]{1,128}")


class Observed:
    """ASGI middleware, the outermost: every HTTP request counted by route, method and status code and timed
    (``dcplace_http_requests_total``, ``dcplace_http_request_duration_seconds``: error rates and 503 storms were
    invisible, only successful places and releases were timed), answered with an ``X-Request-ID`` (the client's,
    if it is 1-128 of ``A-Za-z0-9._:-``, else a new one), and a request that ends in an exception logged with its
    method, path and id; with INFO on, each request is one line of ``dcplace.service.access`` (uvicorn's own access
    log is off: it has neither the time taken nor the id). ``routes``: the first path segments that are labels;
    any other is ``other`` (a path is the client's to choose: labels must stay few)."""

    def __init__(self, app: Any, metrics: ServiceMetrics, routes: frozenset[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        t0 = time.perf_counter()
        given = next((v for k, v in scope["headers"] if k == b"x-request-id"), b"").decode("latin-1")
        rid = given if _REQUEST_ID.fullmatch(given) else uuid.uuid4().hex
        status = 500

        async def sending(message: dict[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                message["headers"] = [*message.get("headers", ()), (b"x-request-id", rid.encode())]
            await send(message)

        try:
            await self.app(scope, receive, sending)
        except Exception:
            log.exception("dcplace serve: %s %s failed (request %s)", scope["method"], _printable(scope["path"]), rid)
            raise
        finally:
            seg = scope["path"].split("/", 2)[1] if scope["path"].startswith("/") else ""
            route = f"/{seg}" if seg in self.routes else "other"
            method = scope["method"] if scope["method"] in ("GET", "HEAD", "POST", "PUT", "DELETE") else "other"
            took = time.perf_counter() - t0
            self.metrics.http_requests.labels(route, method, str(status)).inc()
            self.metrics.http_seconds.labels(route, method).observe(took)
            if access.isEnabledFor(logging.INFO):
                access.info("%s %s %d %.1f ms request %s", _printable(scope["method"]), _printable(scope["path"]),
                            status, took * 1e3, rid)  # fmt: skip
