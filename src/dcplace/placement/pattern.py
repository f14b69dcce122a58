"""The pattern model (Gilmore-Gomory column generation): size depends on the number of types, not of VMs and PMs.

A *pattern* of PM type ``p`` is a vector ``a`` of VM counts per type that one PM of type ``p`` can host (CPU,
memory, and an exclusive disk assignment). The master problem chooses how many PMs of each type run each pattern:

    minimise  sum_{p,k} cost_p x_pk
    s.t.      sum_{p,k} a_pk[t] x_pk >= count_t     (every VM type covered; surplus VMs are simply dropped)
              sum_k x_pk <= pms_p                   (PMs available per type)

Column generation on its LP relaxation (GLOP) prices new patterns per PM type with a one-PM CP-SAT model (the
compact model's constraints for a single machine) maximising the dual value of the VMs it hosts; when no pattern has
negative reduced cost the LP optimum, rounded up, is a lower bound for the whole problem. The integer master over the
generated patterns (CP-SAT) gives the solution; each used PM's disk assignment is then built by the compact model on
that one machine, and the independent checker verifies the result.

Under PM-level colocation and anti-colocation (the hierarchical decomposition's first level) the same model runs
over *items* (:mod:`.items`): ``t`` above ranges over classes of interchangeable items (a colocated group is one item
of several VMs), ``a_pk[t]`` counts items, and the pricer adds the per-PM rows of anti-colocation (a cap per class,
at most one item of an all-apart constraint, items of at most one set); the plain problem is every VM its own item.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ortools.linear_solver import pywraplp
from ortools.sat.python import cp_model

from dcplace.config import check
from dcplace.errors import InputError
from dcplace.placement.compact import CompactModel, Infeasible
from dcplace.placement.cpsat import CpAnswer, int_bound, run_cp
from dcplace.placement.greedy import cost_of, greedy_start
from dcplace.placement.items import Items, plain_items
from dcplace.placement.params import SolverParams
from dcplace.placement.problem import PMType, Problem
from dcplace.placement.result import Result
from dcplace.placement.stop import Deadline, Stop

DUAL_SCALE = 1_000_000
NO_CURRENT = (
    "a pattern says how many PMs of a type run it, not which ones, while a migration's cost depends on which PM a VM "
    "is on now; patterns per PM would give up the model's size advantage"
)


def _fits_alone(pm: PMType, problem: Problem) -> list[int]:
    """Upper bound per VM type on how many one PM of this type can host."""
    ubs = []
    for t, vt in enumerate(problem.vm_types):
        d = len(vt.disks)
        ub = min(problem.vm_counts[t], pm.vcpu // max(vt.vcpu, 1), pm.mem // max(vt.mem, 1))
        if d:
            size = vt.disks[0]
            if sum(s >= size for s in pm.disks) < d:
                ub = 0
            ub = min(ub, sum(min(problem.vm_counts[t], s // size) for s in pm.disks) // d)
        ubs.append(max(ub, 0))
    return ubs


class Pricer:
    """One-PM model for a PM type: which item counts fit (the compact model's constraints for one machine on the
    VMs per type that the items bring, plus the items' per-PM rows: caps, apart rows, choice rows; see
    :mod:`.items`). With the plain items (one class per VM type) the items are the VMs."""

    def __init__(self, pm: PMType, problem: Problem, items: Items) -> None:
        self.pm, self.problem = pm, problem
        ubt = _fits_alone(pm, problem)
        comp = items.comp
        self.ub = []  # per class: at most this many items on one PM of this type
        vcpu = np.array([vt.vcpu for vt in problem.vm_types], np.int64)
        mem = np.array([vt.mem for vt in problem.vm_types], np.int64)
        for k, count in enumerate(items.counts):
            ub = min([count] + [ubt[t] // int(a) for t, a in enumerate(comp[k]) if a])
            if comp[k].sum() > 1:  # an item of several VMs: all of them on one PM, or none
                ub = min(ub, pm.vcpu // max(int(comp[k] @ vcpu), 1), pm.mem // max(int(comp[k] @ mem), 1))
                if ub and _one_pm(problem, problem.pm_types.index(pm), comp[k].tolist()) is None:
                    ub = 0
            self.ub.append(min(ub, items.cap[k]) if items.cap[k] else ub)
        m = cp_model.CpModel()
        vts = problem.vm_types
        self.n = [m.new_int_var(0, u, f"n{k}") for k, u in enumerate(self.ub)]
        # VMs of each type on the PM: the class's count itself where a type is one class of single VMs (plain)
        total: list[cp_model.LinearExprT] = []
        type_ub: list[int] = []
        for t in range(len(vts)):
            ks = np.flatnonzero(comp[:, t]).tolist()
            if len(ks) == 1 and comp[ks[0], t] == 1:
                total.append(self.n[ks[0]])
            else:
                total.append(sum(int(comp[k, t]) * self.n[k] for k in ks))
            type_ub.append(min(ubt[t], sum(int(comp[k, t]) * self.ub[k] for k in ks)))
        m.add(sum(vt.vcpu * n for vt, n in zip(vts, total, strict=True)) <= pm.vcpu)
        m.add(sum(vt.mem * n for vt, n in zip(vts, total, strict=True)) <= pm.mem)
        used: list[list[cp_model.LinearExprT]] = [[] for _ in pm.disks]
        for t, vt in enumerate(vts):
            if not vt.disks or not type_ub[t]:
                continue
            size, d = vt.disks[0], len(vt.disks)
            ws = []
            for dsk, cap in enumerate(pm.disks):
                if cap >= size:
                    w = m.new_int_var(0, min(type_ub[t], cap // size), f"w{t}_{dsk}")
                    m.add(w <= total[t])
                    ws.append(w)
                    used[dsk].append(size * w)
            m.add(sum(ws) == d * total[t])
        for dsk, cap in enumerate(pm.disks):
            if used[dsk]:
                m.add(sum(used[dsk]) <= cap)
        for row in items.apart:  # at most one item of an all-apart constraint
            m.add(sum(self.n[k] for k in row) <= 1)
        for sets in items.choose:  # items of at most one set of an anti-colocation constraint
            h = [m.new_bool_var("") for _ in sets]
            for group, on in zip(sets, h, strict=True):
                for k in group:
                    m.add(self.n[k] <= self.ub[k] * on)
            m.add(sum(h) <= 1)
        self.model = m
        self.exact = True
        """Whether every pricing so far was proven optimal (the LP bound and an infeasibility proof need it)."""

    def best(self, duals: np.ndarray, stop: Stop) -> tuple[float, tuple[int, ...]] | None:
        """The pattern with the largest dual value (scaled to integers), and that value."""
        weights = [round(max(float(x), 0.0) * DUAL_SCALE) for x in duals]
        self.model.maximize(sum(w * n for w, n in zip(weights, self.n, strict=True)))
        ans = run_cp(self.model, stop, least=0.05)
        self.exact &= ans.status == "optimal"
        if not ans.found:
            return None
        pattern = tuple(int(ans.solver.value(n)) for n in self.n)
        return float(np.dot(duals, pattern)), pattern


@dataclass(frozen=True)
class PatternParams(SolverParams):
    """Parameters of the pattern model (column generation)."""

    greedy_start: bool = True
    """Start from the best of 5 greedy runs (skipped above ``GREEDY_START_MAX`` VMs x PMs)."""
    master_share: float = 0.3
    """Share of the time kept for the integer master, in (0, 1): column generation stops when only this much of
    the time given is left."""

    def check(self) -> None:
        super().check()
        check(0 < self.master_share < 1, "master_share", self.master_share, "in (0, 1)")


def solve_pattern(problem: Problem, stop: Stop, seed: int, params: PatternParams) -> Result:
    """Column generation with an LP bound (Gilmore-Gomory), started from greedy (module docstring)."""
    if problem.has_current:
        raise InputError(f"the pattern model does not start from a current placement: {NO_CURRENT}")
    start = greedy_start(problem, stop, seed) if params.greedy_start else None
    return solve_pattern_from(problem, stop, seed, params, start)


def solve_pattern_from(
    problem: Problem, stop: Stop, seed: int, params: PatternParams, start: Result | None, items: Items | None = None
) -> Result:
    """The pattern model with ``start``'s patterns (a known solution) among the first columns; over ``items``
    (:mod:`.items`: colocated VMs merged, anti-colocated ones counted per PM) when given, else every VM its own
    item. A constrained problem whose LP bound exceeds what all its PMs cost (pricing proven optimal) is
    ``infeasible``."""
    used: list[tuple[int, tuple[int, ...]]] = []
    if items is None:
        items = plain_items(problem)
        if start is not None and start.vm_pm is not None:
            vt, pt = problem.vm_type_of(), problem.pm_type_of()
            per_pm: dict[int, list[int]] = {}
            for t, j in zip(vt.tolist(), start.vm_pm.tolist(), strict=True):
                per_pm.setdefault(j, [0] * len(problem.vm_types))[t] += 1
            used = [(int(pt[j]), tuple(c)) for j, c in per_pm.items()]
    columns, bound, stats = _generate_columns(problem, stop, used, params.master_share, items)
    exact = stats.pop("pricing_exact")
    everything = sum(pt.cost * n for pt, n in zip(problem.pm_types, problem.pm_counts, strict=True))
    if bound is not None and bound > everything and exact:  # no answer costs more than all PMs
        return Result(problem.name, "pattern", "infeasible", None, None, vms=problem.n_vms,
                      stats={"columns": float(len(columns)), **stats})  # fmt: skip
    ans, chosen = _master(problem, columns, used, stop, seed, params.workers, items.counts)
    stats = {"columns": float(len(columns)), **stats}
    if ans.cost is None:
        return Result(problem.name, "pattern", "unknown", None, bound, vms=problem.n_vms, stats=stats)
    status, cost = "feasible", ans.cost
    if bound is not None and bound >= cost:
        status, bound = "optimal", cost
    vm_pm, vm_disks = realise(problem, chosen, items)
    real = float(cost_of(problem, vm_pm))  # dropping surplus VMs can leave a chosen PM empty: cost only falls
    return Result(problem.name, "pattern", status if real == cost else "feasible", real, bound, vms=problem.n_vms,
                  vm_pm=vm_pm, vm_disks=vm_disks, stats=stats)  # fmt: skip


Column = tuple[int, tuple[int, ...]]
"""(PM type, pattern): the items per class (plain: VMs per type) that one PM of that type hosts."""


def _generate_columns(
    problem: Problem, stop: Stop, start: list[Column], master_share: float, items: Items
) -> tuple[list[Column], float | None, dict[str, float | bool]]:
    """Column generation on the master's LP relaxation until no column prices out or only ``master_share`` of the
    time is left: (columns, LP bound rounded up or None, stats)."""
    cg = stop.share(1 - master_share)
    pts, counts = problem.pm_types, np.array(items.counts, dtype=float)
    pricers = [Pricer(p, problem, items) for p in pts]
    columns: dict[Column, None] = {}
    for p, pattern in start:
        columns[(p, pattern)] = None
    for p, pr in enumerate(pricers):  # one item alone, wherever it fits: cheap first columns
        for t, u in enumerate(pr.ub):
            if u:
                columns[(p, tuple(int(i == t) for i in range(len(counts))))] = None
    # Phase-one slack: an uncovered VM costs more than every PM together, so the restricted master is always feasible
    # and has duals to price with (one VM per PM does not always cover: two VMs that share one PM's disks, one such
    # PM). A relaxation of the master, so its value and the Lagrangian bound stay lower bounds.
    big = float(sum(pt.cost * n for pt, n in zip(pts, problem.pm_counts, strict=True))) + 1.0
    lp_bound = -math.inf
    rounds = 0
    lp_value = math.inf
    converged = False
    while not cg.expired():
        rounds += 1
        cols = list(columns)
        lp = pywraplp.Solver.CreateSolver("GLOP")
        x = [lp.NumVar(0, problem.pm_counts[p], "") for p, _ in cols]
        cover = [lp.Constraint(float(c), lp.infinity()) for c in counts]
        avail = [lp.Constraint(-lp.infinity(), float(n)) for n in problem.pm_counts]
        for var, (p, pattern) in zip(x, cols, strict=True):
            for t, a in enumerate(pattern):
                if a:
                    cover[t].SetCoefficient(var, a)
            avail[p].SetCoefficient(var, 1)
        slack = [lp.NumVar(0, lp.infinity(), "") for _ in counts]
        for t, v in enumerate(slack):
            cover[t].SetCoefficient(v, 1)
        lp.Minimize(sum(pts[p].cost * var for var, (p, _) in zip(x, cols, strict=True)) + big * sum(slack))
        if lp.Solve() != pywraplp.Solver.OPTIMAL:
            break
        lp_value = lp.Objective().Value()
        pi = np.array([c.dual_value() for c in cover])
        mu = np.array([c.dual_value() for c in avail])
        added = 0
        lagrange = lp_value  # Lagrangian bound: LP value + sum over types of the best reduced cost x availability
        for p, pr in enumerate(pricers):
            got = pr.best(pi, stop.share(0.25, least=0.05, most=2.0))
            if got is None:
                continue
            value, pattern = got
            reduced = pts[p].cost - value - mu[p]
            if reduced < -1e-6:
                lagrange += problem.pm_counts[p] * reduced
                if (p, pattern) not in columns:
                    columns[(p, pattern)] = None
                    added += 1
        lp_bound = max(lp_bound, lagrange)
        if added == 0:
            lp_bound = max(lp_bound, lp_value)
            converged = True
            break
    bound = int_bound(lp_bound) if lp_bound > -math.inf else None
    exact = converged and all(pr.exact for pr in pricers)
    return list(columns), bound, {"cg_rounds": float(rounds), "lp_value": lp_value, "cg_converged": converged,
                                  "pricing_exact": exact}  # fmt: skip


def _master(
    problem: Problem, cols: list[Column], start: list[Column], stop: Stop, seed: int, workers: int,
    counts: Sequence[int],
) -> tuple[CpAnswer, list[Column]]:  # fmt: skip
    """The integer master over the generated columns (CP-SAT, hinted with ``start``), covering ``counts`` items per
    class: the answer and the column of each PM used."""
    pts = problem.pm_types
    m = cp_model.CpModel()
    x = [m.new_int_var(0, problem.pm_counts[p], f"x{i}") for i, (p, _) in enumerate(cols)]
    for t, c in enumerate(counts):
        m.add(sum(pattern[t] * var for var, (_, pattern) in zip(x, cols, strict=True) if pattern[t]) >= c)
    for p, n in enumerate(problem.pm_counts):
        m.add(sum(var for var, (pp, _) in zip(x, cols, strict=True) if pp == p) <= n)
    start_count: dict[Column, int] = {}
    for key in start:
        start_count[key] = start_count.get(key, 0) + 1
    for var, key in zip(x, cols, strict=True):
        m.add_hint(var, start_count.get(key, 0))
    m.minimize(sum(pts[p].cost * var for var, (p, _) in zip(x, cols, strict=True)))
    ans = run_cp(m, stop, workers=workers, seed=seed, least=0.5)
    if not ans.found:
        return ans, []
    return ans, [key for var, key in zip(x, cols, strict=True) for _ in range(int(ans.solver.value(var)))]


def realise(
    problem: Problem, used: list[tuple[int, tuple[int, ...]]], items: Items | None = None
) -> tuple[np.ndarray, list[list[int]]]:
    """A full assignment from the PMs' patterns: drop surplus items, hand each PM its items (in turn per class; a
    family class by the slot rule of :mod:`.items`), then place each PM's VMs and disks exactly with the compact
    model on that one machine (cached per PM type and VMs per type)."""
    items = plain_items(problem) if items is None else items
    remaining = list(items.counts)
    trimmed: list[tuple[int, tuple[tuple[int, int], ...]]] = []
    nonzero: dict[Column, list[tuple[int, int]]] = {}
    for p, pattern in sorted(used, key=lambda u: -problem.pm_types[u[0]].cost):
        nz = nonzero.get((p, pattern))
        if nz is None:
            nz = nonzero[(p, pattern)] = [(k, a) for k, a in enumerate(pattern) if a]
        picked: list[tuple[int, int]] = []
        for k, a in nz:
            got = min(a, remaining[k])
            if got:
                picked.append((k, got))
                remaining[k] -= got
        if picked:
            trimmed.append((p, tuple(picked)))
    pm_first = np.concatenate([[0], np.cumsum(problem.pm_counts)])
    next_pm = [int(pm_first[p]) for p in range(len(problem.pm_types))]
    handed = [0] * items.n_classes  # items of each class handed out so far (the slot of the next one)
    vm_type = problem.vm_type_of().tolist()
    flat = [m.ravel().tolist() for m in items.members]
    width = [m.shape[1] for m in items.members]
    rows = [c // n for c, n in zip(items.counts, items.stride, strict=True)]  # items per constraint (slot rule)
    vm_pm = np.full(problem.n_vms, -1, dtype=np.int64)
    vm_disks: list[list[int]] = [[] for _ in range(problem.n_vms)]
    types_of: dict[tuple[tuple[int, int], ...], list[int]] = {}
    cache: dict[tuple[int, tuple[int, ...]], list[tuple[int, list[int]]]] = {}
    for p, take in trimmed:
        types = types_of.get(take)
        if types is None:
            types = types_of[take] = items.type_counts(dict(take))
        key = (p, tuple(types))
        if key not in cache:
            cache[key] = _place_one(problem, p, types)
        j = next_pm[p]
        next_pm[p] += 1
        vms: list[int] = []
        for k, a in take:
            n, w = items.stride[k], width[k]
            for slot in range(handed[k], handed[k] + a):
                row = (slot % n) * rows[k] + slot // n
                vms += flat[k][row * w : (row + 1) * w]
            handed[k] += a
        vms.sort(key=vm_type.__getitem__)  # stable: by type, as _place_one lists them
        for i, (_, disks) in zip(vms, cache[key], strict=True):
            vm_pm[i] = j
            vm_disks[i] = list(disks)
    return vm_pm, vm_disks


def _place_one(problem: Problem, p: int, take: list[int]) -> list[tuple[int, list[int]]]:
    """(VM type, physical disks) for each VM of one PM hosting ``take`` VMs per type."""
    placed = _one_pm(problem, p, take)
    if placed is None:
        raise RuntimeError(f"a generated pattern does not fit its PM type {problem.pm_types[p].name}: {take}")
    return placed


def _one_pm(problem: Problem, p: int, take: list[int]) -> list[tuple[int, list[int]]] | None:
    """(VM type, physical disks) for each VM of one PM of type ``p`` hosting ``take`` VMs per type (the compact
    model on that one machine, exact), or None when they do not fit."""
    sub = Problem(
        "one",
        tuple(vt for vt, c in zip(problem.vm_types, take, strict=True) if c),
        tuple(c for c in take if c),
        (problem.pm_types[p],),
        (1,),
    )
    types = [t for t, c in enumerate(take) if c]
    try:
        model = CompactModel(sub)
    except Infeasible:
        return None
    ans = run_cp(model.model, Deadline(10.0))
    if not ans.found:
        return None
    _, vm_disks = model.decode(ans.solver)
    sub_types = sub.vm_type_of()
    return [(types[int(sub_types[i])], vm_disks[i]) for i in range(sub.n_vms)]
