"""The NUMA pattern model: column generation over server configurations with NUMA-node patterns, for a
:class:`~dcplace.placement.numa_batch.NumaBatch` (issue 18).

**Configurations and types.** Servers with equal free capacity (node 0 CPU / RAM, node 1 CPU / RAM) form a
configuration ``k`` with ``m_k`` servers; VMs of equal (CPU, RAM, NUMA span) form a type ``t`` with ``n_t`` VMs
(C1-C4: about 106 configurations, 15-18 types).

**Patterns.** A pattern of configuration ``k`` is ``(s0, s1, d)``: how many VMs of each single-NUMA type sit on node 0
and on node 1, and how many of each double-NUMA type (half on each node) the server hosts, such that each node's CPU
and RAM hold its load:

    sum_t cpu_t s0_t + sum_u cpu_u / 2 d_u <= C_k0   (and RAM; node 1 with s1)

It covers ``a_t = s0_t + s1_t`` (single) or ``d_t`` (double) VMs of each type.

**Master** (Gilmore-Gomory): ``x_kp`` servers of configuration ``k`` run pattern ``p``:

    minimise  sum_kp x_kp
    s.t.      sum_kp a_pt x_kp >= n_t      (every type covered; surplus slots stay empty)
              sum_p x_kp <= m_k            (servers per configuration)

Without placement constraints the integer master *is* the problem: VMs of a type are interchangeable and a server's
feasibility is a pattern's, so its optimum over all patterns is the optimum servers used.

**Pricing** is exact by dynamic programming on an integer grid (quantities times ``scale``, the smallest of 1, 2, 4
that makes every capacity and half-demand whole): ``F[c, r]``, the largest dual value of single-NUMA VMs with CPU
<= ``c`` and RAM <= ``r`` (an unbounded 2-D knapsack, one table per round for all nodes), and for each
configuration every double-NUMA count vector that fits both nodes (enumerated once) completed by ``F`` on each
node's remainder. So the best pattern of every configuration is found each round.

**Bound.** For any duals ``pi >= 0`` the Lagrangian ``sum_t pi_t n_t + sum_k m_k min(0, 1 - max_p pi . a_p)`` is a
lower bound on the integer master, hence on the servers used (with the pricing exact, it equals the LP optimum when
no column prices out); rounded up, and at least the largest anti-affinity group. Placement constraints are dropped,
so it is a bound for the constrained problem too.

**Integer master**: CP-SAT over the generated columns (one worker), hinted by the LP answer rounded up, with the
bound as a redundant row so that it stops once it meets it. It is the problem's optimum when it meets the bound
(no branch-and-price otherwise: then the columns may miss a better integer answer).

**Realisation with constraints** (:func:`realise`; a decomposition, heuristic on its own: the constraints are not
in the master). Each chosen pattern goes to a server of its configuration, which fixes typed *slots* (type,
server, node); VMs take slots of their type:

1. affinity groups (largest first): the rack whose free slots cover the whole group, leaving the least spare; else
   the rack where the fewest *exchanges* of untouched patterns with servers of other racks make its slots cover it
   (an exchange keeps every pattern on a server that holds it: equal free capacity, or an empty server at least as
   large on both nodes); else the rack where slots plus room beyond the slots hold it opening the fewest servers
   (room the slots hold is used last, dropping those slots);
2. anti-affinity groups (largest first; distinct servers, the server with most free slots of the type first), then
   fault-domain groups (a domain only in racks the group's other domains do not use; racks it uses already first).
   A VM with no allowed free slot takes the slot of an earlier non-affinity VM of its type that may itself move to
   a free slot of the type (a *swap*);
3. the unconstrained VMs, any free slot of their type.

A VM still without a slot goes to :class:`~dcplace.placement.numa_batch.Packer`'s phase B (best fit into the open
servers' gaps, else a new server; if nothing takes it, unconstrained VMs are moved off the server where the least
RAM moves), then phase C consolidates. The independent checker verifies it all.
"""

from __future__ import annotations

import itertools
import math
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import numpy.typing as npt
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

from dcplace.config import check as check_value
from dcplace.errors import InputError
from dcplace.placement.cpsat import run_cp
from dcplace.placement.numa_batch import (
    STRATEGIES,
    ConsolidateParams,
    NumaBatch,
    NumaBatchParams,
    Packer,
    _node_for,
    _State,
    _take,
    consolidated,
    solve_consolidate,
    solve_relaxation_guided,
    within_budget,
)
from dcplace.placement.params import Params
from dcplace.placement.result import Result
from dcplace.placement.stop import Stop

Column = tuple[int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]
"""(configuration, s0, s1, d): single-NUMA VMs per single type on node 0 and node 1, double-NUMA VMs per double type."""


class OffGrid(InputError):
    """The batch's capacities or demands are not multiples of 1/4: the DP pricing has no exact grid for them."""


@dataclass
class Catalogue:
    """Configurations and types of a batch, on the pricing grid."""

    config_free: npt.NDArray[np.float64]  # (K, 2, 2) free cpu, ram per node
    config_servers: list[list[int]]  # (K,) the servers of each configuration
    type_demand: npt.NDArray[np.float64]  # (T, 3) cpu, ram, numa
    type_count: npt.NDArray[np.int64]  # (T,)
    type_of: npt.NDArray[np.int64]  # (n,) each VM's type
    single: list[int]  # types with numa 1, in s0 / s1 order
    double: list[int]  # types with numa 2, in d order
    scale: int  # grid units per CPU core and per GB

    @property
    def counts(self) -> npt.NDArray[np.int64]:
        return np.array([len(s) for s in self.config_servers], np.int64)

    def cover(self, col: Column) -> npt.NDArray[np.int64]:
        """(T,) VMs of each type the column covers."""
        a = np.zeros(len(self.type_count), np.int64)
        _, s0, s1, d = col
        a[self.single] += np.asarray(s0, np.int64) + np.asarray(s1, np.int64)
        a[self.double] += np.asarray(d, np.int64)
        return a


def catalogue(b: NumaBatch) -> Catalogue:
    """Configurations, types and the pricing grid of ``b``; :class:`InputError` if no grid of 1/4 unit holds the
    data exactly (the DP pricing needs one)."""
    keys, inv = np.unique(b.node_free.reshape(b.servers, 4), axis=0, return_inverse=True)
    inv = np.asarray(inv).ravel()
    servers: list[list[int]] = [[] for _ in range(len(keys))]
    for s, k in enumerate(inv.tolist()):
        servers[k].append(s)
    kinds, tinv, counts = np.unique(np.c_[b.cpu, b.ram, b.numa], axis=0, return_inverse=True, return_counts=True)
    half = kinds[:, :2] / np.where(kinds[:, 2:3] == 2, 2.0, 1.0)
    for scale in (1, 2, 4):
        vals = np.concatenate([keys.ravel(), half.ravel()]) * scale
        if np.array_equal(vals, np.round(vals)):  # exactly: allclose took 4.00001 for 4 (a plan over capacity)
            break
    else:
        raise OffGrid(f"{b.name}: capacities and demands are not multiples of 1/4 (the pattern model's grid)")
    return Catalogue(keys.reshape(-1, 2, 2).astype(np.float64), servers, kinds.astype(np.float64),
                     counts.astype(np.int64), np.asarray(tinv, np.int64).ravel(),
                     [t for t in range(len(kinds)) if kinds[t, 2] == 1],
                     [t for t in range(len(kinds)) if kinds[t, 2] == 2], scale)  # fmt: skip


class Pricer:
    """Exact pricing by dynamic programming (module docstring)."""

    def __init__(self, cat: Catalogue) -> None:
        self.cat = cat
        g = cat.scale
        cap = np.round(cat.config_free * g).astype(np.int64)  # (K, 2, 2)
        self.cap = cap
        self.cmax, self.rmax = int(cap[:, :, 0].max()), int(cap[:, :, 1].max())
        self.sd = np.round(cat.type_demand[cat.single, :2] * g).astype(np.int64)  # (Ts, 2)
        self.dd = np.round(cat.type_demand[cat.double, :2] * g / 2).astype(np.int64)  # (Td, 2) per node
        # every double-NUMA count vector that fits the largest node pair, with its per-node use
        combos: list[tuple[int, ...]] = [()]
        for u in range(len(cat.double)):
            nxt = []
            for c in combos:
                used = np.dot(np.asarray(c, np.int64), self.dd[:u]) if u else np.zeros(2, np.int64)
                k = 0
                while used[0] + k * self.dd[u, 0] <= self.cmax and used[1] + k * self.dd[u, 1] <= self.rmax:
                    nxt.append((*c, k))
                    k += 1
                    if self.dd[u].max() == 0:
                        break
            combos = nxt
        self.combos = np.asarray(combos, np.int64).reshape(len(combos), len(cat.double))  # (M, Td)
        self.combo_use = self.combos @ self.dd if len(cat.double) else np.zeros((len(combos), 2), np.int64)
        lo = cap.min(axis=1)  # (K, 2) the smaller node's cpu, ram
        self.fits = [np.flatnonzero((self.combo_use[:, 0] <= lo[k, 0]) & (self.combo_use[:, 1] <= lo[k, 1]))
                     for k in range(len(cap))]  # fmt: skip

    def table(self, pi_single: npt.NDArray[np.float64]) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.int64]]:
        """``F`` (cmax+1, rmax+1) and the last type that improved each cell (-1: none)."""
        f = np.zeros((self.cmax + 1, self.rmax + 1))
        choice = np.full(f.shape, -1, np.int64)
        for j, (c, r) in enumerate(self.sd.tolist()):
            v = float(pi_single[j])
            if v <= 1e-12 or c > self.cmax or r > self.rmax:
                continue
            for cc in range(c, self.cmax + 1):
                cand = f[cc - c, : self.rmax + 1 - r] + v
                row = f[cc, r:]
                better = cand > row + 1e-12
                if better.any():
                    row[better] = cand[better]
                    choice[cc, r:][better] = j
        return f, choice

    def unpack(self, choice: npt.NDArray[np.int64], c: int, r: int) -> tuple[int, ...]:
        """The single-NUMA counts behind ``F[c, r]``."""
        out = [0] * len(self.sd)
        while c >= 0 and r >= 0 and choice[c, r] >= 0:
            j = int(choice[c, r])
            out[j] += 1
            c, r = c - int(self.sd[j, 0]), r - int(self.sd[j, 1])
        return tuple(out)

    def best(self, pi: npt.NDArray[np.float64]) -> list[tuple[float, Column]]:
        """The best pattern of every configuration for duals ``pi`` (T,): (value, column) per configuration."""
        cat = self.cat
        f, choice = self.table(pi[cat.single])
        dval = self.combos @ pi[cat.double] if len(cat.double) else np.zeros(len(self.combos))
        out = []
        for k in range(len(self.cap)):
            idx = self.fits[k]
            use = self.combo_use[idx]
            (c0, r0), (c1, r1) = self.cap[k].tolist()
            val = dval[idx] + f[c0 - use[:, 0], r0 - use[:, 1]] + f[c1 - use[:, 0], r1 - use[:, 1]]
            m = int(np.argmax(val))
            u0, u1 = int(use[m, 0]), int(use[m, 1])
            col = (k, self.unpack(choice, c0 - u0, r0 - u1), self.unpack(choice, c1 - u0, r1 - u1),
                   tuple(int(v) for v in self.combos[idx[m]]))  # fmt: skip
            out.append((float(val[m]), col))
        return out


@dataclass
class Master:
    """Column generation's outcome: columns, the LP answer, the bound."""

    columns: list[Column]
    lp_x: npt.NDArray[np.float64]  # (columns,)
    lp_value: float
    bound: float  # the best Lagrangian bound seen (not rounded)
    converged: bool
    """No column prices out and the LP covers every type (without phase-one slack)."""
    covered: bool
    """The LP covers every type without slack: the batch fits the servers when constraints are ignored (when
    ``converged`` is False too, only that no covering was found before the stop)."""
    rounds: int
    stats: dict[str, float] = field(default_factory=dict)


def generate_columns(cat: Catalogue, pricer: Pricer, stop: Stop) -> Master:
    """Column generation on the master LP (GLOP) until no column prices out or ``stop`` expires."""
    n = cat.type_count.astype(float)
    m = cat.counts
    columns: dict[Column, None] = {}
    size = (
        cat.type_demand[:, 0] / cat.config_free[:, :, 0].sum() + cat.type_demand[:, 1] / cat.config_free[:, :, 1].sum()
    )
    for _, col in pricer.best(size / size.max()):  # dense first columns: fill each configuration by size
        columns[col] = None
    for t in range(len(n)):  # one VM type alone, where it fits: every type coverable from the start
        pi = np.zeros(len(n))
        pi[t] = 1.0
        for v, col in pricer.best(pi):
            if v > 0:
                columns[col] = None
    big = float(m.sum()) + 1.0  # phase-one slack: the restricted master is always feasible
    best_bound, lp_value, converged, covered, rounds = -math.inf, math.inf, False, False, 0
    x_val = np.zeros(0)
    while True:
        rounds += 1
        cols = list(columns)
        lp = pywraplp.Solver.CreateSolver("GLOP")
        xs = [lp.NumVar(0, float(m[c[0]]), "") for c in cols]
        cover = [lp.Constraint(float(v), lp.infinity()) for v in n]
        avail = [lp.Constraint(-lp.infinity(), float(v)) for v in m]
        for var, col in zip(xs, cols, strict=True):
            for t, a in enumerate(cat.cover(col).tolist()):
                if a:
                    cover[t].SetCoefficient(var, a)
            avail[col[0]].SetCoefficient(var, 1)
        slack = [lp.NumVar(0, lp.infinity(), "") for _ in n]
        for t, v in enumerate(slack):
            cover[t].SetCoefficient(v, 1)
        lp.Minimize(sum(xs) + big * sum(slack))
        if lp.Solve() != pywraplp.Solver.OPTIMAL:
            raise InputError("the pattern master LP found no optimum")
        lp_value = lp.Objective().Value()
        x_val = np.array([v.solution_value() for v in xs])
        pi = np.maximum(np.array([c.dual_value() for c in cover]), 0.0)
        best = pricer.best(pi)
        lagrange = float(pi @ n) + float(sum(m[col[0]] * min(0.0, 1.0 - v) for v, col in best))
        best_bound = max(best_bound, lagrange)
        added = 0
        for v, col in best:
            if v > 1.0 + 1e-9 and col not in columns:
                columns[col] = None
                added += 1
        covered = max(float(s.solution_value()) for s in slack) < 1e-9
        if added == 0:
            converged = covered
            best_bound = max(best_bound, lp_value) if converged else best_bound
            break
        if stop.expired():
            break
    return Master(list(columns)[: len(x_val)], x_val, lp_value, best_bound, converged, covered, rounds)


def integer_master(cat: Catalogue, master: Master, stop: Stop, seed: int) -> list[Column] | None:
    """CP-SAT over the generated columns (one worker), hinted by the LP answer rounded up: one column per server used,
    or None if no integer answer was found in time."""
    mdl = cp_model.CpModel()
    cols = master.columns
    m = cat.counts
    xs = [mdl.new_int_var(0, int(m[c[0]]), f"x{i}") for i, c in enumerate(cols)]
    cover = np.array([cat.cover(c) for c in cols])  # (columns, T)
    for t, need in enumerate(cat.type_count.tolist()):
        mdl.add(sum(int(cover[i, t]) * xs[i] for i in np.flatnonzero(cover[:, t])) >= need)
    for k in range(len(m)):
        mine = [xs[i] for i, c in enumerate(cols) if c[0] == k]
        if mine:
            mdl.add(sum(mine) <= int(m[k]))
    for var, v in zip(xs, master.lp_x.tolist(), strict=True):
        mdl.add_hint(var, math.ceil(v - 1e-6))
    if math.isfinite(master.bound):  # redundant: no integer answer beats the bound; lets CP-SAT stop once it meets it
        mdl.add(sum(xs) >= math.ceil(master.bound - 1e-6))
    mdl.minimize(sum(xs))
    ans = run_cp(mdl, stop, seed=seed, least=0.5)
    if not ans.found:
        return None
    return [c for var, c in zip(xs, cols, strict=True) for _ in range(int(ans.solver.value(var)))]


# --- realisation: slots, constraints, fallback ----------------------------------------------------------------------


@dataclass
class Slots:
    """Free typed slots: ``free[t][(server, node)]``, how many more VMs of type ``t`` go there (node -1: split)."""

    free: dict[int, dict[tuple[int, int], int]]

    def take(self, t: int, s: int, j: int) -> None:
        self.free[t][(s, j)] -= 1
        if self.free[t][(s, j)] == 0:
            del self.free[t][(s, j)]


def slots_of(cat: Catalogue, used: list[Column], order: list[int] | None = None) -> tuple[Slots, list[int]]:
    """Each chosen column onto a server of its configuration (in ``order`` within a configuration, default index
    order): the typed slots and the servers used."""
    nxt = [list(s) for s in cat.config_servers]
    if order is not None:
        rank = {s: i for i, s in enumerate(order)}
        for lst in nxt:
            lst.sort(key=lambda s: rank.get(s, len(rank)))
    free: dict[int, dict[tuple[int, int], int]] = defaultdict(dict)
    servers = []
    for k, s0, s1, d in used:
        s = nxt[k].pop(0)
        servers.append(s)
        for j, counts in ((0, s0), (1, s1)):
            for q, c in enumerate(counts):
                if c:
                    free[cat.single[q]][(s, j)] = c
        for q, c in enumerate(d):
            if c:
                free[cat.double[q]][(s, -1)] = c
    return Slots(free), servers


class _Realiser:
    """The realisation's state: the packing (:class:`Packer`'s state), the free typed slots, and ``reserved``: the
    CPU / RAM the free slots hold on each node, so that a VM placed outside the slots never takes a slot's room
    without the slot being dropped."""

    def __init__(self, b: NumaBatch, cat: Catalogue, used: list[Column], order: list[int] | None = None) -> None:
        self.b, self.cat = b, cat
        self.packer = Packer(b)
        self.st = _State(b.node_free.copy(), np.zeros(b.servers, bool), [-1] * b.vms, [0] * b.vms)
        self.slots, _ = slots_of(cat, used, order)
        self.reserved = np.zeros_like(b.node_free)  # (S, 2, 2) cpu, ram held by free slots
        for t, where in self.slots.free.items():
            for (sv, j), c in where.items():
                self._hold(t, sv, j, c)
        self.by_slot = self.dropped = self.relocated = self.swapped = 0
        self.slotted: dict[int, tuple[int, int]] = {}  # VM -> the slot (server, node) it took

    def _hold(self, t: int, sv: int, j: int, count: int) -> None:
        c, r, _ = self.cat.type_demand[t]
        if j == -1:
            self.reserved[sv, :, 0] += count * c / 2
            self.reserved[sv, :, 1] += count * r / 2
        else:
            self.reserved[sv, j] += (count * c, count * r)

    def effective(self, sv: int) -> npt.NDArray[np.float64]:
        """(2, 2) what server ``sv`` has free beyond its free slots."""
        out: npt.NDArray[np.float64] = self.st.free[sv] - self.reserved[sv]
        return out

    def take_slot(self, i: int, sv: int, j: int) -> None:
        t = int(self.cat.type_of[i])
        self.slots.take(t, sv, j)
        self._hold(t, sv, j, -1)
        self.packer._assign(self.st, i, sv, j)
        self.slotted[i] = (sv, j)
        self.by_slot += 1

    def _give_back(self, i: int) -> None:
        """Take VM ``i`` off its slot, which is free again."""
        sv, j = self.slotted.pop(i)
        t = int(self.cat.type_of[i])
        self.packer._unassign(self.st, i)
        self.slots.free[t][(sv, j)] = self.slots.free[t].get((sv, j), 0) + 1
        self._hold(t, sv, j, 1)
        self.by_slot -= 1

    def slot_or_swap(self, i: int, choose: Callable[[list[tuple[int, int]]], tuple[int, int]]) -> bool:
        """VM ``i`` (not placed) onto a free slot of its type its constraints allow (``choose`` picks among them);
        else onto the slot of a VM of its type placed earlier that may itself move to a free slot of the type (a
        swap). False if neither exists."""
        t = int(self.cat.type_of[i])
        allowed = [k for k in self.slots.free[t] if self.packer._allowed(self.st, i, k[0])]
        if allowed:
            self.take_slot(i, *choose(allowed))
            return True
        if not self.slots.free[t]:
            return False
        for other, (sv, j) in list(self.slotted.items()):
            if int(self.cat.type_of[other]) != t or self.b.strategy[other] == "affinity":  # a group stays whole
                continue
            self._give_back(other)
            if self.packer._allowed(self.st, i, sv):
                self.take_slot(i, sv, j)
                spots = [k for k in self.slots.free[t] if self.packer._allowed(self.st, other, k[0])]
                if spots:
                    self.take_slot(other, *spots[0])
                    self.swapped += 1
                    return True
                self._give_back(i)
            self.take_slot(other, sv, j)
        return False

    def put_free(self, i: int, sv: int, j: int) -> None:
        """VM ``i`` outside the slots; drop free slots of ``sv`` (largest RAM first) until the rest hold again."""
        self.packer._assign(self.st, i, sv, j)
        while np.any(self.effective(sv) < -1e-9):
            here = [(t, jj) for t, where in self.slots.free.items() for (s2, jj) in where if s2 == sv]
            t, jj = max(here, key=lambda tj: (self.cat.type_demand[tj[0], 1], tj[0], tj[1]))
            self.slots.take(t, sv, jj)
            self._hold(t, sv, jj, -1)
            self.dropped += 1

    def _swap_slots(self, u: int, v: int) -> None:
        """Exchange the free slots of servers ``u`` and ``v`` (nothing placed on either yet; each holds the other's
        pattern: equal free capacity, or one of them has no slots and is at least as large on both nodes)."""
        for t, where in self.slots.free.items():
            moving = [(key, where.pop(key)) for key in [key for key in where if key[0] in (u, v)]]
            for (sv, j), c in moving:
                other = v if sv == u else u
                where[(other, j)] = c
                self._hold(t, sv, j, -c)
                self._hold(t, other, j, c)
        self.relocated += 1

    def _relocation(self, need: dict[int, int]) -> tuple[int, list[tuple[int, int]]] | None:
        """The rack where exchanging the fewest untouched patterns (nothing placed on the server yet) between its
        servers and servers of other racks makes its free slots cover ``need`` (VMs per type): (rack, [(server in
        the rack, server outside)]), or None. An exchange keeps every pattern on a server that holds it."""
        b = self.b
        types = sorted(need)
        count = np.zeros((b.servers, len(types)), np.int64)  # (S, types) free slots per server
        holds = np.zeros(b.servers, bool)
        for t, where in self.slots.free.items():
            for (sv, _), c in where.items():
                holds[sv] = True
                if t in need:
                    count[sv, types.index(t)] += c
        idle = ~self.st.opened & np.array([not self.st.on[sv] for sv in range(b.servers)])
        donors = np.flatnonzero(idle & holds)
        if len(donors) == 0:
            return None
        want = np.array([need[t] for t in types], np.int64)
        best: tuple[int, int, list[tuple[int, int]]] | None = None
        for rk, servers in self.packer.rack_servers.items():
            mine = np.array(servers, np.int64)
            deficit = want - count[mine].sum(axis=0)
            if not np.any(deficit > 0):
                continue
            here = mine[idle[mine]]
            there = donors[b.rack[donors] != rk]
            if len(here) == 0 or len(there) == 0:
                continue
            big = np.all(b.node_free[here][:, None] >= b.node_free[there][None] - 1e-9, axis=(2, 3))  # (E, D)
            small = np.all(b.node_free[here][:, None] <= b.node_free[there][None] + 1e-9, axis=(2, 3))
            ok = big & (small | ~holds[here][:, None])
            moves: list[tuple[int, int]] = []
            while np.any(deficit > 0) and ok.any():
                after = deficit[None, None] - count[there][None] + count[here][:, None]  # (E, D, types)
                gain = np.maximum(deficit, 0).sum() - np.maximum(after, 0).sum(axis=2)
                score = np.where(ok, gain, -1)
                e, d = np.unravel_index(int(np.argmax(score)), score.shape)
                if score[e, d] <= 0:
                    break
                moves.append((int(here[e]), int(there[d])))
                deficit = after[e, d]
                ok[e, :] = False
                ok[:, d] = False
            if not np.any(deficit > 0) and (best is None or len(moves) < best[0]):
                best = (len(moves), rk, moves)
        return None if best is None else (best[1], best[2])

    def affinity(self, g: list[int]) -> bool:
        """Group ``g`` whole into one rack: the rack whose free slots cover it with the least spare; else the rack
        where slots plus room beyond the slots (open servers first, then unopened ones, largest first) hold it
        opening the fewest servers; else the same using room the slots hold (dropping them). False if no rack."""
        b, t_of = self.b, self.cat.type_of
        need: dict[int, int] = defaultdict(int)
        for i in g:
            need[int(t_of[i])] += 1
        per_rack: dict[int, dict[int, list[tuple[int, int]]]] = defaultdict(lambda: defaultdict(list))
        for t in need:
            for (sv, j), c in self.slots.free[t].items():
                per_rack[int(b.rack[sv])][t] += [(sv, j)] * c
        covering = [(sum(len(h[t]) - c for t, c in need.items()), rk) for rk, h in per_rack.items()
                    if all(len(h[t]) >= c for t, c in need.items())]  # fmt: skip
        if not covering:  # move untouched patterns onto empty servers of one rack until its slots cover the group
            got = self._relocation(need)
            if got is not None:
                for u, v in got[1]:
                    self._swap_slots(u, v)
                per_rack = defaultdict(lambda: defaultdict(list))
                for t in need:
                    for (sv, j), c in self.slots.free[t].items():
                        per_rack[int(b.rack[sv])][t] += [(sv, j)] * c
                covering = [(0, got[0])]
        if covering:
            rk = min(covering)[1]
            for i in g:
                self.take_slot(i, *per_rack[rk][int(t_of[i])].pop())
            return True
        for beyond_slots in (True, False):
            best: tuple[tuple[int, int], list[tuple[int, int, int, bool]]] | None = None
            for rk, servers in self.packer.rack_servers.items():
                have = {t: list(per_rack[rk][t]) for t in need} if rk in per_rack else {t: [] for t in need}
                room = {sv: self.effective(sv) if beyond_slots else self.st.free[sv].copy() for sv in servers}
                opened = {sv for sv in servers if self.st.opened[sv]}
                plan: list[tuple[int, int, int, bool]] = []
                for i in g:
                    t = int(t_of[i])
                    if have[t]:
                        spot = have[t].pop()
                        plan.append((i, *spot, True))
                        if not beyond_slots:  # room counts the slots' share here: the slot's VM takes it
                            _take(room[spot[0]], float(b.cpu[i]), float(b.ram[i]), spot[1])
                        continue
                    pool = sorted(opened, key=lambda sv: float(room[sv].sum())) + [sv for sv in servers
                                                                                 if sv not in opened]  # fmt: skip
                    for sv in pool:
                        node = _node_for(room[sv], float(b.cpu[i]), float(b.ram[i]), int(b.numa[i]))
                        if node is not None:
                            _take(room[sv], float(b.cpu[i]), float(b.ram[i]), node)
                            opened.add(sv)
                            plan.append((i, sv, node, False))
                            break
                    else:
                        break
                if len(plan) < len(g):
                    continue
                key = (len(opened) - sum(int(self.st.opened[sv]) for sv in servers), -sum(p[3] for p in plan))
                if best is None or key < best[0]:
                    best = (key, plan)
            if best is not None:  # slots first: placing beyond the slots may drop slots of the same server
                for i, sv, j, by_slot in sorted(best[1], key=lambda p: not p[3]):
                    (self.take_slot if by_slot else self.put_free)(i, sv, j)
                return True
        return False


def realise(
    b: NumaBatch, cat: Catalogue, used: list[Column], stop: Stop, order: list[int] | None = None
) -> tuple[list[int], list[int], dict[str, int]]:
    """An assignment from the chosen columns, constraints honoured (module docstring): (server, node, stats).
    ``order``: which servers of a configuration take its patterns first (default: index order)."""
    rz = _Realiser(b, cat, used, order)
    packer, st, slots, t_of = rz.packer, rz.st, rz.slots, cat.type_of
    unplaced_groups = [g for g in packer.groups if not rz.affinity(g)]
    Spot = tuple[int, int]

    def most_slots(i: int) -> Callable[[list[Spot]], Spot]:  # anti-affinity: spread over the fullest slot sets
        t = int(t_of[i])
        return lambda ks: max(ks, key=lambda k: (slots.free[t][k], -k[0]))

    def own_racks(i: int) -> Callable[[list[Spot]], Spot]:  # fault domain: racks this domain uses already first
        mine, dom = st.fd[b.group[i]], b.domain[i]
        return lambda ks: min(ks, key=lambda k: (mine[int(b.rack[k[0]])][dom] == 0, k[0]))

    # anti-affinity groups (largest first): distinct servers
    for g in sorted(b.groups("anti-affinity").values(), key=lambda v: -len(v)):
        for i in g:
            rz.slot_or_swap(i, most_slots(i))
    # fault-domain groups (largest first): a domain only in racks the group's other domains do not use
    for g in sorted(b.groups("fault_domain").values(), key=lambda v: -len(v)):
        for i in sorted(g, key=lambda i: (b.domain[i], i)):
            rz.slot_or_swap(i, own_racks(i))
    # the rest: any slot of the type
    for i in range(b.vms):
        if st.server[i] < 0 and not b.strategy[i]:
            t = int(t_of[i])
            if slots.free[t]:
                rz.take_slot(i, *next(iter(slots.free[t])))
    left = [i for i in range(b.vms) if st.server[i] < 0]
    for g in unplaced_groups:
        packer._group(st, g)
    evicted = 0
    for i in packer.singles:
        if st.server[i] < 0:
            try:
                packer._single(st, i)
            except InputError:
                evicted += _evict_for(packer, st, i)
    opened_before_c = int(st.opened.sum())
    closed = packer.consolidate(st, stop)
    stats = {"by_slot": rz.by_slot, "slots_dropped": rz.dropped, "relocated": rz.relocated, "swapped": rz.swapped,
             "fallback": len(left),
             "evicted": evicted,
             "servers_before_consolidation": opened_before_c, "closed": closed}  # fmt: skip
    return st.server, st.node, stats


def _evict_for(packer: Packer, st: _State, i: int) -> int:
    """Place VM ``i``, which fits no server as things stand, by moving unconstrained VMs off one node (or both, for
    a double-NUMA VM) of a server its constraints allow: the server where the least RAM moves; the moved VMs then go
    where phase B puts them. Returns how many moved; :class:`InputError` if no server can take ``i`` even empty of
    unconstrained VMs."""
    b = packer.b
    c, r = float(b.cpu[i]), float(b.ram[i])
    nodes = (0, 1) if b.numa[i] == 2 else None
    best: tuple[float, int, int, list[int]] | None = None
    for s in range(b.servers):
        if not packer._allowed(st, i, s):
            continue
        for j in (-1,) if nodes else (0, 1):
            want = (c / 2, r / 2) if j == -1 else (c, r)
            on = (0, 1) if j == -1 else (j,)
            out: list[int] = []
            free = {q: st.free[s, q].copy() for q in on}
            loose = sorted((v for v in st.on[s] if not b.strategy[v] and (st.node[v] in on or st.node[v] == -1)),
                           key=lambda v: -b.ram[v])  # fmt: skip
            for v in loose:
                if all(free[q][0] >= want[0] - 1e-9 and free[q][1] >= want[1] - 1e-9 for q in on):
                    break
                out.append(v)
                share = 0.5 if st.node[v] == -1 else 1.0
                for q in on:
                    if st.node[v] == -1 or st.node[v] == q:
                        free[q] += [b.cpu[v] * share, b.ram[v] * share]
            if all(free[q][0] >= want[0] - 1e-9 and free[q][1] >= want[1] - 1e-9 for q in on):
                moved = float(b.ram[out].sum()) if out else 0.0
                if best is None or moved < best[0]:
                    best = (moved, s, j, out)
    if best is None:
        raise InputError(f"{b.name}: VM {i} fits no server under its constraints (infeasible for this packing)")
    _, s, j, out = best
    for v in out:
        packer._unassign(st, v)
    packer._assign(st, i, s, j)
    for v in out:
        packer._single(st, v)
    return len(out)


def constraint_counts(b: NumaBatch) -> dict[str, int]:
    return {s: len(b.groups(s)) for s in STRATEGIES[1:]}


# --- the method ---------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class NumaPatternParams(Params):
    """Parameters of the NUMA pattern model (method ``pattern`` for a :class:`NumaBatch`)."""

    cg_share: float = 0.5
    """Share of the time column generation may use at most, in (0, 1) (it usually converges in a few seconds)."""
    master_seconds: float = 20.0
    """Most seconds for the integer master (CP-SAT, one worker), > 0; it stops earlier once it meets the bound."""
    restarts: int = 10
    """While servers used exceed the bound, realise the same columns again with the servers of each configuration
    in a random order (seeded), keeping the best: at most this many more realisations, >= 0 (0: one)."""
    restart_seconds: float = 20.0
    """... and for at most this many seconds in all, >= 0."""
    lns_seconds: float = 15.0
    """While servers used still exceed the bound, at most this many seconds of :func:`close_by_cpsat` (CP-SAT
    re-places one server's VMs and its rack's unconstrained VMs to close it), >= 0 (0: none)."""

    def check(self) -> None:
        check_value(0 < self.cg_share < 1, "cg_share", self.cg_share, "in (0, 1)")
        check_value(self.master_seconds > 0, "master_seconds", self.master_seconds, "positive")
        check_value(self.restarts >= 0, "restarts", self.restarts, "at least 0")
        check_value(self.restart_seconds >= 0, "restart_seconds", self.restart_seconds, "at least 0")
        check_value(self.lns_seconds >= 0, "lns_seconds", self.lns_seconds, "at least 0")


def solve_numa_pattern(batch: NumaBatch, stop: Stop, seed: int, params: NumaPatternParams) -> Result:
    """Column generation with exact DP pricing (bound), the integer master, then the constraint-aware realisation
    (module docstring); deterministic for a seed."""
    timings: dict[str, float] = {}
    t0 = time.perf_counter()
    cat = catalogue(batch)
    master = generate_columns(cat, Pricer(cat), stop.share(params.cg_share))
    timings["cg_s"] = time.perf_counter() - t0
    if master.converged is False and not master.covered and not stop.expired():
        raise InputError(f"{batch.name}: the servers' free capacity cannot hold the batch (infeasible)")
    anti = max((len(v) for v in batch.groups("anti-affinity").values()), default=0)
    bound = max(math.ceil(master.bound - 1e-6), anti) if math.isfinite(master.bound) else anti
    t1 = time.perf_counter()
    used = integer_master(cat, master, stop.share(1.0, most=params.master_seconds), seed)
    timings["master_s"] = time.perf_counter() - t1
    t2 = time.perf_counter()
    if used is None:  # no integer answer in time: first-fit decreasing from nothing
        used = []
    rng = np.random.default_rng(seed)
    best: tuple[int, list[int], list[int], dict[str, int]] | None = None
    failed: InputError | None = None
    order: list[int] | None = None  # first realisation: servers of a configuration in index order
    tries = 0
    while True:
        tries += 1
        try:
            server, node, stats = realise(batch, cat, used, stop, order)
            if best is None or len(set(server)) < best[0]:
                best = (len(set(server)), server, node, stats)
        except InputError as exc:  # this order strands a VM: another may not
            failed = exc
        if (best is not None and best[0] <= bound) or stop.expired():
            break
        if tries > params.restarts or time.perf_counter() - t2 >= params.restart_seconds:
            break
        order = rng.permutation(batch.servers).tolist()
    if best is None:  # every realisation stranded a VM (small, tightly constrained batches): the other packings
        assert failed is not None
        return _fallback(batch, stop, seed, bound, master.converged, failed)
    servers, server, node, stats = best
    timings["realise_s"] = time.perf_counter() - t2
    lns_closed = 0
    if servers > bound and params.lns_seconds > 0 and not stop.expired():
        t3 = time.perf_counter()
        server, node, lns_closed = close_by_cpsat(batch, server, node, stop.share(1.0, most=params.lns_seconds), seed)
        servers = len(set(server))
        timings["lns_s"] = time.perf_counter() - t3
    all_stats: dict[str, Any] = {
        "bound_proven": master.converged,
        "lp_value": master.lp_value,
        "cg_rounds": master.rounds,
        "columns": len(master.columns),
        "unconstrained_servers": len(used),
        "realisations": tries,
        "lns_closed": lns_closed,
        "constraints": constraint_counts(batch),
        **stats,
        **timings,
    }
    status = "optimal" if servers == bound and master.converged else "feasible"
    return Result(batch.name, "pattern", status, float(servers), float(bound), vms=batch.vms,
                  vm_pm=np.asarray(server), vm_node=np.asarray(node), stats=all_stats)  # fmt: skip


EXACT_MAX_SPOTS = 20_000
"""The exact assignment fallback's size limit: VMs x servers x NUMA choices."""


def _fallback(batch: NumaBatch, stop: Stop, seed: int, bound: int, bound_proven: bool, failed: InputError) -> Result:
    """When no realisation of the pattern answer places every VM: the relaxation-guided packing, then (small
    batches) the exact assignment model; the larger of the pattern's bound (proven when ``bound_proven``) and the
    fallback's own is kept, with whether it is proven, and the answer is ``optimal`` exactly when it uses that many
    servers and the bound is proven (as the pattern's own answers). Raises ``failed`` when neither finds one."""

    def answer(res: Result, own: float, own_proven: bool, how: str) -> Result:
        lower, proven = (own, own_proven) if own >= bound else (float(bound), bound_proven)
        status = "optimal" if proven and res.pms_used <= lower else "feasible"
        return replace(res, method="pattern", status=status, bound=lower,
                       stats={**res.stats, "bound_proven": proven, "fallback_from_pattern": how})  # fmt: skip

    try:
        res = solve_relaxation_guided(batch, stop, seed, NumaBatchParams())
        return answer(res, res.bound or 0.0, bool(res.stats.get("bound_proven", False)), "relaxation-guided")
    except InputError:
        pass
    got = exact_assignment(batch, stop, seed) if not stop.expired() else None
    if got is not None and got[2] == "infeasible":
        raise InputError(f"{batch.name}: no placement satisfies the batch's constraints (proven by the exact "
                         f"assignment model)")  # fmt: skip
    if got is None:
        raise failed
    server, node, _, lower = got  # CP-SAT's best bound: proven whatever its status
    res = Result(batch.name, "pattern", "feasible", float(len(set(server))), lower, vms=batch.vms,
                 vm_pm=np.asarray(server), vm_node=np.asarray(node))  # fmt: skip
    return answer(res, lower, True, "exact-assignment")


def exact_assignment(b: NumaBatch, stop: Stop, seed: int) -> tuple[list[int], list[int], str, float] | None:
    """Fewest servers by a plain CP-SAT assignment model (a boolean per VM, server and NUMA choice; capacity per
    node, a double-NUMA VM half on each; anti-affinity at most one per server; affinity one rack; fault domains on
    different racks), for batches of at most :data:`EXACT_MAX_SPOTS` choices on the quarter grid; None otherwise or
    when CP-SAT finds nothing in time. Returns ``(server, node, status, bound)`` (node -1: both); status
    ``infeasible`` (empty lists) when CP-SAT proves no placement exists."""
    choices = [(-1,) if b.numa[i] == 2 else (0, 1) for i in range(b.vms)]
    if sum(len(c) for c in choices) * b.servers > EXACT_MAX_SPOTS:
        return None
    scale = 8.0  # quarters, halved for a double-NUMA VM's share
    data = np.concatenate([b.cpu, b.ram, b.node_free.ravel()]) * scale
    if not np.allclose(data, np.round(data)):
        return None
    m = cp_model.CpModel()
    x = {(i, s, j): m.new_bool_var("") for i in range(b.vms) for s in range(b.servers) for j in choices[i]}
    used = [m.new_bool_var("") for _ in range(b.servers)]
    for i in range(b.vms):
        m.add_exactly_one(x[i, s, j] for s in range(b.servers) for j in choices[i])
    for s in range(b.servers):
        for q in (0, 1):
            for demand, r in ((b.cpu, 0), (b.ram, 1)):
                load = [round(demand[i] * scale * (0.5 if j == -1 else 1.0)) * x[i, s, j] for i in range(b.vms)
                        for j in choices[i] if j in (q, -1)]  # fmt: skip
                m.add(sum(load) <= round(b.node_free[s, q, r] * scale) * used[s])
    on = {(i, s): sum(x[i, s, j] for j in choices[i]) for i in range(b.vms) for s in range(b.servers)}
    racks = sorted(set(b.rack.tolist()))
    in_rack = {(i, rk): sum(on[i, s] for s in range(b.servers) if b.rack[s] == rk) for i in range(b.vms)
               for rk in racks}  # fmt: skip
    for members in b.groups("anti-affinity").values():
        for s in range(b.servers):
            m.add(sum(on[i, s] for i in members) <= 1)
    for members in b.groups("affinity").values():
        for i, k in itertools.pairwise(members):
            for rk in racks:
                m.add(in_rack[i, rk] == in_rack[k, rk])
    for members in b.groups("fault_domain").values():
        for a, i in enumerate(members):
            for k in members[a + 1 :]:
                if b.domain[i] != b.domain[k]:
                    for rk in racks:
                        m.add(in_rack[i, rk] + in_rack[k, rk] <= 1)
    m.minimize(sum(used))
    ans = run_cp(m, stop, seed=seed)
    if ans.status == "infeasible":
        return [], [], "infeasible", math.inf
    if not ans.found:
        return None
    server = [-1] * b.vms
    node = [-1] * b.vms
    for (i, sv, j), var in x.items():
        if ans.solver.value(var):
            server[i], node[i] = sv, j
    return server, node, ans.status, float(ans.bound or 0.0)


def solve_numa_auto(batch: NumaBatch, stop: Stop, seed: int, params: NumaBatchParams) -> Result:
    """``pattern``; ``relaxation-guided`` where the data is off the pattern model's grid; ``consolidate`` for a batch
    with a current placement."""
    if batch.has_current:
        return solve_consolidate(batch, stop, seed, ConsolidateParams(bound_share=params.bound_share))
    try:
        return replace(solve_numa_pattern(batch, stop, seed, NumaPatternParams()), method="auto")
    except OffGrid:
        return replace(solve_relaxation_guided(batch, stop, seed, params), method="auto")


@dataclass(frozen=True)
class Moves:
    """What moving costs, for :func:`close_by_cpsat` in re-optimisation: per VM its current server (-1: new) and
    migration cost (in servers), and ``fits(server)``: whether a whole placement stays within the event's budget."""

    current: npt.NDArray[np.int64]
    cost: npt.NDArray[np.float64]
    fits: Callable[[list[int]], bool]


def _pays(moves: Moves, st: _State, was: dict[int, tuple[int, int]], hosts: list[int]) -> bool:
    """Re-optimisation's test of a close, exactly in floats: every host node within capacity, one server fewer worth
    more than the migration cost the moves add (the model's rounded costs could accept a close that raises the
    objective by a hair), and the budget kept."""
    cur = moves.current
    added = sum(float(moves.cost[v]) * (int(st.server[v] != cur[v]) - int(was[v][0] != cur[v])) for v in was)
    return bool((st.free[hosts] >= -1e-9).all()) and added < 1.0 - 1e-9 and moves.fits(st.server)


def close_by_cpsat(b: NumaBatch, server: list[int], node: list[int], stop: Stop, seed: int, targets: int = 40, *,
                   fixed: npt.NDArray[np.bool_] | None = None, moves: Moves | None = None, reshuffle: int = 3,
                   ) -> tuple[list[int], list[int], int]:  # fmt: skip
    """A large-neighbourhood search that closes servers one at a time: for an open server ``s`` (least filled
    first), its VMs and the unconstrained VMs on the other open servers of its rack may move onto those servers and
    the ``targets`` open servers elsewhere with the most free room (normalised CPU + RAM); CP-SAT (one worker) looks
    for such a placement with ``s`` empty, every node within capacity and every constraint kept: an affinity VM stays
    in its rack, an anti-affinity VM avoids servers holding its group, a fault-domain VM racks holding another domain
    of its group (VMs that stay are fixed; two moving VMs of one group both come from ``s``, which already keeps them
    apart correctly). Until ``stop``; returns (server, node, servers closed).

    Re-optimisation (``consolidate``'s CP-SAT step): ``fixed`` VMs never move (a server holding one is never
    closed); with ``moves``, a VM placed away from its current server costs its migration cost, CP-SAT finds the
    cheapest placement of the neighbourhood, and a close is kept only when it lowers servers used + migration cost
    (one server against the migration cost it adds) and stays within the budget (``moves.fits``). Where the server
    has no rack mates (the engine's batches: a rack per server), the VMs of the ``reshuffle`` servers with the most
    room left may move too."""
    packer = Packer(b)
    st = _State(b.node_free.copy(), np.zeros(b.servers, bool), [-1] * b.vms, [0] * b.vms)
    for i, (sv, j) in enumerate(zip(server, node, strict=True)):
        packer._assign(st, i, sv, j)
    cap = b.node_free.sum(axis=1)
    scale = cap.max(axis=0)
    closed = 0
    tried: set[int] = set()
    while not stop.expired():
        st.opened &= np.array([bool(st.on[sv]) for sv in range(b.servers)])  # emptied by a move: closed
        opened = [sv for sv in np.flatnonzero(st.opened).tolist() if sv not in tried]
        if fixed is not None:  # a server holding a VM that may not move cannot be emptied
            opened = [sv for sv in opened if not any(fixed[v] for v in st.on[sv])]
        if not opened:
            break
        fill = {sv: float(((cap[sv] - st.free[sv].sum(axis=0)) / scale).sum()) for sv in opened}
        s0 = min(opened, key=lambda sv: (fill[sv], sv))
        tried.add(s0)
        rk = int(b.rack[s0])
        mates = [sv for sv in packer.rack_servers[rk] if st.opened[sv] and sv != s0]
        room = {sv: float((st.free[sv].sum(axis=0) / scale).sum()) for sv in np.flatnonzero(st.opened).tolist()}
        if moves is not None and not mates:  # re-optimisation (a rack per server): the VMs of the servers with the
            # most room left may move too, so that their fragments join into room for s0's VMs
            mates = sorted((sv for sv in room if sv != s0), key=lambda sv: (-room[sv], sv))[:reshuffle]
        far = sorted((sv for sv in room if int(b.rack[sv]) != rk and sv not in mates),
                     key=lambda sv: (-room[sv], sv))[:targets]  # fmt: skip
        hosts = mates + far
        moving = sorted(st.on[s0]) + [v for sv in mates for v in sorted(st.on[sv])
                                      if not b.strategy[v] and (fixed is None or not fixed[v])]  # fmt: skip
        was = {v: (st.server[v], st.node[v]) for v in moving}
        for v in moving:
            packer._unassign(st, v)
        st.opened[s0] = False
        grid = 4 if moves is None else 1000  # the catalogue's quarter units; the engine's sizes are any floats
        m = cp_model.CpModel()
        x: dict[tuple[int, int, int], cp_model.IntVar] = {}
        for v in moving:
            for sv in hosts:
                if b.strategy[v] == "affinity" and int(b.rack[sv]) != rk:
                    continue
                if not packer._allowed(st, v, sv):
                    continue
                for j in (-1,) if b.numa[v] == 2 else (0, 1):
                    if packer._fits_node(st.free[sv], v, j):
                        x[(v, sv, j)] = m.new_bool_var("")
        placed = all(any(k[0] == v for k in x) for v in moving)
        if placed:
            for v in moving:
                m.add_exactly_one(var for k, var in x.items() if k[0] == v)
            for sv in hosts:
                for q in (0, 1):
                    for res, demand in ((0, b.cpu), (1, b.ram)):
                        terms = [(float(demand[v]) * (0.5 if j == -1 else 1.0), var) for (v, s2, j), var in x.items()
                                 if s2 == sv and j in (q, -1)]  # fmt: skip
                        if terms:  # demands rounded up, room down, on the grid: never more than fits (the
                            # catalogue's sizes, halves included, are whole on the quarter grid: exact there)
                            m.add(sum(math.ceil(grid * w - 1e-6) * var for w, var in terms)
                                  <= math.floor(grid * st.free[sv, q, res] + 1e-6))  # fmt: skip
            if moves is not None:  # the cheapest moves, and only a close that pays for them (rechecked exactly below)
                unit = 1000
                cost = {v: round(unit * float(moves.cost[v])) for v in moving}
                away = [(cost[v], var) for (v, sv, _), var in x.items() if sv != moves.current[v] and cost[v]]
                before = sum(cost[v] for v in moving if was[v][0] != moves.current[v])
                m.add(sum(c * var for c, var in away) <= before + unit - 1)
                m.minimize(sum(c * var for c, var in away))
            ans = run_cp(m, stop.share(1.0, most=2.0), seed=seed, least=0.1)
            placed = ans.found
        if placed:
            for (v, sv, j), var in x.items():
                if ans.solver.value(var):
                    packer._assign(st, v, sv, j)
            if moves is None or _pays(moves, st, was, hosts):
                closed += 1
                tried.clear()  # the neighbourhoods changed: servers tried before may close now
                tried.add(s0)
                continue
            for v in moving:  # undone
                packer._unassign(st, v)
        st.opened[s0] = True
        for v in moving:
            packer._assign(st, v, *was[v])
    return st.server, st.node, closed


def solve_consolidate_improved(batch: NumaBatch, stop: Stop, seed: int, params: ConsolidateParams) -> Result:
    """The ``consolidate`` method: :func:`~dcplace.placement.numa_batch.solve_consolidate`'s heuristic, then, with
    ``params.improve_s``, up to that many seconds of :func:`close_by_cpsat` from its answer (pinned VMs fixed, the
    migration costs and the budget of ``params``): the paper's integer programming on one server's neighbourhood at
    a time. Here rather than in ``numa_batch`` because this module imports that one."""
    res = solve_consolidate(batch, stop, seed, params)
    if params.improve_s <= 0 or stop.expired() or res.vm_pm is None or res.vm_node is None:
        return res
    cur = batch.current_server
    assert cur is not None
    fixed = np.zeros(batch.vms, np.bool_) if batch.pinned is None else np.asarray(batch.pinned, np.bool_)
    moves = Moves(cur, batch.migration_costs(), lambda server: within_budget(batch, params, server))
    budget = stop.share(1.0, most=params.improve_s)
    server, node, closed = close_by_cpsat(batch, [int(x) for x in res.vm_pm], [int(x) for x in res.vm_node], budget,
                                          seed, fixed=fixed, moves=moves)  # fmt: skip
    stats = {**res.stats, "closed": int(res.stats["closed"]) + closed, "closed_by_cpsat": closed}
    return consolidated(batch, server, node, float(res.bound or 0.0), stats)
