"""Periodic re-optimisation on the live engine: the datacenter framework of paper 004, section III-D.

The paper: "Periodic re-optimization may be triggered by timers or by events (e.g., such as when the estimated
resource efficiency is below a threshold)." When it is due, "a subset of packs/VMs is selected and a subset of
PMs/swads is selected to participate in re-optimization. The selection depends on the cloud provider's policy and
the states of the packs/VMs and swads/PMs", the assignment is solved again with migration costs in the objective
("for those packs or VMs that have very large migration costs, constraints can be added to prevent their
migration"), and "the packs/VMs are placed according to the solution, which may involve VM migration". In between,
requests are "handled immediately upon arrival" by an online heuristic.

This module holds the parts that read the engine's :class:`~dcplace.engine.cluster_state.ClusterState`; the
:class:`~dcplace.engine.engine.PlacementEngine` methods ``reoptimise``, ``reoptimise_if_due`` and ``evacuate``
take the snapshot under the engine's lock, solve and plan on it without the lock (placements go on meanwhile),
and apply the verified plan under the lock again through the engine's transitions, each move re-checked against
the live state.

One event, step by step:

1. **Trigger** (:meth:`ReoptPolicy.due`): ``every_s`` seconds since the last event (timer), or the *efficiency*
   below ``below`` (event). Efficiency (:func:`efficiency`): the binding resource's allocation over the capacity of
   the machines in use, ``max_r used_r / capacity_r(machines with a VM)``; 1 when the machines in use are full in
   one resource, low when many machines are in use for little load.
2. **Selection** (:func:`movable`): the machines that participate are the active machines in use (drained and
   failed machines neither give nor receive; empty machines stay empty). Which VMs may move: ``selection="all"``:
   every VM on them; ``"underused"``: only the VMs of machines whose fill (the larger of CPU and memory allocated
   over capacity) is below ``underused_below``. Never: pinned VMs (``VmRequest.pinned``) and VMs moved less than
   ``cooldown_s`` ago. VMs that may not move stay where they are and still take their room.
3. **Target** (:func:`consolidation_target`): the participating machines and their VMs become a
   :class:`~dcplace.placement.numa_batch.NumaBatch` with the current placement, the non-movable VMs pinned, and a
   migration cost per VM of ``migration_weight x`` its memory over the largest machine's memory, in machines (so at
   weight 1, moving one largest machine's worth of memory costs as much as keeping one machine). The batch
   optimiser's ``consolidate`` method (a heuristic: best fit, then emptying machines while that pays; with
   ``improve_s``, CP-SAT then empties more where it can, the paper's integer programming on one machine's
   neighbourhood at a time; docs/reoptimisation.md) lowers machines used + migration cost and its independent checker
   verifies the answer (pinned VMs kept, capacities per NUMA node, the costs recounted). The event's budget
   (``max_moves``, ``max_gb``) is the optimiser's too: it empties a machine only when all of that machine's moves
   fit in what is left of the budget. (Before, the target ignored the budget and the plan was cut to a prefix: a
   budget of 5 moves could buy 5 moves off one crowded machine that freed nothing and raised the objective.)
4. **Plan** (:func:`dcplace.placement.migration.plan_migrations`): an ordered list of live migrations that never
   over-fills a NUMA node, cut to the event's budget (``max_moves``, ``max_gb``) at a safe prefix, replayed by the
   independent checker (:func:`dcplace.placement.plan_check.check_plan`).
5. **Execution**: the engine applies the moves in order (release at the source, place at the destination with the
   kernel's transitions), durable as one commit. Steps 3-4 ran without the engine's lock, so each move is checked
   against the live state first: the VM still exists, unpinned, with its size, where the move starts; the
   destination is the same machine, active, with room. The first move that fails a check stops the execution (every
   prefix of a plan is safe) and the report says which and why (``applied < planned``, ``reason``).

Only machines with exactly 2 NUMA nodes are re-optimised by the batch model (the papers' double-NUMA servers);
evacuation (drain and failure) works for any node count.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any, Literal

import numpy as np
import numpy.typing as npt

from dcplace.config import check, check_types
from dcplace.engine.cluster_state import ACTIVE, ClusterState
from dcplace.errors import InputError
from dcplace.placement.migration import ClusterPlacement, MigrationPlan
from dcplace.placement.migration import Placement as Target
from dcplace.placement.numa_batch import STRATEGIES, ConsolidateParams, NumaBatch, with_current
from dcplace.placement.registry import solve
from dcplace.placement.stop import Deadline

Selection = Literal["all", "underused"]


@dataclass(frozen=True)
class ReoptPolicy:
    """When to re-optimise and what may move (module docstring, steps 1-4)."""

    selection: Selection = "all"
    """``all``: every VM of the active machines in use may move; ``underused``: only those of machines whose fill
    is below ``underused_below``."""
    underused_below: float = 0.5
    """Fill (the larger of CPU and memory allocated over capacity) below which a machine is underused, in (0, 1]."""
    cooldown_s: float = 0.0
    """VMs moved less than this many seconds ago do not move again (0: no cool-down)."""
    migration_weight: float = 1.0
    """Cost of moving a VM = weight x its memory / the largest machine's memory, in machines; 0: moves are free."""
    max_moves: int | None = None
    """Budget: at most this many moves per event (None: no limit)."""
    max_gb: float | None = None
    """Budget: at most this much memory copied per event, GB (None: no limit)."""
    time_limit_s: float = 10.0
    """Wall-clock limit of the batch optimiser per event, seconds."""
    bound: bool = False
    """Also prove the typed relaxation's lower bound on machines (SCIP; slower); otherwise the covering bound."""
    improve_s: float = 0.0
    """Seconds of integer programming after the heuristic, within ``time_limit_s`` (0: the heuristic alone): CP-SAT
    empties one more machine at a time at the least migration cost (``ConsolidateParams.improve_s``). The engine's
    lock is not held while the event solves: placements go on, and the plan is applied as far as it still holds."""
    every_s: float | None = None
    """Timer trigger: due when this many seconds passed since the last event (None: no timer)."""
    below: float | None = None
    """Event trigger: due when :func:`efficiency` is below this, in (0, 1] (None: no threshold)."""
    min_gap_s: float = 0.0
    """The threshold trigger waits at least this long after the last event (keeps a stuck cluster from
    re-optimising at every request)."""

    def __post_init__(self) -> None:
        check_types(self)
        check(0 < self.underused_below <= 1, "underused_below", self.underused_below, "in (0, 1]")
        check(self.cooldown_s >= 0 and math.isfinite(self.cooldown_s), "cooldown_s", self.cooldown_s,
              "a finite number >= 0")  # fmt: skip
        check(0 <= self.migration_weight <= 1e6, "migration_weight", self.migration_weight,
              "from 0 to 1e6 (1e308 overflowed the costs)")  # fmt: skip
        check(self.max_moves is None or self.max_moves >= 0, "max_moves", self.max_moves, "at least 0")
        check(self.max_gb is None or self.max_gb >= 0, "max_gb", self.max_gb, "at least 0")
        check(self.time_limit_s > 0 and math.isfinite(self.time_limit_s), "time_limit_s", self.time_limit_s,
              "a finite number > 0")  # fmt: skip
        check(self.every_s is None or (self.every_s > 0 and math.isfinite(self.every_s)), "every_s", self.every_s,
              "a finite number > 0")  # fmt: skip
        check(self.below is None or 0 < self.below <= 1, "below", self.below, "in (0, 1]")
        check(self.min_gap_s >= 0, "min_gap_s", self.min_gap_s, "at least 0")
        check(0 <= self.improve_s <= self.time_limit_s, "improve_s", self.improve_s,
              f"from 0 to the time limit ({self.time_limit_s:g} s)")  # fmt: skip

    def due(self, state: ClusterState, now: float, last: float | None) -> str | None:
        """Why an event is due at time ``now`` (``last``: the previous event's time, None if none): ``"timer"``,
        ``"threshold"``, or None."""
        since = math.inf if last is None else now - last
        if self.every_s is not None and since >= self.every_s:
            return "timer"
        if self.below is not None and since >= self.min_gap_s and efficiency(state) < self.below:
            return "threshold"
        return None


def efficiency(state: ClusterState) -> float:
    """The binding resource's allocation over the capacity of the machines in use (1.0 with none in use)."""
    m = state.active
    used = state.vm_count[:m] > 0
    if not used.any():
        return 1.0
    cap = state.cap[:m][used].sum(axis=(0, 1))
    return float(np.max(state.used / np.maximum(cap, 1e-12)))


def fill(state: ClusterState) -> npt.NDArray[np.float64]:
    """``(M,)`` each machine's fill: the larger of CPU and memory allocated over its capacity."""
    m = state.active
    cap = state.cap[:m].sum(axis=1)
    alloc = cap - state.free[:m].sum(axis=1)
    out: npt.NDArray[np.float64] = (alloc / np.maximum(cap, 1e-12)).max(axis=1)
    return out


@dataclass(frozen=True)
class Snapshot:
    """The engine's VMs as the planner's :class:`ClusterPlacement` (index ``i`` is VM ``vm_ids[i]``)."""

    placement: ClusterPlacement
    vm_ids: tuple[str, ...]
    """``(V,)`` each VM's id: a plan made without the engine's lock is applied by id, since slots are reused."""
    machine_ids: tuple[str, ...]
    """Each machine slot's id when the snapshot was taken (a removed machine's slot can go to a new one)."""
    pinned: npt.NDArray[np.bool_]
    """``(V,)`` each VM's pin when the snapshot was taken (``placement.pinned`` is the planner's: an evacuation of a
    failed machine unpins its VMs there, since they must go)."""


def snapshot(state: ClusterState, pinned: set[str]) -> Snapshot:
    """Every live VM and every machine slot below ``state.active`` (usable = active status); costs are memory in GB.
    Everything is copied (``ClusterPlacement.build`` copies its arrays): the snapshot stays as it was while the engine
    changes."""
    m = state.active
    slots = np.flatnonzero(state.pm_of >= 0).astype(np.int64)
    node = np.where(state.multi[slots], -1, state.node_of[slots])
    ids = tuple(state.vm_ids[int(v)] for v in slots)
    pin = np.fromiter((i in pinned for i in ids), np.bool_, len(ids))
    cp = ClusterPlacement.build(
        state.cap[:m], state.demand[slots], state.multi[slots], state.pm_of[slots], node,
        usable=state.status[:m] == ACTIVE, pinned=pin,
    )  # fmt: skip
    return Snapshot(cp, ids, tuple(state.machine_ids[:m]), pin)


def in_id_order(snap: Snapshot, *masks: npt.NDArray[np.bool_]) -> tuple[Snapshot, list[npt.NDArray[np.bool_]]]:
    """``snap`` with its VMs sorted by id, and each of ``masks`` (over its VMs) with them. The optimiser and the
    planner break ties by VM index, and :func:`snapshot` lists VMs in the ledger's slot order, which depends on the
    history of releases and which a restart lays out anew: the same evacuation of the same cluster dropped another
    VM after a restart (a stateful review). A sort (about 1.5 s at a million VMs), done where the caller can without
    the engine's lock."""
    order = np.array(sorted(range(len(snap.vm_ids)), key=snap.vm_ids.__getitem__), dtype=np.int64)
    cp = snap.placement
    placement = ClusterPlacement.build(
        cp.capacity, cp.demand[order], cp.multi[order], cp.current.machine[order], cp.current.node[order],
        usable=cp.usable, pinned=cp.pinned[order], cost=cp.cost[order],
    )  # fmt: skip
    ids = tuple(snap.vm_ids[int(i)] for i in order)
    return Snapshot(placement, ids, snap.machine_ids, snap.pinned[order]), [m[order] for m in masks]


HELD_REASONS = ("unusable", "pinned", "selection", "cooling")
"""Why a placed VM may not move, in the order a VM is counted under the first that applies: its machine is drained
or failed (an evacuation moves those), it is pinned, the selection left its machine out (``underused``: the machine
is filled above ``underused_below``), it moved less than ``cooldown_s`` ago."""


def movable_and_held(
    state: ClusterState, snap: Snapshot, policy: ReoptPolicy, moved_at: dict[str, float], now: float | None
) -> tuple[npt.NDArray[np.bool_], dict[str, int]]:
    """``(V,)`` the VMs the event may move (module docstring, step 2), and how many placed VMs each of
    :data:`HELD_REASONS` held back (each VM under the first reason that applies), which the report carries: an
    event that moved nothing because every VM was pinned said only ``movable: 0``."""
    cp = snap.placement
    where = cp.current.machine
    placed = where >= 0
    at = np.maximum(where, 0)
    reasons = {"unusable": ~cp.usable[at], "pinned": cp.pinned.copy()}
    if policy.selection == "underused":
        reasons["selection"] = fill(state)[at] >= policy.underused_below
    if policy.cooldown_s > 0 and now is not None and moved_at:
        reasons["cooling"] = np.fromiter(
            (now - moved_at.get(i, -math.inf) < policy.cooldown_s for i in snap.vm_ids), np.bool_, len(snap.vm_ids),
        )  # fmt: skip
    free = placed.copy()
    held = {}
    for name in HELD_REASONS:
        hit = reasons.get(name)
        held[name] = 0 if hit is None else int(np.count_nonzero(free & hit))
        if hit is not None:
            free &= ~hit
    return free, held


@dataclass(frozen=True)
class TargetAnswer:
    """The batch optimiser's answer for one event."""

    target: Target
    machines_before: int
    machines_after: int
    bound: int
    bound_proven: bool
    migration_cost: float
    verified: bool
    solve_s: float


def consolidation_target(snap: Snapshot, may_move: npt.NDArray[np.bool_], policy: ReoptPolicy) -> TargetAnswer:
    """Module docstring, step 3: the batch of the active machines in use, solved by ``consolidate``."""
    cp = snap.placement
    if cp.numa != 2:
        raise InputError(f"re-optimisation solves double-NUMA machines; this cluster has {cp.numa} nodes per machine",
                         field="numa")  # fmt: skip
    where = cp.current.machine
    in_use = np.zeros(cp.machines, np.bool_)
    in_use[where[where >= 0]] = True
    servers = np.flatnonzero(in_use & cp.usable)
    part = np.flatnonzero(np.isin(where, servers))  # the batch's VMs (cluster indices)
    index = np.full(cp.machines, -1, np.int64)
    index[servers] = np.arange(len(servers))
    n = len(part)
    batch = NumaBatch(
        name="engine", node_free=np.asarray(cp.capacity[servers], np.float64), rack=np.arange(len(servers)),
        cpu=cp.demand[part, 0].copy(), ram=cp.demand[part, 1].copy(), numa=np.where(cp.multi[part], 2, 1),
        strategy=(STRATEGIES[0],) * n, group=("",) * n, domain=("",) * n,
    )  # fmt: skip
    biggest = float(cp.capacity[:, :, 1].sum(axis=1).max()) if cp.machines else 1.0
    cost = policy.migration_weight * cp.demand[part, 1] / biggest
    batch = with_current(batch, index[where[part]], cp.current.node[part], cost, np.flatnonzero(~may_move[part]))
    before = len(servers)
    if n == 0 or not may_move[part].any():
        return TargetAnswer(cp.current, before, before, before, False, 0.0, True, 0.0)
    params = ConsolidateParams(
        relaxation=policy.bound, max_moves=policy.max_moves, max_gb=policy.max_gb, improve_s=policy.improve_s
    )
    res = solve(batch, "consolidate", Deadline(policy.time_limit_s), 0, params)
    assert res.vm_pm is not None and res.vm_node is not None
    machine, node = cp.current.machine.copy(), cp.current.node.copy()
    machine[part] = servers[np.asarray(res.vm_pm, np.int64)]
    node[part] = np.asarray(res.vm_node, np.int64)
    return TargetAnswer(
        Target(machine, node), before, len(set(np.asarray(res.vm_pm).tolist())), int(res.bound or 0),
        bool(res.stats.get("bound_proven", False)), float(res.stats.get("migration_cost", 0.0)), res.verified,
        res.wall_s,
    )  # fmt: skip


@dataclass(frozen=True)
class MoveRecord:
    """One move, in the engine's ids (``node`` None: the VM spans every node): executed, or in a dry run's report
    planned."""

    vm: str
    source: str | None
    """The machine it left (None: it had no home, a failed machine's VM)."""
    machine: str
    node: int | None
    staging: bool
    gb: float


@dataclass(frozen=True)
class ReoptReport:
    """What one re-optimisation (or evacuation) event did. Machine counts are machines in use (hosting a VM)."""

    trigger: str
    """``manual``, ``timer``, ``threshold``, ``drain`` or ``failure``."""
    time: float | None
    vms: int
    """Live VMs at the event."""
    movable: int
    """VMs the selection allowed to move."""
    machines_before: int
    machines_target: int
    """Machines in use in the optimiser's target."""
    machines_after: int
    """Machines in use after the executed moves."""
    bound: int | None
    """Lower bound on the machines in use for the event's batch (None: not computed)."""
    bound_proven: bool
    migration_cost: float
    """The target's migration cost in machines (the optimiser's objective term)."""
    verified: bool
    """The optimiser's answer and the plan both passed their independent checkers."""
    complete: bool
    truncated: bool
    reason: str
    planned: int
    applied: int
    staging: int
    gb_moved: float
    solve_s: float
    plan_s: float
    check_s: float
    moves: tuple[MoveRecord, ...] = field(default=(), repr=False)
    dropped: tuple[str, ...] = ()
    """VMs that lost their home and found none (a failed machine's): released."""
    held: dict[str, int] = field(default_factory=dict)
    """Placed VMs the selection held back, by the first reason that applies (:data:`HELD_REASONS`); empty for an
    evacuation, whose movable VMs are its machine's."""

    def as_dict(self, moves: bool = True) -> dict[str, Any]:
        out = asdict(self)
        out["moves"] = [asdict(m) for m in self.moves] if moves else len(self.moves)
        out["dropped"] = list(self.dropped)
        return out


def plan_summary(plan: MigrationPlan) -> dict[str, Any]:
    """The plan's outcome fields shared by every report."""
    return {"complete": plan.complete, "truncated": plan.truncated, "reason": plan.reason,
            "planned": plan.n_moves, "staging": plan.staging_moves, "gb_moved": plan.gb_moved, "plan_s": plan.plan_s,
            "check_s": plan.check_s}  # fmt: skip
