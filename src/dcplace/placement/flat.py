"""The paper's flat formulation (section IV-A, constraints 1-10), as the reference model, on CP-SAT.

``x[i, j]``: VM ``i`` on PM ``j``; ``y[i, k, j, l]``: virtual disk ``k`` of VM ``i`` on physical disk ``l`` of PM
``j``; ``z[j]``: PM ``j`` used. Pairs that cannot work even alone (the VM's CPU, memory or a disk larger than the
PM's, or a virtual disk larger than the physical one) get no variable, which changes no solution. Constraints (8)
and (9) are written as ``x[i, j] <= z[j]`` (the same feasible set as the big-M pair, with a tighter relaxation), and
``z[j] <= sum_i x[i, j]`` is kept as the paper has it. No symmetry breaking: this is the paper's model, kept to
compare against; ``compact`` and ``pattern`` are the fast ones. Without the pruning it has the paper's size (x + y + z:
17,950 binaries for exp1, 55,380 for exp2); pruned, exp1 builds 13,840 y variables instead of 14,400 (exp2: 41,645 of
49,920; ``flat_disk_variables``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from dcplace.placement.cpsat import solve_model
from dcplace.placement.params import SolverParams
from dcplace.placement.problem import Problem
from dcplace.placement.result import Result
from dcplace.placement.stop import Stop

FLAT_MAX_DISK_VARIABLES = 200_000  # the flat model's y variables above which it is not built (minutes to build)


@dataclass(frozen=True)
class FlatParams(SolverParams):
    """Parameters of the paper's flat model (CP-SAT on per-VM variables)."""


def solve_flat(problem: Problem, stop: Stop, seed: int, params: FlatParams) -> Result:
    """The paper's flat formulation on CP-SAT (the reference; models placement constraints)."""
    size = flat_disk_variables(problem)
    if size > FLAT_MAX_DISK_VARIABLES:
        why = {"reason": f"the flat model needs {size:,} disk variables (over {FLAT_MAX_DISK_VARIABLES:,}); "
                         "use compact or pattern"}  # fmt: skip
        return Result(problem.name, "flat", "unknown", vms=problem.n_vms, stats=why)
    return solve_model(problem, "flat", FlatModel(problem), stop, seed, params.workers)


def flat_disk_variables(problem: Problem) -> int:
    """How many y variables the flat model would create (counted per type pair, without building it)."""
    total = 0
    for vt, vc in zip(problem.vm_types, problem.vm_counts, strict=True):
        for pt, pc in zip(problem.pm_types, problem.pm_counts, strict=True):
            if vt.vcpu > pt.vcpu or vt.mem > pt.mem or len(vt.disks) > len(pt.disks):
                continue
            total += vc * pc * sum(sum(size <= cap for cap in pt.disks) for size in vt.disks)
    return total


class FlatModel:
    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        vms = [t for t, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
        pms = [t for t, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
        self.vms, self.pms = vms, pms
        m = cp_model.CpModel()
        self.model = m
        self.z = [m.new_bool_var(f"z{j}") for j in range(len(pms))]
        self.x: dict[tuple[int, int], cp_model.IntVar] = {}
        self.xj: dict[int, list[tuple[int, cp_model.IntVar]]] = {}  # VM -> (PM, x)
        self.y: dict[tuple[int, int, int, int], cp_model.IntVar] = {}
        disk_terms: dict[tuple[int, int], list[cp_model.LinearExprT]] = {}
        per_disk_of_vm: dict[tuple[int, int, int], list[cp_model.IntVar]] = {}
        x_of_vm: list[list[cp_model.IntVar]] = [[] for _ in vms]
        x_on_pm: list[list[tuple[int, cp_model.IntVar]]] = [[] for _ in pms]
        y_of_disk: dict[tuple[int, int], list[cp_model.IntVar]] = {}  # (VM, virtual disk) -> its placements
        for i, vm in enumerate(vms):
            for j, pm in enumerate(pms):
                if vm.vcpu > pm.vcpu or vm.mem > pm.mem or len(vm.disks) > len(pm.disks):
                    continue
                if any(all(s > cap for cap in pm.disks) for s in vm.disks):
                    continue
                x = m.new_bool_var(f"x{i}_{j}")
                self.x[(i, j)] = x
                self.xj.setdefault(i, []).append((j, x))
                x_of_vm[i].append(x)
                x_on_pm[j].append((i, x))
                m.add(x <= self.z[j])
                for k, size in enumerate(vm.disks):
                    for dsk, cap in enumerate(pm.disks):
                        if size <= cap:
                            y = m.new_bool_var(f"y{i}_{k}_{j}_{dsk}")
                            self.y[(i, k, j, dsk)] = y
                            y_of_disk.setdefault((i, k), []).append(y)
                            m.add(y <= x)  # (1)
                            disk_terms.setdefault((j, dsk), []).append(size * y)
                            per_disk_of_vm.setdefault((i, j, dsk), []).append(y)
        for i, vm in enumerate(vms):
            m.add_exactly_one(x_of_vm[i])  # (3)
            for k in range(len(vm.disks)):
                m.add_exactly_one(y_of_disk.get((i, k), []))  # (2)
        for ys in per_disk_of_vm.values():
            if len(ys) > 1:
                m.add_at_most_one(ys)  # (4)
        for (j, dsk), terms in disk_terms.items():
            m.add(sum(terms) <= pms[j].disks[dsk])  # (5)
        for j, pm in enumerate(pms):
            on_j = x_on_pm[j]
            m.add(sum(vms[i].vcpu * v for i, v in on_j) <= pm.vcpu)  # (6)
            m.add(sum(vms[i].mem * v for i, v in on_j) <= pm.mem)  # (7)
            m.add(self.z[j] <= sum(v for _, v in on_j))  # (8)
        m.minimize(sum(pm.cost * self.z[j] for j, pm in enumerate(pms)))  # (10)
        self._add_constraints(x_on_pm)

    def _add_constraints(self, x_on_pm: list[list[tuple[int, cp_model.IntVar]]]) -> None:
        """Section III-D's placement constraints over the x variables (see :mod:`dcplace.placement.problem`)."""
        p, m = self.problem, self.model
        rack = p.rack_of()
        racks = sorted(set(rack.tolist()))

        def in_unit(i: int, level: str) -> dict[int, list[cp_model.IntVar]]:
            """VM i's placement variables grouped by unit (a PM, or the PMs of a rack)."""
            out: dict[int, list[cp_model.IntVar]] = {}
            for j, v in self.xj.get(i, []):
                out.setdefault(j if level == "pm" else int(rack[j]), []).append(v)
            return out

        for n, c in enumerate(p.constraints):
            units = range(len(self.pms)) if c.level == "pm" else racks
            if c.kind == "colocate":
                pick = {u: m.new_bool_var(f"c{n}_{u}") for u in units}
                m.add_exactly_one(pick.values())
                for i in c.vms:
                    for u, vs in in_unit(i, c.level).items():
                        m.add(sum(vs) <= pick[u])
            elif c.kind == "anti-colocate":
                use = [{u: m.new_bool_var(f"a{n}_{k}_{u}") for u in units} for k in range(len(c.sets))]
                for k, members in enumerate(c.sets):
                    for i in members:
                        for u, vs in in_unit(i, c.level).items():
                            m.add(sum(vs) <= use[k][u])  # set k occupies unit u
                for u in units:
                    m.add(sum(use[k][u] for k in range(len(c.sets))) <= 1)
            else:  # spread
                count: dict[int, list[cp_model.IntVar]] = {}
                for i in c.vms:
                    for u, vs in in_unit(i, "rack").items():
                        count.setdefault(u, []).extend(vs)
                used = []
                for u, vs in count.items():
                    w = m.new_bool_var(f"s{n}_{u}")
                    m.add(w <= sum(vs))  # a rack counts as used only if one of the VMs is there
                    used.append(w)
                    if c.max_per_rack:
                        m.add(sum(vs) <= c.max_per_rack)
                m.add(sum(used) >= c.min_racks)

    def decode(self, solver: cp_model.CpSolver) -> tuple[np.ndarray, list[list[int]]]:
        vm_pm = np.full(len(self.vms), -1, dtype=np.int64)
        for (i, j), v in self.x.items():
            if solver.value(v):
                vm_pm[i] = j
        vm_disks = [[-1] * len(vm.disks) for vm in self.vms]
        for (i, k, _, dsk), v in self.y.items():
            if solver.value(v):
                vm_disks[i][k] = dsk
        return vm_pm, vm_disks
