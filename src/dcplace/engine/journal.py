"""The cluster's journal: what happened, in the order it was committed (docs/engine.md, "The journal").

The store keeps the *current* state in its ``machines`` and ``vms`` tables; beside them, in the same transaction as
each change, it appends one ``journal`` row per thing that happened: a VM ``placed``, ``moved`` (re-optimisation,
evacuation, a failed machine's VM placed again), ``pinned`` or ``unpinned``, ``released`` by its client or
``dropped`` (its failed machine's VM that fit nowhere); a request ``rejected`` (nothing changed, but it is demand); a
machine ``machine-added``, ``machine-drained``, ``machine-active`` (activated), ``machine-failed``,
``machine-changed`` (its capacity or rack), ``machine-removed``; ``journal-resumed`` where it was off for a while.
Since a row commits with its change or not at all, the journal never says something happened that is not in the
tables, and replaying its events from an empty cluster gives the tables (tested).

Four uses: an operator's "what happened to this VM, on this machine" (:func:`read_journal`, ``GET /journal``,
``dcplace cluster journal``); an audit of re-optimisation's moves; the state at a past moment (:func:`rewind`,
``dcplace cluster rewind``); and a *trace of the cluster's own demand* (:func:`journal_trace`, ``dcplace cluster
trace``), which every simulator, ``compare`` and ``train`` command reads, so the policies can be compared on what
this cluster was asked, not on a public trace.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import math
import sqlite3
import time
from array import array
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, TypeVar

import numpy as np

from dcplace.engine.store import _reading, check_existing
from dcplace.errors import InputError
from dcplace.workload.table import RequestTable

VM_EVENTS = ("placed", "moved", "pinned", "unpinned", "released", "dropped", "rejected")
MACHINE_EVENTS = (
    "machine-added",
    "machine-drained",
    "machine-active",
    "machine-failed",
    "machine-changed",
    "machine-removed",
)
EVENTS = VM_EVENTS + MACHINE_EVENTS + ("journal-resumed",)
"""Every event the journal records (module docstring)."""
BY = ("import", "reconcile", "reported", "resize", "reoptimisation", "evacuation", "failure", "bind", "assign")
"""Why a VM entry was made, where it was not a client's own call (its ``detail``'s ``by``; :attr:`VmRow.by`)."""

MAX_SEQ = 2**63 - 1
"""SQLite's largest integer: no seq is above it."""

MAX_LIMIT = 10_000
"""The most entries one read returns (page on with ``after``)."""

_COLUMNS = "seq, at, event, vm, machine, node, cpu, mem, multi, detail"


class _Sequenced(Protocol):
    @property
    def seq(self) -> int: ...


_E = TypeVar("_E", bound=_Sequenced)


@dataclass(frozen=True)
class JournalEntry:
    """One journal row. ``seq`` grows with every row (page with ``after=seq``); ``at``: Unix time the operation was
    submitted; ``vm``/``machine``/``node``/``cpu``/``mem``/``multi``: what the event is about (None where it does not
    apply: a machine event has no VM, a rejection no machine); ``detail``: ``placed``, ``released`` and ``dropped``
    the VM's ``uid`` and ``pinned`` where it had them, ``moved`` where from (``from``, ``from_node``), ``rejected``
    its ``reason``, ``machine-added`` and ``machine-removed`` its ``slot``, ``rack``, ``status`` and ``capacity`` per
    NUMA node, the other machine events ``from`` (the status before), ``journal-resumed`` ``off_since``: what
    :func:`rewind` needs to undo each."""

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


@dataclass(frozen=True)
class JournalQuery:
    """Which entries to read: those after ``after`` (a seq) in commit order, at most ``limit`` (None: all), about the
    VM ``vm``, the machine ``machine`` (a VM event on it, a move *from* it included), of kind ``event``, made for the
    reason ``by`` (one of :data:`BY`: ``reoptimisation`` gives the moves re-optimisation made); ``tail``:
    instead, the newest ``tail`` such entries (still oldest first; ``limit`` is not used); ``peek``: one entry past
    ``limit`` where there is one (:func:`paged` tells from it whether a page is the last). Checked when made: one
    sentence naming the field (InputError)."""

    vm: str | None = None
    machine: str | None = None
    event: str | None = None
    after: int = 0
    limit: int | None = 1000
    tail: int | None = None
    peek: bool = False
    by: str | None = None

    def __post_init__(self) -> None:
        for name, value in (("vm", self.vm), ("machine", self.machine)):
            if value is not None and (not isinstance(value, str) or not value):
                raise InputError(f"must be a non-empty id, got {value!r}", field=name)
        if self.event is not None and self.event not in EVENTS:
            raise InputError(f"must be one of {', '.join(EVENTS)}; got {self.event!r}", field="event")
        if self.by is not None and self.by not in BY:
            raise InputError(f"must be one of {', '.join(BY)}; got {self.by!r}", field="by")
        check_window(self.after, self.limit, self.tail)


def check_window(after: object, limit: object, tail: object) -> None:
    """A journal read's ``after`` (a seq), ``limit`` and ``tail`` (None or 1 to :data:`MAX_LIMIT`), as every journal
    (the VM engine's, the network engine's) takes them: one sentence naming the field otherwise (InputError)."""
    if isinstance(after, bool) or not isinstance(after, int) or not 0 <= after <= MAX_SEQ:
        raise InputError(f"must be a whole number from 0 to {MAX_SEQ} (the last seq already read), got "
                         f"{after!r}", field="after")  # fmt: skip
    for name, n in (("limit", limit), ("tail", tail)):
        if n is not None and (isinstance(n, bool) or not isinstance(n, int) or not 1 <= n <= MAX_LIMIT):
            raise InputError(f"must be a whole number from 1 to {MAX_LIMIT:,}, got {n!r}", field=name)


def query_journal(conn: sqlite3.Connection, q: JournalQuery) -> list[JournalEntry]:
    """The entries ``q`` asks for, from an open connection to a dcplace database."""
    where: list[str] = ["seq > ?"]
    args: list[object] = [q.after]
    if q.vm is not None:
        where.append("vm = ?")
        args.append(q.vm)
    if q.machine is not None:
        where.append("(machine = ? OR (event = 'moved' AND json_extract(detail, '$.from') = ?))")
        args += [q.machine, q.machine]
    if q.event is not None:
        where.append("event = ?")
        args.append(q.event)
    if q.by is not None:
        where.append("json_extract(detail, '$.by') = ?")
        args.append(q.by)
    sql = f"SELECT {_COLUMNS} FROM journal WHERE {' AND '.join(where)} ORDER BY seq"
    if q.tail is not None:
        sql += f" DESC LIMIT {int(q.tail)}"
    elif q.limit is not None:
        sql += f" LIMIT {int(q.limit) + int(q.peek)}"
    try:
        rows = conn.execute(sql, args).fetchall()
        if q.tail is not None:
            rows.reverse()
    except sqlite3.OperationalError as e:
        if "no such table" in str(e):  # a database of schema 2 or older, read without opening an engine on it
            return []
        raise
    return [_entry(r) for r in rows]


def _entry(r: Sequence[Any]) -> JournalEntry:
    return JournalEntry(int(r[0]), float(r[1]), str(r[2]), r[3], r[4], r[5], r[6], r[7],
                        None if r[8] is None else bool(r[8]), None if r[9] is None else json.loads(r[9]))  # fmt: skip


@contextlib.contextmanager
def _connected(path: str | Path) -> Iterator[sqlite3.Connection]:
    """A read-only connection to the dcplace database ``path`` (:func:`~dcplace.engine.store._reading`: also while
    an engine holds it, writing nothing beside it where none does); a file that is not one, or fails to read, is one
    sentence naming ``db``."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p} does not exist or is not a file", field="db")
    check_existing(p)
    try:
        with _reading(p) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            yield conn
    except sqlite3.DatabaseError as e:
        raise InputError(f"{p} cannot be read ({e})", field="db") from None


def utc(at: float) -> str:
    """Unix time ``at`` as the journal's commands print it: ``2026-11-28 21:48:00 UTC`` (a time no calendar holds,
    from a hand-edited row, as the number)."""
    try:
        return time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime(at))
    except (OverflowError, OSError, ValueError):
        return f"{at!r} (not a time)"


def read_journal(
    path: str | Path,
    *,
    vm: str | None = None,
    machine: str | None = None,
    event: str | None = None,
    after: int = 0,
    limit: int | None = 1000,
    tail: int | None = None,
    peek: bool = False,
    by: str | None = None,
) -> list[JournalEntry]:
    """The entries of the database ``path`` that the filters ask for (:class:`JournalQuery`), read-only: also while
    ``dcplace serve`` runs on it, and writing nothing beside it where no engine holds it."""
    q = JournalQuery(vm, machine, event, after, limit, tail, peek, by)
    with _connected(path) as conn:
        return query_journal(conn, q)


def journal_entries(path: str | Path, events: Sequence[str] | None = None) -> Iterator[JournalEntry]:
    """Every entry of the database ``path`` (of the kinds ``events``; None: all), oldest first, read lazily and
    read-only (as :func:`read_journal`): a journal of a million rows is not held in memory at once."""
    for e in events or ():
        JournalQuery(event=e)
    sql = f"SELECT {_COLUMNS} FROM journal"
    if events:
        sql += f" WHERE event IN ({', '.join('?' * len(events))})"
    with _connected(path) as conn:
        try:
            cursor = conn.execute(sql + " ORDER BY seq", tuple(events or ()))
        except sqlite3.OperationalError as e:
            if "no such table" in str(e):
                return
            raise
        for row in cursor:
            yield _entry(row)


TRACE_EVENTS = ("placed", "released", "dropped", "rejected", "journal-resumed")
"""The events :func:`journal_trace` reads (pass them to :func:`journal_entries`)."""


def paged(entries: list[_E], limit: int | None) -> tuple[list[_E], int | None]:
    """A page of entries read with ``peek``: the first ``limit``, and the ``after`` of the next page, None where
    nothing more matches now (a page of exactly the entries left is the last one)."""
    if limit is not None and len(entries) > limit:
        return entries[:limit], entries[limit - 1].seq
    return entries, None


@dataclass(frozen=True)
class TraceSummary:
    """What :func:`journal_trace` made of a journal: ``requests`` in the trace (``placed`` VMs, plus ``rejected``
    requests where included), of which ``still_running`` (never leave in a replay) and ``rejected``; ``rejections``
    in the journal (in the trace or not); ``retries``: rejected requests followed by another request under the same
    id (a client retrying), left out where rejections are included, since the demand is the last attempt; ``unmatched``:
    releases whose placement the journal no longer holds (pruned, or made before the journal existed) and
    placements whose release it never recorded before the id was placed again, both left out; ``adjusted``:
    departures at their arrival, put a microsecond after it; ``stepped_back``: entries stamped earlier than one
    committed before them (the host's clock stepped back), given that entry's time, since the journal's order is
    what happened; ``lifetime_s``: the lifetime given each rejected request (None where they were skipped);
    ``resumed_at``: where the journal was turned off and on again, the last time it resumed (the trace starts
    there; None: never off)."""

    requests: int
    still_running: int
    rejected: int
    rejections: int
    retries: int
    unmatched: int
    adjusted: int
    lifetime_s: float | None
    resumed_at: float | None
    start: float
    """Unix time of the first request: the trace's time 0."""
    names: tuple[str, ...] = ()
    """Each request's VM id in the cluster, in the trace's order (request ``i`` is the trace's ``vmid`` ``i``: the
    event-log form numbers VMs; ``cluster trace`` writes these as its ``name`` column)."""
    stepped_back: int = 0
    """Entries stamped before the one committed before them (see the class docstring)."""


def journal_trace(entries: Iterable[JournalEntry], rejected: str = "skip") -> tuple[RequestTable, TraceSummary]:
    """The cluster's demand as a trace: each ``placed`` VM arrives when it was placed and departs when it was
    ``released`` or ``dropped`` (``inf``: still running, as a trace's never-deleted VMs), with its cores, memory
    and NUMA span; times in seconds from the first request. ``rejected``: ``skip`` leaves rejected requests out
    (the trace is what ran); ``include`` adds each, departing after the median lifetime of the VMs that left (the
    journal cannot say how long a VM that never ran would have run; a rejection followed by another request under the
    same id is a retry, not more demand). A VM placed again under a released VM's id is a new request. Moves, pins
    and machine events do not change demand and are ignored. Where the journal was off for a while (a
    ``journal-resumed`` entry), what came before cannot be matched with what came after, so the trace starts at the
    last such entry."""
    if rejected not in ("skip", "include"):
        raise InputError(f"must be skip or include, got {rejected!r}", field="rejected")
    arrival, departure, cpu, mem = array("d"), array("d"), array("d"), array("d")  # 8 bytes a value, not 32
    multi = bytearray()
    names: list[str] = []
    refused = array("q")
    gone = array("q")  # placements superseded without a release: left out
    open_: dict[str, int] = {}
    pending: dict[str, int] = {}  # each id's last rejection not yet followed by another request under the id
    unmatched = rejections = retries = stepped_back = 0
    resumed_at: float | None = None
    latest = -math.inf
    for e in entries:
        at = e.at
        if at < latest:  # the clock stepped back: the entry happened after the one before all the same
            stepped_back += 1
            at = latest
        latest = at
        if e.event == "rejected":
            rejections += 1
        if e.event == "placed" or (e.event == "rejected" and rejected == "include"):
            assert e.vm is not None
            retried = pending.pop(e.vm, None)
            if retried is not None:
                gone.append(retried)
                retries += 1
            if e.event == "placed":
                before = open_.get(e.vm)
                if before is not None:
                    gone.append(before)
                    unmatched += 1
                open_[e.vm] = len(arrival)
            else:
                pending[e.vm] = len(arrival)
                refused.append(len(arrival))
            arrival.append(at)
            departure.append(math.inf)
            cpu.append(float(e.cpu or 0.0))
            mem.append(float(e.mem or 0.0))
            multi.append(bool(e.multi))
            names.append(e.vm)
        elif e.event in ("released", "dropped"):
            i = open_.pop(e.vm or "", None)
            if i is None:
                unmatched += 1
            else:
                departure[i] = at
        elif e.event == "journal-resumed":
            arrival, departure, cpu, mem = array("d"), array("d"), array("d"), array("d")
            multi, refused, gone, open_, pending, resumed_at = bytearray(), array("q"), array("q"), {}, {}, e.at
            names = []
            unmatched = rejections = retries = 0
    keep = np.ones(len(arrival), bool)
    keep[np.asarray(gone, np.int64)] = False
    arr, dep = np.asarray(arrival), np.asarray(departure)
    if not keep.any():
        raise InputError("the journal holds no placement to make a trace of (it is empty, was off, or was pruned past "
                         "every placement it holds a release of)", field="db")  # fmt: skip
    early = keep & (dep <= arr)
    dep[early] = arr[early] + 1e-6  # a VM's delete must follow its create in the trace
    is_refused = np.zeros(len(arr), bool)
    is_refused[np.asarray(refused, np.int64)] = True
    is_refused &= keep
    lived = (dep - arr)[keep & ~is_refused & np.isfinite(dep)]
    lifetime: float | None = None
    if is_refused.any():
        if len(lived) == 0:
            raise InputError("no VM has left yet, so a rejected request has no lifetime to take: use --rejected skip",
                             field="rejected")  # fmt: skip
        lifetime = float(np.median(lived))
        dep[is_refused] = arr[is_refused] + lifetime
    t0 = float(arr[keep].min())
    table = RequestTable.from_arrays(arr[keep] - t0, dep[keep] - t0, np.asarray(cpu)[keep], np.asarray(mem)[keep],
                                     multi_numa=np.frombuffer(bytes(multi), np.uint8).astype(bool)[keep],
                                     source="journal", numa_given=True)  # fmt: skip
    summary = TraceSummary(
        requests=int(keep.sum()),
        still_running=int(np.isinf(dep[keep]).sum()),
        rejected=int(is_refused.sum()),
        rejections=rejections,
        retries=retries,
        unmatched=unmatched,
        adjusted=int(early.sum()),
        lifetime_s=lifetime,
        resumed_at=resumed_at,
        start=t0,
        names=tuple(n for n, k in zip(names, keep.tolist(), strict=True) if k),
        stepped_back=stepped_back,
    )
    return table, summary


def rewind(
    snapshot: Mapping[str, Any], entries: Sequence[JournalEntry], to_seq: int, field: str = "seq"
) -> dict[str, Any]:
    """The cluster's state right after the journal's entry ``to_seq`` committed (0: before its first entry), from
    ``snapshot`` (:meth:`~dcplace.engine.PlacementEngine.snapshot`: the state after the last of ``entries``) by
    undoing ``entries`` (every entry after ``to_seq``, in order; those before it are passed over, so the whole
    journal will do), newest first: a placement taken back, a release or
    drop put back (with its pin and uid), a move moved back, a machine's status, addition or removal undone. Only
    the entries after ``to_seq`` are needed, so a pruned journal rewinds as far as it reaches. InputError (naming
    ``field``, the caller's parameter: ``seq`` or ``at``) where it cannot: an entry missing (pruned, or the journal
    was off: ``journal-resumed``), one written before its entries carried what undoes it, an entry the state does
    not match (the tables changed by something that wrote no journal: another program, a dcplace from before the
    journal), or a journal that began on a cluster already running, rewound to before its first entry.
    The answer has :meth:`~dcplace.engine.PlacementEngine.snapshot`'s form (machines by slot, VMs by id), so
    :meth:`~dcplace.engine.PlacementEngine.restore` and ``compare cluster --snapshot`` take it."""
    check_seq(to_seq)
    machines = {m["id"]: dict(m) for m in snapshot["machines"]}
    vms = {v["id"]: dict(v) for v in snapshot["vms"]}
    entries = [e for e in entries if e.seq > to_seq]  # the whole journal in hand will do
    if entries and entries[0].seq != to_seq + 1:
        first = entries[0].seq
        missing = f"entry {to_seq + 1}" if first == to_seq + 2 else f"entries {to_seq + 1} to {first - 1}"
        raise InputError(f"the journal no longer holds {missing} (pruned): it rewinds to seq {entries[0].seq - 1} at "
                         "the earliest", field=field)  # fmt: skip
    for before, e in itertools.pairwise(entries):
        if e.seq != before.seq + 1:
            raise InputError(f"the journal lacks entries {before.seq + 1} to {e.seq - 1}", field=field)
    for e in reversed(entries):
        try:
            _undo(e, machines, vms, field)
        except (KeyError, _Disagrees):  # a KeyError: a VM or machine the entry names is not in the state
            raise InputError(f"entry {e.seq} ({e.event} {e.vm or e.machine}) does not match the state it would "
                             "undo: the tables were changed without a journal entry (another program, or a dcplace "
                             f"from before the journal); it rewinds to seq {e.seq} at the earliest",
                             field=field) from None  # fmt: skip
    if to_seq == 0 and (machines or vms):  # before the very first entry the cluster was empty (none yet: as now)
        raise InputError("the journal began on a cluster that held machines already (it was first opened by a "
                         "dcplace from before the journal): it rewinds to seq 1 at the earliest",
                         field=field)  # fmt: skip
    return {
        "numa": snapshot["numa"],
        "machines": sorted(machines.values(), key=lambda m: int(m["slot"])),
        "vms": [vms[k] for k in sorted(vms)],
    }


class _Disagrees(Exception):
    """An entry that does not match the state it would undo."""


def _agree(ok: bool) -> None:
    if not ok:
        raise _Disagrees


def _undo(e: JournalEntry, machines: dict[str, dict[str, Any]], vms: dict[str, dict[str, Any]], field: str) -> None:
    """Undo entry ``e`` on ``machines`` and ``vms`` (:func:`rewind`)."""
    d = e.detail or {}

    def needs(*keys: str) -> None:
        if e.detail is None or not all(k in d for k in keys):
            raise InputError(f"entry {e.seq} ({e.event}) was written before the journal kept what undoes it; "
                             f"it rewinds to seq {e.seq} at the earliest", field=field)  # fmt: skip

    if e.event == "placed":
        v = vms.pop(str(e.vm))
        _agree((v["machine"], v["node"]) == (e.machine, e.node))
    elif e.event == "moved":
        needs("from", "from_node")
        v = vms[str(e.vm)]
        _agree((v["machine"], v["node"]) == (e.machine, e.node))
        v["machine"], v["node"] = d["from"], d["from_node"]
    elif e.event in ("pinned", "unpinned"):
        vms[str(e.vm)]["pinned"] = e.event == "unpinned"
    elif e.event in ("released", "dropped"):
        needs()  # {} where the VM had neither pin nor uid; None: written before releases kept them
        _agree(e.vm not in vms)
        vms[str(e.vm)] = {"id": e.vm, "machine": e.machine, "node": e.node, "cpu": e.cpu, "mem": e.mem,
                          "multi": bool(e.multi), "pinned": bool(d.get("pinned", False)),
                          "uid": d.get("uid")}  # fmt: skip
    elif e.event == "machine-added":
        gone = machines.pop(str(e.machine))
        _agree(not any(v["machine"] == e.machine for v in vms.values()))
        _agree(gone["status"] == "active" or "status" in d)
    elif e.event == "machine-removed":
        needs("slot", "rack", "status", "capacity")
        _agree(str(e.machine) not in machines)
        machines[str(e.machine)] = {"id": e.machine, "slot": d["slot"], "rack": d["rack"], "status": d["status"],
                                    "capacity": d["capacity"]}  # fmt: skip
    elif e.event == "machine-changed":
        needs("from_rack", "from_capacity")
        m = machines[str(e.machine)]
        _agree((m["rack"], m["capacity"]) == (d.get("rack"), d.get("capacity")))
        m["rack"], m["capacity"] = d["from_rack"], d["from_capacity"]
    elif e.event.startswith("machine-"):
        needs("from")
        machines[str(e.machine)]["status"] = d["from"]
    elif e.event == "journal-resumed":
        raise InputError(f"the journal was off before entry {e.seq} (or began there, on a cluster that was "
                         f"running already): what happened before is not in it; it rewinds to seq {e.seq} at the "
                         "earliest", field=field)  # fmt: skip


def parse_time(text: str) -> float:
    """A moment as a person writes it: Unix seconds, or an ISO 8601 time ('2026-11-28 21:48:00', UTC unless it says
    otherwise); InputError naming ``at`` for anything else."""
    from datetime import UTC, datetime

    try:
        return float(text)
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text.strip())
    except ValueError:
        raise InputError(f"is not a time ('2026-11-28 21:48:00', ISO 8601, or Unix seconds): {text!r}",
                         field="at") from None  # fmt: skip
    return (moment if moment.tzinfo else moment.replace(tzinfo=UTC)).timestamp()


def check_seq(seq: object) -> int:
    """``seq`` where it can name a journal entry (0: before the first), else InputError naming ``seq``."""
    if isinstance(seq, bool) or not isinstance(seq, int) or not 0 <= seq <= MAX_SEQ:
        raise InputError(f"must be a whole number from 0 to {MAX_SEQ} (a journal entry), got {seq!r}", field="seq")
    return seq


def seq_at(conn: sqlite3.Connection, at: float) -> int:
    """The entry a state at Unix time ``at`` follows: the one before the first entry, in commit order, stamped after
    ``at`` (the last entry where none is; 0: before the first). In commit order, not by time alone: where the clock
    stepped back, an entry committed later may carry an earlier time, and the state after it came after everything
    committed before it."""
    first_after = conn.execute("SELECT min(seq) FROM journal WHERE at > ?", (at,)).fetchone()[0]
    if first_after is not None:
        return int(first_after) - 1
    row = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'journal'").fetchone()
    return 0 if row is None else int(row[0])


def changed_since(conn: sqlite3.Connection, at: float, events: Sequence[str], resumed: str, key: str) -> set[str]:
    """What the journal on ``conn`` records as changed after Unix time ``at``: the ``key`` column (``vm``, ``job``)
    of its entries of ``events``. The inventory reconciles' ``as_of``, VM and network alike. InputError naming
    ``as_of`` where the journal no longer reaches back to ``at`` (pruned) or was off since (a ``resumed`` entry):
    what changed then is not in it."""
    after = seq_at(conn, at)
    first = conn.execute("SELECT min(seq) FROM journal").fetchone()[0]
    if first is not None and first > 1 and after < first:  # the time lies in what was pruned, or before
        raise InputError(f"the journal no longer reaches back to that time (pruned): it begins at entry {first}",
                         field="as_of")  # fmt: skip
    off = conn.execute("SELECT EXISTS (SELECT 1 FROM journal WHERE seq > ? AND event = ?)", (after, resumed))
    if off.fetchone()[0]:
        raise InputError("the journal was off after that time: what changed then is not in it", field="as_of")
    marks = ", ".join("?" * len(events))
    rows = conn.execute(f"SELECT DISTINCT {key} FROM journal WHERE seq > ? AND event IN ({marks}) AND {key} IS NOT "
                        "NULL", (after, *events))  # fmt: skip
    return {x for (x,) in rows}


def vms_held(path: str | Path) -> int:
    """How many VMs the database ``path`` holds now, read read-only."""
    with _connected(path) as conn:
        return int(conn.execute("SELECT count(*) FROM vms").fetchone()[0])


def journal_off_since(path: str | Path) -> float | None:
    """When the journal of the database ``path`` was turned off, where it is off now (None: it is on; 0.0: it was
    never on), read read-only."""
    with _connected(path) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'journal_off_since'").fetchone()
    try:
        return None if row is None else float(row[0])
    except ValueError:
        return 0.0
