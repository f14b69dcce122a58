"""Migration plans: a safe order of moves from the current placement to a target, and machine evacuation.

**Problem.** ``M`` machines of ``K`` NUMA nodes, ``capacity[m, k, r]`` of resource ``r`` (CPU cores, memory GB).
VM ``v`` asks for ``demand[v, r]``; a single-NUMA VM takes all of it on one node ``(m, k)``, a multi-NUMA VM
(``multi[v]``) takes ``demand[v] / K`` on every node of its machine (``node = -1``). That is the footprint rule
of :func:`dcplace.sim.numa_kernel.fits`; it is re-implemented here because ``placement`` may not import ``sim``
(the layer contract). Given the current placement and a target placement, find an ordered list of moves ``(vm,
from (m, k), to (m, k))`` that ends in the target, such that no NUMA node is ever over capacity.

**Live migration holds both ends.** While VM ``v`` migrates from ``s`` to ``d`` it holds its footprint on both, so a
move needs room at ``d`` while ``s`` is still held; ``s`` is freed when the move ends. Moves run one at a time. A
move's source and destination never share a node (a single-NUMA VM changes node or machine, a multi-NUMA VM changes
machine), so "room at ``d`` before the move" is exactly the condition for both "no node over capacity during the
move" and "after every prefix of the plan". The cold reading (release the source, then place) gives the same
condition under one-at-a-time execution, which is why there is no ``hold_both`` switch: it could not change a plan.
A VM lost with a failed machine (current machine ``-1``) is placed "from nowhere": it holds only the destination.

**Feasibility and tolerance.** A footprint fits where ``free >= share - PLAN_TOL`` on every node and resource,
``free`` kept as float64 (``capacity - load``). ``PLAN_TOL = 5e-10`` (cores, GB) absorbs float rounding of the
running sums (about ``1e-12`` after ten thousand updates of numbers near 100). The independent checker
(:mod:`dcplace.placement.plan_check`) replays loads in exact rational arithmetic and allows ``1e-9``: the planner is
the stricter of the two, so rounding can never let a plan through that exact arithmetic rejects.

**Algorithm.** A move is *ready* when its destination has room. (1) Execute ready moves (a work list; a move that
does not fit waits on its destination machine and is re-examined only when that machine frees room). (2) When only
blocked moves remain, the dependency graph has cycles (A waits for B to leave, B waits for A): break one by a
*staging move*, sending a blocked VM to a node that has room, preferring nodes with room even after all planned
arrivals (not in the target's way), and choosing the VM whose departure makes the most blocked moves ready (ties:
the largest reduction of their shortfall, then the least memory). Back to (1); the staged VM later goes on to its
target. (3) If the staging allowance ``max_staging`` is spent, or no VM can be staged anywhere, and the set of VMs
to move is small (``<= exact_limit``), an exact iterative-deepening search over orders and staging places (with a
transposition table) finds a plan with the fewest moves or proves there is none within ``max_staging`` extra moves.
Otherwise the VMs still blocked are reported as stuck, with the safe prefix found so far.

**Guarantees.** Every returned plan, whatever its status, is safe: replaying it from the current state never puts a
node over capacity, never moves a pinned VM, never targets an unusable machine, and ends with no VM parked at a
staging place (each VM is at its target or untouched). The plan is re-checked by the independent checker before it
is returned (``verify=True``, the default) and a failed check raises (it would be a bug). A plan is ``complete``
when it reaches the target. When it is not (and no budget cut it): with ``len(moving) <= exact_limit`` no plan
exists within ``max_staging`` extra moves, proven by the exact search unless ``reason`` says it hit its limit; above
that size the greedy may miss a plan that exists.

**Fewest staging moves.** Any blocked cycle needs at least one extra move (some VM of it must go somewhere other
than its target first). In the unit case (every node that receives a VM holds exactly one VM's footprint, as in
swaps and rotations of equal-size VMs on full nodes) each slot is the target of at most one VM, so once the ready
moves have run, the blocked moves form disjoint cycles (a chain would end at a free slot and have run). Staging any
VM of a cycle (given a staging place) makes its waiter ready and the cycle unwinds, the staged VM last: the greedy
stages exactly one VM per cycle, which is optimal. In general it has no approximation guarantee and uses at most
``max_staging`` (default: the number of VMs to move) extra moves; the exact search on small instances returns the
minimum.

**Budget.** ``max_moves`` and ``max_gb`` (memory moved by live migrations) cut the plan to its longest prefix within
the budget that leaves no VM at a staging place; the plan says it was ``truncated`` and which VMs were ``left``. A
cut is a safety net, not a choice of what to move: a prefix need not free anything, and when the plan starts with a
staging chain longer than the budget nothing is kept (a 12-machine rotation of 106 moves kept 0 at 60). Put the
budget in the target instead, as the engine's re-optimisation does (:class:`~dcplace.placement.numa_batch.
ConsolidateParams`'s ``max_moves`` / ``max_gb``: whole machines emptied into machines that only gain VMs, no staging).

**Complexity** (``n`` VMs to move, ``W`` the most moves waiting on one machine, ``S`` staging rounds): setup and
checks are ``O(V K R)`` numpy; the ready phase is ``O(n W)`` footprint tests (each machine's waiters are re-examined
only when it frees room); a staging round scores every blocked VM against the waiters of its machine, ``O(n W)``,
plus an ``O(M K R)`` vectorised scan for a staging place; in all ``O((1 + S) n W + S M K R)``. The exact search is
exponential and is used only for at most ``exact_limit`` VMs and ``exact_tests`` footprint tests (each expansion
tests every moving VM at every usable place: on a large cluster the limit is reached quickly and said so).

**Evacuation** (:func:`evacuate`): the VMs of drained or failed machines get new homes on the other usable machines
by a placement rule (default :func:`best_fit`, largest VMs first), into free room, so only they move. Where free
room is too fragmented for a VM, the fewest other VMs of one machine are moved away (each into free room elsewhere)
to make room for it; how many is reported. The resulting target goes through :func:`plan_migrations`.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]

#: The planner's absolute tolerance on capacity comparisons (cores, GB); half the checker's.
PLAN_TOL = 5e-10

#: A placement rule for evacuation: ``(free (M, K, R), usable (M,), demand (R,), multi) -> (machine, node) | None``
#: (``node = -1`` for a multi-NUMA VM; ``None``: nowhere fits).
PlacementRule = Callable[[F64, B, F64, bool], tuple[int, int] | None]


def _ro(a: npt.NDArray[np.generic]) -> None:
    a.setflags(write=False)


@dataclass(frozen=True)
class Placement:
    """Where each VM is: ``machine (V,)`` int64 (``-1``: nowhere) and ``node (V,)`` int64 (``-1``: multi-NUMA or
    nowhere). Read-only arrays."""

    machine: I64
    node: I64

    def __post_init__(self) -> None:
        m = np.array(self.machine, dtype=np.int64).reshape(-1)
        k = np.array(self.node, dtype=np.int64).reshape(-1)
        if m.shape != k.shape:
            raise InputError(f"placement has {len(m)} machines but {len(k)} nodes", field="node")
        _ro(m)
        _ro(k)
        object.__setattr__(self, "machine", m)
        object.__setattr__(self, "node", k)

    def __len__(self) -> int:
        return len(self.machine)


@dataclass(frozen=True)
class ClusterPlacement:
    """A cluster and where its VMs are now: the planner's input (the live engine's arrays, by slot).

    Attributes:
        capacity: ``(M, K, R)`` float64, capacity of each NUMA node (cores, GB).
        usable: ``(M,)`` bool, may receive VMs (false for drained and failed machines).
        demand: ``(V, R)`` float64, each VM's total demand.
        multi: ``(V,)`` bool, the VM takes ``demand / K`` on every node of its machine.
        current: the placement now; ``machine = -1`` for a VM with no home (lost with a failed machine, or an
            unused slot: a VM nowhere now and nowhere in the target is ignored).
        pinned: ``(V,)`` bool, must not move.
        cost: ``(V,)`` float64, the cost of one move of the VM; default: its memory in GB (the data a live
            migration copies, at least once).
    """

    capacity: F64
    usable: B
    demand: F64
    multi: B
    current: Placement
    pinned: B
    cost: F64

    @classmethod
    def build(
        cls,
        capacity: npt.ArrayLike,
        demand: npt.ArrayLike,
        multi: npt.ArrayLike,
        machine: npt.ArrayLike,
        node: npt.ArrayLike,
        *,
        usable: npt.ArrayLike | None = None,
        pinned: npt.ArrayLike | None = None,
        cost: npt.ArrayLike | None = None,
    ) -> ClusterPlacement:
        """Validated, read-only state; ``usable`` defaults to all machines, ``pinned`` to none, ``cost`` to the
        memory column (``demand[:, 1]``)."""
        cap = np.array(capacity, dtype=np.float64)
        if cap.ndim != 3:
            raise InputError(f"capacity must have shape (machines, numa, resources), got {cap.shape}", field="capacity")
        d = np.array(demand, dtype=np.float64).reshape(-1, cap.shape[2])
        v = len(d)
        mu = np.array(multi, dtype=np.bool_).reshape(-1)
        us = np.ones(cap.shape[0], np.bool_) if usable is None else np.array(usable, dtype=np.bool_).reshape(-1)
        pin = np.zeros(v, np.bool_) if pinned is None else np.array(pinned, dtype=np.bool_).reshape(-1)
        c = d[:, min(1, cap.shape[2] - 1)].copy() if cost is None else np.array(cost, dtype=np.float64).reshape(-1)
        return cls(cap, us, d, mu, Placement(np.asarray(machine), np.asarray(node)), pin, c)

    def __post_init__(self) -> None:
        cap = self.capacity
        v = len(self.demand)
        if cap.ndim != 3 or not np.all(np.isfinite(cap)) or np.any(cap < 0):
            raise InputError(
                "capacity must be finite, non-negative, shaped (machines, numa, resources)", field="capacity"
            )
        if self.usable.shape != (cap.shape[0],):
            raise InputError(f"usable has shape {self.usable.shape}, expected ({cap.shape[0]},)", field="usable")
        if self.demand.shape != (v, cap.shape[2]) or not np.all(np.isfinite(self.demand)) or np.any(self.demand < 0):
            raise InputError("demand must be finite, non-negative, shaped (vms, resources)", field="demand")
        for name in ("multi", "pinned", "cost"):
            if getattr(self, name).shape != (v,):
                raise InputError(f"{name} has shape {getattr(self, name).shape}, expected ({v},)", field=name)
        if len(self.current) != v:
            raise InputError(f"current placement covers {len(self.current)} VMs, expected {v}", field="current")
        _check_locations(self, self.current, "current")
        for a in (cap, self.usable, self.demand, self.multi, self.pinned, self.cost):
            _ro(a)

    @property
    def machines(self) -> int:
        return int(self.capacity.shape[0])

    @property
    def numa(self) -> int:
        return int(self.capacity.shape[1])

    @property
    def vms(self) -> int:
        return len(self.demand)

    def share(self) -> F64:
        """``(V, R)``: what the VM takes on each node it occupies (``demand / K`` for multi-NUMA VMs)."""
        return np.where(self.multi[:, None], self.demand / self.numa, self.demand)

    def load(self, where: Placement) -> F64:
        """``(M, K, R)``: the load of placement ``where`` (VMs nowhere contribute nothing)."""
        load = np.zeros_like(self.capacity)
        share = self.share()
        placed = where.machine >= 0
        single = placed & ~self.multi
        np.add.at(load, (where.machine[single], where.node[single]), share[single])
        multi = placed & self.multi
        for k in range(self.numa):
            np.add.at(load, (where.machine[multi], np.full(int(multi.sum()), k)), share[multi])
        return load

    def replace_current(
        self, current: Placement, *, usable: B | None = None, pinned: B | None = None
    ) -> ClusterPlacement:
        """The same VMs and machines with another current placement (and usable mask / pins)."""
        return ClusterPlacement(
            self.capacity,
            self.usable if usable is None else usable,
            self.demand,
            self.multi,
            current,
            self.pinned if pinned is None else pinned,
            self.cost,
        )


def _check_locations(state: ClusterPlacement, where: Placement, field: str) -> None:
    """Machines in range (or -1), nodes -1 for multi-NUMA / nowhere and in ``0..K-1`` otherwise."""
    m, k = where.machine, where.node
    bad = np.flatnonzero((m < -1) | (m >= state.machines))
    if len(bad):
        v = int(bad[0])
        raise InputError(f"VM {v} is on machine {int(m[v])}, which does not exist", field=field)
    placed = m >= 0
    bad = np.flatnonzero(placed & state.multi & (k != -1))
    if len(bad):
        v = int(bad[0])
        raise InputError(f"VM {v} is multi-NUMA and must have node -1, got {int(k[v])}", field=field)
    bad = np.flatnonzero(placed & ~state.multi & ((k < 0) | (k >= state.numa)))
    if len(bad):
        v = int(bad[0])
        raise InputError(f"VM {v} is on node {int(k[v])}, machines have {state.numa} nodes", field=field)


def _check_capacity(state: ClusterPlacement, where: Placement, field: str) -> None:
    over = state.load(where) - state.capacity > PLAN_TOL
    if np.any(over):
        m, k, r = (int(x) for x in np.argwhere(over)[0])
        raise InputError(f"the {field} placement puts machine {m} node {k} over capacity in resource {r}", field=field)


@dataclass(frozen=True, slots=True)
class Move:
    """One migration: ``vm`` from ``(src_machine, src_node)`` to ``(dst_machine, dst_node)``; ``src_machine = -1``
    places a VM that has no home (failed machine); node ``-1`` for multi-NUMA VMs; ``staging``: the destination is a
    temporary place, not the VM's target."""

    vm: int
    src_machine: int
    src_node: int
    dst_machine: int
    dst_node: int
    staging: bool


@dataclass(frozen=True)
class MigrationPlan:
    """The answer of :func:`plan_migrations`.

    Attributes:
        moves: the ordered moves (safe after every prefix, whatever the status).
        complete: the moves reach the target.
        stuck: VMs for which no safe order was found within ``max_staging`` extra moves (empty when complete or
            when only the budget cut the plan).
        left: VMs not at their target after the moves (stuck ones and those cut by the budget); each is untouched.
        truncated: the budget cut the plan.
        reason: one sentence on the outcome.
        moving: how many VMs the target moves.
        staging_moves: moves to a staging place (the extra moves).
        gb_moved: memory copied by live migrations (placements from nowhere copy nothing).
        cost: sum of the moved VMs' ``cost``, once per move.
        method: ``"greedy"`` or ``"exact"`` (the small-instance search found it).
        plan_s / check_s: wall time of planning and of the independent check; verified: the check passed
            (``None``: not run).
    """

    moves: tuple[Move, ...]
    complete: bool
    stuck: tuple[int, ...]
    left: tuple[int, ...]
    truncated: bool
    reason: str
    moving: int
    staging_moves: int
    gb_moved: float
    cost: float
    method: str
    plan_s: float
    check_s: float = 0.0
    verified: bool | None = None

    @property
    def n_moves(self) -> int:
        return len(self.moves)


def _is_moving(state: ClusterPlacement, target: Placement) -> B:
    """``(V,)``: the VM's target differs from where it is (machine, or node for a single-NUMA VM)."""
    cur = state.current
    moving: B = (cur.machine != target.machine) | (~state.multi & (cur.node != target.node))
    return moving


class _Planner:
    """Mutable planning state over numpy arrays (see the module docstring for the algorithm)."""

    def __init__(self, state: ClusterPlacement, target: Placement, moving: I64) -> None:
        self.state = state
        self.share = state.share()  # (V, R)
        self.multi = state.multi
        self.usable = state.usable
        self.free = state.capacity - state.load(state.current)  # (M, K, R)
        self.loc_m = state.current.machine.copy()  # (V,)
        self.loc_k = state.current.node.copy()
        self.tgt_m = target.machine
        self.tgt_k = target.node
        self.pending: set[int] = {int(v) for v in moving}
        # Incoming footprint of the pending moves at their targets: where staging would stand in the way.
        self.incoming = np.zeros_like(self.free)
        for v in moving:
            self._add(self.incoming, int(v), int(self.tgt_m[v]), int(self.tgt_k[v]), 1.0)
        self.waiting: dict[int, list[int]] = {}
        self.moves: list[Move] = []
        self.staged = 0

    # -- footprints ----------------------------------------------------------------------------------------------
    def _add(self, arr: F64, v: int, m: int, k: int, sign: float) -> None:
        if self.multi[v]:
            arr[m] += sign * self.share[v]
        else:
            arr[m, k] += sign * self.share[v]

    def fits(self, v: int, m: int, k: int) -> bool:
        need = self.share[v] - PLAN_TOL
        if self.multi[v]:
            return bool(np.all(self.free[m] >= need))
        return bool(np.all(self.free[m, k] >= need))

    def move(self, v: int, m: int, k: int, staging: bool) -> int:
        """Execute a move (which must fit); returns the machine it freed (``-1``: none)."""
        sm, sk = int(self.loc_m[v]), int(self.loc_k[v])
        self._add(self.free, v, m, k, -1.0)
        if sm >= 0:
            self._add(self.free, v, sm, sk, 1.0)
        self.moves.append(Move(v, sm, sk, m, k, staging))
        self.loc_m[v], self.loc_k[v] = m, k
        if staging:
            self.staged += 1
        else:
            self.pending.discard(v)
            self._add(self.incoming, v, m, k, -1.0)
        return sm

    # -- the ready phase -----------------------------------------------------------------------------------------
    def run_ready(self, work: deque[int]) -> None:
        queued = set(work)
        while work:
            v = work.popleft()
            queued.discard(v)
            if v not in self.pending:
                continue
            m, k = int(self.tgt_m[v]), int(self.tgt_k[v])
            if not self.fits(v, m, k):
                self.waiting.setdefault(m, []).append(v)
                continue
            freed = self.move(v, m, k, staging=False)
            if freed >= 0:
                for u in self.waiting.pop(freed, []):
                    if u not in queued and u in self.pending:
                        queued.add(u)
                        work.append(u)

    # -- cycle breaking ------------------------------------------------------------------------------------------
    def _scores(self) -> list[tuple[int, float, float, int]]:
        """``(-ready, -relief, memory, vm)`` for each blocked VM whose departure would help: ``ready`` = blocked
        moves into its machine that would fit once it left, ``relief`` = how much their shortfall (summed over
        nodes and resources, each relative to capacity) would shrink. Vectorised per machine: for ``C`` candidates
        and ``U`` waiters on a machine, one ``(C, U, K, R)`` comparison."""
        kn, nr = self.free.shape[1], self.free.shape[2]
        by_machine: dict[int, list[int]] = {}
        for v in self.pending:
            m = int(self.loc_m[v])
            if m >= 0 and m in self.waiting:
                by_machine.setdefault(m, []).append(v)
        out: list[tuple[int, float, float, int]] = []
        for m, cand_list in by_machine.items():
            us = np.array([u for u in dict.fromkeys(self.waiting[m]) if u in self.pending], dtype=np.int64)
            if not len(us):
                continue
            cands = np.array(sorted(cand_list), dtype=np.int64)
            free = self.free[m]  # (K, R)
            cap = np.maximum(self.state.capacity[m], 1e-12)
            add = np.zeros((len(cands), kn, nr))
            cm = self.multi[cands]
            add[cm] = self.share[cands[cm]][:, None, :]
            cs = np.flatnonzero(~cm)
            add[cs, self.loc_k[cands[cs]]] = self.share[cands[cs]]
            after = free + add  # (C, K, R)
            need = np.full((len(us), kn, nr), -np.inf)  # what each waiter needs, -inf on nodes it does not use
            um = self.multi[us]
            need[um] = self.share[us[um]][:, None, :]
            ws = np.flatnonzero(~um)
            need[ws, self.tgt_k[us[ws]]] = self.share[us[ws]]
            ready = np.all(after[:, None] >= need[None] - PLAN_TOL, axis=(2, 3))  # (C, U)
            short_before = (np.maximum(need - free, 0.0) / cap).sum(axis=(1, 2))  # (U,)
            short_after = (np.maximum(need[None] - after[:, None], 0.0) / cap).sum(axis=(2, 3))  # (C, U)
            itself = cands[:, None] == us[None, :]
            n_ready = (ready & ~itself).sum(axis=1)
            relief = np.where(itself, 0.0, short_before[None, :] - short_after).sum(axis=1)
            for i, v in enumerate(cands.tolist()):
                if n_ready[i] > 0 or relief[i] > PLAN_TOL:
                    out.append((-int(n_ready[i]), -float(relief[i]), float(self.state.demand[v, -1]), v))
        return out

    def staging_place(self, v: int) -> tuple[int, int] | None:
        """A usable place with room for ``v`` other than where it is: preferably with room even after every
        planned arrival there (not in the target's way), the one with the most such room."""
        need = self.share[v] - PLAN_TOL
        slack = self.free - self.incoming  # (M, K, R)
        if self.multi[v]:
            ok = self.usable & np.all(self.free >= need, axis=(1, 2))
            if self.loc_m[v] >= 0:
                ok[self.loc_m[v]] = False
            good = ok & np.all(slack >= need, axis=(1, 2))
            room = slack.sum(axis=(1, 2))
            pick = good if good.any() else ok
            if not pick.any():
                return None
            return int(np.argmax(np.where(pick, room, -np.inf))), -1
        ok2 = self.usable[:, None] & np.all(self.free >= need, axis=2)  # (M, K)
        if self.loc_m[v] >= 0:
            ok2[self.loc_m[v], self.loc_k[v]] = False
        good2 = ok2 & np.all(slack >= need, axis=2)
        room2 = slack.sum(axis=2)
        pick2 = good2 if good2.any() else ok2
        if not pick2.any():
            return None
        flat = int(np.argmax(np.where(pick2, room2, -np.inf)))
        return flat // self.state.numa, flat % self.state.numa

    def stage_one(self) -> tuple[int, str]:
        """Stage the blocked VM whose departure unblocks the most: (the machine freed, "") or (-1, why not)."""
        scored = self._scores()
        if not scored:
            return -1, "no VM's departure would relieve a blocked move"
        scored.sort()
        for *_, v in scored:
            place = self.staging_place(v)
            if place is not None:
                return self.move(v, place[0], place[1], staging=True), ""
        return -1, "no room to stage a VM whose departure would help"


def _exact_search(
    state: ClusterPlacement, target: Placement, moving: I64, max_extra: int, max_tests: int
) -> tuple[list[Move] | None, bool]:
    """Iterative deepening over plans of ``len(moving) + e`` moves, ``e = 0..max_extra``: each move takes one VM
    of ``moving`` to its target or to any usable place with room. Returns (a shortest plan or None, exhausted:
    whether the limit of ``max_tests`` footprint tests cut the search, so None does not prove there is no plan)."""
    p = _Planner(state, target, moving)
    vms = [int(v) for v in moving]
    places: dict[int, list[tuple[int, int]]] = {}
    for v in vms:
        ms = [int(m) for m in np.flatnonzero(state.usable)]
        opts = [(m, -1) for m in ms] if state.multi[v] else [(m, k) for m in ms for k in range(state.numa)]
        tgt = (int(target.machine[v]), int(target.node[v]))
        places[v] = [tgt] + [o for o in opts if o != tgt]  # the target first
    seen: dict[tuple[tuple[int, int], ...], int] = {}
    tests = 0
    per_expansion = sum(len(places[v]) for v in vms)
    path: list[Move] = []

    def at_target(v: int) -> bool:
        return (int(p.loc_m[v]), int(p.loc_k[v])) == (int(target.machine[v]), int(target.node[v]))

    def dfs(budget: int) -> bool:
        nonlocal tests
        away = sum(not at_target(v) for v in vms)
        if away == 0:
            return True
        if budget < away:
            return False
        key = tuple((int(p.loc_m[v]), int(p.loc_k[v])) for v in vms)
        if seen.get(key, -1) >= budget:
            return False
        seen[key] = budget
        tests += per_expansion
        if tests > max_tests:
            raise _SearchLimit
        for v in vms:
            src = (int(p.loc_m[v]), int(p.loc_k[v]))
            for m, k in places[v]:
                if (m, k) == src or not p.fits(v, m, k):
                    continue
                p._add(p.free, v, m, k, -1.0)
                if src[0] >= 0:
                    p._add(p.free, v, src[0], src[1], 1.0)
                p.loc_m[v], p.loc_k[v] = m, k
                tgt = (m, k) == (int(target.machine[v]), int(target.node[v]))
                path.append(Move(v, src[0], src[1], m, k, not tgt))
                if dfs(budget - 1):
                    return True
                path.pop()
                p.loc_m[v], p.loc_k[v] = src
                p._add(p.free, v, m, k, 1.0)
                if src[0] >= 0:
                    p._add(p.free, v, src[0], src[1], -1.0)
        return False

    try:
        for extra in range(max_extra + 1):
            seen.clear()
            if dfs(len(vms) + extra):
                return list(path), False
    except _SearchLimit:
        return None, True
    return None, False


class _SearchLimit(Exception):
    pass


def _cut(moves: list[Move], mem: F64, max_moves: int | None, max_gb: float | None) -> int:
    """The length of the longest prefix within the budget (``mem``: ``(V,)`` GB per live move) after which no VM
    stands at a staging place."""
    parked: set[int] = set()
    best, gb = 0, 0.0
    for i, mv in enumerate(moves):
        if max_moves is not None and i + 1 > max_moves:
            break
        if mv.src_machine >= 0:
            gb += float(mem[mv.vm])
        if max_gb is not None and gb > max_gb + PLAN_TOL:
            break
        if mv.staging:
            parked.add(mv.vm)
        else:
            parked.discard(mv.vm)
        if not parked:
            best = i + 1
    return best


def plan_migrations(
    state: ClusterPlacement,
    target: Placement,
    *,
    max_staging: int | None = None,
    max_moves: int | None = None,
    max_gb: float | None = None,
    exact_limit: int = 6,
    exact_tests: int = 300_000,
    verify: bool = True,
) -> MigrationPlan:
    """An ordered, capacity-safe list of moves from ``state.current`` to ``target`` (see the module docstring).

    Args:
        state: the cluster and its current placement.
        target: ``(V,)`` machine and node per VM; a pinned VM must keep its place; a placed VM may not become
            unplaced; VMs that move must target usable machines; the target must fit the capacities.
        max_staging: extra moves allowed to break cycles (default: the number of VMs to move).
        max_moves / max_gb: a budget (moves; GB copied by live migrations): the plan is cut to a safe prefix.
        exact_limit / exact_tests: when the greedy gets stuck and at most ``exact_limit`` VMs move, search exactly
            (at most ``exact_tests`` footprint tests, about a second).
        verify: replay the plan with the independent checker (raises ``RuntimeError`` if it fails: a bug).

    Raises:
        InputError: a target that is malformed, over capacity, moves a pinned VM, unplaces a VM or puts a moving
            VM on an unusable machine; a negative budget.
    """
    t0 = time.perf_counter()
    if len(target) != state.vms:
        raise InputError(f"target covers {len(target)} VMs, expected {state.vms}", field="target")
    _check_locations(state, target, "target")
    moving_mask = _is_moving(state, target)
    cur = state.current
    bad = np.flatnonzero(moving_mask & state.pinned)
    if len(bad):
        v = int(bad[0])
        raise InputError(
            f"target moves pinned VM {v} (machine {int(cur.machine[v])} -> {int(target.machine[v])})", field="target"
        )
    bad = np.flatnonzero(moving_mask & (target.machine < 0))
    if len(bad):
        raise InputError(f"target removes VM {int(bad[0])} from the cluster; a plan only moves VMs", field="target")
    bad = np.flatnonzero(moving_mask & ~state.usable[np.maximum(target.machine, 0)])
    if len(bad):
        v = int(bad[0])
        raise InputError(
            f"target puts VM {v} on machine {int(target.machine[v])}, which may not receive VMs", field="target"
        )
    _check_capacity(state, cur, "current")
    _check_capacity(state, target, "target")
    for name, val in (("max_staging", max_staging), ("max_moves", max_moves), ("max_gb", max_gb)):
        if val is not None and not val >= 0:
            raise InputError(f"{name} must be non-negative, got {val}", field=name)

    moving = np.flatnonzero(moving_mask).astype(np.int64)
    allowance = len(moving) if max_staging is None else int(max_staging)
    planner = _Planner(state, target, moving)
    planner.run_ready(deque(int(v) for v in moving))
    why = "staging allowance spent"
    while planner.pending and planner.staged < allowance:
        freed, why = planner.stage_one()
        if freed < 0:
            break
        planner.run_ready(deque(planner.waiting.pop(freed, [])))
    moves, method = planner.moves, "greedy"
    stuck: tuple[int, ...] = tuple(sorted(planner.pending))
    reason = "all moves ordered"
    if stuck:
        said = ", ".join(x for x in (why, f"{planner.staged} staging moves tried") if x)
        reason = f"no safe order found for {len(stuck)} VMs ({said})"
        if len(moving) <= exact_limit:
            found, limited = _exact_search(state, target, moving, allowance, exact_tests)
            if found is not None:
                moves, method, stuck, reason = found, "exact", (), "all moves ordered (exact search)"
            elif limited:
                reason += f"; the exact search hit its limit of {exact_tests} footprint tests"
            else:
                reason = f"no safe order exists within {allowance} extra moves (exact search)"
    clean = _cut(moves, state.demand[:, -1], None, None)  # stuck plans end at the last point with none parked
    n = _cut(moves, state.demand[:, -1], max_moves, max_gb)
    truncated = n < clean
    if truncated:
        reason = f"budget: {n} of {len(moves)} moves kept" + ("" if not stuck else f"; {reason}")
    moves = moves[:n]
    final_m, final_k = cur.machine.copy(), cur.node.copy()
    for mv in moves:
        final_m[mv.vm], final_k[mv.vm] = mv.dst_machine, mv.dst_node
    done = (final_m == target.machine) & (state.multi | (final_k == target.node))
    left = tuple(int(v) for v in moving if not done[v])
    mem = state.demand[:, -1]
    plan = MigrationPlan(
        moves=tuple(moves),
        complete=not left,
        stuck=stuck,
        left=left,
        truncated=truncated,
        reason=reason,
        moving=len(moving),
        staging_moves=sum(mv.staging for mv in moves),
        gb_moved=float(sum(mem[mv.vm] for mv in moves if mv.src_machine >= 0)),
        cost=float(sum(state.cost[mv.vm] for mv in moves)),
        method=method,
        plan_s=time.perf_counter() - t0,
    )
    if not verify:
        return plan
    from dcplace.placement.plan_check import check_plan  # the checker shares no code with the planner

    t1 = time.perf_counter()
    report = check_plan(state, target, plan)
    check_s = time.perf_counter() - t1
    if not report.ok:
        raise RuntimeError(f"migration plan failed its independent check: {'; '.join(report.errors[:3])}")
    return replace(plan, check_s=check_s, verified=True)


# ---------------------------------------------------------------------------------------------------------------
# Evacuation


def best_fit(free: F64, usable: B, demand: F64, multi: bool) -> tuple[int, int] | None:
    """The usable place with the least room left after placing ``demand`` (room summed over resources, each scaled
    by the largest free amount of that resource in the cluster), or ``None``. ``free``: ``(M, K, R)``."""
    k_nodes = free.shape[1]
    scale = np.maximum(free.reshape(-1, free.shape[2]).max(axis=0), 1e-12)  # (R,)
    if multi:
        share = demand / k_nodes
        ok = usable & np.all(free >= share - PLAN_TOL, axis=(1, 2))
        if not ok.any():
            return None
        left = ((free - share) / scale).sum(axis=(1, 2))
        return int(np.argmin(np.where(ok, left, np.inf))), -1
    ok2 = usable[:, None] & np.all(free >= demand - PLAN_TOL, axis=2)
    if not ok2.any():
        return None
    left2 = ((free - demand) / scale).sum(axis=2)
    flat = int(np.argmin(np.where(ok2, left2, np.inf)))
    return flat // k_nodes, flat % k_nodes


@dataclass(frozen=True)
class Evacuation:
    """The answer of :func:`evacuate`.

    Attributes:
        state: the state the plan starts from (a failed machine's VMs already have no home; the evacuated machines
            are unusable).
        target: the new placement.
        plan: the migration plan from ``state`` to ``target`` (verified).
        evacuated: VMs that were on the evacuated machines.
        evicted: other VMs moved to make room (empty when free room sufficed).
        unplaced: evacuated VMs that found no home even with evictions (a failed machine's stay without a home,
            a drained machine's stay where they are).
    """

    state: ClusterPlacement
    target: Placement
    plan: MigrationPlan
    evacuated: tuple[int, ...]
    evicted: tuple[int, ...]
    unplaced: tuple[int, ...]


def evacuate(
    state: ClusterPlacement,
    machines: Sequence[int],
    *,
    failed: bool = False,
    rule: PlacementRule = best_fit,
    allow_evictions: bool = True,
    max_staging: int | None = None,
    verify: bool = True,
) -> Evacuation:
    """Move every VM off ``machines`` (drained: live migrations; ``failed``: their VMs are gone and are placed
    from nowhere) onto the other usable machines, moving as few VMs as it can (see the module docstring).

    A pinned VM on a drained machine is an error (unpin it first); pins of a failed machine's VMs are void.
    Complexity: ``O(E M K R)`` for ``E`` evacuated VMs placed into free room; each VM that needs evictions adds
    ``O(M K (h log h + E' M K R))`` for ``h`` VMs per machine and ``E'`` evicted candidates tried.
    """
    ms = sorted({int(m) for m in machines})
    for m in ms:
        if not 0 <= m < state.machines:
            raise InputError(f"machine {m} does not exist (the cluster has {state.machines})", field="machines")
    usable = state.usable.copy()
    usable[ms] = False
    cur = state.current
    on = np.isin(cur.machine, ms)
    evac = np.flatnonzero(on)
    pinned = state.pinned.copy()
    if failed:
        machine, node = cur.machine.copy(), cur.node.copy()
        machine[on], node[on] = -1, -1
        pinned[on] = False
        start = state.replace_current(Placement(machine, node), usable=usable, pinned=pinned)
    else:
        bad = np.flatnonzero(on & pinned)
        if len(bad):
            raise InputError(
                f"VM {int(bad[0])} on drained machine {int(cur.machine[bad[0]])} is pinned; unpin it before draining",
                field="pinned",
            )
        start = state.replace_current(cur, usable=usable)
    tgt_m, tgt_k = start.current.machine.copy(), start.current.node.copy()
    free = start.capacity - start.load(start.current)
    share = start.share()
    size = (share / np.maximum(start.capacity.reshape(-1, start.capacity.shape[2]).max(axis=0), 1e-12)).max(axis=1)
    order = sorted((int(v) for v in evac), key=lambda v: (-size[v], v))

    def put(v: int, m: int, k: int, sign: float) -> None:
        if start.multi[v]:
            free[m] += sign * share[v]
        else:
            free[m, k] += sign * share[v]

    homeless: list[int] = []
    for v in order:
        place = rule(free, usable, start.demand[v], bool(start.multi[v]))
        if place is None:
            homeless.append(v)
            continue
        tgt_m[v], tgt_k[v] = place
        put(v, place[0], place[1], -1.0)
    evicted: dict[int, None] = {}  # ordered set
    unplaced: list[int] = []
    evacuated = set(order)
    for v in homeless:
        place = rule(free, usable, start.demand[v], bool(start.multi[v]))  # room an earlier eviction made
        if place is not None:  # (a failed machine's VM was dropped where a move for the one before had freed room)
            tgt_m[v], tgt_k[v] = place
            put(v, place[0], place[1], -1.0)
            continue
        found = _make_room(start, v, free, usable, tgt_m, tgt_k, evacuated, rule) if allow_evictions else None
        if found is None:
            unplaced.append(v)
            continue
        (m, k), moved = found
        for u, (um, uk) in moved:
            put(u, int(tgt_m[u]), int(tgt_k[u]), 1.0)
            put(u, um, uk, -1.0)
            tgt_m[u], tgt_k[u] = um, uk
            evicted[u] = None
        put(v, m, k, -1.0)
        tgt_m[v], tgt_k[v] = m, k
    target = Placement(tgt_m, tgt_k)
    plan = plan_migrations(start, target, max_staging=max_staging, verify=verify)
    return Evacuation(start, target, plan, tuple(int(v) for v in evac), tuple(evicted), tuple(sorted(unplaced)))


def _make_room(
    state: ClusterPlacement,
    v: int,
    free: F64,
    usable: B,
    tgt_m: I64,
    tgt_k: I64,
    evacuated: set[int],
    rule: PlacementRule,
    max_tries: int = 64,
) -> tuple[tuple[int, int], list[tuple[int, tuple[int, int]]]] | None:
    """A place for ``v`` made by moving the fewest other (unpinned, not evacuated) VMs off one machine, each into
    free room elsewhere: ``((machine, node), [(vm, new place), ...])`` or ``None``. Tries the ``max_tries`` places
    with the smallest shortfall, evicting the largest residents first; stops at the first one-eviction answer."""
    share = state.share()
    kn = state.numa
    need = share[v]
    cap_scale = np.maximum(state.capacity.reshape(-1, state.capacity.shape[2]).max(axis=0), 1e-12)
    movable = ~state.pinned & (tgt_m >= 0)
    movable[list(evacuated)] = False
    residents: dict[int, list[int]] = {}
    for vm in np.flatnonzero(movable).tolist():
        residents.setdefault(int(tgt_m[vm]), []).append(vm)
    best: tuple[tuple[int, int], list[tuple[int, tuple[int, int]]]] | None = None
    room_all = np.where(usable[:, None, None], np.maximum(free, 0.0), 0.0).sum(axis=(0, 1))  # (R,)
    if np.any(room_all < state.demand[v] - PLAN_TOL):
        return None  # evictions move room around, they cannot create it
    # Candidate places by increasing shortfall (each resource relative to the cluster's largest capacity).
    lack = np.maximum(need - free, 0.0) / cap_scale  # (M, K, R)
    if state.multi[v]:
        places = [((int(m), -1), float(lack[m].sum())) for m in np.flatnonzero(usable)]
    else:
        places = [((int(m), k), float(lack[m, k].sum())) for m in np.flatnonzero(usable) for k in range(kn)]
    places.sort(key=lambda p: (p[1], p[0]))
    for (m, k), _ in places[:max_tries]:
        nodes = list(range(kn)) if k < 0 else [k]
        room = free[m].copy()  # (K, R)
        if np.all(room[nodes] >= need - PLAN_TOL):
            continue  # it would have fit: not a case for evictions
        cands: list[int] = [u for u in residents.get(m, []) if state.multi[u] or k < 0 or int(tgt_k[u]) == k]
        cands.sort(key=lambda u: (-float((share[u] / cap_scale).max()), u))
        out: list[int] = []
        for u in cands:
            if best is not None and len(out) + 1 >= len(best[1]):
                break
            if state.multi[u]:
                room += share[u]
            else:
                room[int(tgt_k[u])] += share[u]
            out.append(u)
            if np.all(room[nodes] >= need - PLAN_TOL):
                break
        if not np.all(room[nodes] >= need - PLAN_TOL):
            continue
        trial = free.copy()
        trial[m] = room
        if state.multi[v]:
            trial[m] -= need
        else:
            trial[m, k] -= need
        elsewhere = usable.copy()
        elsewhere[m] = False
        placed: list[tuple[int, tuple[int, int]]] = []
        for u in out:
            p = rule(trial, elsewhere, state.demand[u], bool(state.multi[u]))
            if p is None:
                break
            placed.append((u, p))
            if state.multi[u]:
                trial[p[0]] -= share[u]
            else:
                trial[p[0], p[1]] -= share[u]
        if len(placed) == len(out) and (best is None or len(out) < len(best[1])):
            best = ((m, k), placed)
            if len(out) == 1:
                return best
    return best
