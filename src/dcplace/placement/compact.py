"""The compact model: counts instead of assignments (CP-SAT).

Per PM ``j`` and VM type ``t``: ``n[t, j]``, how many VMs of type ``t`` it hosts; per physical disk ``dsk`` of ``j``:
``w[t, j, dsk]``, how many virtual disks of type-``t`` VMs it holds; ``z[j]``, whether ``j`` is used.

    sum_j n[t, j] = count_t                                   every VM placed
    sum_t vcpu_t n[t, j] <= C_j z_j,  sum_t mem_t n[t, j] <= M_j z_j
    sum_l w[t, j, dsk] = d_t n[t, j]                            every virtual disk placed on its VM's PM
    w[t, j, dsk] <= n[t, j]                                     disk exclusivity (see below)
    sum_t size_t w[t, j, dsk] <= S_jl                           disk sizes
    minimise sum_j cost_j z_j

**Why the counts are exact** (for VM types whose virtual disks have one size, as in Table I): given ``n`` VMs of a
type on a PM and disk counts ``w_l <= n`` with ``sum_l w_l = d n``, write the physical disks in a row, disk ``dsk``
repeated ``w_l`` times (``d n`` slots), and give slot ``p`` to VM ``p mod n``. Each VM gets exactly ``d`` slots,
and the ``w_l <= n`` consecutive slots of one disk go to ``w_l`` different VMs, so no VM has two disks on one
physical disk. Conversely every feasible assignment has ``w_l <= n`` (a disk holds at most one disk per VM). So the
model has exactly the optimum of the paper's formulation, with ``O(types x PMs x disks)`` variables instead of
``O(VMs x PMs x disks)``; :func:`decode` is the construction above.

Symmetry breaking: identical PMs (same type, consecutive) are used in order and loaded by non-increasing vCPU;
identical physical disks of a PM are filled by non-increasing size used.

**Starting from a current placement** (:attr:`Problem.current`): the model runs on the movable view
(:mod:`.current`): classes ``k`` (VM type, migration cost ``m_k``) instead of types, pinned VMs removed and their
PMs' CPU, memory and disks reduced by what they use, ``z_j = 1`` on a PM holding a pinned VM. With ``c[k, j]`` the
class-``k`` VMs on PM ``j`` now, one more variable per (k, j) with ``c[k, j] > 0``:

    0 <= s[k, j] <= c[k, j],  s[k, j] <= n[k, j]                 VMs of class k that stay on j
    minimise sum_j cost_j z_j + sum_{k,j} m_k (c[k, j] - s[k, j])

*Exactness.* Any assignment with counts ``n`` keeps at most ``min(n[k, j], c[k, j])`` of the class-``k`` VMs now on
``j`` there, so its migration cost is at least ``sum m_k (c - min(n, c))``, the model's value for ``n`` (at the
optimum ``s = min(n, c)``). Conversely :meth:`ReoptModel.decode` reaches that value from any counts: on every
``(k, j)`` it keeps ``min(n, c)`` of the VMs now on ``j``, then fills the remaining ``n - min(n, c)`` places with
the class's other VMs (new ones, or ones whose PM kept fewer than it had). Both sides count
``count_k - sum_j min(n[k, j], c[k, j])``, so every VM is placed, and a VM that is not kept sits on a PM ``j'`` with
``n[k, j'] < c[k, j']``, which has no free place of its class, so it does move and its cost is counted once. Its
VMs are interchangeable within a class (same resources, same cost), so counts per class lose nothing, and the disk
argument above holds per class on the residual disks. Pinned VMs keep PM and disks by construction. So the model has
exactly the optimum of machine + migration cost. Symmetry breaking is kept only between identical PMs that hold no
VM now (a PM with current VMs is not interchangeable with its neighbour). The decode gives each staying VM the disk
set with most of its current disks, each on the virtual disk it held (disk moves on a PM cost nothing, see
:mod:`.problem`, but are avoided where the counts allow).

**Placement constraints** (:class:`ConstrainedModel`; exact): VMs of one type that belong to the same sets of the
same constraints are interchangeable under every constraint (each constraint treats the members of a set alike), so
the model counts per *class* ``k`` (type, memberships) with ``|k|`` VMs instead of per type, and states each
constraint on the counts, with units ``u`` = PMs (level ``pm``) or racks (level ``rack``):

    colocate:       sum_u b[c, u] = 1,  sum_{j in u} n[k, j] = |k| b[c, u]          (k in the group)
    anti-colocate:  sum_{j in u} n[k, j] <= |k| h[c, s, u] (k in set s),  sum_s h[c, s, u] <= 1
    spread:         sum_{k in group, j in rack} n[k, j] <= max_per_rack,  r[c, rack] <= that sum,
                    sum_rack r[c, rack] >= min_racks

An assignment meets a constraint iff its class counts meet these rows (the rows restate the definitions on the
number of each class's VMs per unit), and any counts that meet them decode, member by member in any order, to an
assignment that meets the constraints; the disk construction above holds per class (a class has its type's single
disk size). So the model has exactly the constrained optimum. With rack-level constraints, identical PMs are
interchangeable only within a rack, so the symmetry breaking is kept to runs of identical PMs in one rack.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np
from ortools.sat.python import cp_model

from dcplace.errors import InputError
from dcplace.placement.cpsat import solve_model
from dcplace.placement.current import fill, movable
from dcplace.placement.params import SolverParams
from dcplace.placement.problem import Problem
from dcplace.placement.result import Result
from dcplace.placement.stop import Stop


@dataclass(frozen=True)
class CompactParams(SolverParams):
    """Parameters of the compact model (CP-SAT on counts)."""


def solve_compact(problem: Problem, stop: Stop, seed: int, params: CompactParams) -> Result:
    """The compact model on CP-SAT: exact, on counts per PM and VM type (the module docstring)."""
    return solve_compact_from(problem, stop, seed, params.workers, None)


def solve_compact_from(problem: Problem, stop: Stop, seed: int, workers: int, hint: Result | None) -> Result:
    """The compact model, its search started from ``hint``'s assignment when given."""
    try:
        model: CompactModel | ReoptModel | ConstrainedModel
        if problem.has_current:
            model = ReoptModel(problem)
        elif problem.constraints:
            model = ConstrainedModel(problem)
        else:
            model = CompactModel(problem)
    except Infeasible as exc:
        return Result(problem.name, "compact", "infeasible", vms=problem.n_vms, stats={"reason": str(exc)})
    if hint is not None and hint.vm_pm is not None and hint.vm_disks is not None:
        model.hint(hint.vm_pm, hint.vm_disks)
    return solve_model(problem, "compact", model, stop, seed, workers)


class Infeasible(Exception):
    """The instance has no solution, for the reason given."""


class CompactModel:
    """The model above on ``problem``; ``frozen`` PMs (holding VMs now) are left out of the PM symmetry breaking
    and ``forced`` ones (holding pinned VMs) are used."""

    def __init__(self, problem: Problem, frozen: np.ndarray | None = None, forced: np.ndarray | None = None,
                 by_rack: bool = False) -> None:  # fmt: skip
        """``by_rack``: identical PMs are interchangeable only within a rack (rack-level constraints)."""
        self.problem = problem
        self.frozen = np.zeros(problem.n_pms, np.bool_) if frozen is None else frozen
        self.rack = problem.rack_of() if by_rack else np.zeros(problem.n_pms, np.int64)
        for vm_type in problem.vm_types:
            if len(set(vm_type.disks)) > 1:
                raise InputError(
                    f"the compact model needs one virtual disk size per VM type; {vm_type.name} has several"
                )
        m = cp_model.CpModel()
        self.model = m
        pms = [p for p, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
        self.pms = pms
        vts = problem.vm_types
        self.n: dict[tuple[int, int], cp_model.IntVar] = {}
        self.w: dict[tuple[int, int, int], cp_model.IntVar] = {}
        self.z = [m.new_bool_var(f"z{j}") for j in range(len(pms))]
        self.n_on: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in pms]  # per PM: (type, count)
        self.w_on: dict[tuple[int, int], list[tuple[int, cp_model.IntVar]]] = {}  # per (PM, disk): (type, count)
        for j, pm in enumerate(pms):
            for t, vt in enumerate(vts):
                d = len(vt.disks)
                size = vt.disks[0] if d else 0
                big = [dsk for dsk, s in enumerate(pm.disks) if s >= size] if d else []
                ub = min(problem.vm_counts[t], pm.vcpu // max(vt.vcpu, 1), pm.mem // max(vt.mem, 1))
                if d:
                    ub = min(ub, sum(min(problem.vm_counts[t], s // size) for s in pm.disks) // d)
                    if len(big) < d:
                        ub = 0
                if ub <= 0:
                    continue
                n = m.new_int_var(0, ub, f"n{t}_{j}")
                self.n[(t, j)] = n
                self.n_on[j].append((t, n))
                m.add(n <= ub * self.z[j])
                if d:
                    ws = []
                    for dsk in big:
                        w = m.new_int_var(0, min(ub, pm.disks[dsk] // size), f"w{t}_{j}_{dsk}")
                        self.w[(t, j, dsk)] = w
                        self.w_on.setdefault((j, dsk), []).append((t, w))
                        m.add(w <= n)
                        ws.append(w)
                    m.add(sum(ws) == d * n)
            m.add(sum(vts[t].vcpu * v for t, v in self.n_on[j]) <= pm.vcpu * self.z[j])
            m.add(sum(vts[t].mem * v for t, v in self.n_on[j]) <= pm.mem * self.z[j])
            for dsk, size_l in enumerate(pm.disks):
                if (j, dsk) in self.w_on:
                    m.add(self._disk_used(j, dsk) <= size_l)
        by_type: list[list[cp_model.IntVar]] = [[] for _ in vts]
        for (t, _), v in self.n.items():
            by_type[t].append(v)
        for t, count in enumerate(problem.vm_counts):
            vars_t = by_type[t]
            if not vars_t:
                raise Infeasible(f"no PM can host a VM of type {vts[t].name} (CPU, memory or disks)")
            m.add(sum(vars_t) == count)
        if forced is not None:
            for j in np.flatnonzero(forced).tolist():
                m.add(self.z[j] == 1)
        self._break_symmetry()
        self.machine_cost = sum(pm.cost * self.z[j] for j, pm in enumerate(pms))
        m.minimize(self.machine_cost)

    def _symmetric(self, j: int) -> bool:
        """Whether PMs ``j`` and ``j + 1`` are interchangeable (identical and both empty now)."""
        return (self.pms[j] == self.pms[j + 1] and not self.frozen[j] and not self.frozen[j + 1]
                and self.rack[j] == self.rack[j + 1])  # fmt: skip

    def _load(self, j: int) -> cp_model.LinearExprT:
        vts = self.problem.vm_types
        return sum(vts[t].vcpu * v for t, v in self.n_on[j])

    def _disk_used(self, j: int, dsk: int) -> cp_model.LinearExprT:
        vts = self.problem.vm_types
        return sum(vts[t].disks[0] * w for t, w in self.w_on.get((j, dsk), []))

    def _break_symmetry(self) -> None:
        m, pms = self.model, self.pms
        for j in range(len(pms) - 1):
            if self._symmetric(j):
                m.add(self.z[j] >= self.z[j + 1])
                m.add(self._load(j) >= self._load(j + 1))
        for j, pm in enumerate(pms):
            for dsk in range(len(pm.disks) - 1):
                if pm.disks[dsk] == pm.disks[dsk + 1] and (j, dsk) in self.w_on:
                    m.add(self._disk_used(j, dsk) >= self._disk_used(j, dsk + 1))

    def hint(self, vm_pm: np.ndarray, vm_disks: Sequence[Sequence[int]]) -> None:
        """Start the search from a known feasible assignment. It is first relabelled into the order the symmetry
        breaking asks for (identical PMs by vCPU load, identical disks by space used), so the hint is complete and
        feasible and the solver's first solution is at least as good."""
        problem, pms, vts = self.problem, self.pms, self.problem.vm_types
        vt = problem.vm_type_of()
        load = np.zeros(len(pms), dtype=np.int64)
        np.add.at(load, vm_pm, [vts[t].vcpu for t in vt])
        relabel = np.arange(len(pms))
        start = 0
        while start < len(pms):  # runs of identical PMs
            end = start
            while end + 1 < len(pms) and self._symmetric(end):
                end += 1
            run = np.arange(start, end + 1)
            relabel[run[np.argsort(-load[run], kind="stable")]] = run
            start = end + 1
        counts: dict[tuple[int, int], int] = {}
        disk_count: dict[tuple[int, int, int], int] = {}
        used_gb: dict[tuple[int, int], int] = {}
        for i, (t, j) in enumerate(zip(vt.tolist(), vm_pm.tolist(), strict=True)):
            jj = int(relabel[j])
            counts[(t, jj)] = counts.get((t, jj), 0) + 1
            for d in vm_disks[i]:
                disk_count[(t, jj, d)] = disk_count.get((t, jj, d), 0) + 1
                used_gb[(jj, d)] = used_gb.get((jj, d), 0) + vts[t].disks[0]
        disk_relabel: dict[tuple[int, int], int] = {}
        for j, pm in enumerate(pms):
            by_size: dict[int, list[int]] = {}
            for d, size in enumerate(pm.disks):
                by_size.setdefault(size, []).append(d)
            for group in by_size.values():
                for new, old in zip(group, sorted(group, key=lambda d: -used_gb.get((j, d), 0)), strict=True):
                    disk_relabel[(j, old)] = new
        w_hint = {(t, j, disk_relabel[(j, d)]): c for (t, j, d), c in disk_count.items()}
        for key, var in self.n.items():
            self.model.add_hint(var, counts.get(key, 0))
        for wkey, wvar in self.w.items():
            self.model.add_hint(wvar, w_hint.get(wkey, 0))
        used = {j for (_, j) in counts}
        for j, z in enumerate(self.z):
            self.model.add_hint(z, int(j in used))

    def groups(self, solver: cp_model.CpSolver) -> dict[tuple[int, int], list[list[int]]]:
        """Per (type, PM) with VMs in the solution: one physical-disk list per VM there (empty lists for VM types
        without disks), by the slot construction of the module docstring."""
        out: dict[tuple[int, int], list[list[int]]] = {}
        for (t, j), var in self.n.items():
            n = int(solver.value(var))
            if n == 0:
                continue
            d = len(self.problem.vm_types[t].disks)
            slots = [
                dsk
                for dsk in range(len(self.pms[j].disks))
                if (t, j, dsk) in self.w
                for _ in range(int(solver.value(self.w[(t, j, dsk)])))
            ]
            out[(t, j)] = [[slots[q + k * n] for k in range(d)] for q in range(n)]
        return out

    def decode(self, solver: cp_model.CpSolver) -> tuple[np.ndarray, list[list[int]]]:
        """The VM -> PM and virtual -> physical disk assignment of the solver's solution (module docstring)."""
        problem = self.problem
        vt = problem.vm_type_of()
        next_vm = {t: int(np.flatnonzero(vt == t)[0]) for t in range(len(problem.vm_types))}
        vm_pm = np.full(problem.n_vms, -1, dtype=np.int64)
        vm_disks: list[list[int]] = [[] for _ in range(problem.n_vms)]
        for (t, j), sets in self.groups(solver).items():
            for disks in sets:
                vm_pm[next_vm[t]] = j
                vm_disks[next_vm[t]] = disks
                next_vm[t] += 1
        return vm_pm, vm_disks


class ReoptModel:
    """The compact model from a current placement (module docstring): classes on the residual PMs, stay variables,
    machine + migration cost; decodes to the original problem's VM numbers."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        self.view = view = movable(problem)
        self.inner = inner = CompactModel(view.problem, frozen=view.busy, forced=view.fixed)
        self.model = m = inner.model
        self.stay: dict[tuple[int, int], cp_model.IntVar] = {}
        for k, j in zip(*np.nonzero(view.current), strict=True):
            c = int(view.current[k, j])
            s = m.new_int_var(0, c, f"s{k}_{j}")
            n = inner.n.get((int(k), int(j)))
            m.add(s <= (n if n is not None else 0))
            self.stay[(int(k), int(j))] = s
        kept = sum(int(view.cost[k]) * s for (k, _), s in self.stay.items())
        m.minimize(inner.machine_cost + view.constant() - kept)

    def hint(self, vm_pm: np.ndarray, vm_disks: Sequence[Sequence[int]]) -> None:
        """Start from a feasible assignment of the original problem (its movable VMs, in class order)."""
        order = self.view.order
        self.inner.hint(np.asarray(vm_pm)[order], [vm_disks[i] for i in order.tolist()])
        cur = self.problem.current_pm()
        for (k, j), s in self.stay.items():
            ids = self.view.members[k]
            self.model.add_hint(s, int(((cur[ids] == j) & (np.asarray(vm_pm)[ids] == j)).sum()))

    def decode(self, solver: cp_model.CpSolver) -> tuple[np.ndarray, list[list[int]]]:
        """Keep ``min(n, c)`` of the VMs now on each PM there (on their current disks where the disk sets allow),
        fill the rest with the class's other VMs; pinned VMs stay (module docstring)."""
        return fill(self.problem, self.view, self.inner.groups(solver))


class ConstrainedModel:
    """The compact model under placement constraints (module docstring, *placement constraints*): counts per class
    of interchangeable VMs (same type, same constraint memberships), the constraints as rows over the counts;
    decodes to the original problem's VM numbers."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        vt = problem.vm_type_of()
        member: list[list[tuple[int, int]]] = [[] for _ in range(problem.n_vms)]
        for c, con in enumerate(problem.constraints):
            for s, vms in enumerate(con.sets):
                for i in vms:
                    member[i].append((c, s))
        keys = [(int(vt[i]), tuple(sorted(member[i]))) for i in range(problem.n_vms)]
        classes = sorted(set(keys))
        index = {key: k for k, key in enumerate(classes)}
        cls = np.array([index[key] for key in keys], np.int64)
        self.order = np.argsort(cls, kind="stable")  # (n_vms,) original VM numbers, class-major
        size = np.bincount(cls, minlength=len(classes))
        self.inner = inner = CompactModel(replace(
            problem, name=problem.name, vm_types=tuple(problem.vm_types[t] for t, _ in classes),
            vm_counts=tuple(int(c) for c in size), constraints=()),
            by_rack=any(con.level == "rack" for con in problem.constraints))  # fmt: skip
        m, n = inner.model, inner.n
        rack = problem.rack_of()
        units = {"pm": [[j] for j in range(problem.n_pms)],
                 "rack": [np.flatnonzero(rack == r).tolist() for r in np.unique(rack)]}  # fmt: skip
        in_set = [[[k for k, (_, mem) in enumerate(classes) if (c, s) in mem] for s in range(len(con.sets))]
                  for c, con in enumerate(problem.constraints)]  # fmt: skip

        def on(k: int, unit: list[int]) -> cp_model.LinearExprT:
            return sum(n[(k, j)] for j in unit if (k, j) in n)

        for c, con in enumerate(problem.constraints):
            where = units[con.level]
            if con.kind == "colocate":  # every class of the group wholly on one unit, the same for all
                u = [m.new_bool_var(f"col{c}_{q}") for q in range(len(where))]
                m.add_exactly_one(u)
                for k in in_set[c][0]:
                    for q, unit in enumerate(where):
                        m.add(int(size[k]) * u[q] == on(k, unit))
            elif con.kind == "anti-colocate":  # a unit hosts VMs of at most one set
                for q, unit in enumerate(where):
                    h = [m.new_bool_var(f"anti{c}_{s}_{q}") for s in range(len(con.sets))]
                    for s, ks in enumerate(in_set[c]):
                        for k in ks:
                            m.add(on(k, unit) <= int(size[k]) * h[s])
                    m.add(sum(h) <= 1)
            else:  # spread: at most max_per_rack of the VMs per rack, at least min_racks racks with one
                used = []
                for q, unit in enumerate(units["rack"]):
                    terms = [n[(k, j)] for k in in_set[c][0] for j in unit if (k, j) in n]
                    if not terms:
                        continue
                    if con.max_per_rack:
                        m.add(sum(terms) <= con.max_per_rack)
                    r = m.new_bool_var(f"spread{c}_{q}")
                    m.add(r <= sum(terms))
                    used.append(r)
                if len(used) < con.min_racks:
                    raise Infeasible(f"constraint {c} (spread) needs {con.min_racks} racks, {len(used)} can host it")
                m.add(sum(used) >= con.min_racks)
        self.model = m

    def hint(self, vm_pm: np.ndarray, vm_disks: Sequence[Sequence[int]]) -> None:
        """Start from a feasible assignment of the original problem."""
        self.inner.hint(np.asarray(vm_pm)[self.order], [vm_disks[i] for i in self.order.tolist()])

    def decode(self, solver: cp_model.CpSolver) -> tuple[np.ndarray, list[list[int]]]:
        """The class model's assignment, given back to the original VM numbers (class members in number order)."""
        got_pm, got_disks = self.inner.decode(solver)
        vm_pm = np.full(self.problem.n_vms, -1, dtype=np.int64)
        vm_disks: list[list[int]] = [[] for _ in range(self.problem.n_vms)]
        vm_pm[self.order] = got_pm
        for q, i in enumerate(self.order.tolist()):
            vm_disks[i] = list(got_disks[q])
        return vm_pm, vm_disks
