"""The network-aware setting's routes (``dcplace serve --network TOPOLOGY``): jobs of several servers with bandwidth
between them, placed by a netalloc policy on a datacenter topology (:mod:`dcplace.engine.network`). They sit in the
service beside the VM routes, behind the same token check, admission, body limit and error answers."""

from __future__ import annotations

import asyncio
import json
from typing import Annotated, Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import Response
from pydantic import Field, TypeAdapter, ValidationError

from dcplace.engine.journal import MAX_LIMIT
from dcplace.engine.network import NET_EVENTS, NetJob, NetworkEngine
from dcplace.errors import InputError
from dcplace.service.answers import validation_sentence
from dcplace.service.models import (
    MAX_INVENTORY,
    JobIn,
    JobOut,
    JobRejectionOut,
    NetExplanationOut,
    NetInventoryJobIn,
    NetJobMoveIn,
    NetJournalOut,
    NetMoveIn,
    NetReconcileOut,
    NetRoomOut,
    NetworkOut,
    ServerOut,
)

_COMMON: dict[int | str, dict[str, Any]] = {
    422: {"description": "a field out of range, or a query parameter the route does not take"},
    503: {"description": "the network database failed (restart the service), or another program holds its lock"},
}
JOB_ERRORS: dict[int | str, dict[str, Any]] = {404: {"description": "no such job running"}, **_COMMON}


_JOBS = TypeAdapter(Annotated[list[NetInventoryJobIn], Field(max_length=MAX_INVENTORY)])
_MOVES = TypeAdapter(Annotated[list[NetJobMoveIn], Field(min_length=1, max_length=MAX_INVENTORY)])


def _rows(raw: bytes, adapter: TypeAdapter[Any], name: str, what: str) -> list[dict[str, Any]]:
    """A body that is a list (``POST /network/reconcile``'s, ``POST /network/moves``'s), checked; a problem named
    as the engine names it (``jobs[3].bw``, ``moves[0].servers``). ``what``: the sentence for an empty body."""
    if not raw:
        raise InputError(f"the body must be {what}", field=name)
    try:
        rows = adapter.validate_json(raw)
    except ValidationError as e:

        def loc(x: Any) -> tuple[Any, ...]:
            where = tuple(x["loc"])
            return (f"{name}[{where[0]}]", *where[1:]) if where and isinstance(where[0], int) else (name, *where)

        raise InputError(validation_sentence([{**x, "loc": loc(x)} for x in e.errors()])) from None
    return [x.model_dump(exclude_none=True, exclude={"accepted", "locality"}, by_alias=True) for x in rows]


def _jobs(raw: bytes) -> list[dict[str, Any]]:
    return _rows(raw, _JOBS, "jobs", "the inventory, a JSON list of jobs as GET /jobs lists them")


def _json(body: Any, status: int = 200) -> Response:
    return Response(json.dumps(body), status, media_type="application/json")


def add_network_routes(app: FastAPI, net: NetworkEngine) -> None:
    """``POST /jobs``, ``GET /jobs``, ``GET /jobs/{id}``, ``DELETE /jobs/{id}``, ``POST /jobs/{id}/move``, ``GET
    /network``, ``POST /network/explain``, ``POST /network/make-room``, ``POST /network/moves``, ``POST
    /network/reconcile``, ``GET
    /network/journal``, ``GET /network/servers[/{name}]``, ``POST /network/servers/{name}/drain|activate`` on
    ``net``."""

    @app.post("/jobs", status_code=201, tags=["network"], response_model=JobOut,
              responses={**_COMMON, 409: {"model": JobRejectionOut, "description": "not placed (its reason), or a "
                                           "job of that id runs already (`detail`)"}})  # fmt: skip
    def place_job(body: JobIn) -> Response:
        """Place a job, server by server, with the service's network policy: 201 and where it runs (durable), or
        409 and why not."""
        d = net.place(NetJob(body.id, body.cpu, body.mem, body.bw, body.hold))
        return _json(d.as_dict(), 201 if d.accepted else 409)

    @app.get("/jobs", tags=["network"], response_model=list[JobOut])
    def list_jobs() -> Response:
        """Every running job, in the order placed (503 once the network database failed, as the VM reads)."""
        net.health()
        return _json([j.as_dict() for j in net.jobs()])

    @app.get("/jobs/{job_id:vmid}", tags=["network"], response_model=JobOut, responses=JOB_ERRORS)
    def get_job(job_id: str) -> Response:
        """Where a running job is."""
        net.health()
        return _json(net.job(job_id).as_dict())

    @app.delete("/jobs/{job_id:vmid}", tags=["network"], response_model=JobOut, responses=JOB_ERRORS)
    def release_job(job_id: str) -> Response:
        """Release a running job (durable when answered): everything it held is free again; the answer says where
        it was."""
        return _json(net.release(job_id).as_dict())

    @app.get("/network", tags=["network"], response_model=NetworkOut)
    def network() -> Response:
        """Totals: servers, links, jobs, CPU and memory in use, bandwidth in use per tier, counters."""
        net.health()
        return _json(net.stats())

    server_errors = {404: {"description": "no such server in the topology"}, **_COMMON}

    @app.get("/network/servers", tags=["network"], response_model=list[ServerOut])
    def list_servers() -> Response:
        """Every server: capacity, what its jobs use, whether it is drained, its jobs."""
        net.health()
        return _json([x.as_dict() for x in net.servers()])

    @app.get("/network/servers/{server:vmid}", tags=["network"], response_model=ServerOut, responses=server_errors)
    def get_server(server: str) -> Response:
        """One server: capacity, what its jobs use, whether it is drained, its jobs."""
        net.health()
        return _json(net.server(server).as_dict())

    @app.post("/network/servers/{server:vmid}/drain", tags=["network"], response_model=ServerOut,
              responses=server_errors)  # fmt: skip
    def drain_server(server: str) -> Response:
        """No new job is given any of this server (maintenance): its running jobs keep it, and what it has free is
        held apart until it is activated. Durable when answered; journalled; draining a drained server changes
        nothing."""
        return _json(net.drain_server(server).as_dict())

    @app.post("/network/servers/{server:vmid}/activate", tags=["network"], response_model=ServerOut,
              responses=server_errors)  # fmt: skip
    def activate_server(server: str) -> Response:
        """New jobs may use this server again. Durable when answered; journalled."""
        return _json(net.activate_server(server).as_dict())

    @app.post("/network/explain", tags=["network"], response_model=NetExplanationOut, responses=_COMMON)
    def explain_job(body: JobIn) -> Response:
        """Where a job (the body `POST /jobs` takes) would go now and why, without placing it: the servers the
        policy would pick, or why it would be rejected (the free totals for `capacity`; for `network`, the two
        servers no candidate path joined and the most bandwidth any of their paths has free), and each tier's room
        for its bandwidth. The next placement decides as if this had not been asked."""
        return _json(net.explain(NetJob(body.id, body.cpu, body.mem, body.bw, body.hold)).as_dict())

    @app.post(
        "/network/reconcile",
        tags=["network"],
        response_model=NetReconcileOut,
        responses={**_COMMON, 409: {"description": "it would release more than half the jobs running (force)"}},
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "array", "maxItems": MAX_INVENTORY,
            "items": {"$ref": "#/components/schemas/NetInventoryJobIn"}}}}}},
    )  # fmt: skip
    async def reconcile_jobs(
        request: Request,
        dry_run: Annotated[bool, Query(description="check and report, change nothing")] = False,
        force: Annotated[bool, Query(description="release more than half the jobs running if the inventory says "
                                     "so")] = False,
        as_of: Annotated[float | None, Query(description="when the inventory was taken (Unix seconds): jobs placed, "
                                             "moved or released since are left as recorded")] = None,
    ) -> Response:  # fmt: skip
        """Make the running jobs what the cluster runs (docs/engine.md, "Reconciling the network engine"): the body
        is the whole inventory, every job as `GET /jobs` lists it (`links` and `hold` optional). Jobs not in it are
        released, jobs new to it recorded where it says, jobs recorded elsewhere released and recorded anew; all or
        nothing, in one commit (a row that does not fit is a 422 naming it)."""
        rows = await asyncio.to_thread(_jobs, await request.body())
        report = await asyncio.to_thread(lambda: net.reconcile(rows, execute=not dry_run, force=force, as_of=as_of))
        return _json(report.as_dict())

    @app.post("/network/make-room", tags=["network"], response_model=NetRoomOut,
              responses={**_COMMON, 409: {"description": "a job of that id runs already"}})  # fmt: skip
    def make_room(
        body: JobIn,
        execute: Annotated[bool, Query(description="record the moves and the job at once (one commit)")] = False,
        max_together: Annotated[int | None, Query(ge=1, le=1_000_000, description="the most jobs one step may stop "
                                                  "at once (1: one at a time); none: no limit")] = None,
        time_limit: Annotated[float | None, Query(gt=0, le=3600, description="seconds of the search (the "
                                                  "time it holds the engine's lock) after which no rack is begun: "
                                                  "the best plan of those tried")] = None,
    ) -> Response:  # fmt: skip
        """Where a job (the body `POST /jobs` takes) could run if the running jobs of one rack moved, and where they
        would go, in steps safe to carry out (docs/engine.md, "Making room"). Nothing is changed unless
        `execute=true`, which records the moves and the job in one commit. Otherwise, to act on it: make each step's
        moves and tell `POST /network/moves` (or `POST /jobs/{id}/move` for a step of one), then record the job by
        sending `inventory` to `POST /network/reconcile?as_of=` the plan's `at`."""
        job = NetJob(body.id, body.cpu, body.mem, body.bw, body.hold)
        plan = net.make_room(job, execute=execute, max_together=max_together, time_limit_s=time_limit)
        return _json(plan.as_dict())

    @app.post(
        "/jobs/{job_id:vmid}/move",
        tags=["network"],
        response_model=JobOut,
        responses={**JOB_ERRORS, 422: {"description": "not a placement of that job, or it does not fit there"}},
    )
    def move_job(job_id: str, body: NetMoveIn) -> Response:
        """Record that a running job now runs elsewhere (a move of a plan, carried out): its servers with what each
        gives (the job's CPU and memory in all) and, optionally, its links. Cold: its old share is free before the
        new one is taken. Durable when answered; journalled `moved`."""
        return _json(net.move(job_id, body.model_dump(exclude_none=True, by_alias=True)).as_dict())

    @app.post(
        "/network/moves",
        tags=["network"],
        response_model=list[JobOut],
        responses={**JOB_ERRORS, 422: {"description": "a row not a placement of its job, or the moves do not fit"}},
        openapi_extra={"requestBody": {"required": True, "content": {"application/json": {"schema": {
            "type": "array", "minItems": 1, "maxItems": MAX_INVENTORY,
            "items": {"$ref": "#/components/schemas/NetJobMoveIn"}}}}}},
    )  # fmt: skip
    async def move_jobs(request: Request) -> Response:
        """Record that running jobs now run elsewhere, together (one step of a plan: all stopped, then all started;
        a swap): each row a job with its servers, what each gives and, optionally, its links. All or nothing, in one
        commit; journalled `moved`."""
        what = "a JSON list of moves (id, servers, cpu, mem, links)"
        rows = await asyncio.to_thread(_rows, await request.body(), _MOVES, "moves", what)
        return _json([j.as_dict() for j in await asyncio.to_thread(net.moves, rows)])

    @app.get("/network/journal", tags=["network"], response_model=NetJournalOut, responses=_COMMON)
    def network_journal(
        job: Annotated[str | None, Query(min_length=1, description="only this job's entries")] = None,
        event: Annotated[str | None, Query(description="only this event: " + ", ".join(NET_EVENTS))] = None,
        after: Annotated[int, Query(ge=0, description="entries after this seq: the page before's `next`")] = 0,
        limit: Annotated[int, Query(ge=1, le=MAX_LIMIT, description="entries at most")] = 1000,
        tail: Annotated[int | None, Query(ge=1, le=MAX_LIMIT, description="instead: the newest this many, still "
                                          "oldest first (`next` is then null)")] = None,
    ) -> Response:  # fmt: skip
        """What the network engine was asked and did, oldest first (docs/engine.md, "The network journal"): jobs
        placed and rejected with what they asked for, released, the engine's starts. Read on a connection of its
        own: it never holds up a placement."""
        entries, more = net.journal_page(job=job, event=event, after=after, limit=limit, tail=tail)
        return _json({"entries": [e.as_dict() for e in entries], "next": more})


__all__ = ["JOB_ERRORS", "add_network_routes"]
