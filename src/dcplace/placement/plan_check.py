"""The independent checker of migration plans, and a brute-force search for tiny instances.

It shares no code with the planner (:mod:`dcplace.placement.migration`): it reads the raw arrays of the state, the
target and the plan's moves, converts every number to an exact integer multiple of a common unit (floats are dyadic
rationals; see :class:`_Cluster`), so float rounding of running sums can neither hide nor invent an overload, and
replays the moves with plain loops over Python lists. A node counts as over capacity when its exact load exceeds
its capacity by more than ``CHECK_TOL`` (``1e-9`` cores or GB; the planner works to half of that).

What :func:`check_plan` verifies, for every move in order: the VM exists and is not pinned; it is where the move
says it comes from (``-1``: nowhere); the destination machine exists and may receive VMs, the node fits the VM's
kind (``-1`` for multi-NUMA, ``0..K-1`` otherwise) and differs from the source; with the VM held on **both** source
and destination (a live migration), no node of the destination is over capacity; the move's ``staging`` flag says
whether its destination is not the VM's target. At the end: the VMs the plan reports as ``left`` are exactly those
not at their target (none when ``complete``), and each of them is where it started (no VM left parked); every other
VM is at its target; the initial state is within capacity; and the summary (moves, staging moves, GB copied by live
migrations, cost) matches a recount.

:func:`min_moves` is the brute force used by the tests: a breadth-first search over the placements of the VMs that
must move, each step moving one of them to its target or to any usable place with room (all others stay), which
returns the fewest moves that reach the target or ``None`` if none exists within the given number of extra moves.
It is exponential: tiny instances only.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass
from fractions import Fraction
from typing import Any, Protocol

import numpy as np
import numpy.typing as npt

CHECK_TOL = Fraction(1, 10**9)

Where = tuple[int, int]  # (machine, node); machine -1: nowhere; node -1: every node (multi-NUMA)


# What the checker reads, as structural types: it imports nothing from the planner (the planner's
# ClusterPlacement, Placement, Move and MigrationPlan satisfy these).
class Placement(Protocol):
    @property
    def machine(self) -> npt.NDArray[np.int64]: ...  # (V,)
    @property
    def node(self) -> npt.NDArray[np.int64]: ...  # (V,)


class ClusterPlacement(Protocol):
    @property
    def capacity(self) -> npt.NDArray[np.float64]: ...  # (M, K, R)
    @property
    def usable(self) -> npt.NDArray[np.bool_]: ...  # (M,)
    @property
    def demand(self) -> npt.NDArray[np.float64]: ...  # (V, R), memory last
    @property
    def multi(self) -> npt.NDArray[np.bool_]: ...  # (V,)
    @property
    def pinned(self) -> npt.NDArray[np.bool_]: ...  # (V,)
    @property
    def cost(self) -> npt.NDArray[np.float64]: ...  # (V,)
    @property
    def current(self) -> Placement: ...


class Move(Protocol):
    @property
    def vm(self) -> int: ...
    @property
    def src_machine(self) -> int: ...
    @property
    def src_node(self) -> int: ...
    @property
    def dst_machine(self) -> int: ...
    @property
    def dst_node(self) -> int: ...
    @property
    def staging(self) -> bool: ...


class MigrationPlan(Protocol):
    @property
    def moves(self) -> tuple[Move, ...]: ...
    @property
    def complete(self) -> bool: ...
    @property
    def left(self) -> tuple[int, ...]: ...
    @property
    def n_moves(self) -> int: ...
    @property
    def staging_moves(self) -> int: ...
    @property
    def gb_moved(self) -> float: ...
    @property
    def cost(self) -> float: ...


@dataclass(frozen=True)
class PlanCheck:
    """``ok`` when ``errors`` is empty; ``replayed``: moves replayed; ``peak``: the highest exact load / capacity
    ratio seen on any node with capacity during the replay (float)."""

    ok: bool
    errors: tuple[str, ...]
    replayed: int
    peak: float


class _Cluster:
    """Exact integer loads ``load[machine][node][resource]`` and the VMs' raw data, as Python values.

    Every float is a dyadic rational ``n / 2**e``; with ``D`` the largest such denominator among the capacities and
    demands, ``K * D * x`` is an integer for every capacity and demand ``x`` and for every multi-NUMA share ``x / K``.
    Loads are kept in that unit, so sums and comparisons are exact (and fast: Python integers).

    A VM's share in that unit is worked out from its distinct demand row (:meth:`part`; a cluster has few distinct
    sizes), and the starting loads add each group of VMs of one size on one node at once (:meth:`add_placed`): at
    667,000 VMs, a list per VM and a loop over them were two thirds of an evacuation's 6 s under the engine's lock."""

    def __init__(self, state: ClusterPlacement) -> None:
        cap = state.capacity
        self.n_machines, self.n_nodes, self.n_res = (int(x) for x in cap.shape)
        values = np.unique(np.concatenate([cap.reshape(-1), state.demand.reshape(-1)])).tolist()  # few distinct
        ratios = {x: float(x).as_integer_ratio() for x in values}
        self.unit = self.n_nodes * max((d for _, d in ratios.values()), default=1)  # integers per core / GB
        self.exact = {x: n * (self.unit // d) for x, (n, d) in ratios.items()}
        self.tol = int(CHECK_TOL * self.unit)  # floor: an integer excess e is within tolerance iff e <= floor(tol)
        self.cap = [[[self.exact[x] for x in node] for node in machine] for machine in cap.tolist()]
        self.load = [[[0] * self.n_res for _ in range(self.n_nodes)] for _ in range(self.n_machines)]
        self.usable = [bool(x) for x in state.usable.tolist()]
        self.multi_arr = np.asarray(state.multi, dtype=np.bool_)
        self.multi = self.multi_arr.tolist()
        self.pinned = [bool(x) for x in state.pinned.tolist()]
        demand = np.asarray(state.demand, dtype=np.float64).reshape(len(self.multi), self.n_res)
        first, kind = _distinct_rows(demand)
        self.rows = demand[first].tolist()
        self.kind = kind  # the VM's distinct demand row
        self.kinds = self.kind.tolist()
        self._parts: dict[tuple[int, bool], list[int]] = {}
        self.mem = demand[:, -1].tolist()
        self.cost = np.asarray(state.cost, dtype=np.float64).tolist()

    def part_of(self, row: int, multi: bool) -> list[int]:
        """What a VM of demand row ``row`` takes on each node it occupies, in units: demand / K if multi-NUMA."""
        key = (row, multi)
        got = self._parts.get(key)
        if got is None:
            got = self._parts[key] = [self.exact[x] // (self.n_nodes if multi else 1) for x in self.rows[row]]
        return got

    def part(self, v: int) -> list[int]:
        return self.part_of(self.kinds[v], self.multi[v])

    def nodes_of(self, v: int, where: Where) -> list[int]:
        return list(range(self.n_nodes)) if self.multi[v] else [where[1]]

    def add(self, v: int, where: Where, sign: int) -> None:
        if where[0] < 0:
            return
        part = self.part(v)
        for k in self.nodes_of(v, where):
            row = self.load[where[0]][k]
            for r in range(self.n_res):
                row[r] += sign * part[r]

    def add_placed(self, machine: npt.NDArray[np.int64], node: npt.NDArray[np.int64]) -> None:
        """Add every placed VM (machine >= 0) at ``(machine, node)``: what :meth:`add` does VM by VM, a group of
        VMs of one demand row and span on one node at a time (``count`` times the share, exactly)."""
        placed = machine >= 0
        key = np.stack([machine[placed], np.where(self.multi_arr[placed], -1, node[placed]), self.kind[placed],
                        self.multi_arr[placed]], axis=1).astype(np.int64)  # fmt: skip
        if not len(key):
            return
        first, group = _distinct_rows(key)
        counts = np.bincount(group, minlength=len(first))
        for (m, k, row, multi), count in zip(key[first].tolist(), counts.tolist(), strict=True):
            part = self.part_of(row, bool(multi))
            for kk in range(self.n_nodes) if multi else (k,):
                load = self.load[m][kk]
                for r in range(self.n_res):
                    load[r] += count * part[r]

    def over(self, m: int, k: int) -> int:
        """The first resource over capacity on node ``(m, k)``, or -1."""
        for r in range(self.n_res):
            if self.load[m][k][r] - self.cap[m][k][r] > self.tol:
                return r
        return -1

    def ratio(self, m: int, k: int) -> float:
        return max(
            (self.load[m][k][r] / self.cap[m][k][r] for r in range(self.n_res) if self.cap[m][k][r] > 0), default=0.0
        )

    def valid_place(self, v: int, where: Where) -> str:
        m, k = where
        if not 0 <= m < self.n_machines:
            return f"machine {m} does not exist"
        if not self.usable[m]:
            return f"machine {m} may not receive VMs"
        if self.multi[v] and k != -1:
            return f"multi-NUMA VM {v} needs node -1, got {k}"
        if not self.multi[v] and not 0 <= k < self.n_nodes:
            return f"node {k} does not exist"
        return ""


def _distinct_rows(a: npt.NDArray[Any]) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
    """The distinct rows of the 2-D ``a``: (the index of one row of each, each row's group in ``[0, len(first))``).
    ``np.unique(axis=0)`` compares rows as raw bytes and took 2.5 s at 667,000 rows here; each column's codes
    combined into one integer per row (while the product of the columns' distinct counts fits in an int64) take a
    1-D sort instead."""
    codes = np.zeros(len(a), dtype=np.int64)
    radix = 1
    for col in a.T:
        values, inv = np.unique(col, return_inverse=True)
        if radix * len(values) >= 2**62:  # too many combinations for one integer: rows as bytes after all
            _, first, group = np.unique(a, axis=0, return_index=True, return_inverse=True)
            return first.astype(np.int64), group.reshape(-1).astype(np.int64)
        codes = codes * len(values) + inv.reshape(-1)
        radix *= len(values)
    _, first, group = np.unique(codes, return_index=True, return_inverse=True)
    return first.astype(np.int64), group.reshape(-1).astype(np.int64)


def _places(where: Placement) -> list[Where]:
    return list(zip(np.asarray(where.machine).tolist(), np.asarray(where.node).tolist(), strict=True))


def _same(multi: bool, a: Where, b: Where) -> bool:
    return a[0] == b[0] and (multi or a[1] == b[1])


def check_plan(state: ClusterPlacement, target: Placement, plan: MigrationPlan) -> PlanCheck:
    """Replay ``plan`` from ``state.current`` and verify it against ``target`` (see the module docstring)."""
    c = _Cluster(state)
    errors: list[str] = []
    loc = _places(state.current)
    start = list(loc)
    goal = _places(target)
    n_vms = len(loc)
    if len(goal) != n_vms:
        return PlanCheck(False, (f"target covers {len(goal)} VMs, state has {n_vms}",), 0, 0.0)
    cur_m, cur_n = np.asarray(state.current.machine), np.asarray(state.current.node)
    c.add_placed(cur_m, cur_n)
    peak = 0.0
    for m in range(c.n_machines):
        for k in range(c.n_nodes):
            if c.over(m, k) >= 0:
                errors.append(f"the current state is over capacity on machine {m} node {k}")
            peak = max(peak, c.ratio(m, k))
    staging = 0
    gb = 0.0
    cost = 0.0
    replayed = 0
    moved: set[int] = set()
    for i, mv in enumerate(plan.moves):
        v = int(mv.vm)
        src: Where = (int(mv.src_machine), int(mv.src_node))
        dst: Where = (int(mv.dst_machine), int(mv.dst_node))
        if not 0 <= v < n_vms:
            errors.append(f"move {i}: VM {v} does not exist")
            break
        if c.pinned[v]:
            errors.append(f"move {i}: VM {v} is pinned")
        if src != loc[v] and not (src[0] == loc[v][0] == -1):
            errors.append(f"move {i}: VM {v} is at {loc[v]}, the move says {src}")
        bad = c.valid_place(v, dst)
        if bad:
            errors.append(f"move {i}: VM {v} to {dst}: {bad}")
            break
        if _same(c.multi[v], dst, loc[v]):
            errors.append(f"move {i}: VM {v} does not change place")
        c.add(v, dst, +1)  # held on both ends while it migrates
        for k in c.nodes_of(v, dst):
            r = c.over(dst[0], k)
            if r >= 0:
                errors.append(f"move {i}: VM {v} puts machine {dst[0]} node {k} over capacity in resource {r}")
            peak = max(peak, c.ratio(dst[0], k))
        c.add(v, loc[v], -1)
        if loc[v][0] >= 0:
            gb += c.mem[v]
        loc[v] = dst
        moved.add(v)
        cost += c.cost[v]
        is_staging = not _same(c.multi[v], dst, goal[v])
        staging += is_staging
        if bool(mv.staging) != is_staging:
            errors.append(
                f"move {i}: staging flag {mv.staging} but the destination is "
                f"{'not ' if is_staging else ''}VM {v}'s target"
            )
        replayed += 1
    # Not at the target: of the VMs never moved, those whose start is not (in arrays: most VMs stay), and of the
    # moved ones those whose last move did not end there.
    goal_m, goal_n = np.asarray(target.machine), np.asarray(target.node)
    off = (cur_m != goal_m) | (~c.multi_arr & (cur_n != goal_n))
    away = {v for v in np.flatnonzero(off).tolist() if v not in moved}
    away |= {v for v in moved if not _same(c.multi[v], loc[v], goal[v])}
    if plan.complete and away:
        errors.append(f"the plan says complete but {len(away)} VMs are not at their target (first: {min(away)})")
    if away != set(plan.left):
        errors.append(f"{len(away)} VMs are not at their target but the plan reports {len(plan.left)} left")
    for v in sorted(away):
        if loc[v] != start[v]:
            errors.append(f"VM {v} ends at {loc[v]}, neither its target nor where it started")
            break
    if len(plan.moves) != plan.n_moves or staging != plan.staging_moves:
        errors.append(f"summary: {plan.staging_moves} staging moves reported, {staging} counted")
    if abs(gb - plan.gb_moved) > 1e-9 * max(1.0, gb) or abs(cost - plan.cost) > 1e-9 * max(1.0, cost):
        errors.append(f"summary: {plan.gb_moved} GB / cost {plan.cost} reported, {gb} / {cost} counted")
    return PlanCheck(not errors, tuple(errors), replayed, peak)


def min_moves(state: ClusterPlacement, target: Placement, max_extra: int, max_states: int = 200_000) -> int | None:
    """The fewest moves from ``state.current`` to ``target`` with at most ``max_extra`` moves beyond one per VM
    that must move (breadth-first search; see the module docstring), or ``None`` when there is no such plan.

    Raises ``RuntimeError`` if more than ``max_states`` placements would have to be visited."""
    c = _Cluster(state)
    start = _places(state.current)
    goal = _places(target)
    movers = [v for v in range(len(start)) if not _same(c.multi[v], start[v], goal[v])]
    fixed = [v for v in range(len(start)) if v not in set(movers)]
    for v in fixed:
        c.add(v, start[v], +1)
    base = [[list(row) for row in node] for node in c.load]
    options: dict[int, list[Where]] = {}
    for v in movers:
        ms = [m for m in range(c.n_machines) if c.usable[m]]
        options[v] = [(m, -1) for m in ms] if c.multi[v] else [(m, k) for m in ms for k in range(c.n_nodes)]

    def loads(places: tuple[Where, ...]) -> list[list[list[int]]]:
        c.load = [[list(row) for row in node] for node in base]
        for v, w in zip(movers, places, strict=True):
            c.add(v, w, +1)
        return c.load

    def fits(v: int, w: Where, load: Any) -> bool:
        for k in c.nodes_of(v, w):
            for r in range(c.n_res):
                if load[w[0]][k][r] + c.part(v)[r] - c.cap[w[0]][k][r] > c.tol:
                    return False
        return True

    first = tuple(start[v] for v in movers)
    final = tuple(goal[v] for v in movers)
    limit = len(movers) + max_extra
    depth: dict[tuple[Where, ...], int] = {first: 0}
    queue: deque[tuple[Where, ...]] = deque([first])
    while queue:
        s = queue.popleft()
        d = depth[s]
        if all(_same(c.multi[v], a, b) for v, a, b in zip(movers, s, final, strict=True)):
            return d
        if d >= limit:
            continue
        load = loads(s)
        for i, v in enumerate(movers):
            for w in options[v]:
                if _same(c.multi[v], w, s[i]) or not fits(v, w, load):
                    continue
                nxt = (*s[:i], w, *s[i + 1 :])
                if nxt not in depth:
                    depth[nxt] = d + 1
                    if len(depth) > max_states:
                        raise RuntimeError(f"brute force: more than {max_states} placements")
                    queue.append(nxt)
    return None
