"""The live placement engine: machines, VMs, a policy deciding each request, durable state, explanations.

:class:`PlacementEngine` is the stateful object an operator (or :mod:`dcplace.service`) talks to::

    engine = PlacementEngine(numa=2, policy="best-fit")           # in memory; PlacementEngine.open(path) is durable
    engine.add_machine("pm-1", cpu=40, mem=90)                    # per NUMA node (a list gives each node its own)
    result = engine.place(VmRequest("vm-1", cpu=4, mem=8))        # Placement or Rejection, with an Explanation
    engine.release("vm-1")

Every change goes through the simulator's transitions (:func:`dcplace.sim.numa_kernel.place` / ``release`` over
:class:`~dcplace.engine.cluster_state.ClusterState`'s arrays) and every decision through the public policy API
(``policy.choose(view)`` on a :class:`~dcplace.sim.numa.NumaView`; heuristics, ``cvd-rl``, ``cvd-rl-machine`` and
user policies by the registry's names). Replaying a trace through :meth:`PlacementEngine.place` /
:meth:`~PlacementEngine.release` gives the simulator's placements decision by decision (``tests/engine``).

Semantics:

* **place**: the policy picks an action among *active* machines; -1, or an action that is not feasible, is a
  :class:`Rejection` with its reason (nothing changes). A VM id must be new.
* **release**: frees exactly what the ledger says the VM took.
* **drain**: the machine keeps its VMs and receives no new ones; **activate** undoes a drain or a failure.
* **fail**: the machine receives nothing and its VMs come back as requests, placed again one by one (ledger slot
  order) through the policy; those that fit nowhere are dropped and reported as rejections.
* **remove**: only an empty machine (drain and release, or fail, first).

Concurrency: one lock serialises every operation (decisions are microseconds; a reader never sees half an
operation). Durability (when a :class:`~dcplace.engine.store.Store` is attached): an operation validates,
decides and applies the change in memory, queues its rows and leaves the lock; the call returns only after the rows'
group commit (module :mod:`dcplace.engine.store`). A later operation may see an earlier one's effect before that is
durable, but is queued after it, so what is durable is always a prefix of what was applied, and nothing is
acknowledged before it is durable.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import csv
import io
import json
import logging
import math
import numbers
import re
import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any, Literal, NamedTuple, TypeVar

import numpy as np
import numpy.typing as npt

from dcplace.atomic import write_text
from dcplace.config import check_seed
from dcplace.engine import reopt
from dcplace.engine.cluster_state import (
    ABSENT,
    ACTIVE,
    DRAINED,
    FAILED,
    STATUS_CODES,
    STATUS_NAMES,
    ClusterState,
    VmRecord,
)
from dcplace.engine.explain import (
    CLASS_NAMES,
    Candidate,
    Explanation,
    counts_dict,
    machine_classes,
    reason_counts,
    rejection_sentence,
)
from dcplace.engine.journal import JournalEntry, JournalQuery, paged, query_journal
from dcplace.engine.reopt import ReoptPolicy, ReoptReport
from dcplace.engine.store import (
    Change,
    MachineChange,
    MachineDelete,
    MachineRow,
    MachineStatus,
    MetaSet,
    Rejected,
    SqliteStore,
    Store,
    StoreError,
    VmDelete,
    VmRow,
    check_existing,
    create_new,
    remove_database,
    stored_numa,
)
from dcplace.errors import InputError
from dcplace.inputs import read_csv, read_text
from dcplace.jsonio import json_problem
from dcplace.placement.migration import MigrationPlan, Move, plan_migrations
from dcplace.placement.migration import evacuate as evacuate_machines
from dcplace.policies import get_policy
from dcplace.policies.base import NumaPolicy
from dcplace.policies.numa_heuristics import FIRST_FIT, RANDOM, Heuristic
from dcplace.policies.numa_heuristics import choose as heuristic_choose
from dcplace.policies.registry import check_policy_object
from dcplace.sim import numa_kernel
from dcplace.sim.policy_calls import as_action, decide, ranked


class NotFound(InputError):
    """An unknown machine or VM id (HTTP 404)."""


class Conflict(InputError):
    """The request contradicts the state: a duplicate id, a machine that still hosts VMs (HTTP 409)."""


class Unavailable(InputError):
    """The request was fine but the engine's own machine could not serve it now: no room for the temporary copy a
    past state is read from (HTTP 503; a command line's one sentence, exit 2, as for other input errors)."""


@dataclass(frozen=True)
class VmRequest:
    """A VM to place: ``cpu`` cores and ``mem`` GB, on one NUMA node or split evenly over all (``multi``)."""

    id: str
    cpu: float
    mem: float
    multi: bool = False
    pinned: bool = False
    """Never moved by re-optimisation (paper 004: VMs "that have very large migration costs")."""
    uid: str | None = None
    """The client's id of this incarnation of the VM (a Kubernetes pod's UID, a request id; the id rule applies),
    kept with it: a retry carries the same uid and gets its placement back, another VM under a reused id (a pod
    recreated under its old name) carries another and is a :class:`Conflict`, and :meth:`PlacementEngine.release`
    given a uid frees only that incarnation. None: not checked (a request without one is judged by its size);
    likewise a VM recorded without one matches any uid."""


@dataclass(frozen=True)
class Placement:
    """Where a VM went: the machine and its NUMA node (None: split over every node)."""

    vm: str
    machine: str
    node: int | None
    explanation: Explanation | None = None
    accepted: Literal[True] = True
    replayed: bool = False
    """True: the VM was already placed with this size and span (a client's retry after a lost answer): its
    placement as it is now, nothing changed, answered once the first placement was durable."""


@dataclass(frozen=True)
class BulkPlacement:
    """What :meth:`PlacementEngine.place_arrays` decided: per request the action (machine slot x NUMA nodes + node,
    as the simulator numbers them) or -1 for a rejection."""

    actions: npt.NDArray[np.int64]
    multi: npt.NDArray[np.bool_]
    numa: int
    machine_ids: list[str]
    """The machine of each slot when the call returned."""

    @property
    def accepted(self) -> npt.NDArray[np.bool_]:
        return self.actions >= 0

    @property
    def machine_slots(self) -> npt.NDArray[np.int64]:
        """The machine slot of each request, -1 for a rejection."""
        return np.where(self.actions >= 0, self.actions // self.numa, -1)

    @property
    def nodes(self) -> npt.NDArray[np.int64]:
        """The NUMA node of each request, -1 for a rejection or a VM split over every node."""
        return np.where((self.actions >= 0) & ~self.multi, self.actions % self.numa, -1)

    def machines(self) -> list[str | None]:
        """The machine of each request (None: rejected)."""
        ids = self.machine_ids
        return [ids[k] if k >= 0 else None for k in self.machine_slots.tolist()]


@dataclass(frozen=True)
class VmPage:
    """One page of :meth:`PlacementEngine.vm_page`: the VMs, whether each is pinned, and the cursor of the next
    page (the ``after`` to ask with; None: this was the last)."""

    vms: list[VmRecord]
    pinned: list[bool]
    uids: list[str | None]
    """Each VM's uid (:attr:`VmRequest.uid`; None: placed without one)."""
    next: int | None


class VmColumns(NamedTuple):
    """Some VMs of a :class:`VmListing` as plain columns, one list each (:meth:`VmListing.columns`): what a service
    turns into JSON rows without making a :class:`VmRecord` per VM (half a listing's time)."""

    ids: list[str]
    machines: list[str]
    nodes: list[int | None]
    cpu: list[float]
    mem: list[float]
    multi: list[bool]
    pinned: list[bool]
    uids: list[str | None]


def allocation_rows(page: VmPage | VmColumns) -> list[dict[str, Any]]:
    """VMs as allocation records (``vm, machine, node, cpu, mem, pinned, uid``: what ``import_allocations`` reads
    back)."""
    if isinstance(page, VmPage):
        page = VmColumns([r.id for r in page.vms], [r.machine for r in page.vms], [r.node for r in page.vms],
                         [r.cpu for r in page.vms], [r.mem for r in page.vms], [r.multi for r in page.vms],
                         page.pinned, page.uids)  # fmt: skip
    return [{"vm": i, "machine": m, "node": k, "cpu": c, "mem": g, "pinned": p, "uid": u}
            for i, m, k, c, g, _, p, u in zip(*page, strict=True)]  # fmt: skip


@dataclass(frozen=True)
class VmListing:
    """VMs' ledger columns copied under the engine's lock (:meth:`PlacementEngine.vm_listing`), made into records
    after it (:meth:`page`) or into plain columns a chunk at a time (:meth:`columns`), so a listing of many VMs can
    be sent as it is built. ``next``: the cursor of the page after this listing (None: it reaches the end)."""

    ids: list[str]
    pm: np.ndarray
    node: np.ndarray
    demand: np.ndarray
    multi: np.ndarray
    machine_ids: list[str]
    pinned: set[str] | None
    """A copy of the pinned ids (None: none), looked up after the lock."""
    uids: list[str | None] | None
    """Each VM's uid, looked up under the lock (a page's worth: copying every uid for each page cost more at a
    million VMs); None: no VM has one."""
    next: int | None

    def __len__(self) -> int:
        return len(self.ids)

    def page(self) -> VmPage:
        """Every VM of the listing, with its cursor."""
        c = self._columns(0, len(self.ids))
        vms = [VmRecord(*row) for row in zip(c.ids, c.machines, c.nodes, c.cpu, c.mem, c.multi, strict=True)]
        return VmPage(vms, c.pinned, c.uids, self.next)

    def columns(self, size: int | None = None) -> Iterator[VmColumns]:
        """The listing as :class:`VmColumns` of at most ``size`` VMs (None: one for all), each built when asked."""
        step = max(1, size or len(self.ids))
        for start in range(0, len(self.ids), step):
            yield self._columns(start, min(start + step, len(self.ids)))

    def _columns(self, start: int, stop: int) -> VmColumns:
        names = self.machine_ids
        ids = self.ids[start:stop]
        cpu, mem = self.demand[start:stop].T.tolist() if stop > start else ([], [])
        pinned = self.pinned
        return VmColumns(
            ids, [names[m] for m in self.pm[start:stop].tolist()],
            [None if k < 0 else k for k in self.node[start:stop].tolist()], cpu, mem, self.multi[start:stop].tolist(),
            [i in pinned for i in ids] if pinned else [False] * len(ids),
            self.uids[start:stop] if self.uids is not None else [None] * len(ids),
        )  # fmt: skip


def _check_page(limit: int | None, after: int) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise InputError(f"must be a whole number >= 1, got {limit!r}", field="limit")
    if isinstance(after, bool) or not isinstance(after, int) or after < -1:
        raise InputError(f"must be a cursor from an earlier page, got {after!r}", field="after")


@dataclass(frozen=True)
class Rejection:
    """A request that was not placed, and why (``reason``: one sentence; ``code``: ``no-fit`` when no machine can
    host it, ``declined`` when the policy returned -1 although one could, ``invalid`` when it chose an infeasible
    action)."""

    vm: str
    reason: str
    code: str
    explanation: Explanation | None = None
    accepted: Literal[False] = False


Decision = Placement | Rejection

log = logging.getLogger(__name__)
"""INFO: one line per change to a machine (registered, drained, activated, failed, removed, evacuated) and per
re-optimisation event; placements and releases are the service's access log (``dcplace.service.access``)."""
_QUIET = logging.Logger("dcplace.engine.scratch", logging.CRITICAL + 1)
"""The log of :meth:`PlacementEngine.warm_up`'s scratch engine: its machine is nobody's."""

REJECTION_COUNTER = {"no-fit": "rejected_no_fit", "declined": "rejected_declined", "invalid": "rejected_invalid"}
"""A :class:`Rejection`'s code -> its key in :attr:`PlacementEngine.counters`."""


LATEST_TIME = 253_402_300_799
"""The last second of the year 9999 in Unix time: the latest moment a past state may be asked for, and the latest
``now`` a caller may give (milliseconds, 1.8e12 today, are refused rather than read as seconds)."""

CLOCK_SKEW_S = 300.0
"""How far ahead of this host's clock an inventory's ``as_of`` may be (it was taken on another host)."""


def _check_time(value: object, name: str) -> float | None:
    """``value`` (None, or a time in seconds from 0 to :data:`LATEST_TIME`) as a float, or InputError naming
    ``name``: a NaN, infinite or millisecond ``now`` stopped the re-optimisation timer or held VMs for good."""
    if value is None:
        return None
    t = float(value) if isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_) else math.nan
    if not 0 <= t <= LATEST_TIME:  # NaN fails too
        raise InputError(f"must be a time in seconds from 0 to {LATEST_TIME} (the year 9999), got {value!r}",
                         field=name)  # fmt: skip
    return t  # numpy's numbers too (np.int64 was refused)


MAX_NUMA = 256
"""NUMA nodes per machine at most: the largest shared-memory machines sold have 32 sockets of 1-4 nodes each; the
warm-up at 1,024 nodes took 4.6 s and at 100,000 did not end (``serve --numa 100000`` hung at start-up)."""


def _log_event(logger: logging.Logger, report: ReoptReport, what: str) -> None:
    """One log line for an applied event: INFO, or WARNING where it stopped short or dropped VMs."""
    short = not report.complete or report.dropped
    (logger.warning if short else logger.info)(
        "%s (%s): %d of %d move(s) applied, %.1f GB moved, machines in use %d -> %d, %d VM(s) dropped%s", what,
        report.trigger, report.applied, report.planned, report.gb_moved, report.machines_before,
        report.machines_after, len(report.dropped), f"; {report.reason}" if report.reason else "")  # fmt: skip


def _check_numa(numa: object) -> None:
    if isinstance(numa, bool) or not isinstance(numa, int) or not 1 <= numa <= MAX_NUMA:
        raise InputError(f"must be a whole number from 1 to {MAX_NUMA}, got {numa!r}", field="numa")


@dataclass(frozen=True)
class MachineSpec:
    """A machine to register (:meth:`PlacementEngine.add_machines`): ``cpu`` cores and ``mem`` GB per NUMA node (a
    number for every node, or one value per node), its ``rack``."""

    id: str
    cpu: float | Sequence[float]
    mem: float | Sequence[float]
    rack: str | None = None


@dataclass(frozen=True)
class MachineInfo:
    id: str
    status: str
    rack: str | None
    cpu: list[float]
    """Per NUMA node: total cores."""
    mem: list[float]
    free_cpu: list[float]
    free_mem: list[float]
    vms: int


@dataclass(frozen=True)
class FailReport:
    """What failing a machine did to its VMs: placed elsewhere, or dropped (rejections)."""

    machine: str
    replaced: list[Placement] = field(default_factory=list)
    dropped: list[Rejection] = field(default_factory=list)


class _Unchanged:
    """A keyword left out (``change_machine``'s ``rack``, where None already means "none")."""

    def __repr__(self) -> str:
        return "<unchanged>"


_UNCHANGED = _Unchanged()


@dataclass(frozen=True)
class ReconcileReport:
    """What :meth:`PlacementEngine.reconcile` did (or, not ``applied``, would do) to make the records the
    inventory."""

    added: tuple[str, ...]
    """VMs the records lacked: recorded (counted as imported)."""
    removed: tuple[str, ...]
    """VMs the inventory lacks: released."""
    replaced: tuple[str, ...]
    """VMs of another size or uid under a recorded id: released and recorded anew."""
    moved: tuple[tuple[str, str, int | None, str, int | None], ...]
    """``(vm, from machine, from node, to machine, to node)`` (node None: split): journalled as moves."""
    repinned: tuple[str, ...]
    """VMs whose pin the inventory changed."""
    unchanged: int
    applied: bool
    newer: tuple[str, ...] = ()
    """VMs left as recorded because the records changed after the inventory was taken (``as_of``)."""

    def as_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["moved"] = [dict(zip(("vm", "from_machine", "from_node", "machine", "node"), m, strict=True))
                        for m in self.moved]  # fmt: skip
        for key in ("added", "removed", "replaced", "repinned", "newer"):
            out[key] = list(out[key])
        return out


def _applied_summary(moves: tuple[reopt.MoveRecord, ...]) -> dict[str, Any]:
    """The report's counts of the moves done (a plan that stopped early did fewer than it planned)."""
    return {"gb_moved": sum(m.gb for m in moves), "staging": sum(m.staging for m in moves)}


def _move_record(rec: VmRecord, mv: Move, dst: str) -> reopt.MoveRecord:
    """A planned move of the VM ``rec`` (where it is before the move) to machine ``dst``, in the engine's ids."""
    unhomed = mv.src_machine < 0  # a failed machine's VM: it leaves nothing and copies nothing
    return reopt.MoveRecord(rec.id, None if unhomed else rec.machine, dst, None if rec.multi else mv.dst_node,
                            mv.staging, 0.0 if unhomed else rec.mem)  # fmt: skip


MAX_AMOUNT = 2**31 - 1
"""The largest core or GB count a machine's node or a VM may have (docs/errors.md: whole quantities at most
2**31 - 1): ledgers of such amounts stay exact in float64, where 1e308 made a released VM's cores vanish."""

MIN_AMOUNT = 1e-6
"""The smallest core or GB count a machine's node or a VM may have, far above the fit tolerance
(:data:`~dcplace.sim.numa_kernel.FIT_TOL`, 5e-10): a full node took a thousand VMs of 5e-324 cores, then more of
4e-10 and 1e-10, each within the tolerance. (The kube-scheduler extender rounds pods up to 1e-3.) Databases written
before this rule open as they are."""

_AMOUNT_RULE = f"a number at least {MIN_AMOUNT:g} and at most {MAX_AMOUNT}"


_T = TypeVar("_T")

SLOW_S = 0.02
"""A policy whose last decision took longer than this (seconds) decides in a worker thread, off the event loop."""

MAX_SLOTS = 2**20
"""The most machine slots a database may hold (slots are reused, so this is the most machines at once)."""


LAST_REOPTIMISATION = "last_reoptimisation"
"""The store's note (:class:`MetaSet`) of :attr:`PlacementEngine.last_reoptimisation`."""
LAST_BACKGROUND_REPORT = "last_background_report"
"""The store's note of :attr:`PlacementEngine.last_background_report` (its JSON)."""


def _stored_report(value: str | None) -> dict[str, Any] | None:
    """A kept report (:attr:`PlacementEngine.last_background_report`), or None where there is none or it is not a
    JSON object (a hand-edited row): a lost report, not a database that no longer opens."""
    try:
        out = None if value is None else json.loads(value)
    except ValueError:
        return None
    return out if isinstance(out, dict) else None


def _stored_time(value: object) -> float | None:
    """A time the store kept (a number, or a note's text), or None where there is none or it is not a finite
    number (a hand-edited row): a lost cool-down or timer, not a database that no longer opens."""
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            return None
    if not isinstance(value, int | float) or isinstance(value, bool) or not math.isfinite(value):
        return None
    return float(value)


def _positive(value: Any, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise InputError(f"must be a number, got {value!r}", field=name) from None
    except OverflowError:  # an int of 400 digits: a traceback from add_machine, place and serve --import
        raise InputError(f"must be {_AMOUNT_RULE}, got an integer of {value.bit_length()} bits", field=name) from None
    if not math.isfinite(x) or not MIN_AMOUNT <= x <= MAX_AMOUNT or isinstance(value, bool):
        raise InputError(f"must be {_AMOUNT_RULE}, got {value!r}", field=name)
    return x


_NOT_IN_IDS = re.compile(r"[\x00-\x1f\x7f\ud800-\udfff]")
"""What an id must not hold, whichever way it came in (HTTP, the extender, Python, a CSV import): control characters
(NUL, newline, tab, DEL broke logs and CSV exports) and lone surrogates (not UTF-8: the database cannot store them,
and one such record failed the commit of every change beside it)."""


def _id_ok(value: Any) -> bool:
    """The id rule (:func:`check_id`) as a test, cheap for the usual ASCII id (no regex)."""
    return (
        type(value) is str
        and 0 < len(value) <= 256
        and value == value.strip()
        and ((value.isascii() and value.isprintable()) or _NOT_IN_IDS.search(value) is None)
    )


def _where(i: int, fld: str | None, source: str | None, lines: Sequence[int] | None, name: str = "") -> dict[str, Any]:
    """Where item ``i`` (from 0) of a batch is, as :class:`InputError`'s keywords: its line in ``source`` (a CSV's,
    ``lines``), else its index (``name[i].field``)."""
    if lines is not None:
        return {"path": source, "line": lines[i], "field": fld}
    return {"path": source, "field": f"{name}[{i}]" + (f".{fld}" if fld else "")}


def _node_of(raw: Any) -> int | None:
    """An allocation row's ``node``: None for a VM split over every node (empty, ``all``, null), else a whole number
    as an int or its digits (``1.5`` and ``true`` were taken as node 1); ValueError otherwise."""
    if raw is None or (isinstance(raw, str) and raw.strip() in ("", "all")):
        return None
    if type(raw) is int:
        return raw
    if isinstance(raw, str) and raw.strip().isdigit():
        return int(raw.strip())
    raise ValueError(f"must be a NUMA node number, or empty or 'all' for a VM split over every node, got {raw!r}")


def check_id(value: Any, name: str) -> str:
    """``value`` if it is a valid machine or VM id (1-256 characters, no surrounding spaces, no control characters or
    lone surrogates), else an InputError naming ``name``."""
    if not _id_ok(value):
        text = repr(value)
        if not isinstance(value, str):  # a number (10**100 in a JSON file) has no len(): it was a TypeError
            shown = f"{type(value).__name__} {text if len(text) <= 80 else text[:60] + '...'}"
            raise InputError(f"must be a string, got {shown}", field=name)
        shown = text if len(text) <= 80 else f"{text[:60]}... ({len(value)} characters)"
        raise InputError(f"must be a non-empty string of at most 256 characters without surrounding spaces or "
                         f"control characters, got {shown}", field=name)  # fmt: skip
    return str(value)


_MACHINE_FIELDS = {"id": (str,), "slot": (int,), "rack": (str, type(None)), "status": (str,), "capacity": (list,)}
_VM_FIELDS = {"id": (str,), "machine": (str,), "node": (int, type(None)), "cpu": (int, float), "mem": (int, float),
              "multi": (bool,), "pinned": (bool,), "uid": (str, type(None))}  # fmt: skip


def _snapshot_rows(snapshot: Any) -> tuple[list[MachineRow], list[VmRow]]:
    """A snapshot's rows, each field checked for its type (a bool is not a number here), or InputError naming the
    first entry that is not one."""

    def bad(what: str) -> InputError:
        return InputError(f"not a dcplace engine snapshot: {what}", field="snapshot")

    if not isinstance(snapshot, dict) or not {"numa", "machines", "vms"} <= snapshot.keys():
        raise bad("it is not an object with numa, machines and vms")
    if type(snapshot["numa"]) is not int:
        raise bad(f"numa is {snapshot['numa']!r}, not a whole number")
    out: list[list[Any]] = [[], []]
    for key, fields, row_type, rows in (("machines", _MACHINE_FIELDS, MachineRow, out[0]),
                                        ("vms", _VM_FIELDS, VmRow, out[1])):  # fmt: skip
        entries = snapshot[key]
        if not isinstance(entries, list):
            raise bad(f"{key} is not a list")
        for i, entry in enumerate(entries):
            if not isinstance(entry, dict) or entry.keys() != fields.keys():
                raise bad(f"{key}[{i}] is not an object with exactly {', '.join(fields)}")
            for name, types in fields.items():
                value = entry[name]
                if type(value) not in types:
                    raise bad(f"{key}[{i}].{name} is {value!r}")
            rows.append(row_type(**entry))
    for i, m in enumerate(out[0]):
        cap = m.capacity
        if not all(isinstance(node, list) and len(node) == 2 and all(type(x) in (int, float) for x in node)
                   for node in cap):  # fmt: skip
            raise bad(f"machines[{i}].capacity is not a list of [cores, GB] per NUMA node")
    return out[0], out[1]


class PlacementEngine:
    """The live cluster (module docstring). ``numa``: NUMA nodes per machine; ``policy``: the default policy's
    registry name (or a policy object); ``store``: durable storage (None: in memory only); ``top``: candidates in
    each explanation; ``keep_explanations``: how many recent placement explanations :meth:`explanation` keeps."""

    _last: Decision
    """The decision of the last :meth:`place` step (read under the lock that made it)."""

    def __init__(
        self,
        numa: int = 2,
        policy: str | NumaPolicy = "best-fit",
        store: Store | None = None,
        top: int = 3,
        keep_explanations: int = 10_000,
        seed: int = 0,
    ) -> None:
        """``seed``: this engine's own random stream, for the compiled policies that draw (``random``): before each
        of their decisions the compiled generator is seeded from it (:meth:`_draws`), so two engines built alike
        decide alike, whatever else the process (another engine, a simulation, another thread) draws. A policy named
        here whose constructor takes ``seed`` is built with it."""
        _check_numa(numa)
        check_seed(seed)
        self.seed = seed
        self._rng = np.random.default_rng(seed)
        self._dry_rng = np.random.default_rng([seed, 1])  # dry runs' draws: reproducible, and they leave _rng alone
        self.state = ClusterState(numa)
        self.numa = numa
        self.lock = threading.RLock()
        self._reopt_lock = threading.Lock()  # one re-optimisation event at a time; the engine's lock only at its ends
        self.store = store
        self.top = top
        self._policies: dict[str, NumaPolicy] = {}
        self._decision_s: dict[str | None, float] = {}  # each policy name's (None: the default's) last decision time
        self.slow_s = SLOW_S
        self.default_policy = self.policy(policy) if isinstance(policy, str) else self._acts_here(policy)
        if isinstance(policy, NumaPolicy):
            self._policies[policy.name] = policy
        self._log = log
        self._explanations: OrderedDict[str, Explanation] = OrderedDict()
        self._diverged: StoreError | None = None  # set where the store refused changes memory already holds
        self._live: tuple[Any, ...] | None = None  # during a dry run: the live objects (_saved, _shown)
        self._keep = keep_explanations
        self.counters = {
            "placed": 0,
            "rejected": 0,
            "rejected_no_fit": 0,
            "rejected_declined": 0,
            "rejected_invalid": 0,
            "released": 0,
            "dropped": 0,
            "imported": 0,
            "migrated": 0,
            "reoptimisations": 0,
        }
        """Since this engine started: VMs ``placed`` (by a policy, or bound by the extender), placements
        ``rejected`` (and by :class:`Rejection` code, ``rejected_no_fit``, ``rejected_declined``,
        ``rejected_invalid``: an operator alerts on a full cluster and on a policy that declines or errs, not on one
        sum), VMs ``released`` by a client, ``dropped`` (their failed machine's VMs that fit nowhere),
        ``imported`` (existing allocations recorded), ``migrated`` (moves: re-optimisation, evacuation, and a failed
        machine's VMs placed again); the ledger: VMs now = VMs loaded at start + placed + imported - released -
        dropped (:meth:`check_invariants`)."""
        self._loaded = 0
        self.load_warnings: list[str] = []
        """What :meth:`open` loaded but would not write today (a failed machine hosting VMs), with what to do."""
        self.pinned: set[str] = set()
        """VMs that re-optimisation never moves (durable with the VM)."""
        self.uids: dict[str, str] = {}
        """Each VM's uid where it was placed with one (:attr:`VmRequest.uid`; durable with the VM)."""
        self.moved_at: dict[str, float] = {}
        """When each VM last moved, in the caller's clock (the ``now`` of :meth:`reoptimise`, :meth:`evacuate`,
        :meth:`move`, :meth:`reconcile`); durable with the VM (:attr:`VmRow.moved_at`), so the cool-down outlives a
        restart where the caller's clock does (the service's is the wall clock)."""
        self.last_reoptimisation: float | None = None
        """When the last executed re-optimisation ran, in the caller's clock (None: none with a clock); durable
        (``last_reoptimisation`` in the store's notes), so a restart does not make a timer event due at once."""
        self.last_background_report: dict[str, Any] | None = None
        """The report (:meth:`ReoptReport.as_dict`) of the last event :meth:`reoptimise_if_due` ran, committed with
        its moves, so ``GET /reoptimise/last`` and the cluster page still show it after a restart (None: none)."""

    # -- construction ---------------------------------------------------------------------------------------
    @classmethod
    def open(
        cls,
        path: str | Path,
        numa: int = 2,
        policy: str | NumaPolicy = "best-fit",
        journal_keep: int | None = None,
        **kw: Any,
    ) -> PlacementEngine:
        """An engine on the SQLite database ``path`` (created if new), its state loaded exactly. A bad argument
        leaves no new database behind (``numa`` was recorded in a new file before it was checked).
        ``journal_keep``: the newest journal rows kept (:meth:`journal`; 0: none written; None: as the database was
        last opened, else 1,000,000)."""
        _check_numa(numa)
        made = create_new(path)  # the file, if this call made it: only then is it ours to remove on failure
        if made is None and Path(path).is_file():  # refused before anything is written: an open upgrades the file
            check_existing(Path(path))
            if (recorded := stored_numa(Path(path))) not in (None, numa):
                raise InputError(f"{path} holds machines with {recorded} NUMA nodes, not {numa}", field="numa")
        try:
            store = SqliteStore(path, created=made is not None, journal_keep=journal_keep)
        except BaseException:  # refused (a full disk, a folder it cannot write): no empty new file left behind
            if made is not None:
                remove_database(made)
            raise
        try:
            loaded_numa, machines, vms = store.load()
            if loaded_numa is None:
                store.set_numa(numa)
            elif loaded_numa != numa:
                raise InputError(f"{path} holds machines with {loaded_numa} NUMA nodes, not {numa}", field="numa")
            engine = cls(numa, policy, None, **kw)
            try:
                engine._load(machines, vms)
            except InputError as e:  # the rows, not the caller's input: name the database
                raise InputError(f"{path} does not hold a consistent cluster: {e.detail}", field="db") from None
            engine.last_reoptimisation = _stored_time(store.meta(LAST_REOPTIMISATION))
            engine.last_background_report = _stored_report(store.meta(LAST_BACKGROUND_REPORT))
        except BaseException:
            store.close()
            if made is not None:
                remove_database(made)
            raise
        engine.store = store
        return engine

    def close(self) -> None:
        """Close the database (everything acknowledged is already durable); the engine must not be used after."""
        if self.store is not None:
            self.store.close()

    def policy(self, name: str | NumaPolicy | None = None) -> NumaPolicy:
        """The policy ``name`` (built once, by the registry), a policy object as it is, or the default."""
        if name is None:
            return self.default_policy
        if isinstance(name, NumaPolicy):  # it was read as a name: "could not be built without arguments"
            return self._acts_here(name)
        if not isinstance(name, str):
            raise InputError(f"must be a policy name or a NumaPolicy, got a {type(name).__name__}", field="policy")
        pol = self._policies.get(name)
        if pol is None:
            pol = self._acts_here(get_policy(name, seed=self.seed))  # a user's policy taking `seed` gets the engine's
            self._policies[name] = pol
        return pol

    def _acts_here(self, pol: NumaPolicy) -> NumaPolicy:
        """``pol``, or InputError where it cannot act on this engine's machines (:attr:`NumaPolicy.numa`) or is no
        NUMA policy at all."""
        check_policy_object(pol, "numa")
        numa = getattr(pol, "numa", None)
        if numa is not None and numa != self.numa:
            raise InputError(f"{pol.name} acts on machines of {numa} NUMA nodes, and this cluster's have {self.numa}"
                             f"{': give a checkpoint trained for ' + str(self.numa) if hasattr(pol, 'agent') else ''}",
                             field="policy")  # fmt: skip
        return pol

    def journal(
        self,
        vm: str | None = None,
        machine: str | None = None,
        event: str | None = None,
        after: int = 0,
        limit: int | None = 1000,
        tail: int | None = None,
        *,
        peek: bool = False,
        by: str | None = None,
    ) -> list[JournalEntry]:
        """What happened, oldest first (:mod:`dcplace.engine.journal`): the entries after ``after`` (a ``seq``), at
        most ``limit`` (None: all), about the VM ``vm``, the machine ``machine`` (a move away from it included), of
        kind ``event``, made for the reason ``by`` (:data:`~dcplace.engine.journal.BY`: ``reoptimisation``,
        ``evacuation``, ``reconcile``, ...); ``tail``: the newest ``tail`` of them instead; ``peek``: one more than
        ``limit`` where there is one (:meth:`journal_page` pages with it). Committed entries only; an engine without
        a database keeps none (InputError)."""
        reading = getattr(self.store, "reading", None)
        if reading is None:
            raise InputError("this engine keeps no journal: it has no database, or its store keeps none "
                             "(PlacementEngine.open keeps one)", field="db")  # fmt: skip
        query = JournalQuery(vm, machine, event, after, limit, tail, peek, by)
        self.check_store()
        with reading() as conn:
            return query_journal(conn, query)

    def journal_page(
        self,
        vm: str | None = None,
        machine: str | None = None,
        event: str | None = None,
        after: int = 0,
        limit: int = 1000,
        tail: int | None = None,
        *,
        by: str | None = None,
    ) -> tuple[list[JournalEntry], int | None]:
        """:meth:`journal` as pages: the entries, and the ``after`` of the next page (None: nothing more now)."""
        if tail is not None:
            return self.journal(vm, machine, event, after, tail=tail, by=by), None
        return paged(self.journal(vm, machine, event, after, limit, peek=True, by=by), limit)

    # -- durability -----------------------------------------------------------------------------------------
    def _journals(self) -> bool:
        """Whether the store keeps a journal now (a store without the setting: it is given every change)."""
        return self.store is not None and getattr(self.store, "journal_keep", 1) > 0

    def _commit(self, changes: list[Change], by: str | None = None) -> int:
        """Queue one operation's changes; ``by``: why, where it was not a client's own call (the journal's VM
        entries say it)."""
        if by is not None:  # rows made with it already (an import's thousands) are not copied again
            changes = [replace(c, by=by) if isinstance(c, VmRow | VmDelete) and c.by != by else c for c in changes]
        if self.store is None:
            return 0
        try:
            return self.store.submit(changes)
        except BaseException as e:  # memory holds changes the store did not take: nothing more may be answered
            if changes:
                self._diverged = StoreError(f"the engine holds changes its database did not take ({e}); restart it, "
                                            "which reloads exactly what is durable", str(e))  # fmt: skip
            raise

    def _wait(self, ticket: int) -> None:
        if self.store is not None and ticket:
            self.store.wait(ticket)

    def check_store(self) -> None:
        """Raise :class:`~dcplace.engine.store.StoreError` once the database has failed (no store: never): writes,
        and the service's reads, stop there, since memory may then hold a change that never committed."""
        if self._diverged is not None:
            raise StoreError(str(self._diverged), self._diverged.reason)
        if self.store is not None:
            self.store.check()

    # -- lookups --------------------------------------------------------------------------------------------
    def _machine_slot(self, machine_id: str) -> int:
        slot = self.state.slot_of_machine.get(machine_id)
        if slot is None:
            raise NotFound(f"no machine {machine_id!r} is registered", field="machine")
        return slot

    def _vm_slot(self, vm_id: str) -> int:
        v = self.state.slot_of_vm.get(vm_id)
        if v is None:
            raise NotFound(f"no VM {vm_id!r} is placed", field="vm")
        return v

    def _capacity(self, cpu: float | Iterable[float], mem: float | Iterable[float]) -> npt.NDArray[np.float64]:
        cap = np.zeros((self.numa, 2))
        for r, (name, value) in enumerate((("cpu", cpu), ("mem", mem))):
            values = list(value) if isinstance(value, Iterable) and not isinstance(value, str) else [value] * self.numa
            if len(values) != self.numa:
                raise InputError(f"must give one value per NUMA node ({self.numa}), got {len(values)}", field=name)
            cap[:, r] = [_positive(x, name) for x in values]
        return cap

    def _machine_row(self, slot: int) -> MachineRow:
        s = self.state
        return MachineRow(
            s.machine_ids[slot], slot, s.rack[slot], STATUS_NAMES[int(s.status[slot])], s.cap[slot].tolist()
        )

    # -- machines -------------------------------------------------------------------------------------------
    def add_machine(
        self, machine_id: str, cpu: float | Iterable[float], mem: float | Iterable[float], rack: str | None = None
    ) -> MachineInfo:
        """Register a machine with ``cpu`` cores and ``mem`` GB per NUMA node (a number for every node, or a list
        with one value per node), active."""
        check_id(machine_id, "id")
        cap = self._capacity(cpu, mem)
        if rack is not None:
            check_id(rack, "rack")
        with self.lock:
            self.check_store()
            if machine_id in self.state.slot_of_machine:
                raise Conflict(f"a machine {machine_id!r} is already registered", field="id")
            slot = self.state.free_machine_slot()
            if slot >= MAX_SLOTS:  # what a database may hold (open refuses more)
                raise Conflict(f"the cluster holds at most {MAX_SLOTS:,} machines", field="id")
            self.state.add_machine(machine_id, cap, rack, slot)
            ticket = self._commit([self._machine_row(slot)])
            info = self._info(slot)
        self._wait(ticket)
        self._log.info("machine %r registered: %s cores, %s GB per NUMA node", machine_id, info.cpu, info.mem)
        return info

    def add_machines(
        self,
        machines: Sequence[MachineSpec],
        mark: str | None = None,
        source: str | None = None,
        lines: Sequence[int] | None = None,
    ) -> tuple[list[MachineInfo], int]:
        """Register several machines with one commit (one fsync: 10,000 machines one request each took 27 s over
        HTTP), all or nothing: every machine is checked before any is added, and an error names the machine: its
        line in ``source`` (``lines``: each machine's, as :func:`read_machines_at` gives for a CSV file), its index
        there, or without a source its index in the batch (``machines[3]``). A machine already registered exactly
        so (same capacity per node, same rack) is skipped, so a retried batch changes nothing; the same id with
        another shape is a conflict. ``mark``: a note committed with the machines (:meth:`imported_before`;
        ``serve --machines`` marks each file by its hash, so a restart does not bring back machines removed since).
        Returns the machines added, active, and the number skipped."""
        name = "" if source is not None else "machines"
        wanted: list[tuple[str, npt.NDArray[np.float64], str | None]] = []
        seen: set[str] = set()
        for i, m in enumerate(machines):
            try:
                if not isinstance(m, MachineSpec):
                    raise InputError(f"must be a MachineSpec, got {type(m).__name__}")
                mid = check_id(m.id, "id")
                cap = self._capacity(m.cpu, m.mem)
                rack = None if m.rack is None else check_id(m.rack, "rack")
                if mid in seen:
                    raise Conflict(f"the batch names machine {mid!r} twice", field="id")
            except InputError as e:  # named by its place in the batch
                raise type(e)(e.detail, **_where(i, e.field, source, lines, name)) from None
            seen.add(mid)
            wanted.append((mid, cap, rack))
        with self.lock:
            self.check_store()
            s = self.state
            new = []
            for i, (mid, cap, rack) in enumerate(wanted):
                slot = s.slot_of_machine.get(mid)
                if slot is None:
                    new.append((mid, cap, rack))
                elif not (np.array_equal(s.cap[slot], cap) and s.rack[slot] == rack):
                    raise Conflict(f"a machine {mid!r} is already registered with another capacity or rack",
                                   **_where(i, "id", source, lines, name))  # fmt: skip
            if np.count_nonzero(s.status != ABSENT) + len(new) > MAX_SLOTS:
                raise Conflict(f"the cluster holds at most {MAX_SLOTS:,} machines", field="id")
            slots = s.free_machine_slots(len(new))  # one scan of the slots, not one per machine
            for (mid, cap, rack), slot in zip(new, slots, strict=True):
                s.add_machine(mid, cap, rack, slot)
            changes: list[Change] = [self._machine_row(k) for k in slots]
            if mark is not None:
                changes.append(MetaSet(mark, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())))
            ticket = self._commit(changes) if changes else 0
            infos = [self._info(k) for k in slots]
        self._wait(ticket)
        if infos:
            self._log.info("%d machine(s) registered in one batch (%d already were)", len(infos),
                           len(wanted) - len(infos))  # fmt: skip
        return infos, len(wanted) - len(infos)

    def _set_status(self, machine_id: str, status: int) -> MachineInfo:
        with self.lock:
            self.check_store()
            slot = self._machine_slot(machine_id)
            self.state.set_status(slot, status)
            ticket = self._commit([MachineStatus(machine_id, STATUS_NAMES[status])])
            info = self._info(slot)
        self._wait(ticket)
        self._log.info("machine %r %s", machine_id, {DRAINED: "drained", ACTIVE: "activated"}.get(status, info.status))
        return info

    def drain(self, machine_id: str) -> MachineInfo:
        """No new VMs on the machine; those it hosts stay."""
        return self._set_status(machine_id, DRAINED)

    def activate(self, machine_id: str) -> MachineInfo:
        """Undo a drain or a failure: the machine receives VMs again."""
        return self._set_status(machine_id, ACTIVE)

    def fail(self, machine_id: str, policy: str | NumaPolicy | None = None) -> FailReport:
        """The machine failed: it receives nothing, and its VMs are placed again through the policy, largest first
        (cores, then GB; ties by id); the ones that fit nowhere are dropped and reported. The order was the ledger's
        slots, which depend on the history of releases and which a restart lays out anew: the same failure on the
        same state re-homed VMs differently after a restart. Largest first is also first-fit decreasing's order,
        which drops fewer."""
        with self.lock:
            self.check_store()
            slot = self._machine_slot(machine_id)
            pol = self.policy(policy)
            kept = self._saved()  # a policy that raises half-way must not leave half a failure behind
            s = self.state
            try:
                s.set_status(slot, FAILED)
                changes: list[Change] = [MachineStatus(machine_id, "failed")]
                report = FailReport(machine_id)
                for v in sorted(s.vms_on(slot), key=lambda v: (-s.demand[v, 0], -s.demand[v, 1], s.vm_ids[v])):
                    rec = s.record(v)
                    s.release(v)
                    req = VmRequest(rec.id, rec.cpu, rec.mem, rec.multi)
                    decision = self._decide_and_place(pol, req, explain=True)
                    if isinstance(decision, Placement):
                        report.replaced.append(decision)
                        changes.append(self._vm_row(s.slot_of_vm[rec.id]))  # its pin, uid, last move kept
                    else:
                        report.dropped.append(decision)
                        changes.append(VmDelete(rec.id, "dropped"))
            except BaseException:
                self._restore(kept)
                raise
            # the policy counted these as new placements and rejections: they are moves and losses
            self.counters = kept[1]  # the counters before
            self.counters["migrated"] += len(report.replaced)
            self.counters["dropped"] += len(report.dropped)
            for r in report.dropped:
                self._forget(r.vm)
            ticket = self._commit(changes, by="failure")
        self._wait(ticket)
        (self._log.warning if report.dropped else self._log.info)(
            "machine %r failed: %d VM(s) placed again, %d dropped (they fit nowhere else)", machine_id,
            len(report.replaced), len(report.dropped))  # fmt: skip
        return report

    def change_machine(
        self,
        machine_id: str,
        cpu: float | Iterable[float] | None = None,
        mem: float | Iterable[float] | None = None,
        rack: str | _Unchanged | None = _UNCHANGED,
    ) -> MachineInfo:
        """Give a registered machine another capacity per NUMA node (``cpu``, ``mem``: a number for every node or
        one each; None keeps it) or rack (None: none; left out: as it is), also while it hosts VMs: a machine
        replaced by a bigger one, memory added, a machine moved to another rack. Every node must keep at least what
        its VMs take (a Conflict naming the node otherwise). Journalled as ``machine-changed`` (with what it was,
        so a rewind puts it back). Durable on return."""
        if rack is not None and not isinstance(rack, _Unchanged):
            check_id(rack, "rack")
        with self.lock:
            self.check_store()
            s = self.state
            slot = self._machine_slot(machine_id)
            old = s.cap[slot]
            cap = self._capacity(old[:, 0] if cpu is None else cpu, old[:, 1] if mem is None else mem)
            new_rack = s.rack[slot] if isinstance(rack, _Unchanged) else rack
            used = old - s.free[slot]
            short = np.argwhere(cap < used - numa_kernel.FIT_TOL)
            if len(short):
                k, r = (int(x) for x in short[0])
                what = ("cores", "GB")[r]
                raise Conflict(f"machine {machine_id!r} node {k} holds {used[k, r]:g} {what} of VMs, more than the "
                               f"{cap[k, r]:g} asked for: move some away first",
                               field="cpu" if r == 0 else "mem")  # fmt: skip
            if np.array_equal(cap, old) and new_rack == s.rack[slot]:
                ticket = self._commit([])  # as it is: durable once everything before it is
            else:
                s.change_machine(slot, cap, new_rack)
                ticket = self._commit([MachineChange(machine_id, new_rack, cap.tolist())])
            info = self._info(slot)
        self._wait(ticket)
        self._log.info("machine %r changed: %s cores, %s GB per NUMA node, rack %s", machine_id, info.cpu, info.mem,
                       info.rack)  # fmt: skip
        return info

    def remove_machine(self, machine_id: str) -> None:
        """Unregister an empty machine."""
        with self.lock:
            self.check_store()
            slot = self._machine_slot(machine_id)
            n = int(self.state.vm_count[slot])
            if n:
                raise Conflict(
                    f"machine {machine_id!r} still hosts {n} VMs; release them or fail the machine first",
                    field="machine",
                )
            self.state.remove_machine(slot)
            ticket = self._commit([MachineDelete(machine_id)])
        self._wait(ticket)
        self._log.info("machine %r removed", machine_id)

    # -- VMs ------------------------------------------------------------------------------------------------
    def _validate(self, request: VmRequest) -> VmRequest:
        cpu, mem, vid = request.cpu, request.mem, request.id
        if (
            type(cpu) is float
            and type(mem) is float
            and type(vid) is str
            and type(request.multi) is bool
            and type(request.pinned) is bool
            and MIN_AMOUNT <= cpu <= MAX_AMOUNT
            and MIN_AMOUNT <= mem <= MAX_AMOUNT
            and _id_ok(vid)
            and (request.uid is None or _id_ok(request.uid))
        ):
            return request  # the common case, checked without building anything
        return VmRequest(
            check_id(request.id, "id"),
            _positive(request.cpu, "cpu"),
            _positive(request.mem, "mem"),
            _flag(request.multi, "multi"),
            _flag(request.pinned, "pinned"),
            None if request.uid is None else check_id(request.uid, "uid"),
        )

    def place(self, request: VmRequest, policy: str | NumaPolicy | None = None, explain: bool = True) -> Decision:
        """Place ``request`` with ``policy`` (default: the engine's): a :class:`Placement`, durable on return, or a
        :class:`Rejection` (nothing changed). ``explain``: attach an :class:`Explanation` (a rejection always has
        one). A VM already placed with this size and span (a retry) gets its placement back, ``replayed`` and
        without an explanation (:meth:`explanation` keeps the first one's); another size or span under a placed id
        is a :class:`Conflict` (:meth:`_replay`)."""
        request = self._validate(request)
        with self.lock:
            ticket = self._place_locked(request, policy, explain)
            decision = self._last
        self._wait(ticket)
        return decision

    async def place_async(
        self, request: VmRequest, policy: str | NumaPolicy | None = None, explain: bool = True
    ) -> Decision:
        """:meth:`place` for an event loop: decides at once, awaits durability without blocking the loop."""
        request = self._validate(request)

        named = policy is None or isinstance(policy, str)  # a policy object: always in a worker thread, as before
        key = policy if isinstance(policy, str) else None

        def step() -> tuple[int, Decision]:
            t0 = time.perf_counter()
            out = self._place_locked(request, policy, explain), self._last
            if named and not (isinstance(out[1], Placement) and out[1].replayed):  # a replay decides nothing, and
                self._decision_s[key] = time.perf_counter() - t0  # never builds the policy: it says nothing of it
            return out

        # a policy's first decision builds it and compiles its code (3-25 s for a learned one), and a slow policy
        # (a user's, a network on many machines) decides for as long each time: neither on the loop
        last = self._decision_s.get(key) if named else None
        inline = (policy is None or last is not None) and (last is None or last <= self.slow_s)
        ticket, decision = await self._locked_async(step, inline)
        if self.store is not None and ticket:
            await self.store.wait_async(ticket)
        return decision

    async def _locked_async(self, step: Callable[[], _T], inline: bool = True) -> _T:
        """``step()`` under the engine's lock, for an event loop: at once when ``inline`` and the lock is free (the
        common case, no thread hop), else in a worker thread. Taking it on the loop while a long call held it (an
        integer-programming re-optimisation, a large batch) stalled the loop itself: reads, health checks and
        metrics waited seconds behind one placement. ``inline=False`` for work that may itself take long. The
        order in which waiting calls get the lock is not their arrival order."""
        if inline and self.lock.acquire(blocking=False):
            try:
                return step()
            finally:
                self.lock.release()

        def locked() -> _T:
            with self.lock:
                return step()

        return await asyncio.to_thread(locked)

    def _replay(self, request: VmRequest) -> Placement:
        """A request for a VM already placed: a retry (the same size and NUMA span) gets the VM's placement as it is
        now (re-optimisation may have moved it), a different request under the same id is a :class:`Conflict`. A
        client whose answer was lost (a timeout, a dropped connection) cannot tell whether its VM was placed; a
        retry now says, where it was a 409 that read like a refusal. The pin is not compared: an operator may have
        pinned or unpinned the VM since, and a 409 then would have a client place it again under a new id (its pin
        stays as it is now, as :meth:`bind`'s retries leave it). A request with a uid is a retry only where the VM
        was placed with that uid (:meth:`_same_incarnation`); without one, the same id and size from another VM
        (a pod recreated under its old name before the old one's DELETE came) cannot be told from a retry."""
        there = self.state.record(self.state.slot_of_vm[request.id])
        self._same_incarnation(request.id, request.uid)
        if (there.cpu, there.mem, there.multi) != (request.cpu, request.mem, request.multi):
            raise Conflict(
                f"a VM {request.id!r} is already placed with {there.cpu:g} cores and {there.mem:g} GB"
                f"{' over every node' if there.multi else ''}; a retry asks for the same, another VM needs another id",
                field="id",
            )
        return Placement(request.id, there.machine, there.node, replayed=True)

    def _same_incarnation(self, vm_id: str, uid: str | None, release: bool = False) -> None:
        """A :class:`Conflict` where ``uid`` is given and the VM placed under ``vm_id`` was placed with another. A
        VM recorded without one (placed before uids existed, by a client that sent none, or imported so) is not
        checked: any uid matches it, as before uids. Refusing there left every VM of a database upgraded from
        schema 1 impossible to free with a uid-carrying DELETE, and a retry spanning the upgrade refused forever
        (a review of the change)."""
        if uid is None:
            return
        held = self.uids.get(vm_id)
        if held is not None and held != uid:
            what = (
                "this release names another VM under the same id, so nothing was freed"
                if release
                else "another VM under the same id (release the old one first; a retry sends the same uid)"
            )
            raise Conflict(f"VM {vm_id!r} was placed with uid {held!r}, not uid {uid!r}: {what}", field="uid")

    def _place_locked(self, request: VmRequest, policy: str | NumaPolicy | None, explain: bool) -> int:
        self.check_store()
        if request.id in self.state.slot_of_vm:
            self._last = self._replay(request)
            return self._commit([])  # a barrier: answered once the first placement's commit is durable
        counted = dict(self.counters)
        try:
            decision = self._decide_and_place(self.policy(policy), request, explain)
            self._last = decision
            if isinstance(decision, Rejection):
                # journalled, and answered once that is durable (as a placement): the journal holds every answer
                # given; with the journal off there is nothing to write, and the answer need not wait for a commit
                if not self._journals():
                    return 0
                return self._commit([Rejected(request.id, request.cpu, request.mem, request.multi, decision.code)])
            self._remember(request)
            return self._commit([VmRow(request.id, decision.machine, decision.node, request.cpu, request.mem,
                                       request.multi, request.pinned, request.uid)])  # fmt: skip
        except BaseException:  # a bug, or a store that refused the commit, after the ledger took the VM: undone, so
            v = self.state.slot_of_vm.get(request.id)  # memory never holds a VM that was not queued for disk
            if v is not None:
                self.state.release(v)
                self._forget(request.id)
            self._explanations.pop(request.id, None)
            self.counters = counted
            raise

    def place_batch(self, requests: list[VmRequest], policy: str | NumaPolicy | None = None) -> list[Decision]:
        """Place ``requests`` in order: the same decisions as one :meth:`place` call each (``explain=False``), under
        one lock hold and one commit. For a compiled heuristic the decisions run in one compiled loop (the
        function :meth:`place` uses, request after request); a rejection comes back with its explanation. Bulk
        admission and replays. A VM already placed with its size and span (a retried batch) is answered with its
        placement, ``replayed``; an id twice in the batch, another size or span under a placed id, or an invalid
        request fails the whole batch before anything is placed."""
        out, ticket = self._place_batch_locked(requests, policy)
        self._wait(ticket)
        return out

    async def place_batch_async(
        self, requests: list[VmRequest], policy: str | NumaPolicy | None = None
    ) -> list[Decision]:
        """:meth:`place_batch` for an event loop (awaits durability without blocking it)."""
        out, ticket = await self._locked_async(lambda: self._place_batch_locked(requests, policy), inline=False)
        if self.store is not None and ticket:
            await self.store.wait_async(ticket)
        return out

    def _place_batch_locked(
        self, requests: list[VmRequest], policy: str | NumaPolicy | None
    ) -> tuple[list[Decision], int]:
        reqs = [self._validate(r) for r in requests]
        ids = {r.id for r in reqs}
        if len(ids) != len(reqs):
            raise Conflict("the batch names a VM id twice", field="id")
        with self.lock:
            self.check_store()
            s = self.state
            replays = {r.id: self._replay(r) for r in reqs if r.id in s.slot_of_vm}  # a Conflict places nothing
            new = [r for r in reqs if r.id not in replays]
            pol = self.policy(policy)
            decided: list[Decision] = []
            if type(pol) is Heuristic and new:
                self._batch_heuristic(pol, new, decided)
            else:
                self._batch_policy(pol, new, decided)
            journals = self._journals()
            rows: list[Change] = [VmRow(d.vm, d.machine, d.node, r.cpu, r.mem, r.multi, r.pinned, r.uid)
                                  if isinstance(d, Placement) else Rejected(r.id, r.cpu, r.mem, r.multi, d.code)
                                  for d, r in zip(decided, new, strict=True)
                                  if journals or isinstance(d, Placement)]  # fmt: skip
            for d, r in zip(decided, new, strict=True):
                if isinstance(d, Placement):
                    self._remember(r)
            ticket = self._commit(rows) if rows or replays else 0  # replays only: a barrier, as for one retry
            fresh = iter(decided)
            out = [replays[r.id] if r.id in replays else next(fresh) for r in reqs]
        return out, ticket

    def _batch_policy(self, pol: NumaPolicy, reqs: list[VmRequest], out: list[Decision]) -> None:
        """One decision per request, in order; a policy that fails half-way (a user's that raises) takes back what
        the batch placed, so the batch places nothing, as promised: the placed VMs are released and the ledger's
        arrays and the counters put back exactly as they were (copies of a few arrays, not of the whole state)."""
        s = self.state
        free, used, counted = s.free.copy(), s.used.copy(), dict(self.counters)
        try:
            for r in reqs:
                out.append(self._decide_and_place(pol, r, explain=False))
        except BaseException:
            for d in reversed(out):
                if isinstance(d, Placement):
                    s.release(s.slot_of_vm[d.vm])
            s.free[:], s.used[:] = free, used
            self.counters = counted
            out.clear()
            raise

    def _batch_heuristic(self, pol: Heuristic, reqs: list[VmRequest], out: list[Decision]) -> None:
        n = len(reqs)
        cpu = np.fromiter((r.cpu for r in reqs), np.float64, n)
        mem = np.fromiter((r.mem for r in reqs), np.float64, n)
        multi = np.fromiter((r.multi for r in reqs), np.bool_, n)
        rejections: dict[int, Rejection] = {}

        def rejected(k: int) -> None:  # explained on the state it was rejected in
            r = reqs[k]
            rejections[k] = self._rejection(pol, r, np.array([r.cpu, r.mem]), -1)

        actions = self._heuristic_batch(pol, [r.id for r in reqs], cpu, mem, multi, rejected)
        ids = self.state.machine_ids
        kn = self.numa
        for k, (r, a) in enumerate(zip(reqs, actions.tolist(), strict=True)):
            out.append(rejections[k] if a < 0 else Placement(r.id, ids[a // kn], None if r.multi else a % kn))

    def _heuristic_batch(
        self,
        pol: Heuristic,
        ids: list[str],
        cpu: npt.NDArray[np.float64],
        mem: npt.NDArray[np.float64],
        multi: npt.NDArray[np.bool_],
        rejected: Any = None,
    ) -> npt.NDArray[np.int64]:
        """Decide and apply a batch with compiled heuristic ``pol`` (its index where it has one, as
        :meth:`_decide_and_place`): the actions, -1 for a rejection (``rejected(k)`` is called at once, on the state
        request ``k`` was rejected in). Ledger slots taken, counters kept; no durability here."""
        self._draws(pol)  # one compiled loop, one thread: one seed for the batch
        s = self.state
        n = len(ids)
        slots = s.reserve_slots(n)
        actions = np.full(n, -1, np.int64)
        index = pol.index() if pol.code != FIRST_FIT else None  # First-Fit's scan stops early: it stays
        types = s.place_many_types(index, cpu, mem, multi)
        w = self._weights(pol)
        i = 0
        while i < n:
            i = s.place_many_by_heuristic(pol.code, w, slots, cpu, mem, multi, i, actions, index, types)
            if actions[i - 1] < 0 and rejected is not None:
                rejected(i - 1)
        taken = actions >= 0
        s.take_slots([v for v, t in zip(ids, taken.tolist(), strict=True) if t], slots, taken)
        placed = int(taken.sum())
        self.counters["placed"] += placed
        self.counters["rejected"] += n - placed
        self.counters["rejected_no_fit"] += n - placed  # a compiled heuristic declines only where nothing fits
        return actions

    def place_arrays(
        self,
        ids: list[str],
        cpu: npt.ArrayLike,
        mem: npt.ArrayLike,
        multi: npt.ArrayLike | None = None,
        policy: str | NumaPolicy | None = None,
    ) -> BulkPlacement:
        """Bulk admission with arrays in and out: request ``i`` is VM ``ids[i]`` asking ``cpu[i]`` cores and
        ``mem[i]`` GB (per NUMA node it spans: all of them where ``multi[i]``). The decisions of one :meth:`place`
        call each, in order (``explain=False``), under one lock hold and one commit, without building a Python
        object per request: for replays and bulk admission at high rates. A compiled heuristic decides in one
        compiled loop; any other policy through :meth:`place_batch`. Rejections are marked, not explained (ask
        :meth:`explain` for one). A duplicate or invalid request fails the whole call before anything is placed."""
        n = len(ids)
        c = np.ascontiguousarray(cpu, np.float64).reshape(-1)
        m = np.ascontiguousarray(mem, np.float64).reshape(-1)
        mu = np.zeros(n, np.bool_) if multi is None else np.ascontiguousarray(multi, np.bool_).reshape(-1)
        for name, arr in (("cpu", c), ("mem", m), ("multi", mu)):
            if len(arr) != n:
                raise InputError(f"has {len(arr)} values for {n} ids", field=name)
        for name, arr in (("cpu", c), ("mem", m)):
            bad = np.flatnonzero(~(np.isfinite(arr) & (arr >= MIN_AMOUNT) & (arr <= MAX_AMOUNT)))
            if len(bad):
                raise InputError(f"must be {_AMOUNT_RULE}, got {arr[bad[0]]!r} for VM "
                                 f"{ids[bad[0]]!r}", field=name)  # fmt: skip
        for vid in ids:
            if not _id_ok(vid):
                check_id(vid, "id")
        if len(set(ids)) != n:
            raise Conflict("the batch names a VM id twice", field="id")
        pol = self.policy(policy)
        if type(pol) is not Heuristic:
            reqs = [VmRequest(i, float(x), float(y), bool(z))
                    for i, x, y, z in zip(ids, c.tolist(), m.tolist(), mu.tolist(), strict=True)]  # fmt: skip
            with self.lock:  # the slots read in the same hold as the decisions (a machine removed between: KeyError)
                self._refuse_placed(ids)  # the arrays' contract: no replays (place_batch answers those)
                out, ticket = self._place_batch_locked(reqs, policy)
                slot = {mid: k for k, mid in enumerate(self.state.machine_ids)}
                actions = np.array([slot[d.machine] * self.numa + (d.node or 0) if isinstance(d, Placement) else -1
                                    for d in out], np.int64)  # fmt: skip
                names = list(self.state.machine_ids)
            self._wait(ticket)
            return BulkPlacement(actions, mu, self.numa, names)
        with self.lock:
            self.check_store()
            self._refuse_placed(ids)
            actions = self._heuristic_batch(pol, ids, c, m, mu)
            ticket = 0
            if self.store is not None:
                kn = self.numa
                mids = self.state.machine_ids
                # a compiled heuristic declines only where nothing fits: its rejections are no-fit ones
                journals = self._journals()
                rows: list[Change] = [VmRow(v, mids[a // kn], None if x else a % kn, cc, mm, x, False) if a >= 0
                                      else Rejected(v, cc, mm, x, "no-fit")
                                      for v, a, cc, mm, x in zip(ids, actions.tolist(), c.tolist(), m.tolist(),
                                                                 mu.tolist(), strict=True)
                                      if journals or a >= 0]  # fmt: skip
                ticket = self._commit(rows) if rows else 0
            result = BulkPlacement(actions, mu, self.numa, list(self.state.machine_ids))
        self._wait(ticket)
        return result

    def _refuse_placed(self, ids: list[str]) -> None:
        taken = self.state.slot_of_vm.keys() & set(ids)
        if taken:
            raise Conflict(f"a VM {sorted(taken)[0]!r} is already placed", field="id")

    def _draws(self, pol: NumaPolicy, dry: bool = False) -> None:
        """Before a compiled policy that draws decides: seed the compiled generator (the process's, per thread) from
        this engine's own stream, so the engine's decisions depend on its seed alone. ``dry``: for a dry run
        (:meth:`explain`), from a stream of its own, so that asking changes no later placement (an explanation
        drew from whatever the process had drawn before: two engines built alike explained differently)."""
        if type(pol) is Heuristic and pol.code == RANDOM:
            numa_kernel.seed_rng(int((self._dry_rng if dry else self._rng).integers(0, 2**31 - 1)))

    def _decide_and_place(self, pol: NumaPolicy, req: VmRequest, explain: bool) -> Decision:
        """Decide with ``pol`` and apply (no durability here); counts and keeps explanations."""
        self._draws(pol)
        s = self.state
        kn = self.numa
        if not explain and type(pol) is Heuristic:
            # The fast path: the compiled function Heuristic.choose calls, then the kernel's place, in one call.
            index = pol.index() if pol.code != FIRST_FIT else None  # First-Fit's scan stops early: it stays
            action = s.place_by_heuristic(req.id, pol.code, self._weights(pol), req.cpu, req.mem, req.multi, index)
            if action < 0:
                return self._rejected(pol, req, np.array([req.cpu, req.mem]), action)
            self.counters["placed"] += 1
            return Placement(req.id, s.machine_ids[action // kn], None if req.multi else action % kn)
        d = np.array([req.cpu, req.mem])
        if isinstance(pol, Heuristic):  # the compiled function Heuristic.choose calls, without building a view
            action = int(
                heuristic_choose(pol.code, self._weights(pol), s.free, s.cap, s.vm_count, s.usable, d, req.multi,
                                 s.active)
            )  # fmt: skip
        else:
            action = as_action(pol, decide(pol, s.view(req.cpu, req.mem, req.multi)))
        m = action // kn if action >= 0 else -1
        ok = 0 <= m < s.active and bool(s.usable[m]) and s.fits(m, action % kn, req.cpu, req.mem, req.multi)
        if not ok:
            return self._rejected(pol, req, d, action)
        expl = self._explain(pol, req, d, action) if explain else None
        s.place(req.id, s.vm_slot(), req.cpu, req.mem, req.multi, action)
        self.counters["placed"] += 1
        if expl is not None:
            self._explanations[req.id] = expl
            if len(self._explanations) > self._keep:
                self._explanations.popitem(last=False)
        return Placement(req.id, s.machine_ids[m], None if req.multi else action % kn, expl)

    @staticmethod
    def _weights(pol: Heuristic) -> npt.NDArray[np.float64]:
        """The heuristic's weight array (built once by the policy object)."""
        return pol._w()

    def _ranked(self, pol: NumaPolicy, req: VmRequest, n: int) -> list[tuple[int, tuple[float, ...]]]:
        """``pol.rank``: its candidates that are actions on this cluster (a user's policy may rank others)."""
        s = self.state
        acts = ranked(pol, s.view(req.cpu, req.mem, req.multi), n)
        return [(a, sc) for a, sc in acts if 0 <= a < s.active * self.numa]

    def _candidate(self, action: int, score: tuple[float, ...] = ()) -> Candidate:
        kn = self.numa
        return Candidate(self.state.machine_ids[action // kn], action % kn, score)

    def _explain(self, pol: NumaPolicy, req: VmRequest, d: npt.NDArray[np.float64], action: int) -> Explanation:
        s = self.state
        feasible, infeasible = counts_dict(reason_counts(s.free, s.status, d, req.multi, s.active))
        machines = len(s.slot_of_machine)
        cands = [self._candidate(a, sc) for a, sc in self._ranked(pol, req, self.top)]
        if req.multi:
            cands = [Candidate(c.machine, None, c.score) for c in cands]
        if action < 0:
            chosen = None
            if feasible == 0:
                summary = rejection_sentence(req.cpu, req.mem, req.multi, machines, infeasible)
            elif action == -1:
                summary = f"the policy {pol.name} declined the VM although {feasible} machines could host it"
            else:
                summary = f"the policy {pol.name} chose an action that cannot host the VM"
        else:
            score = next((c.score for c in cands if c.machine == s.machine_ids[action // self.numa]), ())
            chosen = self._candidate(action, score)
            if req.multi:
                chosen = Candidate(chosen.machine, None, score)
            summary = f"{pol.name} chose machine {chosen.machine} among {feasible} feasible of {machines} machines"
        return Explanation(pol.name, machines, feasible, infeasible, cands, chosen, summary)

    def _rejection(self, pol: NumaPolicy, req: VmRequest, d: npt.NDArray[np.float64], action: int) -> Rejection:
        expl = self._explain(pol, req, d, -1 if action == -1 else -2)
        code = "no-fit" if expl.feasible == 0 else ("declined" if action == -1 else "invalid")
        return Rejection(req.id, expl.summary, code, expl)

    def _rejected(self, pol: NumaPolicy, req: VmRequest, d: npt.NDArray[np.float64], action: int) -> Rejection:
        """:meth:`_rejection`, counted (in all and by its code)."""
        r = self._rejection(pol, req, d, action)
        self.counters["rejected"] += 1
        self.counters[REJECTION_COUNTER[r.code]] += 1
        return r

    def warm_up(self) -> float:
        """Compile the default policy's code before the first request, and return the seconds it took. numba
        compiles on first use (a learned policy's first placement took 15 s on a cold cache, 0.2 s on a warm one);
        a service calls this before it answers, so no client waits for it. The work is done in a scratch engine
        with a copy of the policy and this engine's machine shapes (one 64-core, 256 GB machine while there are
        none): this engine, its policy's state and its counters are untouched. A policy that cannot act on those
        machines (one tied to a model size), or that cannot be copied, is left cold; it still works, only its first
        request is slow. Never raises."""
        t0 = time.perf_counter()
        with self.lock:
            shapes = [(m.cpu, m.mem) for m in self.machines()] or [([64.0 / self.numa] * self.numa,
                                                                     [256.0 / self.numa] * self.numa)]  # fmt: skip
        try:  # a warm-up is an optimisation: nothing it meets may stop a service from starting
            scratch = PlacementEngine(self.numa, copy.deepcopy(self.default_policy), top=self.top)
            scratch._log = _QUIET
            for k, (cpu, mem) in enumerate(shapes):
                scratch.add_machine(f"m{k}", cpu, mem)
            vcpu, vmem = min(min(c) for c, _ in shapes) / 4, min(min(m) for _, m in shapes) / 4
            # what a service does, each: numba compiles per argument type, and a read-only view (an explanation's)
            # is another type than the live state; warming only explain and place left the first POST /vms
            # compiling 12 s on the event loop and the first release 0.4 s (an overload review)
            scratch.explain(VmRequest("warm-up", vcpu, vmem))
            for multi in (False, True):
                for explain in (False, True):
                    scratch.place(VmRequest(f"warm-up-{multi}-{explain}", vcpu, vmem, multi), explain=explain)
            scratch.place_batch([VmRequest("warm-up-batch", vcpu, vmem), VmRequest("warm-up-b-m", vcpu, vmem, True)])
            for vm in list(scratch.state.slot_of_vm):
                scratch.release(vm)
        except Exception:  # a policy that cannot be copied or act on these machines stays cold
            pass
        return time.perf_counter() - t0

    def explain(self, request: VmRequest, policy: str | NumaPolicy | None = None) -> Explanation:
        """Where ``request`` would go now and why, without placing it (a dry run)."""
        request = VmRequest(request.id or "?", _positive(request.cpu, "cpu"), _positive(request.mem, "mem"),
                            _flag(request.multi, "multi"))  # fmt: skip
        with self.lock:
            pol = self.policy(policy)
            s = self.state
            d = np.array([request.cpu, request.mem])
            self._draws(pol, dry=True)
            action = as_action(pol, decide(pol, s.view(request.cpu, request.mem, request.multi)))
            kn = self.numa
            m = action // kn if action >= 0 else -1
            feasible = (
                0 <= m < s.active
                and bool(s.usable[m])
                and s.fits(m, action % kn, request.cpu, request.mem, request.multi)
            )
            return self._explain(pol, request, d, action if feasible else (-1 if action == -1 else -2))

    def assess(
        self, request: VmRequest, policy: str | NumaPolicy | None = None
    ) -> tuple[dict[str, str], list[tuple[str, int | None, tuple[float, ...]]]]:
        """Every machine's class for ``request`` (``feasible``, ``cpu``, ``mem``, ``numa``, ``drained``,
        ``failed``) and the policy's ranking of all feasible actions (machine, node, score), best first: what a
        scheduler that filters and scores (kube-scheduler's extender, Nova's weighers) asks."""
        req = VmRequest(request.id or "?", _positive(request.cpu, "cpu"), _positive(request.mem, "mem"),
                        _flag(request.multi, "multi"))  # fmt: skip
        with self.lock:
            s = self.state
            classes = machine_classes(s.free, s.status, np.array([req.cpu, req.mem]), req.multi, s.active)
            verdict = {s.machine_ids[m]: CLASS_NAMES[c] for m, c in enumerate(classes) if c >= 0}
            pol = self.policy(policy)
            ranked = self._ranked(pol, req, s.active * self.numa)
            return verdict, [
                (s.machine_ids[a // self.numa], None if req.multi else a % self.numa, sc) for a, sc in ranked
            ]

    def explanation(self, vm_id: str) -> Explanation:
        """The explanation recorded when ``vm_id`` was placed (the most recent ``keep_explanations`` are kept)."""
        with self.lock:
            expl = self._explanations.get(vm_id)
            if expl is None:
                self._vm_slot(vm_id)
                raise NotFound(f"no placement explanation of VM {vm_id!r} is kept: it was placed without one (explain "
                               "false, a batch, an import or bind), moved since (re-optimisation, evacuation), "
                               f"placed before the last {self._keep:,} kept, or placed before the engine last "
                               "started (explanations are kept in memory only)", field="vm")  # fmt: skip
            return expl

    def release(self, vm_id: str, uid: str | None = None) -> VmRecord:
        """Free what VM ``vm_id`` holds; durable on return. ``uid``: only if the VM under that id was placed with
        this uid, else a :class:`Conflict` and nothing freed (a late DELETE of a pod's old incarnation must not free
        what the new one under its name holds)."""
        with self.lock:
            ticket = self._release_locked(vm_id, uid)
            rec = self._last_release
        self._wait(ticket)
        return rec

    async def release_async(self, vm_id: str, uid: str | None = None) -> VmRecord:
        """:meth:`release` for an event loop (awaits durability without blocking it)."""
        return (await self.release_held_async(vm_id, uid))[0]

    async def release_held_async(self, vm_id: str, uid: str | None = None) -> tuple[VmRecord, bool, str | None]:
        """:meth:`release_async`, and whether the VM was pinned and its uid (which the release forgets), read in
        the same hold of the lock: what ``DELETE /vms/{id}`` answers."""

        def step() -> tuple[int, VmRecord, bool, str | None]:
            pinned, held = vm_id in self.pinned, self.uids.get(vm_id)
            return self._release_locked(vm_id, uid), self._last_release, pinned, held

        ticket, rec, pinned, held = await self._locked_async(step)
        if self.store is not None and ticket:
            await self.store.wait_async(ticket)
        return rec, pinned, held

    def _remember(self, req: VmRequest) -> None:
        """What the engine keeps beside the ledger about a VM just recorded from ``req``: its pin and its uid
        (durable with its row; :meth:`_forget` drops them)."""
        if req.pinned:
            self.pinned.add(req.id)
        if req.uid is not None:
            self.uids[req.id] = req.uid

    def _forget(self, vm_id: str) -> None:
        """What the engine keeps about a VM beside the ledger (its explanation, pin, last move), once it is gone: a
        new VM with its id starts clean."""
        self._explanations.pop(vm_id, None)
        self.pinned.discard(vm_id)
        self.uids.pop(vm_id, None)
        self.moved_at.pop(vm_id, None)

    def _release_locked(self, vm_id: str, uid: str | None = None) -> int:
        self.check_store()
        v = self._vm_slot(vm_id)
        self._same_incarnation(vm_id, None if uid is None else check_id(uid, "uid"), release=True)
        self._last_release = self.state.record(v)
        self.state.release(v)
        self._forget(vm_id)
        self.counters["released"] += 1
        return self._commit([VmDelete(vm_id)])

    def assign(self, vm_id: str, machine_id: str, node: int | None, cpu: float, mem: float) -> Placement:
        """Place VM ``vm_id`` where a scheduler decided: on ``machine_id`` at ``node`` (None: split over every
        node), as the extender's bind does; it must fit (a drained machine may hold it, a failed one hosts
        nothing). Counted as ``placed`` (an import of existing allocations counts as ``imported``)."""
        req = self._validate(VmRequest(vm_id, cpu, mem, node is None))
        with self.lock:
            self.check_store()
            changes: list[Change] = [self._assign_locked(req, machine_id, node)]
            self.counters["placed"] += 1  # the extender's bind: a placement, decided by kube-scheduler with us
            ticket = self._commit(changes, by="assign")
        self._wait(ticket)
        return Placement(vm_id, machine_id, node)

    def bind(self, request: VmRequest, machine_id: str, policy: str | NumaPolicy | None = None) -> Placement:
        """Record ``request`` on ``machine_id``, which a scheduler chose (the extender's bind), at the NUMA node
        ``policy`` ranks best there (every node for a multi-NUMA VM). Choice and record are one hold of the lock,
        so nothing comes between them (an evacuation emptied a machine, then a bind placed on it). The machine
        must be active. Idempotent: a VM already recorded on that machine with the same size is answered once its
        record is durable (a retry answered at once, before the first bind's commit, or after it had failed).
        Conflict if the VM is on another machine, there with another size (a new pod under an old name: its bind
        was answered as a retry, and 3 cores went uncounted), or does not fit; durable on return."""
        req = self._validate(request)
        with self.lock:
            self.check_store()
            s = self.state
            v = s.slot_of_vm.get(req.id)
            if v is not None:
                there = s.record(v)
                self._same_incarnation(req.id, req.uid)  # a pod recreated under its old name: not a retry
                if there.machine != machine_id:
                    raise Conflict(f"VM {req.id!r} is already placed on machine {there.machine!r}", field="vm")
                if (there.cpu, there.mem, there.multi) != (req.cpu, req.mem, req.multi):  # not a retry: a new VM
                    raise Conflict(  # under an old name (a pod recreated before the old one's DELETE came)
                        f"VM {req.id!r} is already placed on machine {machine_id!r} with {there.cpu:g} cores and "
                        f"{there.mem:g} GB{' over every node' if there.multi else ''}, not the {req.cpu:g} and "
                        f"{req.mem:g} asked for: release it first", field="vm")  # fmt: skip
                placement = Placement(req.id, machine_id, there.node)
                ticket = self._commit([])  # a barrier: durable once everything before it is, its own record too
            else:
                m = self._machine_slot(machine_id)
                if s.status[m] != ACTIVE:
                    raise Conflict(f"machine {machine_id!r} is {STATUS_NAMES[int(s.status[m])]}: it takes no new VMs",
                                   field="machine")  # fmt: skip
                _, ranked = self.assess(req, policy)
                node = next((k for mm, k, _ in ranked if mm == machine_id), -2)
                if node == -2:
                    raise Conflict(f"VM {req.id!r} ({req.cpu:g} cores, {req.mem:g} GB) does not fit on machine "
                                   f"{machine_id!r}", field="machine")  # fmt: skip
                self._assign_locked(req, machine_id, node)
                self.counters["placed"] += 1
                self._remember(req)  # the pin was written to the database only: memory and disk disagreed
                placement = Placement(req.id, machine_id, node)
                ticket = self._commit([VmRow(req.id, machine_id, node, req.cpu, req.mem, req.multi, req.pinned,
                                             req.uid)], by="bind")  # fmt: skip
        self._wait(ticket)
        return placement

    def _assign_locked(self, req: VmRequest, machine_id: str, node: int | None, by: str | None = None) -> VmRow:
        s = self.state
        if req.id in s.slot_of_vm:
            raise Conflict(f"a VM {req.id!r} is already placed", field="vm")
        m, k = self._destination(machine_id, node)
        if not s.fits(m, k, req.cpu, req.mem, req.multi):
            raise Conflict(f"VM {req.id!r} ({req.cpu:g} cores, {req.mem:g} GB) does not fit on machine "
                           f"{machine_id!r} node {'all' if node is None else node}", field="vm")  # fmt: skip
        s.place(req.id, s.vm_slot(), req.cpu, req.mem, req.multi, m * self.numa + k)
        return VmRow(req.id, machine_id, node, req.cpu, req.mem, req.multi, req.pinned, req.uid, by)

    # -- re-optimisation, migration, evacuation (module dcplace.engine.reopt) ---------------------------------
    def pin(self, vm_id: str, pinned: bool = True) -> VmRecord:
        """Pin (or unpin) VM ``vm_id``: re-optimisation never moves a pinned VM; durable on return."""
        with self.lock:
            self.check_store()
            v = self._vm_slot(vm_id)
            (self.pinned.add if pinned else self.pinned.discard)(vm_id)
            ticket = self._commit([self._vm_row(v)])
            rec = self.state.record(v)
        self._wait(ticket)
        return rec

    def reoptimise(
        self, policy: ReoptPolicy | None = None, now: float | None = None, execute: bool = True,
        trigger: str = "manual",
    ) -> ReoptReport:  # fmt: skip
        """One re-optimisation event (:mod:`dcplace.engine.reopt`): select the VMs that may move, solve the batch
        of the active machines in use with migration costs, plan verified moves within the budget and (``execute``)
        apply them, durable on return. ``now``: the caller's clock (seconds), for the cool-down and the timer.

        The engine's lock is held to take the snapshot and to apply the plan, not while the optimiser and the
        planner work on the snapshot: placements and releases go on meanwhile. Each move is applied only if what it
        was planned on still holds (:meth:`_apply_plan`); the first one that does not stops the event, and the
        report's ``applied``, ``gb_moved``, ``staging`` and ``reason`` say so. Events run one at a time (a second
        waits for the first). Not to be called with the engine's lock held: the event would keep it through the
        solve, and a second event waiting for the first would wait for that lock too."""
        pol = policy or ReoptPolicy()
        if not isinstance(pol, ReoptPolicy):  # "best-fit" was an AttributeError
            raise InputError(f"must be a ReoptPolicy, got {policy!r}", field="policy")
        now = _check_time(now, "now")
        with self._reopt_lock:
            with self.lock:
                snap, may, held = self._reopt_select(pol, now)
            report, ticket = self._reopt_solve_apply(pol, snap, may, held, now, execute, trigger, False)
        self._wait(ticket)
        if execute:
            _log_event(self._log, report, "re-optimisation")
        return report

    def _reopt_select(
        self, pol: ReoptPolicy, now: float | None
    ) -> tuple[reopt.Snapshot, npt.NDArray[np.bool_], dict[str, int]]:
        """Steps 1-2 under the engine's lock (the caller holds it): a copy of the placement, the VMs that may
        move, and how many each reason held back."""
        self.check_store()
        # moved "after" now: the clock went back; such a VM cools down from now, not for hours (a dry run does this
        # too: the step is a fact about the clock, not a change to the cluster; kept in memory until the VM's next
        # write, so a restart before then counts its cool-down from the restart)
        if now is not None:
            for vm, t in self.moved_at.items():
                if t > now:
                    self.moved_at[vm] = now
        snap = reopt.snapshot(self.state, self.pinned)
        return snap, *reopt.movable_and_held(self.state, snap, pol, self.moved_at, now)

    def _reopt_solve_apply(
        self, pol: ReoptPolicy, snap: reopt.Snapshot, may: npt.NDArray[np.bool_], held: dict[str, int],
        now: float | None, execute: bool, trigger: str, background: bool,
    ) -> tuple[ReoptReport, int]:  # fmt: skip
        """Steps 3-5: the target and the plan on the snapshot without the engine's lock, then the plan applied
        under it. The report and the ticket to wait for. ``background``: a timer or threshold event, whose
        report is kept (:attr:`last_background_report`) in the commit of its moves."""
        snap, (may,) = reopt.in_id_order(snap, may)  # the same decisions whatever the ledger's layout
        answer = reopt.consolidation_target(snap, may, pol)
        plan = plan_migrations(snap.placement, answer.target, max_moves=pol.max_moves, max_gb=pol.max_gb)
        summary = reopt.plan_summary(plan)
        with self.lock:
            self.check_store()
            s = self.state
            if execute:
                moves, changes, stopped = self._apply_plan(snap, plan, now)
                if stopped:  # what the report counts is what was done
                    summary.update(complete=False, reason=stopped, **_applied_summary(moves))
                self.counters["reoptimisations"] += 1  # a dry run changes nothing: the counters, the timer
                if now is not None:
                    self.last_reoptimisation = now
                    changes.append(MetaSet(LAST_REOPTIMISATION, repr(float(now))))
            else:
                moves, changes = self._planned(snap, plan), []
            report = ReoptReport(
                trigger=trigger, time=now, vms=snap.placement.vms, movable=int(may.sum()),
                machines_before=answer.machines_before, machines_target=answer.machines_after,
                machines_after=int(np.count_nonzero((s.vm_count[: s.active] > 0) & (s.status[: s.active] == ACTIVE))),
                bound=answer.bound, bound_proven=answer.bound_proven, migration_cost=answer.migration_cost,
                verified=bool(answer.verified and plan.verified), applied=len(moves) if execute else 0,
                solve_s=answer.solve_s, moves=moves, held=held, **summary,
            )  # fmt: skip
            if background and execute:
                self.last_background_report = report.as_dict()
                changes.append(MetaSet(LAST_BACKGROUND_REPORT, json.dumps(self.last_background_report)))
            ticket = self._commit(changes, by="reoptimisation")
        return report, ticket

    def reoptimise_if_due(self, policy: ReoptPolicy, now: float) -> ReoptReport | None:
        """Run :meth:`reoptimise` when ``policy``'s timer or threshold says it is due at ``now`` (else None). The
        check and the snapshot are one hold of the lock; the solve runs outside it and the moves under it again, as
        in :meth:`reoptimise`; the wait for the commit comes after (it was inside, so every other call waited out
        the event's fsync too)."""
        if not isinstance(policy, ReoptPolicy):
            raise InputError(f"must be a ReoptPolicy, got {policy!r}", field="policy")
        checked = _check_time(now, "now")
        if checked is None:
            raise InputError("must be a time in seconds, got None", field="now")
        now = checked
        with self._reopt_lock:
            with self.lock:
                last = self.last_reoptimisation
                if last is not None and now < last:  # the clock went back: the timer counts from now, not from then
                    self._log.warning("the clock is %.0f s before the last re-optimisation's time: the timer counts "
                                      "from now", last - now)  # fmt: skip
                    self.last_reoptimisation = now
                why = policy.due(self.state, now, self.last_reoptimisation)
                if why is None:
                    return None
                snap, may, held = self._reopt_select(policy, now)
            report, ticket = self._reopt_solve_apply(policy, snap, may, held, now, True, why, True)
        self._wait(ticket)
        _log_event(self._log, report, "re-optimisation")
        return report

    def evacuate(
        self, machine_id: str, failed: bool = False, now: float | None = None, execute: bool = True
    ) -> ReoptReport:
        """Drain (``failed=False``: its VMs live-migrate away) or fail the machine and re-home its VMs with the
        fewest moves (:func:`dcplace.placement.migration.evacuate`: free room first, moving other VMs only where
        room is too fragmented); a failed machine's VMs that fit nowhere are released and reported as dropped.
        The machine stays drained or failed. Durable on return. ``execute=False``: the same report with the moves
        planned, nothing changed (where would this machine's VMs go before it is taken out?)."""
        if execute:  # its commit is waited for without the lock (inside)
            return self._evacuate(machine_id, failed, now, execute)
        with self.lock, self._dry_runs_end():  # a dry run's live objects back under the same hold of the lock
            return self._evacuate(machine_id, failed, now, execute)

    def _evacuate(
        self, machine_id: str, failed: bool = False, now: float | None = None, execute: bool = True
    ) -> ReoptReport:
        """The body of :meth:`evacuate`."""
        now = _check_time(now, "now")
        with self.lock:
            self.check_store()
            s = self.state
            slot = self._machine_slot(machine_id)
            if not failed:
                stuck = [s.vm_ids[v] for v in s.vms_on(slot) if s.vm_ids[v] in self.pinned]
                if stuck:
                    raise Conflict(f"VM {stuck[0]!r} on machine {machine_id!r} is pinned; unpin it before draining",
                                   field="machine")  # fmt: skip
            kept = self._saved(dry=not execute)
            s = self.state
            try:
                snap, _ = reopt.in_id_order(reopt.snapshot(s, self.pinned))  # decisions independent of the ledger
                before = s.machines_in_use
                ev = evacuate_machines(snap.placement, [slot], failed=failed)
                s.set_status(slot, FAILED if failed else DRAINED)
                snap = replace(snap, placement=ev.state)
                moves, changes, stopped = self._apply_plan(snap, ev.plan, now)
                if stopped:  # the lock is held throughout: a plan that stops here is a bug, and nothing is kept
                    raise RuntimeError(f"evacuating machine {machine_id!r}: {stopped}")
                dropped: list[str] = []
                if failed:
                    for i in ev.unplaced:
                        dropped.append(snap.vm_ids[i])
                        s.release(s.slot_of_vm[dropped[-1]])
                        changes.append(VmDelete(dropped[-1], "dropped"))
            except BaseException:
                self._restore(kept)
                raise
            for vm_id in dropped:
                self._forget(vm_id)
            self.counters["dropped"] += len(dropped)
            changes.insert(0, MachineStatus(machine_id, STATUS_NAMES[int(s.status[slot])]))
            after = s.machines_in_use
            summary = reopt.plan_summary(ev.plan)
            left = [] if failed else [s.vm_ids[v] for v in s.vms_on(slot)]
            if left:  # a drain whose VMs fit nowhere else: they stay on the drained machine, and the report says so
                named = ", ".join(left[:5]) + (f" and {len(left) - 5} more" if len(left) > 5 else "")
                summary.update(complete=False, reason=f"{len(left)} VM(s) fit nowhere else and stay on the drained "
                                                      f"machine {machine_id!r}: {named}")  # fmt: skip
            report = ReoptReport(
                trigger="failure" if failed else "drain", time=now, vms=snap.placement.vms,
                movable=len(ev.evacuated) + len(ev.evicted), machines_before=before, machines_target=after,
                machines_after=after, bound=None, bound_proven=False, migration_cost=0.0,
                verified=bool(ev.plan.verified), applied=len(moves) if execute else 0, solve_s=0.0,
                moves=moves, dropped=tuple(dropped), **summary,
            )  # fmt: skip
            if not execute:
                self._restore(kept)
                return report
            ticket = self._commit(changes, by="failure" if failed else "evacuation")
        self._wait(ticket)
        _log_event(self._log, report, f"machine {machine_id!r} evacuated")
        return report

    def _planned(self, snap: reopt.Snapshot, plan: MigrationPlan) -> tuple[reopt.MoveRecord, ...]:
        """``plan``'s moves as records, not applied (a dry run's answer: what executing it would do, in order, each
        from where the move before left the VM), in the snapshot's ids."""
        cp = snap.placement
        out = []
        for mv in plan.moves:
            src = "" if mv.src_machine < 0 else snap.machine_ids[mv.src_machine]
            rec = VmRecord(snap.vm_ids[mv.vm], src, None if mv.src_node < 0 else mv.src_node,
                           float(cp.demand[mv.vm, 0]), float(cp.demand[mv.vm, 1]), bool(cp.multi[mv.vm]))  # fmt: skip
            out.append(_move_record(rec, mv, snap.machine_ids[mv.dst_machine]))
        return tuple(out)

    def _stale(self, snap: reopt.Snapshot, mv: Move) -> str | None:
        """Why ``mv`` no longer applies to the live state (None: it does). A plan made on ``snap`` without the
        engine's lock (:meth:`reoptimise`) meets a state that placements, releases, pins and machine changes may
        have moved on: the VM must still exist, be where the move starts, have the size it was planned with and not
        have been pinned since; the destination slot must still be the same machine, and active."""
        s = self.state
        vm_id = snap.vm_ids[mv.vm]
        v = s.slot_of_vm.get(vm_id)
        if v is None:
            return f"VM {vm_id!r} was released after the plan was made"
        if vm_id in self.pinned and not snap.pinned[mv.vm]:
            return f"VM {vm_id!r} was pinned after the plan was made"
        if mv.src_machine >= 0:
            node = -1 if s.multi[v] else int(s.node_of[v])
            if s.machine_ids[int(s.pm_of[v])] != snap.machine_ids[mv.src_machine] or node != mv.src_node:
                return f"VM {vm_id!r} moved after the plan was made"
        if not np.array_equal(s.demand[v], snap.placement.demand[mv.vm]):
            return f"VM {vm_id!r} changed size after the plan was made"
        dst = mv.dst_machine
        if dst >= s.active or s.machine_ids[dst] != snap.machine_ids[dst] or s.status[dst] != ACTIVE:
            return f"machine {snap.machine_ids[dst]!r} is no longer active as it was when the plan was made"
        return None

    def _apply_plan(
        self, snap: reopt.Snapshot, plan: MigrationPlan, now: float | None
    ) -> tuple[tuple[reopt.MoveRecord, ...], list[Change], str]:
        """Apply ``plan``'s moves in order through the kernel's transitions (release at the source, place at the
        destination). The planner guarantees room on the snapshot; the live state is checked again move by move,
        and the first move that is stale (:meth:`_stale`) or does not fit stops the execution: the moves before it
        stay (every prefix of a plan is safe), and the third value says why it stopped ("" when it did not)."""
        s = self.state
        kn = self.numa
        done: list[reopt.MoveRecord] = []
        changes: list[Change] = []
        stopped = ""
        for mv in plan.moves:
            why = self._stale(snap, mv)
            if why is not None:
                stopped = f"stopped after {len(done)} of {plan.n_moves} moves: {why}"
                break
            v = s.slot_of_vm[snap.vm_ids[mv.vm]]
            rec = s.record(v)
            node = max(mv.dst_node, 0)
            s.release(v)
            if not s.fits(mv.dst_machine, node, rec.cpu, rec.mem, rec.multi):
                k = 0 if rec.node is None else rec.node
                s.place(rec.id, s.vm_slot(), rec.cpu, rec.mem, rec.multi, s.slot_of_machine[rec.machine] * kn + k)
                stopped = (f"stopped after {len(done)} of {plan.n_moves} moves: VM {rec.id!r} no longer fits on "
                           f"machine {s.machine_ids[mv.dst_machine]!r}")  # fmt: skip
                break
            s.place(rec.id, s.vm_slot(), rec.cpu, rec.mem, rec.multi, mv.dst_machine * kn + node)
            self._explanations.pop(rec.id, None)  # it explained a machine the VM has left (GET said "chose ex1")
            done.append(_move_record(rec, mv, s.machine_ids[mv.dst_machine]))
            if now is not None and not mv.staging:
                self.moved_at[rec.id] = now
            changes.append(self._vm_row(s.slot_of_vm[rec.id]))
        self.counters["migrated"] += len(done)
        return tuple(done), changes, stopped

    # -- reading --------------------------------------------------------------------------------------------
    def _info(self, slot: int) -> MachineInfo:
        s = self.state
        return MachineInfo(
            s.machine_ids[slot], STATUS_NAMES[int(s.status[slot])], s.rack[slot],
            s.cap[slot, :, 0].tolist(), s.cap[slot, :, 1].tolist(), s.free[slot, :, 0].tolist(),
            s.free[slot, :, 1].tolist(), int(s.vm_count[slot]),
        )  # fmt: skip

    def machine(self, machine_id: str) -> MachineInfo:
        with self.lock:
            return self._info(self._machine_slot(machine_id))

    def machines(self) -> list[MachineInfo]:
        """Every machine, in slot order (the order policies see)."""
        with self.lock:
            return [self._info(int(m)) for m in np.flatnonzero(self.state.status != ABSENT)]

    def vm(self, vm_id: str) -> VmRecord:
        """Where VM ``vm_id`` runs and what it takes (:class:`NotFound` when there is no such VM)."""
        with self.lock:
            return self.state.record(self._vm_slot(vm_id))

    def vms(self, machine: str | None = None) -> list[VmRecord]:
        """Every placed VM (``machine``: those on that machine), in ledger order."""
        return self.vm_page(machine=machine).vms

    def vm_page(self, limit: int | None = None, after: int = -1, machine: str | None = None) -> VmPage:
        """At most ``limit`` placed VMs (None: all) from ledger slot ``after + 1`` on, in ledger order
        (``machine``: only those on that machine), whether each is pinned, and the cursor of the next page (None:
        no more). Only the arrays are copied under the engine's lock; the records are built after it, so listing a
        million VMs no longer holds every placement for the 10-25 s it took to build them. A walk over pages is
        not a snapshot: a VM placed meanwhile into a slot already passed is not listed
        (:meth:`snapshot` is one)."""
        return self.vm_listing(limit, after, machine).page()

    def vm_listing(self, limit: int | None = None, after: int = -1, machine: str | None = None) -> VmListing:
        """:meth:`vm_page`'s VMs as columns copied under the lock, their records not built yet (:class:`VmListing`:
        all at once, or a chunk at a time as a service sends them)."""
        _check_page(limit, after)
        with self.lock:
            return self._vm_columns(limit, after, machine)

    async def vm_listing_async(self, limit: int | None = None, after: int = -1,
                               machine: str | None = None) -> VmListing:  # fmt: skip
        """:meth:`vm_listing` for an event loop: the copy at once when the lock is free, else in a worker thread."""
        _check_page(limit, after)
        return await self._locked_async(lambda: self._vm_columns(limit, after, machine))

    def _vm_columns(self, limit: int | None, after: int, machine: str | None) -> VmListing:
        """:meth:`vm_listing`'s copy of the ledger (the caller holds the lock)."""
        s = self.state
        start = min(after + 1, len(s.pm_of))  # a cursor past the ledger: an empty page (int64 overflowed at 2**63)
        placed = s.pm_of[start:] >= 0
        if machine is not None:
            placed &= s.pm_of[start:] == self._machine_slot(machine)
        idx = np.flatnonzero(placed) + start
        more = limit is not None and len(idx) > limit
        idx = idx[:limit]
        slots = idx.tolist()
        ids = [s.vm_ids[v] for v in slots]
        uids = [self.uids.get(i) for i in ids] if self.uids else None
        return VmListing(
            ids, s.pm_of[idx], s.node_of[idx], s.demand[idx], s.multi[idx],
            list(s.machine_ids), set(self.pinned) if self.pinned else None, uids, slots[-1] if more else None,
        )  # fmt: skip

    def stats(self, wait_s: float | None = None) -> dict[str, Any]:
        """Cluster totals: machines by status, VMs, CPU / memory capacity (every registered machine: active,
        drained or failed) and allocation, and the :attr:`counters`. ``wait_s``: wait at most that long for the
        engine's lock, then read without it (a number may be caught mid-change): what a Prometheus scrape uses, so
        that it never waits behind a long call holding the lock."""
        got = self.lock.acquire(timeout=-1 if wait_s is None else wait_s)
        try:
            s, counters = (self.state, self.counters) if got else self._shown()
            active = s.active  # read once: without the lock a machine added between two reads misaligned them
            st = s.status[:active]
            present = st != ABSENT
            cap = s.cap[:active][present].sum(axis=(0, 1))
            return {
                "machines": {name: int(np.sum(st == code)) for code, name in STATUS_NAMES.items() if code != ABSENT},
                "machines_in_use": s.machines_in_use,
                "vms": len(s.slot_of_vm),
                "capacity": {"cpu": float(cap[0]), "mem": float(cap[1])},
                "allocated": {"cpu": float(s.used[0]), "mem": float(s.used[1])},
                "counters": dict(counters),
            }
        finally:
            if got:
                self.lock.release()

    def _shown(self) -> tuple[ClusterState, dict[str, int]]:
        """The ledger and counters a reader without the lock sees: the live ones, also while a dry run works on
        copies of them (:meth:`_saved`)."""
        live = self._live
        return (live[0], live[1]) if live is not None else (self.state, self.counters)

    def health(self) -> dict[str, int]:
        """Machines registered and VMs placed, read without the engine's lock (so a probe never waits behind a long
        call holding it, such as a re-optimisation event); raises :class:`StoreError` once the database failed."""
        self.check_store()
        s = self._shown()[0]
        return {"machines": int(np.count_nonzero(s.status[: s.active] != ABSENT)), "vms": len(s.slot_of_vm)}

    def check_invariants(self) -> None:
        """Raise AssertionError if the state and the ledger disagree (:meth:`ClusterState.check_invariants`), or
        the counters do not account for the VMs there are (:attr:`counters`)."""
        with self.lock:
            self.state.check_invariants()
            c = self.counters
            vms = len(self.state.slot_of_vm)
            assert vms == self._loaded + c["placed"] + c["imported"] - c["released"] - c["dropped"], (vms, c)
            assert c["rejected"] == sum(c[k] for k in REJECTION_COUNTER.values()), c
            assert self.pinned <= self.state.slot_of_vm.keys(), "a pin outlived its VM"
            assert self.uids.keys() <= self.state.slot_of_vm.keys(), "a uid outlived its VM"

    # -- snapshot / restore, import / export ----------------------------------------------------------------
    def snapshot(self) -> dict[str, Any]:
        """The whole state as JSON-able data (machines in slot order with their slot, VMs by id: ledger slots are
        an implementation detail that no decision depends on). One consistent state: the machines and the VMs'
        arrays are copied under one hold of the lock, the rows built after it (building them inside held every
        placement for 54 s at a million VMs)."""
        with self.lock:
            s = self.state
            machines = [asdict(self._machine_row(int(m))) for m in np.flatnonzero(s.status != ABSENT)]
            cols = self._vm_columns(None, -1, None)
        c = next(cols.columns(), None)  # plain lists: a VmRecord per VM first took 0.9-1.1 s at 160,000 VMs, now 0.6
        if c is None:
            return {"numa": self.numa, "machines": machines, "vms": []}
        order = sorted(range(len(c.ids)), key=c.ids.__getitem__)
        vms = [{"id": c.ids[i], "machine": c.machines[i], "node": c.nodes[i], "cpu": c.cpu[i], "mem": c.mem[i],
                "multi": c.multi[i], "pinned": c.pinned[i], "uid": c.uids[i]} for i in order]  # fmt: skip
        return {"numa": self.numa, "machines": machines, "vms": vms}

    def copy(self, policy: str | NumaPolicy | None = None, seed: int | None = None) -> PlacementEngine:
        """An in-memory engine holding this one's state now (machines with their status and rack, VMs, pins, uids,
        when each VM last moved), deciding with ``policy`` (a name, an object, or None: a copy of this one's default
        policy, since a policy object keeps an index of the state it decides on and two engines deciding with one
        object at once over-committed nodes) and a random stream of its own, started from ``seed`` (default: this
        one's seed). Its counters start at zero; it has no store and no explanations; nothing is shared. What a
        what-if starts from: at 160,000 VMs a copy takes about 5-9 ms, a :meth:`restore` of the snapshot 0.9 s."""
        with self.lock:
            own = copy.deepcopy(self.default_policy) if policy is None else policy
            out = PlacementEngine(self.numa, own, None, self.top, self._keep, self.seed if seed is None else seed)
            out.state = copy.deepcopy(self.state)
            out.pinned = set(self.pinned)
            out.uids = dict(self.uids)
            out.moved_at = dict(self.moved_at)
            out._loaded = len(out.state.slot_of_vm)
            out.last_reoptimisation = self.last_reoptimisation
            out.last_background_report = self.last_background_report
        return out

    @classmethod
    def read_snapshot(cls, path: str | Path) -> dict[str, Any]:
        """The state of the cluster database ``path`` as :meth:`snapshot` gives it, read without writing to it and
        also while a service runs on it (which holds the database: another engine cannot open it): an online backup
        (:func:`~dcplace.engine.store.backup_database`) into a temporary folder, opened there, removed after."""
        return cls._on_a_copy(path, lambda engine: engine.snapshot())

    @classmethod
    def read_state_at(cls, path: str | Path, seq: int | None = None, at: float | None = None) -> dict[str, Any]:
        """The state of the cluster database ``path`` as it was right after its journal's entry ``seq`` (0: before
        its first entry), or at Unix time ``at`` (after the last entry committed then), in :meth:`snapshot`'s form:
        the state now with the journal's entries since undone (:func:`dcplace.engine.journal.rewind`), both read
        from one online backup, so also while a service runs on it. Give exactly one of ``seq`` and ``at``. A
        ``seq`` inside one operation's entries (a reconcile's or a re-optimisation's, which share their time) gives
        the state after the whole operation: halfway through, a swap of two VMs on full nodes over-commits one. The
        answer's ``seq`` says which entry the state is right after (the one given, that operation's last, or for
        ``at`` the last committed then)."""
        from dcplace.engine.journal import check_seq, rewind, seq_at, utc

        if (seq is None) == (at is None):
            raise InputError("give exactly one of seq (a journal entry) and at (a time)", field="seq")
        _check_time(at, "at")
        if seq is not None:
            check_seq(seq)

        def state(engine: PlacementEngine) -> dict[str, Any]:
            store = engine.store
            assert isinstance(store, SqliteStore)
            field = "seq" if seq is not None else "at"
            off = store.meta("journal_off_since")
            if off is not None:
                since = "it was never on" if float(off) == 0 else "since " + utc(float(off))
                raise InputError(f"the journal is off ({since}): the state now holds changes it never recorded, so "
                                 "it cannot be rewound; turn it on (serve --journal-keep N) and rewind to a moment "
                                 "after that", field=field)  # fmt: skip
            with store.reading() as conn:
                to = seq if seq is not None else seq_at(conn, float(at))  # type: ignore[arg-type]
                if seq is not None and seq > 0:  # inside one operation (its entries share their time): its end
                    mark = conn.execute("SELECT at FROM journal WHERE seq = ?", (seq,)).fetchone()
                    if mark is not None:
                        for nxt, when in conn.execute("SELECT seq, at FROM journal WHERE seq > ? ORDER BY seq",
                                                      (seq,)):  # fmt: skip
                            if nxt != to + 1 or when != mark[0]:
                                break
                            to = nxt
                last = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'journal'").fetchone()
                oldest = conn.execute("SELECT min(seq), min(at) FROM journal").fetchone()
            if at is not None and oldest[0] is not None and to == oldest[0] - 1 and oldest[0] > 1:
                # a time before the oldest entry kept: when the pruned ones happened is gone with them
                raise InputError(f"the journal no longer reaches back to that time: its oldest entry kept is "
                                 f"{oldest[0]}, of {utc(float(oldest[1]))} (older ones were pruned)",
                                 field="at")  # fmt: skip
            if to > (0 if last is None else int(last[0])):
                raise InputError(f"the journal's last entry is {0 if last is None else int(last[0])}; a later one "
                                 "has not happened yet", field="seq")  # fmt: skip
            return rewind(engine.snapshot(), engine.journal(after=to, limit=None), to, field) | {"seq": to}

        return cls._on_a_copy(path, state)

    @classmethod
    def _on_a_copy(cls, path: str | Path, read: Callable[[PlacementEngine], _T]) -> _T:
        """``read`` an engine on an online backup of the database ``path`` in a temporary folder (removed after)."""
        import tempfile

        from dcplace.engine.store import backup_database, stored_numa

        db = Path(path)
        with tempfile.TemporaryDirectory(prefix="dcplace-snapshot-") as tmp:
            copy = Path(tmp) / "copy.db"
            try:
                backup_database(db, copy)
                engine = cls.open(copy, numa=stored_numa(copy) or 2)
            except InputError as e:  # the copy's name means nothing to the caller
                said = e.detail.replace(f" to {copy} ", f" to a temporary folder ({tmp}) ").replace(str(copy), str(db))
                if " failed (" in e.detail:  # the copy could not be written (a full disk): not the caller's doing
                    raise Unavailable(said, field="db") from None
                raise InputError(said, field="db") from None
            try:
                return read(engine)
            finally:
                engine.close()

    def _vm_row(self, v: int) -> VmRow:
        """Ledger slot ``v``'s VM as the store keeps it: place, size, pin, uid, last move."""
        r = self.state.record(v)
        return VmRow(r.id, r.machine, r.node, r.cpu, r.mem, r.multi, r.id in self.pinned, self.uids.get(r.id),
                     moved_at=self.moved_at.get(r.id))  # fmt: skip

    @classmethod
    def restore(cls, snapshot: dict[str, Any], policy: str | NumaPolicy = "best-fit", **kw: Any) -> PlacementEngine:
        """An in-memory engine holding exactly ``snapshot``'s state (what :meth:`snapshot` gives; every field of
        the right type, or InputError naming the entry: ``"2"`` NUMA nodes, a slot of 0.5 or a ``"yes"`` pin were
        taken or failed with a traceback)."""
        machines, vms = _snapshot_rows(snapshot)
        engine = cls(snapshot["numa"], policy, None, **kw)
        try:
            engine._load(machines, vms)
        except (OverflowError, ValueError) as e:  # a number no float holds
            raise InputError(f"not a dcplace engine snapshot ({e})", field="snapshot") from None
        return engine

    def _load(self, machines: list[MachineRow], vms: list[VmRow]) -> None:
        """Rebuild the arrays: machines at their slots (active while the VMs are placed), the VMs through the
        kernel's ``place``, then each machine's status."""
        s = self.state
        for row in machines:
            if row.id in s.slot_of_machine or row.slot < 0 or (row.slot < s.machine_slots and s.status[row.slot]):
                raise InputError(f"machine {row.id!r} or its slot {row.slot} appears twice", field="machines")
            try:
                cap = np.asarray(row.capacity, np.float64)
            except (TypeError, ValueError):  # ragged, or not numbers (a hand-edited database row)
                cap = np.zeros(0)
            if cap.shape != (self.numa, 2):
                raise InputError(f"machine {row.id!r} has capacity {row.capacity}, not [cores, GB] for each of "
                                 f"{self.numa} NUMA nodes", field="machines")  # fmt: skip
            if row.status not in STATUS_CODES or row.status == "absent":
                raise InputError(f"machine {row.id!r} has status {row.status!r}, not active, drained or failed",
                                 field="machines")  # fmt: skip
            if not (np.isfinite(cap).all() and (cap > 0).all() and (cap <= MAX_AMOUNT).all()):
                raise InputError(f"machine {row.id!r} has capacity {row.capacity}, not numbers above 0 and at most "
                                 f"{MAX_AMOUNT}", field="machines")  # fmt: skip
            if row.slot >= MAX_SLOTS:  # one damaged integer asked for lists of that length
                raise InputError(f"machine {row.id!r} has slot {row.slot}, above {MAX_SLOTS - 1}", field="machines")
            s.add_machine(row.id, cap, row.rack, row.slot, ACTIVE)
        before = copy.deepcopy(s)
        if not self._load_vms_at_once(vms):  # a row it cannot take: one by one, where the error names the row
            self.state = s = before
            self.pinned.clear()
            self.uids.clear()
            self._load_vms_one_by_one(vms)
        self.moved_at = {v.id: t for v in vms if (t := _stored_time(v.moved_at)) is not None}
        self._set_loaded_status(machines)

    def _load_vms_at_once(self, vms: list[VmRow]) -> bool:
        """The database's VMs checked as columns and placed in one compiled loop (``ClusterState.load_placed``):
        one at a time it took about 43 us a VM, 43 s to open a million. False, the state half-changed, at the first
        row any check of :meth:`_load_vms_one_by_one` would refuse (that path then says which and why)."""
        s, n, numa = self.state, len(vms), self.numa
        if not vms:
            return True
        ids = [v.id for v in vms]
        if not all(type(i) is str and 0 < len(i) <= 256 for i in ids) or len(set(ids)) != n or s.slot_of_vm:
            return False
        if not all(v.uid is None or _id_ok(v.uid) for v in vms):
            return False
        nodes = [v.node for v in vms]
        if not all(k is None or (type(k) is int and 0 <= k < numa) for k in nodes):
            return False
        multi = np.array([k is None for k in nodes], np.bool_)
        if any(bool(v.multi) != x for v, x in zip(vms, multi.tolist(), strict=True)):
            return False
        amounts = [(v.cpu, v.mem) for v in vms]
        if any(type(c) not in (int, float) or type(m) not in (int, float) for c, m in amounts):  # bool: refused
            return False
        cpu_mem = np.array(amounts, np.float64).reshape(n, 2)
        if not (np.isfinite(cpu_mem).all() and (cpu_mem > 0).all() and (cpu_mem <= MAX_AMOUNT).all()):
            return False
        slot_of = s.slot_of_machine
        machine = np.array([slot_of.get(v.machine, -1) for v in vms], np.int64)
        if (machine < 0).any():
            return False
        actions = machine * numa + np.array([0 if k is None else k for k in nodes], np.int64)
        if not s.load_placed(ids, cpu_mem[:, 0].copy(), cpu_mem[:, 1].copy(), multi, actions):
            return False
        self.pinned.update(v.id for v in vms if v.pinned)
        self.uids.update((v.id, v.uid) for v in vms if v.uid is not None)
        return True

    def _load_vms_one_by_one(self, vms: list[VmRow]) -> None:
        for vm in vms:
            try:
                self._load_vm(vm)
            except InputError as e:  # the sentence names the VM it is about, and its field
                if e.detail.startswith((f"VM {vm.id!r}", f"a VM {vm.id!r}")):
                    raise
                what = f", {e.field}" if e.field not in (None, "vms", "vm", "id") else ""
                raise InputError(f"VM {vm.id!r}{what}: {e.detail}", field="vms") from None

    def _load_vm(self, vm: VmRow) -> None:
        if (vm.node is None) != bool(vm.multi):
            raise InputError(f"VM {vm.id!r} is {'' if vm.multi else 'not '}split over every node but its node is "
                             f"{vm.node!r}", field="vms")  # fmt: skip
        if not (isinstance(vm.id, str) and 0 < len(vm.id) <= 256):  # ids written before today's rule stay
            raise InputError(f"VM id {vm.id!r} is not 1-256 characters", field="vms")
        try:
            uid = None if vm.uid is None else check_id(vm.uid, "uid")
        except InputError as e:
            raise InputError(f"VM {vm.id!r} has a bad uid: {e.detail}", field="vms") from None
        req = VmRequest(vm.id, _positive(vm.cpu, "cpu"), _positive(vm.mem, "mem"), bool(vm.multi), bool(vm.pinned),
                        uid)  # fmt: skip
        self._assign_locked(req, vm.machine, vm.node)
        self._remember(req)

    def _set_loaded_status(self, machines: list[MachineRow]) -> None:
        s = self.state
        for row in machines:
            slot = s.slot_of_machine[row.id]
            if row.status == "failed" and s.vm_count[slot]:  # an import could put VMs there until 2026-11-27
                self.load_warnings.append(
                    f"machine {row.id!r} has failed but hosts {int(s.vm_count[slot])} VMs (a database written before "
                    f"2026-11-27): `dcplace cluster evacuate {row.id} --failed` places them elsewhere or drops them"
                )
            s.set_status(slot, STATUS_CODES[row.status])
        self._loaded = len(s.slot_of_vm)

    def export_allocations(self) -> list[dict[str, Any]]:
        """Every allocation as a record: ``vm, machine, node (None: all nodes), cpu, mem, pinned, uid``."""
        return [row for chunk in self.vm_listing().columns() for row in allocation_rows(chunk)]

    def import_allocations(
        self,
        rows: list[dict[str, Any]],
        source: str = "<records>",
        lines: Sequence[int] | None = None,
        mark: str | None = None,
    ) -> int:
        """Record existing allocations (``vm, machine, node, cpu, mem``, optional ``pinned`` and ``uid``; node
        empty or ``all``: split over every node) all or nothing. An error names the row: its line in ``source``
        (``lines``: each row's line, as :func:`read_allocations_at` gives for a CSV file), else its index in the
        list (``[0]`` is the first).
        A row the ledger already holds exactly (same machine, node and size) is skipped, so a retried request
        changes nothing; a VM recorded elsewhere, with another size or another uid is a conflict. ``mark``: a note
        committed with the rows (:meth:`imported_before` finds it; ``serve --import`` marks each file by its hash,
        so a restart does not import it again and bring back VMs released since). Returns how many were newly
        recorded."""

        def at(i: int, fld: str | None) -> dict[str, Any]:  # i: 1-based
            return _where(i - 1, fld, source, lines)

        parsed = [(req, machine, node) for req, machine, node, _ in self._parse_allocations(rows, source, lines)]
        with self.lock:
            self.check_store()
            done: list[int] = []
            changes: list[Change] = []
            try:
                for i, (req, machine, node) in enumerate(parsed, 1):
                    try:
                        if self._recorded_as(req, machine, node):
                            continue
                        changes.append(self._assign_locked(req, machine, node, by="import"))
                        self._remember(req)
                    except InputError as e:
                        raise type(e)(e.detail, **at(i, e.field)) from None
                    done.append(self.state.slot_of_vm[req.id])
            except InputError:
                for v in reversed(done):
                    self._forget(self.state.record(v).id)
                    self.state.release(v)
                raise
            self.counters["imported"] += len(done)
            if mark is not None:
                changes.append(MetaSet(mark, time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())))
            ticket = self._commit(changes, by="import")
        self._wait(ticket)
        return len(done)

    def _parse_allocations(
        self, rows: list[dict[str, Any]], source: str, lines: Sequence[int] | None
    ) -> list[tuple[VmRequest, str, int | None, frozenset[str]]]:
        """Allocation rows checked (each error naming its row; a VM named twice refused): each as the request, its
        machine, its node (None: split), and which of ``pinned`` and ``uid`` it gives."""

        def at(i: int, fld: str | None) -> dict[str, Any]:  # i: 1-based
            return _where(i - 1, fld, source, lines)

        parsed: list[tuple[VmRequest, str, int | None, frozenset[str]]] = []
        for i, row in enumerate(rows, 1):
            try:
                node = _node_of(row.get("node"))
                uid = row.get("uid")
                req = VmRequest(str(row["vm"]), row["cpu"], row["mem"], node is None, _pinned(row.get("pinned")),
                                None if uid in (None, "") else uid)  # fmt: skip
                given = frozenset(k for k in ("pinned", "uid") if row.get(k) not in (None, ""))
                parsed.append((self._validate(req), str(row["machine"]), node, given))
            except KeyError as e:
                raise InputError(f"missing column {e}", **at(i, None)) from None
            except (ValueError, TypeError) as e:
                raise InputError(f"bad node ({e})", **at(i, "node")) from None
            except InputError as e:
                raise InputError(e.detail, **at(i, e.field)) from None
        first: dict[str, int] = {}
        for i, (req, _, _, _) in enumerate(parsed, 1):
            if req.id in first:
                where = f"line {lines[first[req.id] - 1]}" if lines is not None else f"[{first[req.id] - 1}]"
                raise InputError(f"names VM {req.id!r} a second time (first at {where})", **at(i, "vm"))
            first[req.id] = i
        return parsed

    def move(
        self, vm_id: str, machine_id: str, node: int | None = None, now: float | None = None, execute: bool = True
    ) -> VmRecord:
        """Record that VM ``vm_id`` now runs on ``machine_id`` at ``node`` (None: split over every node, as the VM
        is): a live migration done outside dcplace (by hand, or a move of a re-optimisation plan that the
        operator's own tooling carried out). Journalled as ``moved``; the VM keeps its size, pin and uid, and its
        cool-down starts at ``now``. The machine must be registered and not failed (a drained one may hold it, as
        an import may), and the VM must fit there; a VM already there is answered as it is. Durable on return.
        ``execute=False``: the same checks and answer (where it would be), nothing changed: ask before migrating."""
        now = _check_time(now, "now")
        with self.lock:
            self.check_store()
            s = self.state
            v = self._vm_slot(vm_id)
            rec = s.record(v)
            if rec.multi != (node is None):
                said = "no node (null or 'all')" if rec.multi else "the node it runs on"
                raise InputError(f"VM {vm_id!r} is {'split over every node' if rec.multi else 'on one node'}: give "
                                 f"{said}", field="node")  # fmt: skip
            if (rec.machine, rec.node) == (machine_id, node):
                ticket = self._commit([])  # durable once everything before it is
            elif not execute:
                kept = self._saved(dry=True)
                try:
                    self._move_locked(rec, machine_id, node)
                    return self.state.record(self.state.slot_of_vm[vm_id])
                finally:
                    self._restore(kept)
            else:
                self._move_locked(rec, machine_id, node)
                if now is not None:
                    self.moved_at[vm_id] = now
                self.counters["migrated"] += 1
                ticket = self._commit([self._vm_row(s.slot_of_vm[vm_id])], by="reported")
            out = s.record(s.slot_of_vm[vm_id])
        self._wait(ticket)
        return out

    def resize(self, vm_id: str, cpu: float, mem: float) -> VmRecord:
        """Record that VM ``vm_id`` now has ``cpu`` cores and ``mem`` GB where it runs (a resize done outside
        dcplace: Nova's ``resize.confirm``): one step, keeping its place, span, pin and uid; journalled as its
        release and a placement anew (``by``: ``resize``), as a reconcile records a VM of another size. It must fit
        there (a Conflict otherwise: a resize that moved it is a move and a resize, or a reconcile). Durable on
        return."""
        with self.lock:
            self.check_store()
            s = self.state
            rec = s.record(self._vm_slot(vm_id))
            req = self._validate(VmRequest(vm_id, cpu, mem, rec.multi, vm_id in self.pinned, self.uids.get(vm_id)))
            if (rec.cpu, rec.mem) == (req.cpu, req.mem):
                ticket = self._commit([])  # as it is: durable once everything before it is
            else:
                m, k = self._destination(rec.machine, rec.node)  # a failed machine's VM: refused, nothing changed
                s.release(s.slot_of_vm[vm_id])  # in the ledger only: its pin, uid and explanation stay
                if not s.fits(m, k, req.cpu, req.mem, req.multi):
                    s.place(vm_id, s.vm_slot(), rec.cpu, rec.mem, rec.multi, m * self.numa + k)  # its room is free
                    raise Conflict(f"VM {vm_id!r} with {req.cpu:g} cores and {req.mem:g} GB does not fit on machine "
                                   f"{rec.machine!r} node {'all' if rec.node is None else rec.node}",
                                   field="cpu")  # fmt: skip
                s.place(vm_id, s.vm_slot(), req.cpu, req.mem, req.multi, m * self.numa + k)
                self.counters["released"] += 1
                self.counters["imported"] += 1
                row = self._vm_row(s.slot_of_vm[vm_id])  # its pin, uid and last move kept
                ticket = self._commit([VmDelete(vm_id, "released"), row], by="resize")
            out = s.record(s.slot_of_vm[vm_id])
        self._wait(ticket)
        return out

    def _destination(self, machine_id: str, node: int | None) -> tuple[int, int]:
        """The slot and node a VM is recorded at on ``machine_id`` (``node`` None: split, recorded at node 0): the
        machine registered and not failed, the node a number the machine has."""
        m = self._machine_slot(machine_id)
        if self.state.status[m] == FAILED:  # it was recorded, leaving a failed machine that hosts a VM
            raise Conflict(f"machine {machine_id!r} has failed: it hosts nothing", field="machine")
        if node is not None and not (type(node) is int and 0 <= node < self.numa):  # True was node 1, in numba
            raise InputError(f"must be a NUMA node from 0 to {self.numa - 1}, or empty for all, got {node!r}",
                             field="node")  # fmt: skip
        return m, 0 if node is None else node

    def _move_locked(self, rec: VmRecord, machine_id: str, node: int | None) -> None:
        """Move ``rec`` to ``machine_id`` at ``node`` in the ledger (the caller holds the lock), or raise and leave
        it where it was."""
        s = self.state
        m, k = self._destination(machine_id, node)
        v = s.slot_of_vm[rec.id]
        s.release(v)
        if not s.fits(m, k, rec.cpu, rec.mem, rec.multi):
            back = 0 if rec.node is None else rec.node
            s.place(rec.id, s.vm_slot(), rec.cpu, rec.mem, rec.multi, s.slot_of_machine[rec.machine] * self.numa + back)
            raise Conflict(f"VM {rec.id!r} ({rec.cpu:g} cores, {rec.mem:g} GB) does not fit on machine {machine_id!r} "
                           f"node {'all' if node is None else node}", field="machine")  # fmt: skip
        s.place(rec.id, s.vm_slot(), rec.cpu, rec.mem, rec.multi, m * self.numa + k)
        self._explanations.pop(rec.id, None)  # it explained a machine the VM has left

    def reconcile(
        self,
        rows: list[dict[str, Any]],
        *,
        source: str = "<records>",
        lines: Sequence[int] | None = None,
        execute: bool = True,
        now: float | None = None,
        as_of: float | None = None,
        force: bool = False,
    ) -> ReconcileReport:
        """Make the recorded allocations what ``rows`` says the cluster runs (the whole inventory, as
        :meth:`import_allocations` reads rows): VMs not in it are released, VMs new to it recorded, VMs elsewhere moved
        (journalled ``moved``; ``now`` starts their cool-down), VMs of another size or another given uid released and
        recorded anew (a VM recreated under its name: its uid the row's, if any), pins a row gives set (a row without
        ``pinned`` or ``uid`` keeps what is recorded). All or nothing, in one commit: the result must fit every node
        (what reality runs does, if the machines are registered as they are; a refusal names the row).
        ``execute=False``: the same checks and the same report, nothing changed (a dry run). Machines are not touched:
        register new ones first (:meth:`add_machines`). ``as_of``: the Unix time the inventory was taken; a VM placed,
        moved, pinned or released after it is left as recorded (``newer``), since the inventory may not know of it yet
        (a create notification that came after the export: it was released). Needs the journal. A reconcile that would
        release more than half of the recorded VMs is refused unless ``force`` (an empty or truncated inventory released
        them all)."""
        parsed = self._parse_allocations(rows, source, lines)
        now, as_of = _check_time(now, "now"), _check_time(as_of, "as_of")
        if as_of is not None and as_of > time.time() + CLOCK_SKEW_S:
            raise InputError(f"is {as_of - time.time():.0f} s after this host's clock: an inventory cannot have been "
                             "taken later than it is given (seconds, not milliseconds?)", field="as_of")  # fmt: skip
        with self._locked_when_durable(as_of is not None), self._dry_runs_end():  # put back under the same hold
            self.check_store()
            newer = self._changed_since(as_of) if as_of is not None else set()
            kept = self._saved(dry=not execute)
            s = self.state
            listed = {req.id for req, _, _, _ in parsed}
            removed = [s.vm_ids[v] for v in sorted(s.slot_of_vm.values())
                       if s.vm_ids[v] not in listed and s.vm_ids[v] not in newer]  # fmt: skip
            known = len(s.slot_of_vm) - len(newer & s.slot_of_vm.keys())  # what the inventory can know of
            if not force and removed and 2 * len(removed) > known:
                if not execute:  # a dry run's live objects back (a real run has changed nothing yet)
                    self._restore(kept)
                raise Conflict(f"the inventory would release {len(removed):,} of the {known:,} VMs recorded"
                               f"{' before it was taken' if newer else ''}, more than half: an empty or truncated "
                               "inventory? force does it", field="force")  # fmt: skip
            added: list[str] = []
            replaced: list[str] = []
            moves: list[tuple[int, VmRecord, str, int | None]] = []
            repinned: list[str] = []
            unchanged = 0
            changes: list[Change] = []
            try:
                for vm_id in removed:
                    self._release_slot(vm_id)
                    changes.append(VmDelete(vm_id, "released"))
                todo: list[tuple[int, VmRequest, str, int | None, float | None]] = []
                for i, (req, machine, node, given) in enumerate(parsed, 1):
                    if req.id in newer:  # changed after the inventory was taken: the records know better
                        continue
                    v = s.slot_of_vm.get(req.id)
                    if v is None:
                        added.append(req.id)
                        todo.append((i, req, machine, node, None))
                        continue
                    rec = s.record(v)
                    new_uid = "uid" in given and self.uids.get(req.id) != req.uid
                    if (rec.cpu, rec.mem, rec.multi) != (req.cpu, req.mem, req.multi) or new_uid:
                        # a new incarnation: the row's uid (none where it gives none), the pin kept unless given
                        keep = replace(req, pinned=req.pinned if "pinned" in given else req.id in self.pinned)
                        moved = None if new_uid else self.moved_at.get(req.id)  # a resize, maybe: as resize() does
                        if not new_uid and now is not None and (rec.machine, rec.node) != (machine, node):
                            moved = now  # resized and moved: it moved now
                        self._release_slot(req.id)
                        changes.append(VmDelete(req.id, "released"))
                        replaced.append(req.id)
                        todo.append((i, keep, machine, node, moved))
                        continue
                    pin_changes = "pinned" in given and req.pinned != (req.id in self.pinned)
                    if pin_changes:
                        (self.pinned.add if req.pinned else self.pinned.discard)(req.id)
                        repinned.append(req.id)
                    if (rec.machine, rec.node) != (machine, node):
                        s.release(v)  # every move leaves first, so swaps and chains fit as reality has them
                        moves.append((i, rec, machine, node))
                    elif pin_changes:
                        changes.append(self._vm_row(v))
                    else:
                        unchanged += 1
                for i, req, machine, node, moved in todo:
                    try:
                        row = self._assign_locked(req, machine, node, by="reconcile")
                    except InputError as e:
                        raise type(e)(e.detail, **_where(i - 1, e.field, source, lines)) from None
                    self._remember(req)
                    if moved is not None:
                        self.moved_at[req.id] = moved
                        row = replace(row, moved_at=moved)
                    changes.append(row)
                for i, rec, machine, node in moves:
                    try:
                        m, k = self._destination(machine, node)
                        if not s.fits(m, k, rec.cpu, rec.mem, rec.multi):
                            raise Conflict(f"VM {rec.id!r} ({rec.cpu:g} cores, {rec.mem:g} GB) does not fit on "
                                           f"machine {machine!r} node {'all' if node is None else node} with the rest "
                                           "of the inventory", field="machine")  # fmt: skip
                    except InputError as e:
                        raise type(e)(e.detail, **_where(i - 1, e.field, source, lines)) from None
                    s.place(rec.id, s.vm_slot(), rec.cpu, rec.mem, rec.multi, m * self.numa + k)
                    self._explanations.pop(rec.id, None)
                    if now is not None:
                        self.moved_at[rec.id] = now
                    changes.append(self._vm_row(s.slot_of_vm[rec.id]))
            except BaseException:
                self._restore(kept)
                raise
            report = ReconcileReport(
                added=tuple(added), removed=tuple(removed), replaced=tuple(replaced),
                moved=tuple((r.id, r.machine, r.node, mm, nn) for _, r, mm, nn in moves), repinned=tuple(repinned),
                unchanged=unchanged, applied=execute, newer=tuple(sorted(newer & (listed | set(s.slot_of_vm)))),
            )  # fmt: skip
            if not execute:
                self._restore(kept)
                return report
            self.counters["released"] += len(removed) + len(replaced)
            self.counters["imported"] += len(added) + len(replaced)
            self.counters["migrated"] += len(moves)
            ticket = self._commit(changes, by="reconcile")
        self._wait(ticket)
        return report

    @contextlib.contextmanager
    def _dry_runs_end(self) -> Iterator[None]:
        """A dry run's copies never outlive it: whatever ends it (a bug included), the live objects are put back."""
        try:
            yield
        finally:
            live = self._live
            if live is not None:
                with self.lock:
                    self._restore(live)

    @contextlib.contextmanager
    def _locked_when_durable(self, durable: bool) -> Iterator[None]:
        """Hold the engine's lock; with ``durable``, at a moment when everything queued is durable, so the journal
        holds every change the state does. The wait for the commit happens without the lock (a commit waiting for
        another program's lock on the database would otherwise hold every operation up), and is tried again while
        something was queued meanwhile; at last it waits under the lock."""
        stats = getattr(self.store, "stats", None)
        held = False
        try:
            for _ in range(20 if durable and callable(stats) else 0):
                self._wait(self._commit([]))
                self.lock.acquire()
                held = True
                st = stats()  # type: ignore[misc]
                if st["submitted"] == st["durable"]:
                    break
                self.lock.release()
                held = False
            if not held:
                self.lock.acquire()
                held = True
                if durable:
                    self._wait(self._commit([]))
            yield
        finally:
            if held:
                self.lock.release()

    def _changed_since(self, at: float) -> set[str]:
        """The VMs the journal records as placed, moved, pinned, unpinned, released or dropped after Unix time
        ``at`` (the caller holds the lock, at a moment when the journal has every change:
        :meth:`_locked_when_durable`)."""
        from dcplace.engine.journal import changed_since

        reading = getattr(self.store, "reading", None)
        if reading is None or not self._journals():
            raise InputError("needs the journal, which this engine does not keep (no database, or --journal-keep 0)",
                             field="as_of")  # fmt: skip
        moves = ("placed", "moved", "pinned", "unpinned", "released", "dropped")
        with reading() as conn:
            return changed_since(conn, at, moves, "journal-resumed", "vm")

    def _saved(self, dry: bool = False) -> tuple[Any, ...]:
        """What an operation that may be undone, or is only a dry run, changes beside the database (the caller holds
        the lock): the ledger and what the engine keeps about its VMs, for :meth:`_restore`. An operation works on
        the live objects and keeps copies to put back on an error; a dry run (``dry``) works on copies and keeps the
        live objects, which readers without the lock (``/healthz``, ``/metrics``) and the heuristics' indexes then
        never see changed."""
        copies = (copy.deepcopy(self.state), dict(self.counters), dict(self.moved_at), set(self.pinned),
                  dict(self.uids), self._explanations.copy())  # fmt: skip  # an OrderedDict: its oldest is evicted
        if not dry:
            return copies
        live = (self.state, self.counters, self.moved_at, self.pinned, self.uids, self._explanations)
        self._live = live  # what readers without the lock go on seeing (_shown)
        self.state, self.counters, self.moved_at, self.pinned, self.uids, self._explanations = copies
        return live

    def _restore(self, kept: tuple[Any, ...]) -> None:
        self.state, self.counters, self.moved_at, self.pinned, self.uids, self._explanations = kept
        self._live = None

    def _release_slot(self, vm_id: str) -> None:
        """Release ``vm_id`` from the ledger and forget its pin, uid and explanation (the caller holds the lock)."""
        self.state.release(self.state.slot_of_vm[vm_id])
        self._forget(vm_id)

    def imported_before(self, mark: str) -> str | None:
        """When the import marked ``mark`` was committed to this engine's database (None: never, or no database)."""
        return None if self.store is None else self.store.meta(mark)

    def _recorded_as(self, req: VmRequest, machine: str, node: int | None) -> bool:
        """Whether the ledger holds VM ``req.id`` exactly so (an import's row already recorded); a VM of that id
        recorded otherwise is a :class:`Conflict` naming both."""
        v = self.state.slot_of_vm.get(req.id)
        if v is None:
            return False
        rec = self.state.record(v)
        if (rec.machine, rec.node, rec.cpu, rec.mem, rec.multi) == (machine, node, req.cpu, req.mem, req.multi):
            if (req.id in self.pinned) != req.pinned:
                raise Conflict(f"a VM {req.id!r} is already recorded {'' if req.id in self.pinned else 'un'}pinned; "
                               "this row says otherwise (PUT /vms/{id}/pinned changes it)", field="pinned")  # fmt: skip
            self._same_incarnation(req.id, req.uid)  # a row without a uid is not checked
            return True
        said = "all" if node is None else node
        held = "all" if rec.node is None else rec.node
        raise Conflict(f"a VM {req.id!r} is already placed on machine {rec.machine!r} node {held} ({rec.cpu:g} "
                       f"cores, {rec.mem:g} GB), not on {machine!r} node {said} ({req.cpu:g}, {req.mem:g}) as this "
                       "row says", field="vm")  # fmt: skip


def _pinned(value: object) -> bool:
    """An allocation row's optional ``pinned``: a JSON boolean, or in a CSV ``true`` / ``false`` (or empty)."""
    if value is None or isinstance(value, bool):
        return bool(value)
    text = str(value).strip().lower()
    if text in ("", "false"):
        return False
    if text == "true":
        return True
    raise InputError(f"must be true or false, got {value!r}", field="pinned")


def _flag(value: object, name: str) -> bool:
    """A VmRequest's flag: True or False (numpy's too); ``"no"`` was truthy and placed a VM split over every node."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise InputError(f"must be True or False, got {value!r}", field=name)


def read_machines_at(path: str | Path) -> tuple[list[MachineSpec], list[int] | None]:
    """Machines to register (:meth:`PlacementEngine.add_machines`) from a ``.csv`` (header ``id,cpu,mem`` and an
    optional ``rack``; ``cpu`` and ``mem`` one number for every NUMA node or one per node, ``;``-separated) or a
    ``.json`` file (a list of ``{"id", "cpu", "mem", "rack"?}``, numbers or lists); and each machine's line (a CSV's;
    None for JSON, whose machines are named by their index). A value that is not a number names its line and
    field; the engine checks the rest."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        text = read_text(p, "machines file")
        try:
            data = json.loads(text)
        except (json.JSONDecodeError, RecursionError) as e:
            raise InputError(f"not valid JSON ({json_problem(e)})", path=p, line=getattr(e, "lineno", None)) from None
        if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
            raise InputError("must be a JSON list of machine objects", path=p)
        specs = []
        for i, r in enumerate(data):
            unknown = set(r) - {"id", "cpu", "mem", "rack"}
            missing = {"id", "cpu", "mem"} - set(r)
            if unknown or missing:
                said = f"unknown key {sorted(unknown)[0]!r}" if unknown else f"missing key {sorted(missing)[0]!r}"
                raise InputError(f"{said} (a machine has id, cpu, mem and rack)", path=p, field=f"[{i}]")
            specs.append(MachineSpec(r["id"], r["cpu"], r["mem"], r.get("rack")))
        return specs, None
    table = read_csv(p, ("id", "cpu", "mem"), "machines file")
    specs, k = [], table.header.index
    extra = [c for c in table.header if c not in ("id", "cpu", "mem", "rack")]
    if extra:  # a misspelt rack column dropped every rack without a word
        raise InputError(f"unknown column (a machine has id, cpu, mem and rack; the header has "
                         f"{', '.join(table.header)})", path=p, line=table.header_line, field=extra[0])  # fmt: skip

    def numbers(cells: list[str], col: str, line: int) -> float | list[float]:
        values = cells[k(col)].split(";")
        try:
            got = [float(v) for v in values]
        except ValueError:
            raise InputError(f"must be a number or numbers separated by ';', got {cells[k(col)]!r}", path=p,
                             line=line, field=col) from None  # fmt: skip
        return got[0] if len(got) == 1 else got

    for cells, line in zip(table.rows, table.lines, strict=True):
        rack = cells[k("rack")] if "rack" in table.header and cells[k("rack")] else None
        specs.append(MachineSpec(cells[k("id")], numbers(cells, "cpu", line), numbers(cells, "mem", line), rack))
    return specs, list(table.lines)


def read_allocations(path: str | Path) -> list[dict[str, Any]]:
    """Allocation records from a ``.json`` (a list of objects) or ``.csv`` file (header ``vm,machine,node,cpu,mem``)."""
    return read_allocations_at(path)[0]


def read_allocations_at(path: str | Path) -> tuple[list[dict[str, Any]], list[int] | None]:
    """:func:`read_allocations` and each record's line in the file (a CSV's; None for JSON, whose records are named
    by their index), for :meth:`PlacementEngine.import_allocations`'s errors."""
    p = Path(path)
    if p.suffix.lower() != ".json":
        table = read_csv(p, ("vm", "machine", "cpu", "mem"), "allocations file", min_rows=0)  # node: optional
        return [dict(zip(table.header, cells, strict=True)) for cells in table.rows], list(table.lines)
    return _read_allocations_json(p), None


def _read_allocations_json(p: Path) -> list[dict[str, Any]]:
    text = read_text(p, "allocations file")
    try:
        data = json.loads(text)
    except (json.JSONDecodeError, RecursionError) as e:  # RecursionError: arrays nested too deep to read
        raise InputError(f"not valid JSON ({json_problem(e)})", path=p, line=getattr(e, "lineno", None)) from None
    if not isinstance(data, list) or not all(isinstance(r, dict) for r in data):
        raise InputError("must be a JSON list of allocation objects", path=p)
    return data


def write_allocations(rows: list[dict[str, Any]], path: str | Path) -> None:
    """Write allocation records as ``.json`` or ``.csv`` (by the suffix); CSV writes ``all`` for a split VM."""
    p = Path(path)
    if p.suffix.lower() == ".json":
        write_text(p, json.dumps(rows, indent=1) + "\n")  # atomic: whole or not at all
        return
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=["vm", "machine", "node", "cpu", "mem", "pinned", "uid"],
                       lineterminator="\n")  # fmt: skip
    w.writeheader()
    for r in rows:
        node, pinned = "all" if r["node"] is None else r["node"], str(bool(r.get("pinned"))).lower()
        w.writerow({**r, "node": node, "pinned": pinned, "uid": r.get("uid") or ""})
    write_text(p, buf.getvalue())
