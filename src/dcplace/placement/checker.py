"""The independent checker: every assignment any method returns is verified here before it is reported.

It shares no code with the models or the heuristic: it reads the problem's raw numbers and the assignment (a PM per
VM, a physical disk per virtual disk) and recomputes everything with plain loops.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from dcplace.placement.problem import Problem
from dcplace.placement.result import Result


def check(problem: Problem, vm_pm: Sequence[int], vm_disks: Sequence[Sequence[int]]) -> tuple[list[str], int]:
    """(violations, cost). An empty list means feasible: every VM on exactly one existing PM, CPU and memory
    within capacity, each virtual disk on a physical disk of the VM's PM, no two disks of one VM on the same
    physical disk, and no physical disk over its size."""
    vms = [t for t, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    pms = [t for t, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
    errors: list[str] = []
    if len(vm_pm) != len(vms) or len(vm_disks) != len(vms):
        return [f"the assignment covers {len(vm_pm)} VMs, the problem has {len(vms)}"], 0
    cpu = [0] * len(pms)
    mem = [0] * len(pms)
    disk_use: dict[tuple[int, int], int] = {}
    for i, (vm, j, disks) in enumerate(zip(vms, vm_pm, vm_disks, strict=True)):
        if not 0 <= j < len(pms):
            errors.append(f"VM {i} is on PM {j}, which does not exist")
            continue
        cpu[j] += vm.vcpu
        mem[j] += vm.mem
        if len(disks) != len(vm.disks):
            errors.append(f"VM {i} has {len(disks)} disk placements for {len(vm.disks)} virtual disks")
            continue
        if len(set(disks)) != len(disks):
            errors.append(f"VM {i} has two virtual disks on one physical disk of PM {j}")
        for size, d in zip(vm.disks, disks, strict=True):
            if not 0 <= d < len(pms[j].disks):
                errors.append(f"VM {i} uses disk {d} of PM {j}, which has {len(pms[j].disks)}")
                continue
            disk_use[(j, d)] = disk_use.get((j, d), 0) + size
    for j, pm in enumerate(pms):
        if cpu[j] > pm.vcpu:
            errors.append(f"PM {j} ({pm.name}) has {cpu[j]} vCPU assigned, capacity {pm.vcpu}")
        if mem[j] > pm.mem:
            errors.append(f"PM {j} ({pm.name}) has {mem[j] / 4} GiB assigned, capacity {pm.mem / 4}")
    for (j, d), used in disk_use.items():
        if used > pms[j].disks[d]:
            errors.append(f"disk {d} of PM {j} holds {used} GB, size {pms[j].disks[d]}")
    errors += _constraint_errors(problem, vm_pm, len(pms))
    used_pms = set(vm_pm)
    cost = sum(pms[j].cost for j in used_pms if 0 <= j < len(pms))
    return errors, cost


def verify(problem: Problem, res: Result) -> Result:
    """``res`` with ``verified`` and ``violations`` from :func:`check` (a result without an assignment stays
    unverified); a reported cost the checker does not recompute is a violation too."""
    if res.vm_pm is None or res.vm_disks is None:
        return res
    errors, cost = check(problem, res.vm_pm.tolist(), res.vm_disks)
    if res.cost is not None and cost != res.cost:
        errors.append(f"the method reported cost {res.cost}, the checker computes {cost}")
    return replace(res, verified=not errors, violations=tuple(errors))


def _constraint_errors(problem: Problem, vm_pm: Sequence[int], n_pms: int) -> list[str]:
    """Colocation, anti-colocation and spread, recomputed from the raw assignment and rack list."""
    rack = list(problem.racks) if problem.racks else list(range(n_pms))
    errors: list[str] = []
    for n, c in enumerate(problem.constraints):

        def unit(i: int, level: str = c.level) -> int:
            j = vm_pm[i]
            if not 0 <= j < n_pms:
                return -1 - i  # a VM on no valid PM shares nothing
            return j if level == "pm" else rack[j]

        if c.kind == "colocate":
            units = {unit(i) for s in c.sets for i in s}
            if len(units) > 1:
                errors.append(f"constraint {n} (colocate at {c.level} level) spans {len(units)} {c.level}s")
        elif c.kind == "anti-colocate":
            owner: dict[int, int] = {}
            for k, s in enumerate(c.sets):
                for i in s:
                    u = unit(i)
                    if u in owner and owner[u] != k:
                        errors.append(f"constraint {n} (anti-colocate at {c.level} level): sets {owner[u]} and {k} "
                                      f"share a {c.level}")  # fmt: skip
                    owner.setdefault(u, k)
        else:
            per_rack: dict[int, int] = {}
            for s in c.sets:
                for i in s:
                    u = unit(i)
                    per_rack[u] = per_rack.get(u, 0) + 1
            if len(per_rack) < c.min_racks:
                errors.append(f"constraint {n} (spread) uses {len(per_rack)} racks, needs at least {c.min_racks}")
            if c.max_per_rack and max(per_rack.values(), default=0) > c.max_per_rack:
                errors.append(f"constraint {n} (spread) puts {max(per_rack.values())} VMs in one rack, at most "
                              f"{c.max_per_rack} allowed")  # fmt: skip
    return errors
