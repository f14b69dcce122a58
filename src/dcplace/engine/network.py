"""A live network-aware cluster: jobs of several servers that talk to each other, placed on a datacenter network by
any network-aware policy (Nara, Tetris, NALB, NULB, a user's), durable in SQLite.

This is the Nara paper's setting (its section 3) outside an episode: a job asks for CPU and memory, spread over as
many servers as it takes, and bandwidth on every link between them; a policy picks its servers one at a time and
the job is accepted once it has them all and a path with that bandwidth joins every pair, or rejected with what it
took returned. The transitions are the simulator's own (:class:`~dcplace.sim.netalloc.LiveNetSim`, a subclass of
the episode simulator that takes requests as they come), so a policy decides here exactly as it was evaluated and
trained (a test replays an episode through both and compares every server), and the same invariants hold: no
server or link is ever over its capacity, and everything is free after every job has been released.

``NetworkEngine.open(path, topology, policy)`` keeps the running jobs in a SQLite file (WAL, ``synchronous=FULL``,
one transaction per placement or release, durable when it returns); a restart reloads them exactly (their servers,
amounts and links, not decided again) and refuses a file written for another topology. The service mounts it with
``dcplace serve --network TOPOLOGY`` (``POST /jobs``, docs/engine.md, "The network-aware setting, live").
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import sqlite3
import threading
import time
from array import array
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.cluster.topology import BW_SCALE, PRESETS, TIER_NAMES, Topology, load_topology, preset
from dcplace.engine.engine import CLOCK_SKEW_S, Conflict, NotFound, Unavailable, _check_time, _id_ok
from dcplace.engine.journal import check_window, paged
from dcplace.engine.locks import YieldingLock
from dcplace.engine.network_check import check_room_plan
from dcplace.engine.store import (
    StoreError,
    _reading,
    _why,
    check_journal_keep,
    check_network_database,
    create_new,
    hold_database,
    names_the_file,
    remove_database,
    save_recovery,
    stored_keep,
)
from dcplace.errors import InputError
from dcplace.inputs import MAX_BANDWIDTH, MIN_BANDWIDTH
from dcplace.policies.base import NetPolicy
from dcplace.policies.registry import check_policy_object, get_net_policy
from dcplace.sim.netalloc import LOCALITY_NAMES, Allocation, LiveNetSim
from dcplace.sim.netalloc_episodes import Routings, default_requests, get_setting
from dcplace.sim.policy_calls import as_action, decide
from dcplace.workload.netreq import NetRequests, calibrate_hold

BUSY_S = 5.0
"""How long a write waits for another program's lock on the network database before answering 503."""

MAX_UNITS = 1_000_000
"""CPU or memory units one job may ask for at most (a Nara server has 10 of each)."""


@dataclass(frozen=True)
class NetJob:
    """A job: ``cpu`` and ``mem`` in server units over as many servers as it takes, ``bw`` in link units (1.0: a
    whole server-rack link of the presets) on every link between its servers, ``hold`` its expected holding period
    in arrivals where known (only a learned policy reads it; None: half the policy's horizon). Checked when made:
    one sentence naming the field."""

    id: str
    cpu: int
    mem: int
    bw: float
    hold: int | None = None

    def __post_init__(self) -> None:
        if not _id_ok(self.id):
            raise InputError(f"must be 1-256 printable characters, got {self.id!r}", field="id")
        for name, value in (("cpu", self.cpu), ("mem", self.mem)):
            if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_UNITS:
                raise InputError(f"must be a whole number of units from 0 to {MAX_UNITS:,}, got {value!r}",
                                 field=name)  # fmt: skip
        if self.cpu == 0 and self.mem == 0:
            raise InputError("a job asks for some CPU or memory; both are 0", field="cpu")
        bw = self.bw
        if isinstance(bw, bool) or not isinstance(bw, int | float) or not MIN_BANDWIDTH <= bw <= MAX_BANDWIDTH:
            raise InputError(f"must be link units from {MIN_BANDWIDTH:g} to {MAX_BANDWIDTH:g}, got {bw!r}", field="bw")
        hold = self.hold
        if hold is not None and (isinstance(hold, bool) or not isinstance(hold, int) or not 1 <= hold <= MAX_UNITS):
            raise InputError(f"must be a whole number of arrivals from 1 to {MAX_UNITS:,}, got {hold!r}", field="hold")

    @property
    def bw_micro(self) -> int:
        """The bandwidth in the topology's integer micro-units (:data:`~dcplace.cluster.topology.BW_SCALE`)."""
        return max(1, round(self.bw * BW_SCALE))


@dataclass(frozen=True)
class JobPlacement:
    """Where a job runs: its servers (names) with the CPU and memory each gives, the links that carry its
    bandwidth (each reserved once, by its two endpoints' names), how local it is (``LOCALITY_NAMES``) and its
    declared ``hold``."""

    id: str
    servers: tuple[str, ...]
    cpu: tuple[int, ...]
    mem: tuple[int, ...]
    links: tuple[tuple[str, str], ...]
    bw: float
    locality: str
    hold: int | None = None
    """Its expected holding period in arrivals, as declared (None: none was)."""

    accepted = True

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "accepted": True, "servers": list(self.servers), "cpu": list(self.cpu),
                "mem": list(self.mem), "links": [list(x) for x in self.links], "bw": self.bw,
                "locality": self.locality, "hold": self.hold}  # fmt: skip


@dataclass(frozen=True)
class JobRejection:
    """A job not placed: ``capacity`` (the cluster's free CPU or memory cannot hold it), ``network`` (no path with
    its bandwidth between two of its servers), ``invalid`` (the policy picked a server it could not use)."""

    id: str
    reason: str

    accepted = False

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "accepted": False, "reason": self.reason}


@dataclass(frozen=True)
class NetReconcileReport:
    """What :meth:`NetworkEngine.reconcile` did (or, a dry run, would do): jobs ``released`` (recorded, not in the
    inventory), ``recorded`` (in the inventory, not recorded), ``changed`` (recorded elsewhere, with other amounts or
    another bandwidth: released and recorded anew), and how many were ``kept`` as they were; ``executed``: False
    for a dry run; ``newer``: jobs left as recorded because their records changed after the inventory was taken
    (``as_of``)."""

    released: tuple[str, ...]
    recorded: tuple[str, ...]
    changed: tuple[str, ...]
    kept: int
    executed: bool
    newer: tuple[str, ...] = ()

    def as_dict(self) -> dict[str, Any]:
        return {"released": list(self.released), "recorded": list(self.recorded), "changed": list(self.changed),
                "kept": self.kept, "executed": self.executed, "newer": list(self.newer)}  # fmt: skip


@dataclass(frozen=True)
class NetMove:
    """A running job a plan changes: from its servers to ``servers`` (names) with ``cpu`` and ``mem`` on each, its
    bandwidth on ``links`` (the same servers with another split, or other links, is a change too)."""

    id: str
    source: tuple[str, ...]
    servers: tuple[str, ...]
    cpu: tuple[int, ...]
    mem: tuple[int, ...]
    links: tuple[tuple[str, str], ...]
    step: int = 0
    """The moves of one step are carried out together, all stopped before any starts (a step of one move: that job
    alone); steps one after another, in order."""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "from": list(self.source), "servers": list(self.servers), "cpu": list(self.cpu),
                "mem": list(self.mem), "links": [list(x) for x in self.links], "step": self.step}  # fmt: skip


@dataclass(frozen=True)
class NetRoomPlan:
    """Where a job could run if the jobs of one rack moved (:meth:`NetworkEngine.make_room`), nothing changed.
    ``accepted``: whether it could run, now (no moves) or after ``moves``; ``reason``: why not (``capacity``: the
    free totals cannot hold it, and moving adds none; ``network``: no rack's jobs moved make a path for it);
    ``rack``: the switch whose jobs move; ``moves``: in the order to carry them out, by ``step`` (cold);
    ``inventory``: every job as it would run, the new one included, as ``GET /jobs`` lists them."""

    id: str
    accepted: bool
    reason: str | None
    placement: JobPlacement | None
    rack: str | None
    moves: tuple[NetMove, ...]
    inventory: tuple[dict[str, Any], ...]
    executed: bool = False
    """Whether the moves and the job were recorded (``make_room(execute=True)`` of a plan that accepts it)."""
    at: float = 0.0
    """When the plan was made (Unix time): ``inventory`` is the state then, a reconcile's ``as_of``."""

    def as_dict(self) -> dict[str, Any]:
        return {"id": self.id, "accepted": self.accepted, "reason": self.reason,
                "placement": None if self.placement is None else self.placement.as_dict(), "rack": self.rack,
                "moves": [m.as_dict() for m in self.moves], "inventory": list(self.inventory),
                "executed": self.executed, "at": self.at}  # fmt: skip


@dataclass(frozen=True)
class _Trial:
    """A rack of :meth:`NetworkEngine.make_room`'s search where every job fitted: the rack (its index), how many jobs
    move, their steps, and the copy of the state with the moves and the job made (``rids``: where each went)."""

    rack: int
    moved: int
    steps: list[list[str]]
    sim: LiveNetSim
    rids: dict[str, int]


@dataclass(frozen=True)
class _CheckInputs:
    """What :func:`~dcplace.engine.network_check.check_room_plan` replays a plan from: the drained servers' names,
    the request, every running job as ``GET /jobs`` lists it."""

    drained: list[str]
    request: dict[str, Any]
    jobs: list[dict[str, Any]]


class _Stopwatch:
    """Seconds counted only while running: :meth:`NetworkEngine.make_room`'s time limit counts the lock held."""

    def __init__(self) -> None:
        self.spent, self.since = 0.0, time.perf_counter()

    def seconds(self) -> float:
        return self.spent + time.perf_counter() - self.since

    def pause(self) -> None:
        self.spent += time.perf_counter() - self.since

    def resume(self) -> None:
        self.since = time.perf_counter()


_RECORDED: Any = object()
"""``NetworkEngine._placement``'s hold of a running job: the engine's record of it."""

_INVENTORY_FIELDS = {"id", "servers", "cpu", "mem", "bw", "links", "hold", "accepted", "locality"}
"""What an inventory row may have: a running job as ``GET /jobs`` lists it (``accepted`` and ``locality`` are
ignored), with ``links`` and ``hold`` optional."""


@dataclass(frozen=True)
class ServerInfo:
    """A server of the network: its capacity, what its running jobs use of it, whether it is drained (no new job
    is given any of it), and those jobs (in the order placed)."""

    name: str
    drained: bool
    cpu_capacity: int
    mem_capacity: int
    cpu_used: int
    mem_used: int
    jobs: tuple[str, ...]

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "drained": self.drained, "cpu_capacity": self.cpu_capacity,
                "mem_capacity": self.mem_capacity, "cpu_used": self.cpu_used, "mem_used": self.mem_used,
                "jobs": list(self.jobs)}  # fmt: skip


@dataclass(frozen=True)
class NetExplanation:
    """Where a job would go now and why (:meth:`NetworkEngine.explain`), nothing changed. ``placement``: where it
    would run (None: it would be rejected, for ``reason``); ``picks``: the servers the policy picked, in order (for
    a rejection, the last is where it failed); ``pair`` and ``widest``: for a ``network`` rejection, the two servers
    no candidate path joined with the job's bandwidth, and the most free bandwidth on any of their candidate paths
    (link units); ``free_cpu``, ``free_mem``: the cluster's free units; ``tiers``: per tier, the links with at least
    the job's bandwidth free and the most free on one link; ``summary``: one sentence."""

    id: str
    policy: str
    placement: JobPlacement | None
    reason: str | None
    picks: tuple[str, ...]
    pair: tuple[str, str] | None
    widest: float | None
    free_cpu: int
    free_mem: int
    tiers: dict[str, dict[str, float]]
    summary: str

    @property
    def accepted(self) -> bool:
        return self.placement is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id, "policy": self.policy, "accepted": self.accepted,
            "placement": None if self.placement is None else self.placement.as_dict(), "reason": self.reason,
            "picks": list(self.picks), "pair": None if self.pair is None else list(self.pair), "widest": self.widest,
            "free_cpu": self.free_cpu, "free_mem": self.free_mem, "tiers": self.tiers, "summary": self.summary,
        }  # fmt: skip


SCHEMA_VERSION = 3
"""The newest network database layout this dcplace reads, in SQLite's ``user_version`` (1: meta and jobs; 2: and the
journal; 3: its entries may be ``moved``, or ``placed`` by ``make-room``, which a dcplace reading up to 2 would take
for hand-edited rows: a file becomes 3 with the first such entry, so one never moved stays readable by an older
dcplace); a newer one is refused. A version-1 file gains the journal when opened (its jobs then running have no
entry in it)."""

_SCHEMA = (
    "CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL)",
    "CREATE TABLE IF NOT EXISTS jobs (seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, "
    "servers TEXT NOT NULL, cpu TEXT NOT NULL, mem TEXT NOT NULL, links TEXT NOT NULL, bw INTEGER NOT NULL, "
    "hold INTEGER)",
    "CREATE TABLE IF NOT EXISTS journal (seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, "
    "event TEXT NOT NULL, job TEXT NOT NULL, cpu INTEGER, mem INTEGER, bw INTEGER, hold INTEGER, reason TEXT)",
    # A job's entries by index (`cluster journal --job`, GET /network/journal?job=): a scan of 1M entries takes
    # about 50 ms, the index 0.5 ms. Made when a file is opened (an older file gains it); the version is unchanged.
    "CREATE INDEX IF NOT EXISTS journal_job ON journal (job)",
)

JOURNAL_KEEP = 1_000_000
"""The newest journal entries a network database keeps by default (placements, rejections, releases, starts: about
70-80 bytes each with the index on ``job``, by the ids' length: 70-80 MB); older ones are deleted as new ones come,
1,000 at a time (``journal_keep`` of :meth:`NetworkEngine.open`, ``serve --journal-keep``)."""
_PRUNE_EVERY = 1000
_JOURNAL_LAYOUT = 2
"""The layout a file is brought up to when opened (the journal); :data:`SCHEMA_VERSION` once a move is written."""

NET_EVENTS = ("placed", "rejected", "released", "moved", "started", "resumed", "drained", "activated")
"""What the network journal records: a job ``placed`` or ``rejected`` (what it asked for, as asked; a rejection's
reason), ``released``, ``moved`` (a running job's new servers recorded: its size, and who moved it, ``make-room``
or ``move``); each start of the engine (``started``, with its policy); ``resumed`` where the journal was
off (``journal_keep`` 0) for a while, with when it went off: a trace starts there; a server ``drained`` or
``activated`` (:meth:`NetworkEngine.drain_server`)."""


@dataclass(frozen=True)
class NetJournalEntry:
    """One entry of a network database's journal (:func:`read_network_journal`). ``seq`` grows with every entry
    (page with ``after=seq``); ``at``: Unix time; ``job``, ``cpu``, ``mem`` (units), ``bw`` (link units), ``hold``
    (arrivals, where declared): what a ``placed`` or ``rejected`` job asked for (``released`` has its ``job`` only);
    ``reason``: a rejection's (capacity, network, invalid); ``by``: ``reconcile`` for a job a reconcile recorded or
    released, ``make-room`` or ``move`` for a job moved (or recorded by an executed plan); ``policy``: a start's;
    ``off_since``: a resume's, when the journal went off; ``server``: a drain's or activation's. None where it
    does not apply."""

    seq: int
    at: float
    event: str
    job: str | None
    cpu: int | None
    mem: int | None
    bw: float | None
    hold: int | None
    reason: str | None
    policy: str | None
    off_since: float | None
    server: str | None = None
    by: str | None = None
    """``reconcile`` where a reconcile recorded or released the job (not the policy or its client); ``make-room`` or
    ``move`` where a plan recorded or moved it."""

    def as_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq, "at": self.at, "event": self.event, "job": self.job, "cpu": self.cpu, "mem": self.mem,
            "bw": self.bw, "hold": self.hold, "reason": self.reason, "policy": self.policy,
            "off_since": self.off_since, "server": self.server, "by": self.by,
        }  # fmt: skip


_NET_COLUMNS = "seq, at, event, job, cpu, mem, bw, hold, reason"


_LATEST_TIME = 1e11
"""Unix times past this (the year 5138) are no entry's."""


def _journal_entry(row: Sequence[Any]) -> NetJournalEntry:
    """A journal row as an entry; ValueError where it is not one the engine writes (a hand-edited row)."""
    seq, at, event, job, cpu, mem, bw, hold, reason = row

    def when(x: object) -> bool:
        return type(x) in (int, float) and 0 <= x < _LATEST_TIME  # type: ignore[operator]

    off = None
    if event == "resumed" and isinstance(reason, str):
        with contextlib.suppress(ValueError):
            off = float(reason)
    if event in ("placed", "rejected"):
        ok = _journalled(event, job, cpu, mem, bw, hold, reason) and bool(job)
    elif event == "released":
        ok = isinstance(job, str) and bool(job) and reason in (None, "reconcile")
    elif event == "moved":
        ok = _journalled("placed", job, cpu, mem, bw, hold, None) and bool(job) and reason in _MOVERS
    elif event == "started":  # the policy's name, which a user's policy may leave empty
        ok = isinstance(reason, str)
    elif event in ("drained", "activated"):
        ok = isinstance(reason, str) and bool(reason)
    else:
        ok = event == "resumed" and (when(off) or reason == "")
    if not (ok and type(seq) is int and when(at)):
        raise ValueError(f"journal entry {seq!r} is not one dcplace writes ({event!r}, job {job!r}, at {at!r}, cpu "
                         f"{cpu!r}, mem {mem!r}, bw {bw!r}, hold {hold!r}, reason {reason!r})")  # fmt: skip
    return NetJournalEntry(seq, float(at), event, job or None, cpu, mem, None if bw is None else bw / BW_SCALE, hold,
                           reason if event == "rejected" else None, reason if event == "started" else None,
                           off, reason if event in ("drained", "activated") else None,
                           reason if event in ("placed", "released", "moved") else None)  # fmt: skip


def read_network_journal(
    path: str | Path,
    *,
    job: str | None = None,
    event: str | None = None,
    after: int = 0,
    limit: int | None = 1000,
    tail: int | None = None,
    peek: bool = False,
) -> list[NetJournalEntry]:
    """The entries of the network database ``path`` after the seq ``after``, oldest first: at most ``limit`` (None:
    all), about the job ``job``, of kind ``event`` (one of :data:`NET_EVENTS`); ``tail``: instead, the newest
    ``tail`` such entries (still oldest first); ``peek``: one past ``limit`` where there is one (so a page knows
    whether it is the last: :func:`~dcplace.engine.journal.paged`). Read-only, also while a service runs on the
    file. Bad arguments, or a file that is not a network database, are one sentence naming the field."""
    if job is not None and (not isinstance(job, str) or not job):
        raise InputError(f"must be a non-empty job id, got {job!r}", field="job")
    if event is not None and event not in NET_EVENTS:
        raise InputError(f"must be one of {', '.join(NET_EVENTS)}; got {event!r}", field="event")
    check_window(after, limit, tail)
    p = Path(path)
    if "journal" not in check_network_database(p):
        return []  # a version-1 file no engine of this version opened yet
    where: list[str] = ["seq > ?"]
    args: list[object] = [after]
    for column, value in (("job", job), ("event", event)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    sql = f"SELECT {_NET_COLUMNS} FROM journal WHERE {' AND '.join(where)} ORDER BY seq"
    if tail is not None:
        sql += f" DESC LIMIT {int(tail)}"
    elif limit is not None:
        sql += f" LIMIT {int(limit) + int(peek)}"
    try:
        with _reading(p) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            rows = conn.execute(sql, args).fetchall()
    except sqlite3.DatabaseError as e:
        raise InputError(f"{p} cannot be read ({e})", field="db") from None
    if tail is not None:
        rows.reverse()
    try:
        return [_journal_entry(r) for r in rows]
    except ValueError as e:
        raise InputError(f"{p}: {e}: a hand-edited row?", field="db") from None


def stored_preset(path: Path) -> str | None:
    """The preset the network database ``path`` was written for (None: a topology file's, which ``--topology``
    must then name). Read-only."""
    check_network_database(path)
    try:
        with _reading(path) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('topology', 'topology_name')"))
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path} cannot be read ({e})", field="db") from None
    return _preset_of(meta)


def _preset_of(meta: Mapping[str, Any]) -> str | None:
    name = meta.get("topology_name")  # a preset only if it is one (a file's name is its stem: alpha.json)
    return name if name in PRESETS and meta.get("topology") == fingerprint(preset(name)) else None


@contextlib.contextmanager
def _reloading(path: Path) -> Iterator[None]:
    """A file's rows reloaded: what they get wrong (a hand-edited row) is one sentence naming the file."""
    try:
        yield
    except (ValueError, TypeError, KeyError, OverflowError, RecursionError, InputError) as e:
        why = "a list nested too deep" if isinstance(e, RecursionError) else str(e)
        raise InputError(f"{path} does not hold a consistent set of jobs: {why}", field="db") from None


def read_network_jobs(path: Path, topology: Topology | str | None = None) -> list[dict[str, Any]]:
    """The jobs running in the network database ``path``, each as ``GET /jobs`` lists it with its declared ``hold``
    (null: none): an inventory :meth:`NetworkEngine.reconcile` takes back (``cluster export``). Read-only, also while
    a service runs on the file; every row checked as a start checks it. ``topology``: the file's own where it was
    written for a preset (None), else its topology file."""
    where = topology if topology is not None else stored_preset(path)
    if where is None:
        raise InputError(f"{path} was written for a topology file, not a preset: pass it with --topology",
                         field="topology")  # fmt: skip
    engine = NetworkEngine(where)
    try:
        with _reading(path) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            conn.execute("BEGIN")  # one snapshot: a service writing on meanwhile
            mark = conn.execute("SELECT value FROM meta WHERE key = 'topology'").fetchone()
            rows = conn.execute("SELECT id, servers, cpu, mem, links, bw, hold FROM jobs ORDER BY seq").fetchall()
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path} cannot be read ({e})", field="db") from None
    if mark is None and rows:
        raise InputError(f"{path} holds jobs but no topology", field="db")
    if mark is not None and mark[0] != fingerprint(engine.topology):
        raise InputError(f"{path} was written for another topology, not this {engine.topology.name}",
                         field="topology")  # fmt: skip
    with _reloading(path):
        for row in rows:
            engine._reload(row)
    return [job.as_dict() for job in engine.jobs()]


def last_policy(path: Path) -> str | None:
    """The policy the network database ``path``'s engine last started with, by its journal (None: not known)."""
    if "journal" not in check_network_database(path):
        return None
    started = read_network_journal(path, event="started", tail=1)
    return started[0].policy if started else None


def read_network_inventory(path: Path) -> list[Any]:
    """The jobs a cluster runs, from a JSON file: a list of jobs as ``GET /jobs`` lists them (or an object with
    such a list under ``jobs``), for :meth:`NetworkEngine.reconcile`. InputError naming the file where it is not."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot be read ({e.strerror if isinstance(e, OSError) else e})", path=path) from None
    try:
        data = json.loads(text)
    except json.JSONDecodeError as e:
        raise InputError(f"is not JSON ({e.msg})", path=path, line=e.lineno) from None
    except RecursionError:
        raise InputError("is not JSON dcplace reads (nested too deep)", path=path) from None
    if isinstance(data, dict) and set(data) == {"jobs"}:
        data = data["jobs"]
    if not isinstance(data, list):
        raise InputError('must be a JSON list of jobs as GET /jobs lists them (or {"jobs": [...]})', path=path)
    return data


def fingerprint(topology: Topology) -> str:
    """A digest of what a job's servers and links refer to: the servers' capacities and the links by endpoints and
    capacity, in order. A file written for another topology (or the same name built otherwise) is refused."""
    h = hashlib.sha256()
    for a in (topology.server_cpu, topology.server_mem, topology.link_u, topology.link_v, topology.link_cap):
        h.update(np.ascontiguousarray(a, dtype=np.int64).tobytes())
        h.update(b"|")
    return h.hexdigest()


@dataclass(frozen=True)
class _InventoryRow:
    """A checked inventory row (:meth:`NetworkEngine.reconcile`): the job, its servers (ids), amounts, links (ids,
    sorted; None: route it) and where it was in the inventory (``jobs[3]``)."""

    job: NetJob
    servers: np.ndarray
    cpu: np.ndarray
    mem: np.ndarray
    links: np.ndarray | None
    where: str

    def matches(self, a: Allocation) -> bool:
        """Whether the job runs as recorded in ``a``: the same servers with the same amounts, bandwidth and (where
        the row gives them) links."""
        links = a.links if self.links is None else self.links
        return _same(Allocation(self.servers, self.cpu, self.mem, links, self.job.bw_micro, 0), a)


class NetworkEngine:
    """Jobs placed on ``topology`` (a :class:`Topology`, a preset name or a topology file) by ``policy`` (a
    registered netalloc name, ``name=checkpoint`` for a learned one, or a :class:`NetPolicy`), with ``k`` candidate
    paths per pair of servers (the paper's 3; NALB and NULB use their own weighted routing, as in the paper's
    setting). Thread-safe: one lock serialises every change. In memory only; :meth:`open` keeps the jobs in a
    database."""

    def __init__(
        self,
        topology: Topology | str,
        policy: str | NetPolicy = "tetris-bw",
        *,
        k: int = 3,
        seed: int = 0,
        hold_max: int | None = None,
    ) -> None:
        self.topology = load_topology(topology) if isinstance(topology, str) else topology
        if isinstance(policy, str):
            name, _, checkpoint = policy.partition("=")
            self.policy: Any = get_net_policy(name, seed=seed, checkpoint=checkpoint or None)
            self.policy_name = policy
        else:
            check_policy_object(policy, "netalloc")
            self.policy, self.policy_name = policy, getattr(policy, "name", type(policy).__name__)
        if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 16:
            raise InputError(f"must be a whole number of paths from 1 to 16, got {k!r}", field="k")
        routing = Routings(self.topology, get_setting("paper"), k).for_policy(self.policy)
        self.hold_max = horizon(self.policy) if hold_max is None else hold_max
        self.sim = LiveNetSim(self.topology, k, routing, bool(getattr(self.policy, "any_server", False)), self.hold_max)
        self.lock = YieldingLock()
        """Held by every call that reads or changes the state; :meth:`make_room` lets waiting calls go first between
        two racks (:class:`~dcplace.engine.locks.YieldingLock`)."""
        self.make_room_yields = True
        """Whether :meth:`make_room` lets waiting calls go first between two racks (False: it holds the lock for its
        whole search, as the search did before 2026-11-29; a plan that changes nothing is checked after the lock is
        let go either way; ``benchmarks/bench_network_make_room.py --contention`` compares both)."""
        self._changes = 0  # bumped by every write: a search that let others go sees whether they changed anything
        self._shown: dict[str, tuple[Allocation, int | None, JobPlacement]] = {}
        """Each job as last listed, with the allocation and hold it was listed from: listing it again while both are
        the same objects reuses it (a job's names and tuples, built anew, took 20 ms per listing of 2,000 jobs)."""
        self._rid: dict[str, int] = {}  # job id -> its allocation in the simulator
        self._hold: dict[str, int | None] = {}  # job id -> its declared hold (None: none), as the file keeps it
        self._layout = SCHEMA_VERSION  # the file's user_version (open); 3 once a move is written
        self._conn: sqlite3.Connection | None = None
        self._lock_fd: int | None = None
        self._path = Path()
        self._failed: str | None = None
        self._closed = False
        self._noticing = threading.Lock()  # one thread makes the failure's sentence (and the recovery copy)
        self.on_failure: Any = None
        """Called once (no arguments) when the database fails: ``serve --exit-on-failure`` stops on it."""
        self.counters = {"placed": 0, "rejected": 0, "released": 0, "moved": 0}
        self.in_use = (0, 0, 0, 0)
        """(CPU used, memory used, CPU held apart on drained servers, memory held apart), published whole after each
        change: the metrics' source, read without the lock in one read (two reads of the simulator's totals taken
        around a drain gave a negative allocation)."""
        self.rejections = {"capacity": 0, "network": 0, "invalid": 0}
        """Rejections by reason, counted with ``counters["rejected"]`` once the decision is durable (the metrics'
        source: their sum is the rejected decisions in the same read)."""
        self.journal_keep = JOURNAL_KEEP
        """The newest journal entries kept (:meth:`open`'s ``journal_keep``; 0: the journal is off)."""
        self._names = self.topology.node_names
        self._server_of = {self._names[v]: v for v in range(self.topology.n_servers)}
        top = self.topology
        self._racks: list[tuple[str, np.ndarray]] = []  # each rack of Topology.server_rack: its switch, its servers
        for r in range(int(top.server_rack.max(initial=-1)) + 1):
            members = np.flatnonzero(top.server_rack == r)
            first = int(members[0])  # a rack's server hangs from its switch by its one link
            link = int(np.flatnonzero((top.link_u == first) | (top.link_v == first))[0])
            self._racks.append((self._names[int(top.link_u[link] + top.link_v[link]) - first], members))
        self._link_of: dict[tuple[str, str], int] = {}
        for x, (u, v) in enumerate(zip(top.link_u.tolist(), top.link_v.tolist(), strict=True)):
            self._link_of[(self._names[u], self._names[v])] = self._link_of[(self._names[v], self._names[u])] = x

    # -- the database ----------------------------------------------------------------------------------------
    @classmethod
    def open(cls, path: str | Path, topology: Topology | str, policy: str | NetPolicy = "tetris-bw", *,
             journal_keep: int | None = None, started: bool = True, **kw: Any) -> NetworkEngine:  # fmt: skip
        """An engine whose jobs are kept in the SQLite file ``path`` (made if new), reloaded exactly. A file that
        is not one, or was written for another topology, is one sentence naming ``db``. ``journal_keep``: the
        newest journal entries kept (0: none written, the journal is off; None: as the file was last opened, else
        :data:`JOURNAL_KEEP`). ``started=False``: no ``started`` entry (an offline command that decides nothing:
        ``cluster reconcile``; a trace would read it as a start of its policy)."""
        check_journal_keep(journal_keep)
        engine = cls(topology, policy, **kw)
        p = Path(path)
        made = create_new(p) is not None  # atomically: only a file this call made is removed on a failure
        if not made:
            check_network_database(p)  # looked at read-only: nothing written to a file that is not ours
        try:
            conn = sqlite3.connect(p, isolation_level=None, check_same_thread=False, timeout=BUSY_S)
        except sqlite3.Error as e:
            raise InputError(f"{p} cannot be opened ({e})", field="db") from None
        try:
            engine._lock_fd = hold_database(p, conn)  # one engine per file: two over-committed it between them
        except BaseException:
            if made:
                remove_database(p)
            raise
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA journal_size_limit=8388608")  # a checkpoint truncates the -wal to 8 MiB, as the
            # VM store's: a reader holding a transaction under load grew it to 455 MB, kept until a restart
            conn.execute("BEGIN IMMEDIATE")
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise InputError(f"{p} was written by a newer dcplace (network schema version {version}; this one "
                                 f"reads up to {SCHEMA_VERSION}): upgrade dcplace", field="db")  # fmt: skip
            for statement in _SCHEMA:
                conn.execute(statement)
            engine._layout = max(version, _JOURNAL_LAYOUT)
            conn.execute(f"PRAGMA user_version = {engine._layout}")
            mark = fingerprint(engine.topology)
            row = conn.execute("SELECT value FROM meta WHERE key = 'topology'").fetchone()
            if row is None:
                if conn.execute("SELECT EXISTS (SELECT 1 FROM jobs)").fetchone()[0]:
                    raise InputError(f"{p} holds jobs but no topology", field="db")
                conn.execute("INSERT INTO meta VALUES ('topology', ?)", (mark,))
                conn.execute("INSERT INTO meta VALUES ('topology_name', ?)", (engine.topology.name,))
            elif row[0] != mark:
                said = conn.execute("SELECT value FROM meta WHERE key = 'topology_name'").fetchone()
                raise InputError(f"{p} was written for another topology ({said[0] if said else 'unnamed'}), not "
                                 f"this {engine.topology.name}", field="topology")  # fmt: skip
            rows = conn.execute("SELECT id, servers, cpu, mem, links, bw, hold FROM jobs ORDER BY seq").fetchall()
            drained = conn.execute("SELECT value FROM meta WHERE key = 'drained'").fetchone()
            resumed = engine._journal_setting(conn, journal_keep)
            conn.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            raise engine._refused(conn, p, made, e, "is not a dcplace network database") from None
        except BaseException:
            engine._release_file(conn)
            if made:
                remove_database(p)
            raise
        try:
            with _reloading(p):
                for row in rows:
                    engine._reload(row)
                engine._redrain(drained)
            engine._publish()
        except BaseException:
            engine._release_file(conn)
            raise
        try:  # a start, once the jobs reloaded (a refused open is none): a random policy draws anew from its seed
            if engine.journal_keep and started:
                conn.execute("BEGIN IMMEDIATE")
                if resumed is not None:  # the journal was off: a trace starts here
                    conn.execute("INSERT INTO journal (at, event, job, reason) VALUES (?, 'resumed', '', ?)",
                                 (time.time(), resumed))  # fmt: skip
                    conn.execute("DELETE FROM meta WHERE key = 'journal_off_since'")
                cur = conn.execute("INSERT INTO journal (at, event, job, reason) VALUES (?, 'started', '', ?)",
                                   (time.time(), engine.policy_name))  # fmt: skip
                engine._prune(conn, cur.lastrowid)
                conn.execute("COMMIT")
        except sqlite3.Error as e:
            raise engine._refused(conn, p, made, e, "cannot be written") from None
        engine._conn, engine._path = conn, p.absolute()
        return engine

    def _refused(self, conn: sqlite3.Connection, p: Path, made: bool, e: sqlite3.Error, why: str) -> InputError:
        """The open's sentence for SQLite's refusal ``e`` (``why`` unless another program's lock), the file released
        first, and removed where this open made it."""
        self._release_file(conn)
        if made:
            remove_database(p)
        said = _why(p, e) if isinstance(e, sqlite3.DatabaseError) else ""
        if not said or said.startswith("is not"):  # SQLite's own words for a file that is no database of ours
            said = f"{why} ({e})"
        return InputError(f"{p} {said}", field="db")

    def _journal_setting(self, conn: sqlite3.Connection, asked: int | None) -> str | None:
        """In :meth:`open`'s transaction: the ``journal_keep`` in force (``asked``, else the one stored, else
        :data:`JOURNAL_KEEP`), stored; where the journal goes off, when (``journal_off_since``). Returns that time
        where the journal was off and comes back on (the ``resumed`` entry's), else None."""
        row = conn.execute("SELECT value FROM meta WHERE key = 'journal_keep'").fetchone()
        if asked is None:  # a hand-edited setting that is none: the default
            kept = stored_keep(None if row is None else str(row[0]))
            asked = JOURNAL_KEEP if kept is None else kept
        self.journal_keep = asked
        conn.execute("INSERT INTO meta VALUES ('journal_keep', ?) ON CONFLICT (key) DO UPDATE SET value = "
                     "excluded.value", (str(asked),))  # fmt: skip
        off = conn.execute("SELECT value FROM meta WHERE key = 'journal_off_since'").fetchone()
        if asked == 0 and off is None:
            conn.execute("INSERT INTO meta VALUES ('journal_off_since', ?)", (repr(time.time()),))
        if asked == 0 or off is None:
            return None
        with contextlib.suppress(ValueError):
            if 0 <= float(off[0]) < _LATEST_TIME:
                return repr(float(off[0]))
        return ""  # off since a time the file no longer says (hand-edited): the resume says nothing of it

    def _release_file(self, conn: sqlite3.Connection) -> None:
        conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def _publish(self) -> None:
        sim, top = self.sim, self.topology
        held_cpu, held_mem = int(sim.held_cpu.sum()), int(sim.held_mem.sum())
        self.in_use = (int(top.server_cpu.sum()) - sim.free_cpu_total - held_cpu,
                       int(top.server_mem.sum()) - sim.free_mem_total - held_mem, held_cpu, held_mem)  # fmt: skip

    def _redrain(self, row: tuple[Any, ...] | None) -> None:
        """The servers the file says are drained, drained again (ValueError where it names no server of ours)."""
        try:
            names = [] if row is None else json.loads(row[0])
        except (ValueError, TypeError):
            names = None
        if not isinstance(names, list) or not all(isinstance(x, str) and x in self._server_of for x in names):
            raise ValueError(f"its drained servers {str(row[0])[:80] if row else ''} are not servers of this topology")
        for name in names:
            self.sim.set_drained(self._server_of[name], True)

    def _reload(self, row: tuple[Any, ...]) -> None:
        job_id, servers, cpu, mem, links, bw, hold = row
        named = ((servers, "servers"), (cpu, "cpu"), (mem, "mem"), (links, "links"))
        at, took_cpu, took_mem, over = (_whole(job_id, text, name) for text, name in named)
        if type(bw) is not int or not 0 <= bw <= MAX_BANDWIDTH * BW_SCALE:
            raise ValueError(f"job {job_id!r}: bw {bw!r} is not a whole number of micro-units")
        alloc = Allocation(at, took_cpu, took_mem, over, bw, 0)
        NetJob(job_id, int(alloc.cpu.sum()), int(alloc.mem.sum()), max(bw, 1) / BW_SCALE, hold)  # its fields' rules
        try:
            self._rid[job_id] = self.sim.restore(alloc)
        except ValueError as e:
            raise ValueError(f"job {job_id!r}: {e}") from None
        self._hold[job_id] = hold

    def _decided(self, drawn: tuple[Mapping[str, Any] | None, dict[str, Any] | None],
                 *statements: tuple[str, tuple[Any, ...]]) -> None:  # fmt: skip
        """A decision's :meth:`_write`. Answered 503 (another program's lock), nothing changed: the policy's random
        draws are put back where :func:`_draws` saw them, so the retry decides as a replay does (the simulator's
        own tally counts the attempt, as its clock, and its invariant holds)."""
        try:
            self._write(*statements)
        except Unavailable:
            _put_back(self.policy, drawn)
            raise

    def _count_rejection(self, reason: str) -> None:
        self.counters["rejected"] += 1
        self.rejections[reason] += 1

    @staticmethod
    def _entry(event: str, job: NetJob, reason: str | None = None) -> tuple[str, tuple[Any, ...]]:
        """The journal's row of ``job`` placed or rejected: what it asked for, as asked; ``reason``: a rejection's,
        or ``reconcile`` for a job a reconcile recorded."""
        return ("INSERT INTO journal (at, event, job, cpu, mem, bw, hold, reason) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (time.time(), event, job.id, job.cpu, job.mem, job.bw_micro, job.hold, reason))  # fmt: skip

    def _write(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        """One change (the statements in one transaction), durable on return; every :data:`_PRUNE_EVERY` journal
        entries the oldest beyond :data:`JOURNAL_KEEP` go in it too. Another program's lock held past ``BUSY_S`` is
        a 503 (Unavailable) with nothing changed; any other failure stops the engine (memory then holds what the
        file may not)."""
        self._changes += 1  # under the lock, before anything can fail: a change refused counts too (harmless)
        conn = self._conn
        if conn is None:
            return
        self._check()
        try:
            conn.execute("BEGIN IMMEDIATE")
            try:
                for sql, args in statements:
                    journal = sql.startswith("INSERT INTO journal")
                    if journal and not self.journal_keep:  # the journal is off
                        continue
                    cur = conn.execute(sql, args)
                    if journal:
                        self._prune(conn, cur.lastrowid)
                conn.execute("COMMIT")
            except BaseException:
                if conn.in_transaction:
                    with contextlib.suppress(sqlite3.Error):  # a connection that failed may refuse this too
                        conn.execute("ROLLBACK")
                raise
        except sqlite3.OperationalError as e:
            if "locked" in str(e) or "busy" in str(e):
                raise Unavailable(f"the network database {self._path} is locked by another program ({e}); nothing "
                                  "was changed: try again", field="db") from None  # fmt: skip
            self._fail(f"the network database {self._path} refused a change ({e}): restart to reload what is durable")
        except sqlite3.Error as e:
            self._fail(f"the network database {self._path} refused a change ({e}): restart to reload what is durable")

    def _prune(self, conn: sqlite3.Connection, seq: int | None) -> None:
        """After journal entry ``seq``, in its transaction: every :data:`_PRUNE_EVERY` entries (starts included),
        those older than the newest ``journal_keep``."""
        if seq and seq % _PRUNE_EVERY == 0:
            conn.execute("DELETE FROM journal WHERE seq <= ?", (seq - self.journal_keep,))

    def _fail(self, why: Any) -> None:
        """Stop the engine (every change refused from now on), tell :attr:`on_failure`, raise StoreError. ``why``:
        the sentence, or a callable making it (called once, by whichever thread notices first: two threads saving a
        recovery copy at once reported the second one's failure)."""
        with self._noticing:
            first = self._failed is None
            if first:
                self._failed = why() if callable(why) else why
        if first and self.on_failure is not None:
            self.on_failure()
        raise StoreError(str(self._failed))

    def close(self) -> None:
        """Close the database. A file deleted or replaced under the engine is noticed here too (what it committed
        saved beside it: :attr:`failed` says so): a stop before any request or health check said all was durable."""
        with self.lock:
            if self._conn is not None:
                with contextlib.suppress(StoreError):
                    self._check()
                self._release_file(self._conn)
                self._conn = None
            self._closed = True
            self._shown.clear()

    @property
    def job_count(self) -> int:
        """Jobs running, read without the lock (a scrape never waits)."""
        return len(self._rid)

    @property
    def failed(self) -> str | None:
        """Why the database failed (None: it has not)."""
        return self._failed

    def _check(self) -> None:
        """StoreError once the database failed, or once its file was deleted or replaced under the engine (what
        it committed is then saved beside it first)."""
        if self._failed is not None:
            raise StoreError(self._failed)
        if self._closed:  # it took jobs it never saved
            raise StoreError("the network engine is closed")
        conn = self._conn
        if conn is not None and not names_the_file(self._path, self._lock_fd):
            self._fail(lambda: f"the network database file {self._path} was deleted or replaced while the engine "
                               f"had it open; {save_recovery(conn, self._path.resolve())}; nothing more is "
                               "acknowledged")  # fmt: skip

    def health(self) -> dict[str, int]:
        """Jobs running, read without the lock (a probe never waits behind a placement); StoreError once the
        database failed or its file was deleted or replaced."""
        self._check()
        return {"jobs": len(self._rid)}

    # -- operations -------------------------------------------------------------------------------------------
    def place(self, job: NetJob) -> JobPlacement | JobRejection:
        """Place ``job`` with the policy, server by server; durable on return where accepted. A job id already
        running is a Conflict (release it first); a rejection changes nothing."""
        _check_job(job)
        with self.lock:
            self._check_new(job)
            sim = self.sim
            hold = job.hold if job.hold is not None else max(1, self.hold_max // 2)
            drawn = _draws(self.policy)  # put back where a 503 says nothing was changed
            try:
                if sim.submit(job.cpu, job.mem, job.bw_micro, hold):
                    rid = sim.t
                    while not sim.done:
                        sim.pick(as_action(self.policy, decide(self.policy, sim.view())))
                else:
                    rid = -1
            except BaseException:
                if not sim.done:  # what the waiting job took goes back, counted as the simulator counts it
                    sim.abandon()
                    # journalled and counted as any rejection; the policy's own error is the one raised
                    with contextlib.suppress(Unavailable, StoreError):  # nothing changed, or the engine stopped
                        self._decided(drawn, self._entry("rejected", job, "invalid"))
                        self._count_rejection("invalid")
                raise
            if rid not in sim.active:
                reason = sim.last_rejection or "invalid"
                self._decided(drawn, self._entry("rejected", job, reason))  # the demand a replay needs
                self._count_rejection(reason)
                return JobRejection(job.id, reason)
            a = sim.active[rid]
            try:
                self._decided(drawn, _job_row(job.id, a, job.hold), self._entry("placed", job))
            except BaseException:  # not durable (a lock: 503; a failure: stopped): nothing taken
                sim.release(rid)
                raise
            self._rid[job.id] = rid
            self._hold[job.id] = job.hold
            self._publish()
            self.counters["placed"] += 1
            return self._placement(job.id, rid)

    def release(self, job_id: str) -> JobPlacement:
        """Release a running job (NotFound where none runs under that id): everything it held is free again,
        durable on return. Returns where it was."""
        with self.lock:
            self._check()
            rid = self._rid.get(job_id)
            if rid is None:
                raise NotFound(f"no job {job_id!r} is running", field="id")
            was = self._placement(job_id, rid)
            self._write(
                ("DELETE FROM jobs WHERE id = ?", (job_id,)),
                ("INSERT INTO journal (at, event, job) VALUES (?, 'released', ?)", (time.time(), job_id)),
            )
            self.sim.release(rid)
            del self._rid[job_id]
            del self._hold[job_id]
            self._shown.pop(job_id, None)
            self._publish()
            self.counters["released"] += 1
            return was

    def reconcile(self, rows: Sequence[Mapping[str, Any]], *, execute: bool = True, force: bool = False,
                  source: str = "jobs", as_of: float | None = None) -> NetReconcileReport:  # fmt: skip
        """Make the running jobs what ``rows`` says the cluster runs: the whole inventory, each row a job as ``GET
        /jobs`` lists it (``id``; ``servers``, names; ``cpu`` and ``mem``, what each server gives; ``bw``, link
        units; ``links``, pairs of node names, and ``hold`` optional). Jobs not in it are released; jobs new to it
        are recorded where it says they run; jobs recorded elsewhere (other servers or amounts, another bandwidth,
        other links where the row gives them) are released and recorded anew; the rest are kept as recorded. A row
        without ``links`` is routed as a placement is: from each server, the widest candidate path to each server
        before it in the row. A drained server may be in a row: its running jobs keep it.

        All or nothing, in one commit: the result must fit every server and link, or nothing changes and an
        InputError names the row (``jobs[3].servers``). ``execute=False``: the same checks and report, nothing
        changed (a dry run). A reconcile that would release more than half of the recorded jobs is refused
        (Conflict) unless ``force``: an empty or truncated inventory would have released them all. ``as_of``: the
        Unix time the inventory was taken (a listing's, or a plan's ``at``); a job placed, moved or released after
        it is left as recorded (``newer``), since the inventory cannot know of it: without it, a job placed
        meanwhile was released and one released meanwhile recorded again. Needs the journal."""
        as_of = _check_time(as_of, "as_of")
        if as_of is not None and as_of > time.time() + CLOCK_SKEW_S:
            raise InputError(f"is {as_of - time.time():.0f} s after this host's clock: an inventory cannot have been "
                             "taken later than it is given (seconds, not milliseconds?)", field="as_of")  # fmt: skip
        if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Sequence):
            raise InputError(f"must be a list of jobs, got {type(rows).__name__}", field=source)
        parsed = [self._inventory_row(row, f"{source}[{i}]") for i, row in enumerate(rows)]
        seen: dict[str, int] = {}
        for i, row in enumerate(parsed):
            if row.job.id in seen:
                raise InputError(f"job {row.job.id!r} is listed twice, in rows {seen[row.job.id]} and {i}",
                                 field=f"{source}[{i}].id")  # fmt: skip
            seen[row.job.id] = i
        with self.lock:
            self._check()
            sim = self.sim
            newer = self._changed_since(as_of) if as_of is not None else set()
            released = [j for j in self._rid if j not in seen and j not in newer]
            recorded, changed = [], []
            for row in parsed:
                if row.job.id in newer:
                    continue
                rid = self._rid.get(row.job.id)
                if rid is None:
                    recorded.append(row)
                elif not row.matches(sim.active[rid]):
                    changed.append(row)
            known = len(self._rid) - len(newer & self._rid.keys())  # what the inventory can know of
            if not force and released and 2 * len(released) > known:
                raise Conflict(f"the inventory would release {len(released):,} of the {len(self._rid):,} jobs "
                               "running: send the whole inventory, or force it (force=true, --force)",
                               field="force")  # fmt: skip
            left = tuple(sorted(newer & (self._rid.keys() | seen.keys())))
            report = NetReconcileReport(tuple(released), tuple(r.job.id for r in recorded),
                                        tuple(r.job.id for r in changed),
                                        len(parsed) - len(recorded) - len(changed) - len(newer & seen.keys()), execute,
                                        left)  # fmt: skip
            if not (released or recorded or changed):
                return report
            fork, rids = sim.fork(), dict(self._rid)
            statements: list[tuple[str, tuple[Any, ...]]] = []
            for job_id in released + [row.job.id for row in changed]:  # journalled in the order the state changes
                fork.release(rids.pop(job_id))
                statements += self._released_rows(job_id)
            for row in changed + recorded:
                rids[row.job.id], alloc = self._adopt(fork, row)
                statements.append(_job_row(row.job.id, alloc, row.job.hold))
                statements.append(self._entry("placed", row.job, "reconcile"))
            if not execute:
                return report
            self._write(*statements)  # a 503 or a failure: nothing taken (the fork is dropped)
            self.sim, self._rid = fork, rids
            self._hold = {j: self._hold[j] for j in rids if j in self._hold}
            self._hold.update((row.job.id, row.job.hold) for row in changed + recorded)
            self._publish()
            self.counters["released"] += len(released) + len(changed)  # what it records is no policy's decision
            return report

    def _changed_since(self, at: float) -> set[str]:
        """The jobs the journal records as placed, moved or released after Unix time ``at`` (under the lock: every
        change is committed before it is answered, so the journal has them all)."""
        from dcplace.engine.journal import changed_since

        conn = self._conn
        if conn is None or not self.journal_keep:
            raise InputError("needs the journal, which this engine does not keep (no database, or --journal-keep 0)",
                             field="as_of")  # fmt: skip
        return changed_since(conn, at, ("placed", "moved", "released"), "resumed", "job")

    @staticmethod
    def _released_rows(job_id: str) -> list[tuple[str, tuple[Any, ...]]]:
        return [("DELETE FROM jobs WHERE id = ?", (job_id,)),
                ("INSERT INTO journal (at, event, job, reason) VALUES (?, 'released', ?, 'reconcile')",
                 (time.time(), job_id))]  # fmt: skip

    def _inventory_row(self, row: object, where: str) -> _InventoryRow:
        """One inventory row, checked: InputError naming ``where`` and the field."""
        if not isinstance(row, Mapping):
            raise InputError(f"must be a job (an object with id, servers, cpu, mem, bw), got {type(row).__name__}",
                             field=where)  # fmt: skip
        extra = sorted(str(k) for k in row if k not in _INVENTORY_FIELDS)
        if extra:
            raise InputError(
                "is not a field of a job (id, servers, cpu, mem, bw, links, hold)", field=f"{where}.{extra[0]}"
            )
        for name in ("id", "servers", "cpu", "mem", "bw"):
            if name not in row:
                raise InputError("is missing", field=f"{where}.{name}")
        servers, cpu, mem = row["servers"], row["cpu"], row["mem"]
        for name, value in (("servers", servers), ("cpu", cpu), ("mem", mem)):
            if not isinstance(value, list | tuple) or not value or len(value) > self.topology.n_servers:
                raise InputError(f"must be a list of 1 to {self.topology.n_servers:,} entries, got {value!r:.80}",
                                 field=f"{where}.{name}")  # fmt: skip
        if not len(servers) == len(cpu) == len(mem):
            raise InputError(f"servers, cpu and mem must have one entry per server; they have {len(servers)}, "
                             f"{len(cpu)} and {len(mem)}", field=f"{where}.servers")  # fmt: skip
        at = []
        for name in servers:
            v = self._server_of.get(name) if isinstance(name, str) else None
            if v is None:
                raise InputError(f"{name!r:.80} is not a server of {self.topology.name}", field=f"{where}.servers")
            at.append(v)
        if len(set(at)) != len(at):
            raise InputError("names a server twice", field=f"{where}.servers")
        for name, values in (("cpu", cpu), ("mem", mem)):
            if not all(type(x) is int and 0 <= x <= MAX_UNITS for x in values):
                raise InputError(f"must be whole numbers of units from 0 to {MAX_UNITS:,}, got {values!r:.80}",
                                 field=f"{where}.{name}")  # fmt: skip
        try:
            job = NetJob(row["id"], sum(cpu), sum(mem), row["bw"], row.get("hold"))
        except InputError as e:
            raise InputError(e.detail, field=f"{where}.{e.field}") from None
        links = None
        if row.get("links") is not None:
            listed = row["links"]
            if not isinstance(listed, list | tuple) or len(listed) > self.topology.n_links:
                raise InputError(f"must be a list of links (pairs of node names), got {listed!r:.80}",
                                 field=f"{where}.links")  # fmt: skip
            links = []
            for pair in listed:
                named = isinstance(pair, list | tuple) and len(pair) == 2 and all(isinstance(x, str) for x in pair)
                link = self._link_of.get((pair[0], pair[1])) if named else None
                if link is None:
                    raise InputError(f"{pair!r:.80} is not a link of {self.topology.name}", field=f"{where}.links")
                links.append(link)
            if len(set(links)) != len(links):
                raise InputError("names a link twice", field=f"{where}.links")
        return _InventoryRow(job, np.array(at, dtype=np.int64), np.array(cpu, dtype=np.int64),
                             np.array(mem, dtype=np.int64), None if links is None else np.array(sorted(links),
                             dtype=np.int64), where)  # fmt: skip

    def _adopt(self, sim: LiveNetSim, row: _InventoryRow) -> tuple[int, Allocation]:
        """``row``'s job taken on ``sim`` where the row says it runs (routed where it gives no links): InputError
        naming the row where it does not fit or no path joins two of its servers."""
        bw = row.job.bw_micro
        links = row.links
        if links is not None:  # only what joins its servers: a link off their paths would hold another's room
            spare = _off_paths(self.topology, links, row.servers)
            if spare is not None:
                u, v = self._names[int(self.topology.link_u[spare])], self._names[int(self.topology.link_v[spare])]
                raise InputError(f"link {u}-{v} is on no path between two of its servers: its links join its servers, "
                                 "nothing more", field=f"{row.where}.links")  # fmt: skip
        else:
            on: set[int] = set()
            for k, v in enumerate(row.servers.tolist()):
                for u in row.servers[:k].tolist():
                    path = sim.widest_path(u, v, bw)
                    if path is None:
                        raise InputError(f"no candidate path between {self._names[u]} and {self._names[v]} has "
                                         f"{row.job.bw:g} link units free", field=f"{row.where}.servers")  # fmt: skip
                    on.update(path)
            links = np.array(sorted(on), dtype=np.int64)
        alloc = Allocation(row.servers, row.cpu, row.mem, links, bw, 0)
        drained = [v for v in row.servers.tolist() if sim.drained[v]]
        for v in drained:  # a drained server's room is held apart from new jobs, not from one that runs there
            sim.set_drained(v, False)
        try:
            rid = sim.restore(alloc)
        except ValueError as e:
            raise InputError(f"job {row.job.id!r} cannot run as listed: {e}", field=row.where) from None
        finally:
            for v in drained:
                sim.set_drained(v, True)
        return rid, alloc

    def explain(self, job: NetJob) -> NetExplanation:
        """Where ``job`` would go now and why, without placing it: the policy decides it on a copy of the state
        (:meth:`~dcplace.sim.netalloc.LiveNetSim.fork`), its random draws put back, so the next placement decides as
        if this had not been asked. Nothing is written; the counters do not move. ``job.id`` may be one running."""
        _check_job(job)
        with self.lock:
            self._check()
            sim = self.sim.fork()
            hold = job.hold if job.hold is not None else max(1, self.hold_max // 2)
            drawn = _draws(self.policy)
            picks: list[int] = []
            rid = -1
            try:
                if sim.submit(job.cpu, job.mem, job.bw_micro, hold):
                    rid = sim.t
                    while not sim.done:
                        picks.append(as_action(self.policy, decide(self.policy, sim.view())))
                        sim.pick(picks[-1])
            finally:
                _put_back(self.policy, drawn)
            return self._explanation(job, sim, picks, rid)

    def make_room(self, job: NetJob, *, execute: bool = False, max_together: int | None = None,
                  time_limit_s: float | None = None) -> NetRoomPlan:  # fmt: skip
        """Where ``job`` could run if the running jobs of one rack moved, and where they would go: for each rack, on
        a copy of the state, its jobs are lifted, ``job`` placed by the policy, then they are placed again, largest
        first; of the racks where all fit, the one that changes the fewest jobs (a job whose servers, amounts on them
        or links change) is proposed. A job that fits now needs no move; one the free totals cannot hold is
        ``capacity`` (moving adds no room).

        The moves come in steps safe to carry out **cold**: a job stopped where it runs and started where its move
        says, its old servers and links free before its new ones are taken. One job a step while one fits alone;
        the moves that need each other's room (a swap) form one last step, all stopped before any starts. Every
        server and link is within capacity after each step; then ``job`` is started where ``placement`` says. (Live
        migration, both ends held, is the VM planner's reading; here a job's new servers may be its old ones with
        another split, which a live move would hold twice.) ``max_together``: the most jobs one step may stop at once
        (1: one at a time); a rack whose moves need more is passed over (None: no limit). ``time_limit_s``: no rack
        is begun once the search has held the lock this many seconds, the first excepted (None: every rack is
        tried); the best plan of the racks tried is answered, none if none fitted (``network``).
        Every plan is re-checked by :func:`dcplace.engine.network_check.check_room_plan` before it is answered.

        The search holds the engine's lock, but between two racks it lets the calls waiting for it go first
        (placements, releases: they wait for one rack's trial, not the whole search). Where one of them changed the
        state, what was found before is dropped: the search goes on over the racks left on the new state (the job
        asked again first: it may fit now), and the best racks before each change are tried again at the end, fewest
        moves first, while one could still move fewer (and, once a plan is found, within the time limit)
        (:attr:`make_room_yields`; docs/engine.md, "Making room", measures it).

        ``execute=False`` (the default): nothing changes, and the policy's draws are put back (as :meth:`explain`;
        an executed plan keeps them, as a placement does).
        To act on it: carry the steps out in order and tell the engine after each (:meth:`moves`; :meth:`move` for a
        step of one job), then record the job by sending ``inventory`` (every job as the plan leaves it) to
        :meth:`reconcile` with ``as_of`` the plan's ``at`` (placing it anew lets the policy decide on another state,
        which may refuse it). ``execute=True``: the moves
        and the job are recorded at once, in one commit (journalled ``moved`` and ``placed`` by ``make-room``), as
        an executed re-optimisation event records its moves; the records then run ahead of the cluster until the
        moves are made. Measured in Nara's setting (docs/netalloc.md, "Moving running jobs"): on demand this way
        gains 0.6-3.7 points of acceptance with tetris-bw, at a job moved every one to six arrivals."""
        _check_job(job)
        if max_together is not None and (isinstance(max_together, bool) or not isinstance(max_together, int)
                                         or max_together < 1):  # fmt: skip
            raise InputError(f"must be a whole number of jobs from 1, got {max_together!r}", field="max_together")
        if time_limit_s is not None and (isinstance(time_limit_s, bool) or not isinstance(time_limit_s, int | float)
                                         or not 0 < time_limit_s <= 3600):  # fmt: skip  # NaN fails too
            raise InputError(f"must be seconds from above 0 to 3600, got {time_limit_s!r}", field="time_limit")
        with self.lock:
            plan, unchecked = self._room(job, execute, max_together, time_limit_s)
        if unchecked is not None:  # a plan that changes nothing is checked once the lock is let go, on what it saw
            self._check_plan(job, plan, unchecked)
        return plan

    def _room(self, job: NetJob, execute: bool, max_together: int | None,
              time_limit_s: float | None) -> tuple[NetRoomPlan, _CheckInputs | None]:  # fmt: skip
        """:meth:`make_room` under the lock: the plan, and for a plan that moves jobs but changes nothing yet, what
        its check replays (the caller checks it once the lock is let go; an executed plan is checked here)."""
        clock = _Stopwatch()  # the lock's waits do not count: the limit bounds the racks tried

        def out_of_time() -> bool:
            return time_limit_s is not None and clock.seconds() > time_limit_s

        answer, by_rack, at = self._room_start(job, execute)
        if answer is not None:
            return answer, None
        drawn = _draws(self.policy)
        best: _Trial | None = None
        again: dict[int, int] = {}  # the best racks before waiting calls changed the state (their moves then)
        tried = 0
        try:  # the draws put back unless the plan is recorded: then the policy has decided, as a placement does
            for i in range(len(self._racks)):
                if not by_rack.get(i):
                    continue
                if best is not None and not best.moved:
                    break  # no rack moves fewer than none
                if tried and out_of_time():
                    break
                if tried and self.make_room_yields and self.lock.waiting and self._step_aside(drawn, clock):
                    drawn = _draws(self.policy)  # where the waiting calls left it: an error below keeps their draws
                    if best is not None:  # what was found holds no more: its rack is tried again at the end
                        again[best.rack] = min(best.moved, again.get(best.rack, best.moved))
                        best = None
                    answer, by_rack, at = self._room_start(job, execute)
                    if answer is not None:
                        return answer, None
                    if not by_rack.get(i):
                        continue
                tried += 1
                best = self._try_rack(job, i, by_rack[i], max_together, best)
            for r, moved in sorted(again.items(), key=lambda x: (x[1], x[0])):  # fewest moves first
                if best is not None and (moved >= best.moved or out_of_time()):
                    break  # none left moved fewer before: the first found on the state the plan answers for stands
                if by_rack.get(r):
                    best = self._try_rack(job, r, by_rack[r], max_together, best)
        except BaseException:
            _put_back(self.policy, drawn)
            raise
        if best is None or not execute:
            _put_back(self.policy, drawn)
        if best is None:
            return NetRoomPlan(job.id, False, "network", None, None, (), (), at=at), None
        steps, rack, sim, rids = best.steps, self._racks[best.rack][0], best.sim, best.rids
        placement = self._placement(job.id, rids[job.id], sim, job.hold)
        moves: list[NetMove] = []
        for step, group in enumerate(steps):
            for j in group:
                to = self._placement(j, rids[j], sim)
                moves.append(NetMove(j, self._placement(j, self._rid[j]).servers, to.servers, to.cpu, to.mem,
                                     to.links, step))  # fmt: skip
        where = {**self._rid, **rids}
        after = tuple(self._placement(j, r, sim, job.hold if j == job.id else _RECORDED).as_dict()
                      for j, r in where.items())  # fmt: skip
        plan = NetRoomPlan(job.id, True, None, placement, rack, tuple(moves), after, at=at)
        if not execute:
            return plan, self._check_inputs(job)
        try:
            self._check_plan(job, plan, self._check_inputs(job))
            plan = replace(plan, executed=True)
            self._record_room(job, plan, sim, where)
        except BaseException:  # nothing changed (a 503; a bug): the policy as if it had not decided
            _put_back(self.policy, drawn)
            raise
        return plan, None

    def _room_start(self, job: NetJob, execute: bool) -> tuple[NetRoomPlan | None, dict[int, list[str]], float]:
        """Where :meth:`make_room` begins, and begins again after a waiting call changed the state: its answer where
        ``job`` fits now (placed where ``execute``) or the free totals cannot hold it; otherwise none, the running
        jobs touching each rack (in the order placed; those on a drained server are left where they run, as they
        could not come back to it), and the time of the state."""
        self._check_new(job)
        at = time.time()  # under the lock: the plan is made on the state of this moment
        now = self.explain(job)
        if now.accepted or now.reason == "capacity":
            if now.accepted and execute:  # placed as POST /jobs places it: the policy decides again, its draws
                placed = self.place(job)  # put back, so as the explanation said (a user's policy may not)
                if not isinstance(placed, JobPlacement):
                    return NetRoomPlan(job.id, False, placed.reason, None, None, (), (), at=at), {}, at
                now = replace(now, placement=placed)
            inventory = [self._placement(j, r).as_dict() for j, r in self._rid.items()]
            inventory += [now.placement.as_dict()] if now.placement is not None and not execute else []
            plan = NetRoomPlan(job.id, now.accepted, now.reason, now.placement, None, (),
                               tuple(inventory) if now.accepted else (), execute and now.accepted, at)  # fmt: skip
            return plan, {}, at
        by_rack: dict[int, list[str]] = {}
        drained = self.sim.drained
        for j, r in self._rid.items():
            servers = self.sim.active[r].servers
            if not drained[servers].any():
                for i in np.unique(self.topology.server_rack[servers]).tolist():
                    by_rack.setdefault(i, []).append(j)
        return None, by_rack, at

    def _try_rack(self, job: NetJob, rack: int, lifted: list[str], max_together: int | None,
                  best: _Trial | None) -> _Trial | None:  # fmt: skip
        """One rack of :meth:`make_room`'s search, on a copy of the state: ``lifted`` (its jobs) released, ``job``
        placed by the policy, then they are placed again, largest first. The better of this rack and ``best``: this
        one where every job fits, fewer move than in ``best`` and no step stops more than ``max_together``."""
        sim = self.sim.fork()
        for j in lifted:
            sim.release(self._rid[j])
        rids = {job.id: self._decide_on(sim, job)}
        for j in sorted(lifted, key=self._size):  # largest first
            if min(rids.values()) < 0:
                break
            a = self.sim.active[self._rid[j]]
            rids[j] = self._decide_on(sim, NetJob(j, int(a.cpu.sum()), int(a.mem.sum()), max(int(a.bw), 1) / BW_SCALE,
                                                  self._hold[j]))  # fmt: skip
        if min(rids.values()) < 0:
            return best
        moved = [j for j in lifted if not _same(sim.active[rids[j]], self.sim.active[self._rid[j]])]
        if best is not None and len(moved) >= best.moved:
            return best
        steps = self._cold_steps(moved, sim, rids)
        if max_together is not None and max(map(len, steps), default=0) > max_together:
            return best
        return _Trial(rack, len(moved), steps, sim, rids)

    def _step_aside(self, drawn: tuple[Mapping[str, Any] | None, dict[str, Any] | None], clock: _Stopwatch) -> bool:
        """Between two racks of :meth:`make_room`'s search, the calls waiting for the lock go first, the policy as the
        search found it (so they decide as if it had not begun). True where one of them changed the state (the
        search goes on from there, the policy where they left it); False where none did (the policy's draws where
        the search had them)."""
        mine = _draws(self.policy)
        _put_back(self.policy, drawn)
        changes = self._changes
        clock.pause()
        try:
            self.lock.let_waiters_go()
        finally:
            clock.resume()
        self._check()  # stopped or failed meanwhile
        if self._changes != changes:
            return True
        _put_back(self.policy, mine)
        return False

    def _cold_steps(self, moved: list[str], sim: LiveNetSim, rids: dict[str, int]) -> list[list[str]]:
        """``moved`` in steps that carry the moves out cold: one job at a time while one fits (repeatedly the first,
        in the order the jobs were placed, whose new share fits once its old one is free), then the rest in one
        step, all stopped before any starts (the moves need each other's room: a swap). Every server and link stays
        within capacity after each step: the last ends where ``sim`` does, which holds them all."""
        free_cpu, free_mem, free_bw = self.sim.free_cpu.copy(), self.sim.free_mem.copy(), self.sim.free_bw.copy()

        def shift(a: Allocation, sign: int) -> None:
            np.add.at(free_cpu, a.servers, sign * a.cpu)
            np.add.at(free_mem, a.servers, sign * a.mem)
            np.add.at(free_bw, a.links, sign * a.bw)

        left, steps = list(moved), []
        while left:
            for j in left:
                a, b = self.sim.active[self._rid[j]], sim.active[rids[j]]
                shift(a, 1)
                shift(b, -1)
                if min(free_cpu.min(), free_mem.min(), free_bw.min(initial=0)) >= 0:
                    steps.append([j])
                    left.remove(j)
                    break
                shift(b, 1)  # undone: it does not fit on its own yet
                shift(a, -1)
            else:
                steps.append(left)
                break
        return steps

    def _check_inputs(self, job: NetJob) -> _CheckInputs:
        """Under the lock: what the independent checker replays a plan for ``job`` from, read once."""
        drained = [self._names[v] for v in np.flatnonzero(self.sim.drained).tolist()]
        request = {"id": job.id, "cpu": job.cpu, "mem": job.mem, "bw": job.bw_micro / BW_SCALE}
        return _CheckInputs(drained, request, [self._placement(j, r).as_dict() for j, r in self._rid.items()])

    def _check_plan(self, job: NetJob, plan: NetRoomPlan, inputs: _CheckInputs) -> None:
        """The plan re-checked by the independent checker on ``inputs`` (:meth:`_check_inputs`; the lock is not
        needed): a failure is a bug of the planner's, RuntimeError."""
        problems = check_room_plan(self.topology, inputs.jobs, inputs.drained, inputs.request, plan.as_dict())
        if problems:
            raise RuntimeError(f"make_room's plan for {job.id!r} failed its check: {'; '.join(problems[:3])}")

    def _record_room(self, job: NetJob, plan: NetRoomPlan, sim: LiveNetSim, where: dict[str, int]) -> None:
        """An accepted plan recorded (under the lock): its moves and the job in one commit, then the state swapped
        for ``sim``, where they were made (a 503 or a failure: nothing changed)."""
        statements = []
        for m in plan.moves:
            a = sim.active[where[m.id]]
            statements.append(self._moved_row(m.id, a))
            statements.append(self._moved_entry(m.id, a, "make-room"))
        statements.append(_job_row(job.id, sim.active[where[job.id]], job.hold))
        statements.append(self._entry("placed", job, "make-room"))
        self._write_moves(*statements)
        self.sim, self._rid = sim, where
        self._hold[job.id] = job.hold
        self._publish()
        self.counters["placed"] += 1
        self.counters["moved"] += len(plan.moves)

    def _write_moves(self, *statements: tuple[str, tuple[Any, ...]]) -> None:
        """:meth:`_write` of statements that journal a move: the file's layout becomes :data:`SCHEMA_VERSION` in the
        same commit, where it is older (a dcplace that reads only up to 2 then refuses it, not misreads it)."""
        bump = [("PRAGMA user_version = " + str(SCHEMA_VERSION), ())] if self._layout < SCHEMA_VERSION else []
        self._write(*bump, *statements)
        self._layout = SCHEMA_VERSION

    @staticmethod
    def _moved_row(job_id: str, a: Allocation) -> tuple[str, tuple[Any, ...]]:
        """The jobs table's row of a moved job, rewritten where it keeps its place in the order placed."""
        return "UPDATE jobs SET servers = ?, cpu = ?, mem = ?, links = ? WHERE id = ?", (*_stored(a), job_id)

    def _moved_entry(self, job_id: str, a: Allocation, by: str) -> tuple[str, tuple[Any, ...]]:
        """A move's journal entry: the job's size (unchanged) and hold, and who moved it (``by``)."""
        sql = "INSERT INTO journal (at, event, job, cpu, mem, bw, hold, reason) VALUES (?, 'moved', ?, ?, ?, ?, ?, ?)"
        return sql, (time.time(), job_id, int(a.cpu.sum()), int(a.mem.sum()), int(a.bw), self._hold[job_id], by)

    def move(self, job_id: str, row: Mapping[str, Any]) -> JobPlacement:
        """Record that running job ``job_id`` now runs where ``row`` says: :meth:`moves` of that one job (``row``
        without ``id``, or with this one)."""
        if not isinstance(row, Mapping):
            raise InputError(f"must be where the job runs (servers, cpu, mem, links), got {type(row).__name__}",
                             field="body")  # fmt: skip
        if row.get("id", job_id) != job_id:
            raise InputError(f"names job {row['id']!r:.80}, not {job_id!r}", field="id")
        try:
            return self.moves([{**row, "id": job_id}])[0]
        except InputError as e:
            field = "servers" if e.field == "moves[0]" else (e.field or "").removeprefix("moves[0].")
            raise type(e)(e.detail, field=field) from None  # a 404 stays one

    def moves(self, rows: Sequence[Mapping[str, Any]]) -> list[JobPlacement]:
        """Record that running jobs now run elsewhere, as a plan of :meth:`make_room` carried out step by step tells
        it: each row a job (``id``) where it runs now (``servers``, names; ``cpu`` and ``mem``, what each gives;
        ``links`` optional, pairs of node names: routed as a reconcile routes where absent). A move keeps the job's
        CPU, memory and bandwidth (a job of another size is a release and a placement, or a reconcile). Cold and
        together: every listed job's old share is free before the new ones are taken, so a step's swap is one call;
        a job may be given no more of a drained server than it had. All or nothing, durable on return, journalled
        ``moved`` by ``move``; a row where the job runs already changes nothing. NotFound where a job does not
        run; InputError naming the row and field (``moves[1].servers``) where a row is not a placement of its job
        or the moves do not fit (nothing changed)."""
        if isinstance(rows, str | bytes | Mapping) or not isinstance(rows, Sequence) or not rows:
            raise InputError("must be a non-empty list of moves (id, servers, cpu, mem, links)", field="moves")
        with self.lock:
            self._check()
            parsed, seen = [], set()
            for i, row in enumerate(rows):
                where = f"moves[{i}]"
                if not isinstance(row, Mapping):
                    raise InputError(f"must be a move (id, servers, cpu, mem, links), got {type(row).__name__}",
                                     field=where)  # fmt: skip
                extra = sorted(str(k) for k in row if k not in _MOVE_FIELDS)
                if extra:
                    raise InputError("is not a field of a move (id, servers, cpu, mem, links; from and step as a "
                                     "plan lists them)", field=f"{where}.{extra[0]}")  # fmt: skip
                job_id = row.get("id")
                if not isinstance(job_id, str) or job_id not in self._rid:
                    raise NotFound(f"no job {job_id!r:.80} is running", field=f"{where}.id")
                rid = self._rid[job_id]
                if job_id in seen:
                    raise InputError(f"job {job_id!r} moves twice", field=f"{where}.id")
                seen.add(job_id)
                a = self.sim.active[rid]
                source, on = row.get("from"), [self._names[v] for v in a.servers.tolist()]
                stale = source is not None and (
                    not isinstance(source, list | tuple) or sorted(map(str, source)) != sorted(on)
                )
                if stale:
                    raise Conflict(f"job {job_id!r} runs on {on}, not {source!r:.80}: the plan is older than what the "
                                   "engine records (ask again)", field=f"{where}.from")  # fmt: skip
                listed = {k: v for k, v in row.items() if k not in ("from", "step")}
                r = self._inventory_row({**listed, "bw": a.bw / BW_SCALE, "hold": self._hold[job_id]}, where)
                if (int(r.cpu.sum()), int(r.mem.sum())) != (int(a.cpu.sum()), int(a.mem.sum())):
                    raise InputError(f"gives {int(r.cpu.sum())} CPU and {int(r.mem.sum())} memory units where the "
                                     f"job has {int(a.cpu.sum())} and {int(a.mem.sum())}: a move keeps its size",
                                     field=f"{where}.cpu")  # fmt: skip
                had = {int(v): (int(c), int(m)) for v, c, m in zip(a.servers, a.cpu, a.mem, strict=True)}
                now = zip(r.servers.tolist(), r.cpu.tolist(), r.mem.tolist(), strict=True)
                fresh = [self._names[v] for v, c, m in now if self.sim.drained[v]
                         and (c > had.get(v, (0, 0))[0] or m > had.get(v, (0, 0))[1])]  # fmt: skip
                if fresh:  # what it gives the job may only shrink there
                    raise InputError(f"server {fresh[0]} is drained: no job is given more of it than it had",
                                     field=f"{where}.servers")  # fmt: skip
                parsed.append((r, rid))
            moving = [(r, rid) for r, rid in parsed if not r.matches(self.sim.active[rid])]  # the rest: as recorded
            if moving:
                fork, rids = self.sim.fork(), dict(self._rid)
                for _, rid in moving:
                    fork.release(rid)
                statements = []
                for r, _ in moving:
                    rids[r.job.id], alloc = self._adopt(fork, r)
                    statements += [self._moved_row(r.job.id, alloc), self._moved_entry(r.job.id, alloc, "move")]
                self._write_moves(*statements)  # a 503 or a failure: nothing taken (the fork is dropped)
                self.sim, self._rid = fork, rids
                self._publish()
                self.counters["moved"] += len(moving)
            return [self._placement(r.job.id, self._rid[r.job.id]) for r, _ in parsed]

    def _check_new(self, job: NetJob) -> None:
        """Under the lock: the engine usable, and ``job`` not running already (a Conflict: release it first)."""
        self._check()
        if job.id in self._rid:
            raise Conflict(f"job {job.id!r} is running already: release it first", field="id")

    def _size(self, job_id: str) -> int:
        """Minus a running job's CPU and memory: the sort key of largest first."""
        a = self.sim.active[self._rid[job_id]]
        return -int(a.cpu.sum() + a.mem.sum())

    def _decide_on(self, sim: LiveNetSim, job: NetJob) -> int:
        """``job`` placed by the policy on ``sim`` (a copy): its allocation, or -1 where it was rejected."""
        hold = job.hold if job.hold is not None else max(1, self.hold_max // 2)
        if not sim.submit(job.cpu, job.mem, job.bw_micro, hold):
            return -1
        rid = sim.t
        try:
            while not sim.done:
                sim.pick(as_action(self.policy, decide(self.policy, sim.view())))
        except BaseException:
            sim.abandon()
            raise
        return rid if rid in sim.active else -1

    def _explanation(self, job: NetJob, sim: LiveNetSim, picks: list[int], rid: int) -> NetExplanation:
        top, names, bw = self.topology, self._names, job.bw_micro
        name = tuple(names[v] if 0 <= v < top.n_servers else str(v) for v in picks)
        tiers, now = {}, self.sim  # the cluster as it is, before the job (the copy has taken what it would)
        for t, tier in enumerate(TIER_NAMES):
            free = now.free_bw[top.link_tier == t]
            if len(free):
                tiers[tier] = {"links_with_room": int((free >= bw).sum()), "widest_link": int(free.max()) / BW_SCALE}

        def said(placement: JobPlacement | None, reason: str | None, summary: str,
                 pair: tuple[str, str] | None = None, widest: float | None = None) -> NetExplanation:  # fmt: skip
            return NetExplanation(job.id, self.policy_name, placement, reason, name, pair, widest, now.free_cpu_total,
                                  now.free_mem_total, tiers, summary)  # fmt: skip

        if rid in sim.active:
            where = self._placement(job.id, rid, sim, job.hold)
            on = f", with {where.bw:g} link units on {len(where.links)} link(s)" if where.links else ""
            return said(where, None, f"{self.policy_name} would place it on {len(where.servers)} server(s), "
                        f"{where.locality} ({', '.join(where.servers)}){on}")  # fmt: skip
        reason = sim.last_rejection or "invalid"
        if reason == "capacity":
            return said(None, reason, f"the cluster has {now.free_cpu_total} CPU and {now.free_mem_total} memory "
                        f"units free in all, and the job asks for {job.cpu} and {job.mem}")  # fmt: skip
        if reason == "network":  # bandwidth is taken only once a job is accepted: free_bw is as the pick saw it
            v = picks[-1]
            u = next(u for u in picks[:-1] if sim.widest_path(u, v, bw) is None)
            paths = sim.routing.paths(min(u, v), max(u, v), sim.free_bw, 1)
            widest = max((min(int(sim.free_bw[x]) for x in p) for p in paths), default=0) / BW_SCALE
            return said(None, reason, f"{self.policy_name} picked {len(picks)} server(s), and no candidate path "
                        f"between {names[u]} and {names[v]} has the job's {job.bw:g} link units free (the widest "
                        f"has {widest:g})", (names[u], names[v]), widest)  # fmt: skip
        v = picks[-1] if picks else -1
        why = ("is not a server" if not 0 <= v < top.n_servers else "was picked already for this job"
               if v in picks[:-1] else "has none of the CPU or memory the job still needed")  # fmt: skip
        return said(None, reason, f"{self.policy_name} picked {name[-1] if name else 'nothing'}, which {why}")

    def drain_server(self, server: str) -> ServerInfo:
        """Give no new job any of ``server`` (a server's name; NotFound where none has it): its running jobs keep
        it, and what it has free, or they free, is held apart until :meth:`activate_server`. Durable on return;
        journalled. Draining a drained server changes nothing."""
        return self._set_drained(server, True)

    def activate_server(self, server: str) -> ServerInfo:
        """Let new jobs use ``server`` again (all it has free). Durable on return; journalled."""
        return self._set_drained(server, False)

    def _set_drained(self, server: str, drained: bool) -> ServerInfo:
        with self.lock:
            self._check()
            v = self._server_index(server)
            if bool(self.sim.drained[v]) != drained:
                after = self.sim.drained.copy()
                after[v] = drained
                names = [self._names[x] for x in np.flatnonzero(after).tolist()]
                self._write(
                    ("INSERT INTO meta VALUES ('drained', ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                     (json.dumps(names),)),
                    ("INSERT INTO journal (at, event, job, reason) VALUES (?, ?, '', ?)",
                     (time.time(), "drained" if drained else "activated", server)),
                )  # fmt: skip
                self.sim.set_drained(v, drained)
                self._publish()
            return self._servers([v])[0]

    def _server_index(self, server: str) -> int:
        v = self._server_of.get(server) if isinstance(server, str) else None
        if v is None:
            raise NotFound(f"no server {server!r} in {self.topology.name}", field="server")
        return v

    def server(self, server: str) -> ServerInfo:
        """A server's capacity, use, state and jobs."""
        with self.lock:
            return self._servers([self._server_index(server)])[0]

    def servers(self) -> list[ServerInfo]:
        """Every server, in the topology's order."""
        with self.lock:
            return self._servers(range(self.topology.n_servers))

    def _servers(self, which: Sequence[int]) -> list[ServerInfo]:
        sim, top, names = self.sim, self.topology, self._names
        wanted = set(which)
        jobs: dict[int, list[str]] = {v: [] for v in wanted}
        for job_id, rid in self._rid.items():
            for v in sim.active[rid].servers.tolist():
                if v in wanted:
                    jobs[v].append(job_id)
        free_cpu, free_mem = sim.free_cpu + sim.held_cpu, sim.free_mem + sim.held_mem
        return [ServerInfo(names[v], bool(sim.drained[v]), int(top.server_cpu[v]), int(top.server_mem[v]),
                           int(top.server_cpu[v] - free_cpu[v]), int(top.server_mem[v] - free_mem[v]),
                           tuple(jobs[v])) for v in which]  # fmt: skip

    # -- reading ----------------------------------------------------------------------------------------------
    def job(self, job_id: str) -> JobPlacement:
        with self.lock:
            rid = self._rid.get(job_id)
            if rid is None:
                raise NotFound(f"no job {job_id!r} is running", field="id")
            return self._placement(job_id, rid)

    def jobs(self) -> list[JobPlacement]:
        """Every running job, in the order placed."""
        with self.lock:
            return [self._placement(j, r) for j, r in self._rid.items()]

    def journal_page(self, job: str | None = None, event: str | None = None, after: int = 0, limit: int = 1000,
                     tail: int | None = None) -> tuple[list[NetJournalEntry], int | None]:  # fmt: skip
        """The journal's entries that :func:`read_network_journal` gives for these filters, and the ``after`` of
        the next page (None: nothing more now; always None with ``tail``). Committed entries only, read on a
        connection of its own: it never holds up a placement. An engine without a database keeps none
        (InputError)."""
        self._check()  # a closed engine is said so
        if self._conn is None:
            raise InputError("this network engine keeps no journal: it has no database (NetworkEngine.open keeps "
                             "one)", field="db")  # fmt: skip
        entries = read_network_journal(self._path, job=job, event=event, after=after, limit=limit, tail=tail,
                                       peek=tail is None)  # fmt: skip
        return (entries, None) if tail is not None else paged(entries, limit)

    def _placement(self, job_id: str, rid: int, sim: LiveNetSim | None = None, hold: Any = _RECORDED) -> JobPlacement:
        """Where job ``job_id`` (allocation ``rid`` of ``sim``, the engine's own by default) runs, with ``hold``
        (:data:`_RECORDED`, the default for a running job: the engine's record)."""
        sim = self.sim if sim is None else sim
        a = sim.active[rid]
        held = self._hold.get(job_id) if hold is _RECORDED else hold
        known = self._shown.get(job_id)
        if known is not None and known[0] is a and known[1] == held:  # allocations are replaced, never changed
            return known[2]
        names, top = self._names, self.topology
        shown = JobPlacement(
            job_id,
            tuple(names[int(v)] for v in a.servers),
            tuple(int(c) for c in a.cpu),
            tuple(int(m) for m in a.mem),
            tuple((names[int(top.link_u[x])], names[int(top.link_v[x])]) for x in a.links),
            a.bw / BW_SCALE,
            LOCALITY_NAMES[sim.locality_of(a.servers)],
            held,
        )
        if len(self._shown) > 2 * len(self._rid) + 64:  # jobs gone, and plans' jobs never placed
            self._shown = {j: x for j, x in self._shown.items() if j in self._rid}
        self._shown[job_id] = (a, held, shown)
        return shown

    def stats(self) -> dict[str, Any]:
        """Totals: servers, links, jobs running, CPU and memory in use (units and shares), bandwidth in use per
        tier (share of the tier's capacity), and the counters since this engine started."""
        with self.lock:
            sim, top = self.sim, self.topology
            cpu_cap, mem_cap = int(top.server_cpu.sum()), int(top.server_mem.sum())
            tiers = tier_shares(top, sim.free_bw)
            cpu_used, mem_used, held_cpu, held_mem = self.in_use  # published with every change, under this lock
            return {
                "topology": top.name, "policy": self.policy_name, "servers": top.n_servers, "links": top.n_links,
                "jobs": len(self._rid), "cpu_used": cpu_used, "cpu_capacity": cpu_cap,
                "mem_used": mem_used, "mem_capacity": mem_cap,
                "cpu_share": cpu_used / cpu_cap, "mem_share": mem_used / mem_cap,
                "drained": [self._names[v] for v in np.flatnonzero(sim.drained).tolist()],
                "cpu_drained": held_cpu, "mem_drained": held_mem,
                "bw_share_by_tier": tiers, "counters": dict(self.counters), "durable": self._conn is not None,
                "healthy": self._failed is None,
            }  # fmt: skip

    def check_invariants(self) -> None:
        """Every free array recomputed from the running jobs; nothing over or under capacity; the jobs and the
        simulator's allocations one to one (AssertionError otherwise)."""
        with self.lock:
            self.sim.check_invariants()
            assert self.sim.done, "a job is still waiting for its servers"
            assert set(self._rid.values()) == set(self.sim.active), "jobs and allocations differ"
            assert (self.sim.free_cpu <= self.topology.server_cpu).all(), "free CPU above capacity"
            assert (self.sim.free_mem <= self.topology.server_mem).all(), "free memory above capacity"


def replay(engine: NetworkEngine, requests: NetRequests, prefix: str = "j") -> list[int]:
    """An episode's requests through a live engine: request ``i`` placed as job ``<prefix><i>`` when it arrives and
    released when its holding period ends (before that step's request, in the order accepted, as the simulator
    releases). Returns the requests accepted, comparable with an episode's ``accepted_ids``."""
    ends: dict[int, list[str]] = {}
    accepted = []
    for i in range(len(requests)):
        for job_id in ends.pop(i, []):
            engine.release(job_id)
        job = NetJob(f"{prefix}{i}", int(requests.cpu[i]), int(requests.mem[i]), int(requests.bw[i]) / BW_SCALE,
                     int(requests.hold[i]))  # fmt: skip
        if engine.place(job).accepted:
            accepted.append(i)
            ends.setdefault(i + int(requests.hold[i]), []).append(job.id)
    return accepted


@dataclass(frozen=True)
class NetTrace:
    """A network database's demand, from its journal, as the simulator replays it (:func:`network_trace`): one row
    per job asked for, in the order asked. ``hold`` is in arrivals: for a job that ran, the arrivals until it was
    released (so a replay releases it where the engine did: before the same request); for one still running, up
    to the end; for a rejected one, the hold it was asked with, else the median of those that ran. ``live``: what
    the engine answered (``placed`` or the rejection's reason)."""

    ids: list[str]
    cpu: Sequence[int]
    mem: Sequence[int]
    bw: Sequence[int]
    """Micro-units (:data:`~dcplace.cluster.topology.BW_SCALE`)."""
    hold: Sequence[int]
    live: list[str]
    rejected: int
    """Rejections in the journal (written or left out)."""
    still_running: int
    filled: int
    """Rejected jobs without a declared hold, given :attr:`median_hold`."""
    median_hold: int
    unmatched: int
    """Releases of jobs placed before the journal's first entry (a version-1 database, or pruned): left out."""
    before: int
    """Jobs running in the database whose placement is older than the journal's first entry: not in the trace, so
    a replay starts without them."""
    restarts: int
    """Starts of the engine after the trace's first job: a policy drawing at random drew anew from its seed at each,
    which one replay (one stream) cannot follow."""
    policies: tuple[str, ...]
    """The policies that decided the trace's jobs (those of the starts before them), in order, each once;
    ``unknown`` for jobs whose start the journal no longer has."""
    topology: str | None = None
    """The topology the database was written for, where it is a preset (``--topology`` takes its name)."""
    resumed: tuple[float, float] | None = None
    """(went off, came back on), Unix times, where the journal was off (``journal_keep`` 0) before its last
    resume: the trace starts there (what ran before is left out; jobs still running from then are :attr:`before`)."""
    off_since: float | None = None
    """When the journal went off, where it is off now: what happened since is not in the trace (a job released
    since is still running in it)."""
    drains: int = 0
    """Servers drained or activated during the trace: a replay has every server, so it may decide otherwise from
    the first."""
    drained_now: int = 0
    """Servers drained when the trace was read (maybe since before its first entry: a replay has them too)."""

    def write(self, path: Path) -> None:
        """The request file ``simulate netalloc --dataset`` and ``compare`` read (``cpu,mem,bw,hold``, bw in link
        units), with the ``id`` and ``live`` columns beside them."""
        import csv

        with open(path, "w", newline="", encoding="utf-8") as f:
            out = csv.writer(f)
            out.writerow(("id", "cpu", "mem", "bw", "hold", "live"))
            for row in zip(self.ids, self.cpu, self.mem, self.bw, self.hold, self.live, strict=True):
                out.writerow((row[0], row[1], row[2], f"{row[3] / BW_SCALE:.6f}", row[4], row[5]))


def network_trace(path: Path, rejected: str = "include") -> NetTrace:
    """The demand the network database ``path`` saw (:class:`NetTrace`), read read-only, also while a service runs
    on it. ``rejected``: ``include`` (the default: acceptance is what policies are compared on) or ``skip``."""
    if rejected not in ("include", "skip"):
        raise InputError(f"must be include or skip, got {rejected!r}", field="rejected")
    check_network_database(path)
    ids: list[str] = []
    cpu_, mem_, bw_, asked_hold, held = (array("q") for _ in range(5))  # held: -1 until it is known
    live: list[str] = []
    running: dict[str, int] = {}
    unmatched = restarts = drains = 0
    restarted = False
    starting = "unknown"  # the policy of the last start (a journal pruned past it: not known)
    policies: list[str] = []
    resumed: tuple[float, float] | None = None
    try:
        with _reading(path) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            conn.execute("BEGIN")  # one snapshot for the journal and the jobs: a service writing on meanwhile
            if "journal" not in {n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}:
                raise InputError(f"{path} has no journal (written by a dcplace before 2026-11-29): open it with "
                                 "this one and its demand is journalled from then on", field="db")  # fmt: skip
            query = f"SELECT {_NET_COLUMNS} FROM journal ORDER BY seq"
            for seq, at, event, job, cpu, mem, bw, hold, reason in conn.execute(query):  # streamed: 1M rows 650 MB
                if event == "resumed":  # the journal was off until here: what came before is no history to replay
                    ids.clear()
                    for column in (cpu_, mem_, bw_, asked_hold, held):
                        del column[:]
                    live.clear()
                    running.clear()
                    policies.clear()
                    unmatched = restarts = drains = 0
                    restarted = False
                    try:
                        off = _journal_entry((seq, at, event, job, cpu, mem, bw, hold, reason)).off_since
                    except ValueError as e:
                        raise InputError(f"{path}: {e}: a hand-edited row?", field="db") from None
                    resumed = (at if off is None else off, at)
                    continue
                if event in ("drained", "activated"):
                    drains += 1
                    continue
                if event == "moved":  # the same job running on: its arrival stays where it was placed
                    continue
                if event == "started":
                    restarted = bool(ids)  # counted when a job follows: an idle service since is no replay's
                    starting = str(reason)
                    continue
                if event == "released" and isinstance(job, str):
                    i = running.pop(job, None)
                    if i is None:
                        unmatched += 1
                    else:
                        held[i] = len(ids) - i
                    continue
                if not _journalled(event, job, cpu, mem, bw, hold, reason):
                    raise InputError(f"{path}: journal entry {seq} is not one dcplace writes ({event!r}, job "
                                     f"{job!r}, cpu {cpu!r}, mem {mem!r}, bw {bw!r}, hold {hold!r}, reason "
                                     f"{reason!r}): a hand-edited row?", field="db")  # fmt: skip
                if event == "placed":
                    running[job] = len(ids)
                restarts += restarted
                restarted = False
                if starting not in policies:  # the policies that decided, in order
                    policies.append(starting)
                ids.append(job)
                cpu_.append(cpu)
                mem_.append(mem)
                bw_.append(bw)
                asked_hold.append(-1 if hold is None else hold)
                held.append(-1)
                live.append(_LIVE[event if event == "placed" else reason])
            now_running = {job for (job,) in conn.execute("SELECT id FROM jobs")}
            meta = dict(conn.execute("SELECT key, value FROM meta WHERE key IN ('topology', 'topology_name', "
                                     "'journal_off_since', 'drained')"))  # fmt: skip
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path} cannot be read ({e})", field="db") from None
    n = len(ids)
    for i in running.values():
        held[i] = n - i
    before = len(now_running - set(running))
    ran = sorted(held[i] for i in range(n) if live[i] == "placed")
    median = ran[len(ran) // 2] if ran else 1
    filled = 0
    for i in range(n):
        if live[i] != "placed":
            filled += asked_hold[i] < 0
            held[i] = median if asked_hold[i] < 0 else asked_hold[i]
    n_rejected = n - len(ran)
    preset_name = _preset_of(meta)
    off_since = None
    with contextlib.suppress(TypeError, ValueError):  # a hand-edited note: no note
        off_since = float(meta.get("journal_off_since"))  # type: ignore[arg-type]
        off_since = off_since if 0 <= off_since < _LATEST_TIME else None
    drained_now = 0
    with contextlib.suppress(TypeError, ValueError):  # a hand-edited list: the engine's open says so
        listed = json.loads(meta.get("drained") or "[]")
        drained_now = len(listed) if isinstance(listed, list) else 0
    notes = (unmatched, before, restarts, tuple(policies), preset_name, resumed, off_since, drains, drained_now)
    if rejected == "skip":  # what ran, each leaving where it did: arrivals counted over what is kept
        return _without_rejections(ids, cpu_, mem_, bw_, held, live, n_rejected, len(running), median, notes)
    return NetTrace(ids, cpu_, mem_, bw_, held, live, n_rejected, len(running), filled, median, *notes)


_MOVE_FIELDS = ("id", "servers", "cpu", "mem", "links", "from", "step")
"""What a row of :meth:`NetworkEngine.moves` may have: a plan's move as it lists it (``from`` checked against where
the job runs, ``step`` ignored)."""
_MOVERS = ("make-room", "move")
"""Who a ``moved`` entry says moved the job: an executed :meth:`NetworkEngine.make_room`, or
:meth:`~NetworkEngine.move`."""
_RECORDERS = ("reconcile", "make-room")
"""Who a ``placed`` entry may say recorded the job, where no client's placement did."""

_LIVE = {"placed": "placed", "capacity": "capacity", "network": "network", "invalid": "invalid"}
"""One string object per answer: a million rows share four."""


def _journalled(event: object, job: object, cpu: object, mem: object, bw: object, hold: object,
                reason: object) -> bool:  # fmt: skip
    """Whether a placed or rejected entry is as the engine writes it."""

    def whole(x: object, low: int, high: int = MAX_UNITS) -> bool:
        return type(x) is int and low <= x <= high

    return (
        event in ("placed", "rejected")
        and isinstance(job, str)
        and whole(cpu, 0)
        and whole(mem, 0)
        and whole(bw, 1, round(MAX_BANDWIDTH * BW_SCALE))
        and (hold is None or whole(hold, 1))
        and (reason in ("capacity", "network", "invalid") if event == "rejected" else reason in (None, *_RECORDERS))
    )


def _without_rejections(ids: list[str], cpu: array[int], mem: array[int], bw: array[int], held: array[int],
                        live: list[str], rejected: int, running: int, median: int,
                        notes: tuple[Any, ...]) -> NetTrace:  # fmt: skip
    """The trace of what ran only: each job's hold counted again over the jobs kept (a release falls before the
    same next placement as in the engine)."""
    import bisect

    kept = [i for i, x in enumerate(live) if x == "placed"]
    hold = array("q")
    for rank, i in enumerate(kept):
        end = i + held[i]  # released before request ``end``: before the first kept request at or after it
        hold.append(bisect.bisect_left(kept, end) - rank)

    def pick(column: array[int]) -> array[int]:
        return array("q", (column[i] for i in kept))

    return NetTrace([ids[i] for i in kept], pick(cpu), pick(mem), pick(bw), hold, ["placed"] * len(kept), rejected,
                    running, 0, median, *notes)  # fmt: skip


def _stored(a: Allocation) -> tuple[str, str, str, str]:
    """An allocation's servers, amounts and links as the jobs table keeps them (JSON lists)."""
    return tuple(json.dumps(x.tolist()) for x in (a.servers, a.cpu, a.mem, a.links))  # type: ignore[return-value]


def _job_row(job_id: str, a: Allocation, hold: int | None) -> tuple[str, tuple[Any, ...]]:
    """The jobs table's row of a job recorded where ``a`` says (placed, reconciled, or by a plan)."""
    return ("INSERT INTO jobs (id, servers, cpu, mem, links, bw, hold) VALUES (?, ?, ?, ?, ?, ?, ?)",
            (job_id, *_stored(a), int(a.bw), hold))  # fmt: skip


def _check_job(job: object) -> None:
    if not isinstance(job, NetJob):
        raise InputError(f"must be a NetJob, got {type(job).__name__}", field="job")


def _same(a: Allocation, b: Allocation) -> bool:
    """Whether two allocations hold the same: each server's amounts, the bandwidth and the links."""
    mine = sorted(zip(a.servers.tolist(), a.cpu.tolist(), a.mem.tolist(), strict=True))
    theirs = sorted(zip(b.servers.tolist(), b.cpu.tolist(), b.mem.tolist(), strict=True))
    return mine == theirs and int(a.bw) == int(b.bw) and sorted(a.links.tolist()) == sorted(b.links.tolist())


def _off_paths(topology: Topology, links: np.ndarray, servers: np.ndarray) -> int | None:
    """A link of ``links`` that lies on no simple path between two of ``servers`` (None: every one does; links
    that do not join the servers at all are :meth:`~dcplace.sim.netalloc.LiveNetSim.restore`'s to refuse). Every
    link of a block (biconnected component) lies on a simple path between any two of its nodes, so a block is spare
    exactly when it is a leaf of the block tree (one cut vertex at most) with no server but that cut vertex; if no
    leaf is spare, every leaf holds a server and every block lies between two of them."""
    import networkx as nx

    g = nx.Graph()
    for x in links.tolist():
        g.add_edge(int(topology.link_u[x]), int(topology.link_v[x]), link=x)
    ends = set(servers.tolist())
    cuts = set(nx.articulation_points(g))
    for block in nx.biconnected_component_edges(g):
        nodes = {n for e in block for n in e}
        if len(nodes & cuts) <= 1 and not (nodes - cuts) & ends:
            return int(g.edges[block[0]]["link"])
    return None


def _draws(policy: object) -> tuple[Mapping[str, Any] | None, dict[str, Any] | None]:
    """Where a policy stands: its random stream (its numpy ``rng``, as the registered ones have) and its attributes
    (NALB's search order of the request it last decided, a user's own state), for :func:`_put_back`."""
    rng = getattr(policy, "rng", None)
    attrs = getattr(policy, "__dict__", None)
    return (rng.bit_generator.state if isinstance(rng, np.random.Generator) else None,
            dict(attrs) if isinstance(attrs, dict) else None)  # fmt: skip


def _put_back(policy: object, drawn: tuple[Mapping[str, Any] | None, dict[str, Any] | None]) -> None:
    """The policy back where :func:`_draws` saw it: a decision answered 503, or an explanation's dry run, drew
    nothing and decided nothing (attributes rebound since are bound back; a change made inside one is not)."""
    state, attrs = drawn
    if attrs is not None:  # exactly as it was: an attribute first set since (a cache) goes too, or it would
        d = vars(policy)  # outlive the others it was set with (tetris-bw's rack table was put back, its graph not)
        for key in [k for k in d if k not in attrs]:
            del d[key]
        d.update(attrs)
    if state is not None:
        policy.rng.bit_generator.state = state  # type: ignore[attr-defined]


def _whole(job_id: str, text: str, name: str) -> np.ndarray:
    """A stored list of whole numbers (ValueError naming the job and field otherwise: a hand-edited row)."""
    values = json.loads(text)
    if not isinstance(values, list) or not all(type(v) is int and 0 <= v < 2**62 for v in values):
        raise ValueError(f"job {job_id!r}: {name} {text[:80]} is not a list of whole numbers")
    return np.array(values, np.int64)


def horizon(policy: object) -> int:
    """The holding-period scale a learned policy was trained with (its checkpoint's topology and request set, as
    the episodes it learned on drew them); 100 for a policy that reads no hold."""
    meta = getattr(policy, "meta", None)
    if isinstance(meta, dict) and meta.get("topology") in PRESETS and isinstance(meta.get("dataset"), str):
        top = preset(meta["topology"])
        try:
            return calibrate_hold(meta["dataset"], default_requests(top), int(top.server_cpu.sum()),
                                  int(top.server_mem.sum()), "train")  # fmt: skip
        except (KeyError, InputError):  # a request set this version does not know: the scale below
            pass
    return 100


def tier_shares(topology: Topology, free_bw: np.ndarray) -> dict[str, float]:
    """Bandwidth in use over each tier's capacity (tiers without links left out)."""
    used = topology.link_cap - free_bw
    out = {}
    for t, name in enumerate(TIER_NAMES):
        cap = int(topology.link_cap[topology.link_tier == t].sum())
        if cap:
            out[name] = int(used[topology.link_tier == t].sum()) / cap
    return out


__all__ = [
    "MAX_UNITS",
    "NET_EVENTS",
    "JobPlacement",
    "JobRejection",
    "NetExplanation",
    "NetJob",
    "NetJournalEntry",
    "NetworkEngine",
    "ServerInfo",
    "fingerprint",
    "network_trace",
    "read_network_journal",
    "replay",
    "tier_shares",
]
