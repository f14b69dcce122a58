"""The HTTP placement service: FastAPI over one :class:`~dcplace.engine.PlacementEngine`.

``create_app(engine)`` builds the application; ``dcplace serve --db PATH --policy NAME`` runs it under uvicorn.
OpenAPI docs are at ``/docs`` and ``/redoc`` (and ``/openapi.json``), served with their scripts from the installed
``fastapi-offline`` package, not from a CDN, so they work on a cluster network without internet access.

Errors a client can cause are 4xx with ``{"detail": "<one sentence>"}``: an unknown machine or VM is 404, a
duplicate id, a machine that still hosts VMs or a VM that fits nowhere is 409 (the body of a rejected placement also
carries ``code`` and the explanation), a malformed body or a bad number is 422. A database failure is 503 (the
service must be restarted to reload what is durable). Anything else is a bug: 500.

Placing and releasing are ``async``: the decision is taken at once under the engine's lock (microseconds) and the
answer waits, without blocking the event loop, for the group commit that makes it durable. The rarer operations
(machines, import) run in FastAPI's thread pool.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import sys
import threading
import time
import traceback
from collections.abc import AsyncIterator, Callable, MutableMapping, Sequence
from contextlib import asynccontextmanager
from dataclasses import asdict
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi.exception_handlers import http_exception_handler
from fastapi.exceptions import RequestValidationError
from fastapi.responses import PlainTextResponse, Response, StreamingResponse
from fastapi.routing import APIRoute
from fastapi_offline import FastAPIOffline
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest
from pydantic import Field, TypeAdapter, ValidationError
from starlette.convertors import Convertor, register_url_convertor
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.routing import Match, Route

from dcplace.engine import (
    Conflict,
    MachineSpec,
    Placement,
    PlacementEngine,
    ReoptPolicy,
    SqliteStore,
    StoreError,
    VmColumns,
    VmListing,
    VmRequest,
)
from dcplace.engine.journal import BY, parse_time
from dcplace.engine.journal import MAX_LIMIT as MAX_JOURNAL
from dcplace.engine.network import NetworkEngine
from dcplace.errors import InputError
from dcplace.service.admission import LISTING_STALL_S, MAX_LISTINGS, Admission, Gate, remember_transport
from dcplace.service.answers import (
    ERROR_STATUS,
    allocation_rows_json,
    explanation_json,
    fail_json,
    place_vm,
    placement_json,
    refuse_query,
    rejection_json,
    release_uid,
    release_vm,
    unparsed,
    validation_sentence,
    vm_json,
    vm_rows_json,
)
from dcplace.service.auth import CERT_ONLY, OPEN_PATHS, BearerAuth, Tokens
from dcplace.service.extender import add_extender_routes
from dcplace.service.hotpath import MAX_BODY, BodyLimit, HotPaths, send_json
from dcplace.service.metrics import Observed, ServiceMetrics
from dcplace.service.models import (
    MAX_INVENTORY,
    AllocationIn,
    AllocationsIn,
    BatchOut,
    ErrorOut,
    ExplainIn,
    ExplanationOut,
    FailOut,
    HealthOut,
    ImportOut,
    JournalOut,
    LastReoptOut,
    MachineChangeIn,
    MachineIn,
    MachineOut,
    MachinesIn,
    MachinesOut,
    MoveIn,
    PinIn,
    PlacementOut,
    ReconcileOut,
    RejectionOut,
    ReoptIn,
    ReoptOut,
    ResizeIn,
    SnapshotOut,
    StateOut,
    VmBatchIn,
    VmIn,
    VmOut,
    check_policy,
    served_policies,
)
from dcplace.service.network import add_network_routes
from dcplace.service.probe import Heartbeat
from dcplace.service.ui import add_ui_routes

UNCHECKED_QUERY = frozenset({"/healthz", "/metrics"})
"""Routes whose query is not checked: a probe or a scrape that a parameter turned into a 422 would restart the
service or lose its metrics, and neither route changes or filters anything."""

ERRORS: dict[int | str, dict[str, Any]] = {
    404: {"model": ErrorOut, "description": "unknown machine or VM"},
    409: {"model": ErrorOut, "description": "conflicts with the state (duplicate id, machine not empty)"},
    422: {"model": ErrorOut, "description": "malformed body or bad number"},
    503: {"model": ErrorOut, "description": "the database failed; restart the service"},
}


REFUSALS: dict[str, str] = {
    "403": "a web page's request (its Origin is another site) may not change the cluster",
    "413": "the request body is over the service's limit (serve --max-body-mb; POST /vms: one VM's worth)",
    "421": "the Host header names a host this service does not answer to (serve --allowed-host)",
    "422": "a query parameter the operation does not take, named (or a malformed body or bad number)",
    "503": "the database failed (restart the service), or a past state's temporary copy found no room (free space)",
}
"""Answers middleware or a dependency gives before or around any route, added to each operation they apply to."""

PAGED = ("/vms", "/allocations")


def _complete_document(app: FastAPI, numa: int) -> None:
    """Add to the generated OpenAPI document what the routes' declarations cannot say, once, when it is first asked for:
    the refusals of :data:`REFUSALS` on the operations they apply to (403 on changing methods, 421 on all but the
    probes, 413 on all, 422 on all but the probe and the scrape, 503 on all but ``/metrics``); the one-sentence body of
    every 422 (FastAPI declares its list-shaped error, which the service never sends); the ``X-Request-ID`` header of
    every answer and the ``Link`` header of the paged listings; the NUMA node count of this cluster as the length of a
    per-node list; the policy names the service takes. (A conformance review found each of these missing or wrong: a
    client generated from the document met answers it did not know.)"""
    generate = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        try:
            return _completed(generate(), numa)
        except BaseException:  # generate() cached the document: a half-completed one must not be served later
            app.openapi_schema = None
            raise

    app.openapi = openapi  # type: ignore[method-assign]


def _completed(doc: dict[str, Any], numa: int) -> dict[str, Any]:
    """:func:`_complete_document`'s additions, made to ``doc`` in place."""
    from dcplace.service.models import ExtenderArgs, ExtenderBindingArgs, NetInventoryJobIn

    schemas = doc["components"]["schemas"]
    for body_model in (ExtenderArgs, ExtenderBindingArgs, NetInventoryJobIn):  # bodies their routes read themselves
        own = body_model.model_json_schema(ref_template="#/components/schemas/{model}")
        schemas.update(own.pop("$defs", {}))
        schemas[body_model.__name__] = own
    error = {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorOut"}}}
    request_id = {"X-Request-ID": {"description": "the client's X-Request-ID when well-formed (1-128 of "
                                   "A-Za-z0-9._:-), else a new one; the log's line for the request names it",
                                   "schema": {"type": "string"}}}  # fmt: skip
    for path, ops in doc["paths"].items():
        for method, op in ops.items():
            answers = op["responses"]
            refusals = ["413"] + (["503"] if path != "/metrics" else [])
            refusals += [] if method == "get" and path in PROBES else ["421"]
            refusals += ["403"] if method in ("post", "put", "patch", "delete") else []
            refusals += [] if path in UNCHECKED_QUERY else ["422"]  # _known_query
            for code in refusals:
                answers.setdefault(code, {"description": REFUSALS[code], "content": error})
            if "422" in answers:
                answers["422"]["content"] = error
            for code, answer in answers.items():
                answer["headers"] = {**answer.get("headers", {}), **request_id}
                if method == "get" and path in PAGED and code == "200":
                    answer["headers"]["Link"] = {"description": '<next page>; rel="next" while more remain (with '
                                                 "limit)", "schema": {"type": "string"}}  # fmt: skip
    for name in ("HTTPValidationError", "ValidationError"):
        schemas.pop(name, None)
    for route, name in (("/extender/filter", "ExtenderArgs"), ("/extender/prioritize", "ExtenderArgs"),
                        ("/extender/bind", "ExtenderBindingArgs")):  # fmt: skip
        doc["paths"][route]["post"]["requestBody"] = {
            "required": True,
            "content": {"application/json": {"schema": {"$ref": f"#/components/schemas/{name}"}}},
        }
    names = sorted(served_policies())
    for name in ("VmIn", "ExplainIn", "VmBatchIn"):
        _policy_names(schemas[name]["properties"]["policy"], names)
    for param in doc["paths"]["/machines/{machine_id}/fail"]["post"].get("parameters", []):
        if param["name"] == "policy":
            _policy_names(param["schema"], names)
    for field in ("cpu", "mem"):
        for branch in schemas["MachineIn"]["properties"][field]["anyOf"]:
            if branch.get("type") == "array":
                branch.update(minItems=numa, maxItems=numa)
    return doc


def _methods_at(app: FastAPI, scope: MutableMapping[str, Any]) -> list[str]:
    """The methods the routes take at ``scope``'s path, with HEAD beside GET (:class:`HeadAsGet`) and OPTIONS:
    ``/machines/m1/drain`` is matched by ``GET /machines/{id}`` (ids hold "/") and ``POST .../drain`` alike. None
    where no route matches (a 404; the docs' files under ``/docs-static`` answer for themselves)."""
    methods: set[str] = set()
    for route in app.router.routes:
        if isinstance(route, Route) and route.matches(scope)[0] != Match.NONE:
            methods |= route.methods or set()
    if "GET" in methods:
        methods.add("HEAD")
    return sorted(methods | {"OPTIONS"}) if methods else []


def _policy_names(schema: dict[str, Any], names: list[str]) -> None:
    """The string branch of an optional ``policy`` field lists the names the service takes (``served_policies``)."""
    for branch in schema.get("anyOf", [schema]):
        if branch.get("type") == "string":
            branch["enum"] = names


def _query_names(route: APIRoute) -> frozenset[str]:
    """The query parameters ``route`` takes (its own and its dependencies'), kept on the route once found."""
    known: frozenset[str] | None = getattr(route, "_dcplace_query", None)
    if known is None:
        names: set[str] = set()
        todo = [route.dependant]
        while todo:
            d = todo.pop()
            names |= {p.alias for p in d.query_params}
            todo += d.dependencies
        known = frozenset(names)
        route._dcplace_query = known  # type: ignore[attr-defined]
    return known


async def _known_query(request: Request) -> None:
    """Every API route's query parameters checked by name: one it does not take is a 422 naming it. Ignored, they
    made ``POST /machines/{id}/evacuate?dry_run=true`` drain the machine and ``POST /allocations?dry_run=true``
    import its rows (an operator's review). The page and the docs (out of the schema) take what they like, and so
    do the probe and the scrape (:data:`UNCHECKED_QUERY`)."""
    route = request.scope.get("route")
    if not request.query_params or not isinstance(route, APIRoute) or not route.include_in_schema:
        return
    if route.path_format in UNCHECKED_QUERY:
        return
    refuse_query(request.method, route.path_format, _query_names(route), request.query_params)


_INVENTORY = TypeAdapter(Annotated[list[AllocationIn], Field(max_length=MAX_INVENTORY)])


def _as_of(text: str) -> float:
    """``as_of`` as :func:`parse_time` reads a time, an error naming ``as_of``."""
    try:
        return parse_time(text)
    except InputError as e:
        raise InputError(e.detail, field="as_of") from None


def _inventory(raw: bytes) -> list[dict[str, Any]]:
    """``POST /allocations/reconcile``'s body, checked as ``POST /allocations`` checks its rows; each row as given
    (a ``pinned`` or ``uid`` it leaves out is not set, so the records keep theirs)."""
    if not raw:
        raise InputError("the body must be the inventory, a JSON list of allocations", field="body")
    try:
        rows = _INVENTORY.validate_json(raw)
    except ValidationError as e:
        raise InputError(validation_sentence([{**x, "loc": ("body", *x["loc"])} for x in e.errors()])) from None
    return [r.model_dump(exclude_unset=True) for r in rows]


def _answer_with(status: int) -> Any:
    """An exception handler answering ``status`` with the error's one sentence."""

    async def handler(request: Request, exc: Exception) -> Response:
        return _json({"detail": str(exc)}, status)

    return handler


def _json(data: Any, status: int = 200) -> Response:
    return Response(json.dumps(data), status_code=status, media_type="application/json")


Limit = Annotated[int | None, Query(ge=1, description="at most this many (none: all)")]
After = Annotated[int, Query(ge=-1, le=2**62, description="the cursor of the page before, from its Link header")]
# checked by the engine, so that the fast path (which has no FastAPI validation) answers with the same sentence
UidQuery = Annotated[str | None, Query(description="free the VM only if it was placed with this uid (else a 409)")]


LISTING_CHUNK = 1000
"""VMs a listing builds between two turns of the event loop (about 10 ms here)."""


def _listed(listing: VmListing, encode: Callable[[VmColumns], str], request: Request) -> Response:
    """A listing as JSON (``encode``: a chunk's rows as JSON text without the list's brackets), a ``Link`` header
    (RFC 8288, as GitHub's API pages) naming the next page. Over :data:`LISTING_CHUNK` VMs it is built and sent a
    chunk at a time on the event loop, which serves everything else between two chunks: built in one piece in a
    worker thread, each listing of 100,000 VMs (12.6 MB) held 22 MB while it was built, and its thread took Python's
    interpreter lock from the loop's placements, which ran at 35 a second beside twenty listings (an overload
    review)."""
    headers = {}
    if listing.next is not None:
        url = request.url.include_query_params(after=listing.next)
        headers["Link"] = f'<{url.path}?{url.query}>; rel="next"'
    if len(listing) <= LISTING_CHUNK:
        whole = ", ".join(encode(chunk) for chunk in listing.columns())
        return Response(f"[{whole}]", media_type="application/json", headers=headers)

    async def body() -> AsyncIterator[bytes]:
        yield b"["
        sep = b""
        for chunk in listing.columns(LISTING_CHUNK):
            yield sep + encode(chunk).encode()
            sep = b", "
            await asyncio.sleep(0)
        yield b"]"

    return StreamingResponse(body(), media_type="application/json", headers=headers)


async def _reoptimiser(engine: PlacementEngine, policy: ReoptPolicy, every_s: float, last: dict[str, Any]) -> None:
    """Check ``policy``'s triggers every ``every_s`` seconds; run a due event in a worker thread (it holds the
    engine's lock for its snapshot and its moves, not while it solves)."""
    while True:
        await asyncio.sleep(every_s)
        try:
            rep = await asyncio.to_thread(engine.reoptimise_if_due, policy, time.time())
        except (InputError, StoreError) as e:  # a cluster the batch model cannot take: say so, keep serving
            last["report"] = {"error": str(e)}
            log.warning("dcplace serve: a background re-optimisation event failed: %s", e)  # was /reoptimise/last only
            continue
        except Exception as e:  # a bug in an event: it ended background re-optimisation silently, for good
            last["report"] = {"error": f"the re-optimisation event failed ({type(e).__name__}: {e}); see the log"}
            traceback.print_exc(file=sys.stderr)
            continue
        if rep is not None:
            last["report"] = rep.as_dict()
            if logging.getLogger("dcplace.engine").isEnabledFor(logging.INFO):
                continue  # the engine's own line says it (serve --log-level info)
            print(f"dcplace serve: re-optimisation ({rep.trigger}): {rep.applied} move(s), machines in use "
                  f"{rep.machines_before} -> {rep.machines_after}, verified: {'yes' if rep.verified else 'NO'}",
                  file=sys.stderr, flush=True)  # fmt: skip


log = logging.getLogger(__name__)

LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "::1")
PROBES = ("/healthz", "/metrics")
"""Answered whatever the Host header names: a kubelet's probes and Prometheus' pod discovery address the pod by its
IP, which changes and which no ``--allowed-host`` list can hold (they got 421, so the pod restarted in a loop). Both
only read counts, which a page could learn nothing harmful from; everything else keeps the Host check."""
"""The names a service bound to a loopback address answers to (``serve``'s default, with the address itself): any
other ``Host`` is a page that rebound its own DNS name to the loopback address to reach it, unless an operator named
it (``serve --allowed-host``: a proxy in front that passes its own name on)."""


def _host_name(netloc: str) -> str:
    """``host`` of ``host[:port]`` (``[::1]:8000`` -> ``::1``), lower-cased, without a trailing dot."""
    netloc = netloc.strip().lower()
    if netloc.startswith("["):
        netloc = netloc[1 : netloc.find("]")] if "]" in netloc else netloc
    elif netloc.count(":") == 1:
        netloc = netloc.rsplit(":", 1)[0]
    return netloc.rstrip(".")


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a name or an address, brackets allowed) is this machine only: localhost, 127.0.0.0/8, ::1."""
    import ipaddress

    name = _host_name(host)
    if name == "localhost":
        return True
    try:
        return ipaddress.ip_address(name).is_loopback
    except ValueError:
        return False


class BrowserGuard:
    """ASGI middleware against web pages reaching the service through the operator's browser (there is no
    authentication: docs/engine.md, "Security"). A request that changes something (POST, PUT, PATCH, DELETE) and
    carries an ``Origin`` other than the service's own is refused 403: a page on any site could otherwise drain,
    fail or evacuate machines with a body-less ``fetch`` (no preflight), and clients that are not browsers send no
    ``Origin``. With ``hosts``, a ``Host`` header naming another host is refused 421 (DNS rebinding: a page whose
    name now points at 127.0.0.1 is same-origin with the service as far as the browser knows)."""

    def __init__(self, app: Any, hosts: tuple[str, ...] | None = None, origins: tuple[str, ...] = ()) -> None:
        self.app = app
        self.hosts = None if hosts is None else {_host_name(h) for h in hosts}
        self.origins = {_host_name(h) for h in origins}  # names an operator declared (a proxy's public name)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            headers = {k.decode(): v.decode("latin-1") for k, v in scope["headers"] if k in (b"host", b"origin")}
            host = headers.get("host", "")
            probe = scope["method"] in ("GET", "HEAD") and scope["path"] in PROBES  # by pod IP: kubelet, Prometheus
            # no Host: not a browser
            if self.hosts is not None and host and not probe and _host_name(host) not in self.hosts:
                said = (f"this service answers to {', '.join(sorted(self.hosts))}, not to host {host!r} (serve "
                        "--allowed-host adds names)")  # fmt: skip
                await send_json(send, (421, {"detail": said}))
                return
            origin = headers.get("origin")
            if origin is not None and scope["method"] in ("POST", "PUT", "PATCH", "DELETE"):
                netloc = origin.split("://", 1)[-1].rstrip("/").lower()
                if netloc != host.lower() and _host_name(netloc) not in self.origins:
                    said = (f"a request from the web page at {origin} may not change the cluster; call the "
                            "service directly, or name a proxy in front with serve --allowed-host")  # fmt: skip
                    await send_json(send, (403, {"detail": said}))
                    return
        await self.app(scope, receive, send)


class HeadAsGet:
    """ASGI middleware: ``HEAD`` on any route answered as its ``GET`` without the body (HTTP requires it of every GET
    resource; FastAPI routes answered 405), headers included, so a client learns the status and the length."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or scope["method"] != "HEAD":
            await self.app(scope, receive, send)
            return

        async def no_body(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.body":
                if message.get("more_body", False):  # a streamed answer: ended here, the rest never built
                    await send({"type": "http.response.body", "body": b"", "more_body": False})
                    raise _HeadDone
                message = {**message, "body": b""}
            await send(message)

        with contextlib.suppress(_HeadDone):
            await self.app({**scope, "method": "GET"}, receive, no_body)


class _Service(FastAPI):
    """The service's application: every HTTP request's connection kept in its scope first
    (:func:`~dcplace.service.admission.remember_transport`: a stalled listing is cut off by it). Only this call
    sees the ``send`` uvicorn gives (every middleware, Starlette's own outermost, wraps it). ``FastAPIOffline`` is a
    function that builds a ``FastAPI``, so its answer takes this class (:func:`create_app`)."""

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            remember_transport(scope, send)
        await super().__call__(scope, receive, send)


class _HeadDone(Exception):
    """A ``HEAD`` answered as soon as its ``GET`` started a streamed body (:class:`HeadAsGet`): a listing of 100,000
    VMs was built whole, about half a second of the event loop, for headers."""


class _VmId(Convertor[str]):
    """A VM or machine id in a path: one or more characters, "/" included (Kubernetes' namespace/name; a machine
    registered as ``rack1/m0`` was placed on but unreachable under /machines); never empty, so ``DELETE /vms/``
    is never a lookup of '' (it is redirected to ``/vms``, which answers 405)."""

    regex = ".+"

    def convert(self, value: str) -> str:
        return value

    def to_string(self, value: str) -> str:
        return value


register_url_convertor("vmid", _VmId())


def _document_bearer(app: FastAPI) -> None:
    """The OpenAPI document says every operation needs a bearer token (the docs page then offers "Authorize", and
    its "Try it out" sends the token); the open paths do not call for one."""
    plain = app.openapi

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is not None:
            return app.openapi_schema
        doc = plain()  # FastAPI keeps it as app.openapi_schema: changed in place, once
        doc.setdefault("components", {})["securitySchemes"] = {"bearer": {"type": "http", "scheme": "bearer"}}
        for path, ops in doc.get("paths", {}).items():
            if path not in OPEN_PATHS:
                for op in ops.values():
                    op["security"] = [{"bearer": []}]
                    op.setdefault("responses", {})["401"] = {"description": "no token, or not one it takes"}
        return doc

    app.openapi = openapi  # type: ignore[method-assign]


def create_app(
    engine: PlacementEngine,
    reopt: ReoptPolicy | None = None,
    check_every_s: float = 60.0,
    fast_path: bool = True,
    max_body: int = MAX_BODY,
    allowed_hosts: tuple[str, ...] | None = None,
    allowed_origins: tuple[str, ...] = (),
    tokens: Sequence[str] | Tokens = (),
    client_certs: bool = False,
    max_in_flight: int | None = None,
    max_listings: int = MAX_LISTINGS,
    heartbeat: Heartbeat | None = None,
    listing_stall_s: float = LISTING_STALL_S,
    network: NetworkEngine | None = None,
) -> FastAPI:
    """The service over ``engine`` (which it does not close). ``reopt``: re-optimise in the background whenever its
    timer or threshold is due (checked every ``check_every_s`` seconds, wall clock); the last event's report is at
    ``GET /reoptimise/last``. ``fast_path``: answer ``POST /vms`` and ``DELETE /vms/{id}`` in
    :class:`~dcplace.service.hotpath.HotPaths` (same answers, less CPU) instead of FastAPI's routes.
    ``allowed_hosts``: the ``Host`` names answered (None: any); ``allowed_origins``: host names whose web pages may
    change the cluster besides the service's own (a proxy's public name; :class:`BrowserGuard`); ``tokens``: the
    bearer tokens every request but the open paths must carry (none: no check; a :class:`Tokens` to replace them
    while the service runs; :mod:`dcplace.service.auth`);
    ``client_certs``: every client shows a certificate (the server requires one), so the extender's routes need no
    token (kube-scheduler sends none); ``max_in_flight`` (None: no limit), ``max_listings``: more requests in
    flight, or listings being built, are answered 429 at once, and a listing whose client reads nothing for
    ``listing_stall_s`` is cut off (:mod:`dcplace.service.admission`); ``heartbeat``:
    beaten by a task on the application's event loop, for a probe on another (:mod:`dcplace.service.probe`);
    ``network``: also serve jobs of the network-aware setting on it (:mod:`dcplace.service.network`)."""
    if not ((max_in_flight is None or max_in_flight >= 1) and max_listings >= 1):
        raise ValueError(f"max_in_flight and max_listings must be at least 1, not {max_in_flight}, {max_listings}")
    last: dict[str, Any] = {} if engine.last_background_report is None else {"report": engine.last_background_report}

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        tasks = [] if reopt is None else [asyncio.create_task(_reoptimiser(engine, reopt, check_every_s, last))]
        if heartbeat is not None:
            tasks.append(asyncio.create_task(heartbeat.run()))
        yield
        for task in tasks:
            task.cancel()

    app = FastAPIOffline(
        dependencies=[Depends(_known_query)],
        static_url="/docs-static",
        title="dcplace placement service",
        description="Place VMs on NUMA machines with a named policy; durable state; explanations of every decision.",
        version="0.1.0",
        lifespan=lifespan,
    )
    app.__class__ = _Service  # a subclass adding one step to each call (its docstring)
    metrics = ServiceMetrics(engine, network)
    app.state.engine = engine
    app.state.metrics = metrics

    for exc_type, status in ERROR_STATUS:
        app.add_exception_handler(exc_type, _answer_with(status))
    if fast_path:
        app.add_middleware(HotPaths, engine=engine, metrics=metrics)
    app.add_middleware(HeadAsGet)
    app.add_middleware(BodyLimit, limit=max_body)
    app.add_middleware(BrowserGuard, hosts=allowed_hosts, origins=allowed_origins)  # before any body
    gate = Gate(max_in_flight, max_listings, metrics.http_shed, cut=metrics.http_listings_cut,
                stall_s=listing_stall_s)  # fmt: skip
    metrics.http_in_flight.set_function(lambda: gate.in_flight)
    # before any body is read; inside the token check: a caller without a token learns nothing of the load
    app.add_middleware(Admission, gate=gate)
    held = tokens if isinstance(tokens, Tokens) else Tokens(tokens) if tokens else None
    if held is not None:
        # outside all but Observed (401s counted): nothing is read for a caller without a token
        app.add_middleware(BearerAuth, tokens=held, open_prefixes=CERT_ONLY if client_certs else ())
        _document_bearer(app)

    @app.exception_handler(RequestValidationError)
    async def _invalid(request: Request, exc: RequestValidationError) -> Response:
        return _json({"detail": validation_sentence(exc.errors())}, 422)

    @app.exception_handler(StarletteHTTPException)
    async def _http(request: Request, exc: StarletteHTTPException) -> Response:
        """FastAPI's own errors as it answers them, except a body it could not parse (JSON nested too deep): the
        422 and sentence every other malformed body gets, on every route (the fast path's included)."""
        if exc.status_code == 400 and str(exc.detail).startswith("There was an error parsing the body"):
            return _json({"detail": unparsed(exc.__cause__)}, 422)
        allowed = _methods_at(app, request.scope) if exc.status_code == 405 else []
        if allowed:  # Starlette's Allow named the methods of the first route that matched the path
            allow = ", ".join(allowed)
            if request.method == "OPTIONS":
                return Response(status_code=204, headers={"Allow": allow})
            said = f"{request.method} is not allowed on {request.url.path}; it takes {allow}"
            return Response(json.dumps({"detail": said}), 405, {"Allow": allow}, media_type="application/json")
        return await http_exception_handler(request, exc)

    # -- health and metrics -------------------------------------------------------------------------------------
    async def readable() -> None:
        """Reads answer 503 once the database failed, as writes and /healthz do (GET /vms listed a VM whose write
        had failed)."""
        engine.check_store()

    READ = [Depends(readable)]

    @app.get("/healthz", tags=["operations"], response_model=HealthOut, responses={503: ERRORS[503]})
    async def healthz() -> Response:
        """200 while the engine can take writes; 503 once the database failed. Answered on the event loop without
        the engine's lock: a liveness probe waited behind a long re-optimisation event, first for the lock and then
        for a worker thread (those were all waiting for the lock too)."""
        return _json({"status": "ok", **engine.health(), **(network.health() if network is not None else {})})

    @app.get("/metrics", tags=["operations"], response_class=PlainTextResponse)
    async def prometheus() -> Response:
        """Prometheus text format; read on the event loop, with the engine's lock when it is free and without it
        otherwise (EngineCollector), so a scrape never waits behind a long call."""
        return Response(generate_latest(metrics.registry), media_type=CONTENT_TYPE_LATEST)

    @app.get("/state", dependencies=READ, tags=["operations"], response_model=StateOut)
    def state() -> Response:
        """Cluster totals: machines by status, VMs, capacity and allocation, counters."""
        return _json(engine.stats())

    @app.get("/state/snapshot", dependencies=READ, tags=["operations"], response_model=SnapshotOut,
             responses=ERRORS)  # fmt: skip
    def snapshot(
        request: Request,
        seq: Annotated[int | None, Query(description="the state as it was right after this journal entry (0: before "
                                         "the first)")] = None,
        at: Annotated[str | None, Query(description="the state as it was at this time: Unix seconds or ISO 8601 "
                                        "('2026-11-28T21:48:00Z'; UTC unless it says otherwise)")] = None,
    ) -> Response:  # fmt: skip
        """The whole state (machines with their slots, every VM); with ``seq`` or ``at``, as it was then: the state
        now with the journal's entries since undone (docs/engine.md, "The state at a past moment"), read from an
        online backup of the database, a copy of it for the time it takes."""
        if seq is None and at is None:
            return _json(engine.snapshot())
        store = engine.store
        if not isinstance(store, SqliteStore):
            raise InputError("this service keeps no journal to rewind: it has no database", field="seq")
        return _json(PlacementEngine.read_state_at(store.path, seq=seq, at=None if at is None else parse_time(at)))

    # -- machines -----------------------------------------------------------------------------------------------
    @app.post("/machines", status_code=201, response_model=MachineOut, tags=["machines"],
              responses={**ERRORS, 200: {"model": MachineOut, "description": "registered exactly so already (a "
                                         "retry): what it holds"}})  # fmt: skip
    def add_machine(body: MachineIn) -> Response:
        """Register a machine (active); 201. One registered exactly so already is answered 200 with what it holds
        (a retry changes nothing, as ``POST /machines/batch`` skips it); the same id with another shape is a 409."""
        try:
            return _json(asdict(engine.add_machine(body.id, body.cpu, body.mem, body.rack)), 201)
        except Conflict as exc:
            if exc.field != "id":
                raise
            try:  # the batch's rule: skipped where registered exactly so, a conflict where not
                _, skipped = engine.add_machines([MachineSpec(body.id, body.cpu, body.mem, body.rack)])
            except Conflict:
                raise Conflict(f"a machine {body.id!r} is already registered with another capacity or rack (GET "
                               "/machines/{id} says which); PATCH /machines/{id} changes it",
                               field="id") from None  # fmt: skip
            if not skipped:  # removed between the two calls, and registered now by the second
                return _json(asdict(engine.machine(body.id)), 201)
            return _json(asdict(engine.machine(body.id)), 200)

    @app.post("/machines/batch", status_code=201, response_model=MachinesOut, tags=["machines"], responses=ERRORS)
    def add_machines(body: MachinesIn) -> Response:
        """Register several machines with one commit (one fsync), all or nothing (an error names the machine by
        its index); a machine already registered exactly so is skipped, so a retried batch changes nothing."""
        added, skipped = engine.add_machines([MachineSpec(m.id, m.cpu, m.mem, m.rack) for m in body.machines])
        return _json({"registered": len(added), "already_registered": skipped,
                      "machines": [asdict(m) for m in added]}, 201)  # fmt: skip

    @app.get("/machines", dependencies=READ, response_model=list[MachineOut], tags=["machines"])
    def machines() -> Response:
        """Every machine, in the order policies see them."""
        return _json([asdict(m) for m in engine.machines()])

    @app.get(
        "/machines/{machine_id:vmid}", dependencies=READ, response_model=MachineOut, tags=["machines"], responses=ERRORS
    )
    def machine(machine_id: str) -> Response:
        return _json(asdict(engine.machine(machine_id)))

    @app.post("/machines/{machine_id:vmid}/drain", response_model=MachineOut, tags=["machines"], responses=ERRORS)
    def drain(machine_id: str) -> Response:
        """No new VMs on the machine; those it hosts stay."""
        return _json(asdict(engine.drain(machine_id)))

    @app.post("/machines/{machine_id:vmid}/activate", response_model=MachineOut, tags=["machines"], responses=ERRORS)
    def activate(machine_id: str) -> Response:
        """Undo a drain or a failure."""
        return _json(asdict(engine.activate(machine_id)))

    @app.post("/machines/{machine_id:vmid}/fail", response_model=FailOut, tags=["machines"], responses=ERRORS)
    def fail(machine_id: str, policy: str | None = None) -> Response:
        """The machine failed: its VMs are placed again through the policy; those that fit nowhere are dropped."""
        if policy is not None:
            try:
                check_policy(policy)
            except ValueError as e:
                raise InputError(str(e), field="policy") from None
        return _json(fail_json(engine.fail(machine_id, policy)))

    @app.post("/machines/{machine_id:vmid}/evacuate", response_model=ReoptOut, tags=["machines"], responses=ERRORS)
    def evacuate(machine_id: str, failed: bool = False, dry_run: bool = False) -> Response:
        """Drain the machine (or, ``failed=true``, fail it) and re-home its VMs with the fewest moves, through a
        verified migration plan; a failed machine's VMs that fit nowhere are dropped. 409 for a pinned VM on a
        drained machine. ``dry_run``: the same report with the moves planned, nothing changed."""
        rep = engine.evacuate(machine_id, failed=failed, now=time.time(), execute=not dry_run)
        return _json(rep.as_dict())

    manual = threading.Lock()  # one event asked for over HTTP at a time: they queued without limit, each solving

    @app.post("/reoptimise", response_model=ReoptOut, tags=["machines"], responses=ERRORS)
    def reoptimise(body: ReoptIn | None = None) -> Response:
        """One re-optimisation event now: select the VMs that may move, re-solve the machines in use with
        migration costs, and apply the verified migration plan (``execute=false``: plan only)."""
        fields = (body or ReoptIn()).model_dump()  # no body: every field's default
        execute = fields.pop("execute")
        if not manual.acquire(blocking=False):  # an event solves for up to an hour: one asked for over HTTP at a time
            return _json({"detail": "a re-optimisation event asked for over HTTP is already running; ask again "
                                    "when it has answered"}, 409)  # fmt: skip
        try:
            return _json(engine.reoptimise(ReoptPolicy(**fields), now=time.time(), execute=execute).as_dict())
        finally:
            manual.release()

    @app.get("/reoptimise/last", dependencies=READ, tags=["machines"], response_model=LastReoptOut)
    def last_reoptimisation(
        moves: Annotated[bool, Query(description="false: the moves list left empty (the counts stay), for a page "
                                     "that shows the summary: an event of 10,000 moves is about a megabyte")] = True,
    ) -> Response:  # fmt: skip
        """The last background re-optimisation event's report, its moves listed as ``POST /reoptimise`` lists them
        (kept in the database: a restart still shows it); ``{}`` before one, ``{"error": sentence}`` when the
        cluster could not be re-optimised (since this start)."""
        report = last.get("report", {})
        if not moves and "moves" in report:
            report = {**report, "moves": []}
        return _json(report)

    @app.get("/journal", dependencies=READ, tags=["operations"], response_model=JournalOut, responses=ERRORS)
    def journal(
        request: Request,
        vm: Annotated[str | None, Query(description="only this VM's entries")] = None,
        machine: Annotated[str | None, Query(description="only this machine's (a VM moved away from it included)")]
        = None,
        event: Annotated[str | None, Query(description="only this event (placed, moved, released, ...)")] = None,
        by: Annotated[str | None, Query(description="only VM entries made for this reason: " + ", ".join(BY))] = None,
        after: Annotated[int, Query(ge=0, description="entries after this seq: the page before's `next`")] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_JOURNAL, description="entries at most")] = 1000,
        tail: Annotated[int | None, Query(ge=1, le=MAX_JOURNAL, description="instead: the newest this many, still "
                                          "oldest first (`next` is then null)")] = None,
    ) -> Response:  # fmt: skip
        """What happened to the cluster, oldest first (docs/engine.md, "The journal"): VMs placed, moved, pinned,
        released, dropped, requests rejected, machines added, drained, activated, failed, removed. Read on a
        connection of its own: it never holds up the commits."""
        entries, more = engine.journal_page(vm=vm, machine=machine, event=event, after=after, limit=limit, tail=tail,
                                            by=by)  # fmt: skip
        return _json({"entries": [e.as_dict() for e in entries], "next": more})

    @app.put("/vms/{vm_id:vmid}/pinned", response_model=VmOut, tags=["vms"], responses=ERRORS)
    def pin(vm_id: str, body: PinIn) -> Response:
        """Pin (or unpin) a VM: re-optimisation never moves a pinned VM."""
        return _json(vm_json(engine.pin(vm_id, body.pinned), body.pinned, engine.uids.get(vm_id)))

    @app.patch("/vms/{vm_id:vmid}", response_model=VmOut, tags=["vms"], responses=ERRORS)
    def resize(vm_id: str, body: ResizeIn) -> Response:
        """Record a VM's new size where it runs (a resize done outside dcplace, Nova's ``resize.confirm``): one
        step, keeping its place, pin and uid; journalled as its release and a placement anew (``by``: ``resize``);
        409 where it does not fit there. Durable when answered."""
        rec = engine.resize(vm_id, body.cpu, body.mem)
        return _json(vm_json(rec, vm_id in engine.pinned, engine.uids.get(vm_id)))

    @app.post("/vms/{vm_id:vmid}/move", response_model=VmOut, tags=["vms"], responses=ERRORS)
    def move(vm_id: str, body: MoveIn, dry_run: bool = False) -> Response:
        """Record that a VM now runs on another machine (or node): a live migration done outside dcplace, by hand
        or by the operator's own tooling carrying out a re-optimisation plan's move. It keeps its size, pin and
        uid; journalled as ``moved``; it must fit there. Durable when answered. ``dry_run``: whether it would fit
        (the same answer or refusal), nothing changed: ask before migrating."""
        node = None if body.node in (None, "all") else body.node
        rec = engine.move(vm_id, body.machine, node, now=time.time(), execute=not dry_run)  # type: ignore[arg-type]
        return _json(vm_json(rec, vm_id in engine.pinned, engine.uids.get(vm_id)))

    @app.patch("/machines/{machine_id:vmid}", response_model=MachineOut, tags=["machines"], responses=ERRORS)
    def change_machine(machine_id: str, body: MachineChangeIn) -> Response:
        """Give a registered machine another capacity per NUMA node or another rack, also while it hosts VMs (a
        machine replaced by a bigger one, memory added, moved to another rack); what the body leaves out stays. Each
        node must keep at least what its VMs take (409 otherwise). Journalled as ``machine-changed``."""
        given = body.model_dump(exclude_unset=True)
        rack = {"rack": given["rack"]} if "rack" in given else {}
        info = engine.change_machine(machine_id, given.get("cpu"), given.get("mem"), **rack)
        return _json(asdict(info))

    @app.delete("/machines/{machine_id:vmid}", status_code=204, tags=["machines"], responses=ERRORS)
    def remove(machine_id: str) -> Response:
        """Unregister an empty machine."""
        engine.remove_machine(machine_id)
        return Response(status_code=204)

    # -- VMs ----------------------------------------------------------------------------------------------------
    @app.post(
        "/vms",
        status_code=201,
        response_model=PlacementOut,
        tags=["vms"],
        responses={
            **ERRORS,
            200: {"model": PlacementOut, "description": "a retry: the VM was already placed so (`replayed`)"},
            409: {
                "model": RejectionOut | ErrorOut,
                "description": "rejected (no fit: the reason, code and "
                "explanation), or another request under a placed id (the sentence only)",
            },
        },
    )
    async def place(body: VmIn) -> Response:
        """Place a VM with the service's policy (or ``policy``); durable when answered. A VM that fits nowhere is
        409 with the reason and the explanation. A retry (the same id, size and span as a placed VM: the first
        answer was lost) is 200 with that VM's placement as it is now, ``replayed``; the same id with another size
        or span is 409."""
        status, payload = await place_vm(engine, metrics, body)
        return _json(payload, status)

    @app.post("/vms/batch", response_model=BatchOut, tags=["vms"], responses=ERRORS)
    async def place_batch(body: VmBatchIn) -> Response:
        """Place several VMs in order (the decisions of one ``POST /vms`` each, without explanations, rejections
        with theirs), durable when answered, with one commit: bulk admission. 200 even when some are rejected
        (each result says); a VM already placed with its size and span is answered with its placement,
        ``replayed`` and counted apart (a retried batch places nothing twice); an id twice, another size or span
        under a placed id, or a bad body is 409 / 422 and places nothing."""
        reqs = [VmRequest(v.id, v.cpu, v.mem, v.multi_numa, v.pinned, v.uid) for v in body.vms]
        out = await engine.place_batch_async(reqs, body.policy)
        placed = sum(1 for d in out if isinstance(d, Placement))
        replayed = sum(1 for d in out if isinstance(d, Placement) and d.replayed)
        results = [placement_json(d) if isinstance(d, Placement) else rejection_json(d) for d in out]
        return _json({"placed": placed - replayed, "rejected": len(out) - placed, "replayed": replayed,
                      "results": results})  # fmt: skip

    @app.get("/vms", dependencies=READ, response_model=list[VmOut], tags=["vms"], responses=ERRORS)
    async def vms(request: Request, machine: str | None = None, limit: Limit = None, after: After = -1) -> Response:
        """Placed VMs in ledger order (``machine``: those on that machine). ``limit``: at most that many, with a
        ``Link: <...>; rel="next"`` header while more remain (follow it; without ``limit``, every VM at once, sent
        as it is built)."""
        listing = await engine.vm_listing_async(limit, after, machine)
        return _listed(listing, vm_rows_json, request)

    @app.get(
        "/vms/{vm_id:vmid}/explanation",
        dependencies=READ,
        response_model=ExplanationOut,
        tags=["vms"],
        responses=ERRORS,
    )
    def explanation(vm_id: str) -> Response:
        """Why the VM went where it is (kept for the most recent placements). Before ``GET /vms/{vm_id}``: an id may
        hold "/" (Kubernetes' namespace/name)."""
        return _json(explanation_json(engine.explanation(vm_id)))

    @app.get("/vms/{vm_id:vmid}", dependencies=READ, response_model=VmOut, tags=["vms"], responses=ERRORS)
    def vm(vm_id: str) -> Response:
        return _json(vm_json(engine.vm(vm_id), vm_id in engine.pinned, engine.uids.get(vm_id)))

    @app.delete("/vms/{vm_id:vmid}", response_model=VmOut, tags=["vms"], responses=ERRORS)
    async def release(vm_id: str, request: Request, uid: UidQuery = None) -> Response:  # uid: declared for /docs
        """Release a VM; durable when answered. Returns what it held. ``uid``: only if the VM under this id was
        placed with that uid, else a 409 and nothing freed (a late DELETE of a pod's old incarnation); any other
        query parameter is a 422."""
        status, payload = await release_vm(engine, metrics, vm_id, release_uid(request.query_params.multi_items()))
        return _json(payload, status)

    @app.post("/explain", dependencies=READ, response_model=ExplanationOut, tags=["vms"], responses=ERRORS)
    def explain(body: ExplainIn) -> Response:
        """Where a VM would go now and why, without placing it."""
        return _json(explanation_json(engine.explain(VmRequest("?", body.cpu, body.mem, body.multi_numa), body.policy)))

    # -- allocations --------------------------------------------------------------------------------------------
    @app.get("/allocations", dependencies=READ, response_model=list[AllocationIn], tags=["allocations"],
             responses=ERRORS)  # fmt: skip
    async def export_allocations(request: Request, limit: Limit = None, after: After = -1) -> Response:
        """Every allocation (vm, machine, node, cpu, mem, pinned); ``limit`` and ``after`` page it as ``GET /vms``
        does."""
        return _listed(await engine.vm_listing_async(limit, after), allocation_rows_json, request)

    @app.post("/allocations", tags=["allocations"], response_model=ImportOut, responses=ERRORS)
    def import_allocations(body: AllocationsIn) -> Response:
        """Record existing allocations, all or nothing; rows already recorded exactly so are skipped (a retried
        request changes nothing) and counted in ``already_recorded``."""
        n = engine.import_allocations([b.model_dump() for b in body], "request body")
        return _json({"imported": n, "already_recorded": len(body) - n})

    @app.post("/allocations/reconcile", tags=["allocations"], response_model=ReconcileOut, responses=ERRORS,
              openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
                  "type": "array", "maxItems": MAX_INVENTORY,
                  "items": {"$ref": "#/components/schemas/AllocationIn"}}}}}})  # fmt: skip
    async def reconcile(
        request: Request,
        dry_run: Annotated[bool, Query(description="only say what would change")] = False,
        as_of: Annotated[str | None, Query(description="when the inventory was taken (Unix seconds or ISO 8601, UTC "
                                           "unless it says otherwise): VMs whose records changed since are left as "
                                           "they are")] = None,
        force: Annotated[bool, Query(description="release more than half of the VMs recorded if the inventory "
                                     "says so (refused otherwise: an empty or truncated inventory)")] = False,
    ) -> Response:  # fmt: skip
        """Make the records what the cluster runs: the body is the whole inventory (every VM, as ``POST
        /allocations`` takes them). VMs not in it are released, new ones recorded, VMs elsewhere moved, VMs of
        another size or uid recorded anew, pins a row gives set (a row without ``pinned`` or ``uid`` keeps what is
        recorded); all or nothing, one commit. ``dry_run``: the same answer, nothing changed. ``as_of``: when the
        inventory was taken; VMs whose records changed since are left as they are (``newer``). Machines are not
        touched: register new ones first."""
        when = None if as_of is None else _as_of(as_of)
        raw = await request.body()
        rows = await asyncio.to_thread(_inventory, raw)
        report = await asyncio.to_thread(
            lambda: engine.reconcile(
                rows, source="request body", execute=not dry_run, now=time.time(), as_of=when, force=force
            )
        )
        return _json(report.as_dict())

    add_extender_routes(app, engine)
    add_ui_routes(app)
    if network is not None:
        add_network_routes(app, network)
    _complete_document(app, engine.numa)
    paths = [str(getattr(r, "path", "")) for r in app.routes]
    routes = frozenset(p.split("/", 2)[1] for p in paths if p.startswith("/"))
    app.add_middleware(Observed, metrics=metrics, routes=routes)  # outermost: every answer, a 421 and a 413 too
    return app
