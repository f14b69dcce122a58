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
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from dcplace.errors import InputError
from dcplace.placement.cpsat import solve_model
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
        model = CompactModel(problem)
    except Infeasible as exc:
        return Result(problem.name, "compact", "infeasible", vms=problem.n_vms, stats={"reason": str(exc)})
    if hint is not None and hint.vm_pm is not None and hint.vm_disks is not None:
        model.hint(hint.vm_pm, hint.vm_disks)
    return solve_model(problem, "compact", model, stop, seed, workers)


class Infeasible(Exception):
    """The instance has no solution, for the reason given."""


class CompactModel:
    def __init__(self, problem: Problem) -> None:
        self.problem = problem
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
        self._break_symmetry()
        m.minimize(sum(pm.cost * self.z[j] for j, pm in enumerate(pms)))

    def _load(self, j: int) -> cp_model.LinearExprT:
        vts = self.problem.vm_types
        return sum(vts[t].vcpu * v for t, v in self.n_on[j])

    def _disk_used(self, j: int, dsk: int) -> cp_model.LinearExprT:
        vts = self.problem.vm_types
        return sum(vts[t].disks[0] * w for t, w in self.w_on.get((j, dsk), []))

    def _break_symmetry(self) -> None:
        m, pms = self.model, self.pms
        for j in range(len(pms) - 1):
            if pms[j] == pms[j + 1]:
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
            while end + 1 < len(pms) and pms[end + 1] == pms[start]:
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

    def decode(self, solver: cp_model.CpSolver) -> tuple[np.ndarray, list[list[int]]]:
        """The VM -> PM and virtual -> physical disk assignment of the solver's solution (module docstring)."""
        problem = self.problem
        vt = problem.vm_type_of()
        next_vm = {t: int(np.flatnonzero(vt == t)[0]) for t in range(len(problem.vm_types))}
        vm_pm = np.full(problem.n_vms, -1, dtype=np.int64)
        vm_disks: list[list[int]] = [[] for _ in range(problem.n_vms)]
        for (t, j), var in self.n.items():
            n = int(solver.value(var))
            if n == 0:
                continue
            ids = list(range(next_vm[t], next_vm[t] + n))
            next_vm[t] += n
            vm_pm[ids] = j
            d = len(problem.vm_types[t].disks)
            if d:
                slots = [
                    dsk
                    for dsk in range(len(self.pms[j].disks))
                    if (t, j, dsk) in self.w
                    for _ in range(int(solver.value(self.w[(t, j, dsk)])))
                ]
                for q, vm in enumerate(ids):
                    vm_disks[vm] = [slots[q + k * n] for k in range(d)]
        return vm_pm, vm_disks
