"""The cluster's journal: what happened, in the order it was committed (docs/engine.md, "The journal").

The store keeps the *current* state in its ``machines`` and ``vms`` tables; beside them, in the same transaction as
each change, it appends one ``journal`` row per thing that happened: a VM ``placed``, ``moved`` (re-optimisation,
evacuation, a failed machine's VM placed again), ``pinned`` or ``unpinned``, ``released`` by its client or
``dropped`` (its failed machine's VM that fit nowhere); a request ``rejected`` (nothing changed, but it is demand); a
machine ``machine-added``, ``machine-drained``, ``machine-active`` (activated), ``machine-failed``,
``machine-removed``. Since a row commits with its change or not at all, the journal never says something happened
that is not in the tables, and replaying its VM events from an empty cluster gives the tables' VMs (tested).

Three uses: an operator's "what happened to this VM, on this machine" (:func:`read_journal`, ``GET /journal``,
``dcplace cluster journal``); an audit of re-optimisation's moves; and a *trace of the cluster's own demand*
(:func:`journal_trace`, ``dcplace cluster trace``), which every simulator, ``compare`` and ``train`` command reads,
so the policies can be compared on what this cluster was asked, not on a public trace.
"""

from __future__ import annotations

import contextlib
import json
import math
import sqlite3
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.engine.store import _reading, check_existing
from dcplace.errors import InputError
from dcplace.workload.table import RequestTable

VM_EVENTS = ("placed", "moved", "pinned", "unpinned", "released", "dropped", "rejected")
MACHINE_EVENTS = ("machine-added", "machine-drained", "machine-active", "machine-failed", "machine-removed")
EVENTS = VM_EVENTS + MACHINE_EVENTS
"""Every event the journal records (module docstring)."""

MAX_LIMIT = 10_000
"""The most entries one read returns (page on with ``after``)."""

_COLUMNS = "seq, at, event, vm, machine, node, cpu, mem, multi, detail"


@dataclass(frozen=True)
class JournalEntry:
    """One journal row. ``seq`` grows with every row (page with ``after=seq``); ``at``: Unix time the operation was
    submitted; ``vm``/``machine``/``node``/``cpu``/``mem``/``multi``: what the event is about (None where it does not
    apply: a machine event has no VM, a rejection no machine); ``detail``: ``placed`` the client's ``uid``,
    ``moved`` where from (``from``, ``from_node``), ``rejected`` its ``reason``, ``machine-added`` its ``rack`` and
    ``capacity`` per NUMA node."""

    seq: int
    at: float
    event: str
    vm: str | None
    machine: str | None
    node: int | None
    cpu: float | None
    mem: float | None
    multi: bool | None
    detail: dict[str, Any] | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "at": self.at, "event": self.event, "vm": self.vm, "machine": self.machine,
            "node": self.node, "cpu": self.cpu, "mem": self.mem, "multi": self.multi, "detail": self.detail,
        }  # fmt: skip


def check_filters(
    vm: str | None = None,
    machine: str | None = None,
    event: str | None = None,
    after: int = 0,
    limit: int | None = 1000,
    tail: int | None = None,
) -> None:
    """One sentence naming the field where a filter cannot be used (InputError)."""
    for name, value in (("vm", vm), ("machine", machine)):
        if value is not None and (not isinstance(value, str) or not value):
            raise InputError(f"must be a non-empty id, got {value!r}", field=name)
    if event is not None and event not in EVENTS:
        raise InputError(f"must be one of {', '.join(EVENTS)}; got {event!r}", field="event")
    if isinstance(after, bool) or not isinstance(after, int) or after < 0:
        raise InputError(f"must be a whole number >= 0 (the last seq already read), got {after!r}", field="after")
    for name, n in (("limit", limit), ("tail", tail)):
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_LIMIT):
            raise InputError(f"must be a whole number from 1 to {MAX_LIMIT:,}, got {n!r}", field=name)


def query_journal(
    conn: sqlite3.Connection,
    vm: str | None = None,
    machine: str | None = None,
    event: str | None = None,
    after: int = 0,
    limit: int | None = 1000,
    tail: int | None = None,
) -> list[JournalEntry]:
    """The entries after ``after`` in commit order, at most ``limit`` (None: all), filtered by VM, machine (a VM
    event on the machine, a move *from* it included) and event, from an open connection to a dcplace database.
    ``tail``: instead, the newest ``tail`` such entries (still oldest first; ``limit`` is not used)."""
    check_filters(vm, machine, event, after, limit, tail)
    where: list[str] = ["seq > ?"]
    args: list[object] = [after]
    if vm is not None:
        where.append("vm = ?")
        args.append(vm)
    if machine is not None:
        where.append("(machine = ? OR (event = 'moved' AND json_extract(detail, '$.from') = ?))")
        args += [machine, machine]
    if event is not None:
        where.append("event = ?")
        args.append(event)
    sql = f"SELECT {_COLUMNS} FROM journal WHERE {' AND '.join(where)} ORDER BY seq"
    if tail is not None:
        sql += f" DESC LIMIT {int(tail)}"
    elif limit is not None:
        sql += f" LIMIT {int(limit)}"
    try:
        rows = conn.execute(sql, args).fetchall()
        if tail is not None:
            rows.reverse()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):  # a database of schema 2 or older, read without opening an engine on it
            return []
        raise
    return [_entry(r) for r in rows]


def _entry(r: Sequence[Any]) -> JournalEntry:
    return JournalEntry(int(r[0]), float(r[1]), str(r[2]), r[3], r[4], r[5], r[6], r[7],
                        None if r[8] is None else bool(r[8]), None if r[9] is None else json.loads(r[9]))  # fmt: skip


def read_journal(
    path: str | Path,
    vm: str | None = None,
    machine: str | None = None,
    event: str | None = None,
    after: int = 0,
    limit: int | None = 1000,
    tail: int | None = None,
) -> list[JournalEntry]:
    """:func:`query_journal` on the database ``path``, read-only: also while ``dcplace serve`` runs on it, and
    writing nothing beside it where no engine holds it."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p} does not exist or is not a file", field="db")
    check_existing(p)
    check_filters(vm, machine, event, after, limit, tail)
    try:
        with _reading(p) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            return query_journal(conn, vm, machine, event, after, limit, tail)
    except sqlite3.DatabaseError as e:
        raise InputError(f"{p} cannot be read ({e})", field="db") from None


@dataclass(frozen=True)
class TraceSummary:
    """What :func:`journal_trace` made of a journal: ``requests`` in the trace (``placed`` VMs, plus ``rejected``
    requests where included), of which ``still_running`` (never leave in a replay) and ``rejected``; ``unmatched``
    releases whose placement the journal no longer holds (pruned, or made before the journal existed; left out), and
    the ``lifetime_s`` given each rejected request (None where they were skipped)."""

    requests: int
    still_running: int
    rejected: int
    unmatched: int
    lifetime_s: float | None
    start: float
    """Unix time of the first request: the trace's time 0."""


def journal_trace(entries: Iterable[JournalEntry], rejected: str = "skip") -> tuple[RequestTable, TraceSummary]:
    """The cluster's demand as a trace: each ``placed`` VM arrives when it was placed and departs when it was
    ``released`` or ``dropped`` (``inf``: still running, as a trace's never-deleted VMs), with its cores, memory
    and NUMA span; times in seconds from the first request. ``rejected``: ``skip`` leaves rejected requests out
    (the trace is what ran); ``include`` adds each, departing after the median lifetime of the VMs that left (the
    journal cannot say how long a VM that never ran would have run). A VM placed again under a released VM's id is a
    new request. Moves, pins and machine events do not change demand and are ignored."""
    if rejected not in ("skip", "include"):
        raise InputError(f"must be skip or include, got {rejected!r}", field="rejected")
    arrival: list[float] = []
    departure: list[float] = []
    cpu: list[float] = []
    mem: list[float] = []
    multi: list[bool] = []
    refused: list[int] = []
    open_: dict[str, int] = {}
    unmatched = 0
    for e in entries:
        if e.event == "placed" or (e.event == "rejected" and rejected == "include"):
            if e.event == "placed":
                assert e.vm is not None
                open_[e.vm] = len(arrival)
            else:
                refused.append(len(arrival))
            arrival.append(e.at)
            departure.append(math.inf)
            cpu.append(float(e.cpu or 0.0))
            mem.append(float(e.mem or 0.0))
            multi.append(bool(e.multi))
        elif e.event in ("released", "dropped"):
            i = open_.pop(e.vm or "", None)
            if i is None:
                unmatched += 1
            else:
                departure[i] = e.at
    if not arrival:
        raise InputError("the journal holds no placed VMs to make a trace of (is the journal off, or empty?)",
                         field="db")  # fmt: skip
    lived = [d - a for a, d in zip(arrival, departure, strict=True) if math.isfinite(d)]
    lifetime: float | None = None
    if refused:
        if not lived:
            raise InputError("no VM has left yet, so a rejected request has no lifetime to take: use --rejected skip",
                             field="rejected")  # fmt: skip
        lifetime = float(np.median(lived))
        for i in refused:
            departure[i] = arrival[i] + lifetime
    t0 = min(arrival)
    arr = np.asarray(arrival) - t0
    dep = np.asarray(departure) - t0
    table = RequestTable.from_arrays(arr, dep, cpu, mem, multi_numa=multi, source="journal")
    summary = TraceSummary(
        requests=len(arr),
        still_running=int(np.isinf(dep).sum()),
        rejected=len(refused),
        unmatched=unmatched,
        lifetime_s=lifetime,
        start=t0,
    )
    return table, summary
