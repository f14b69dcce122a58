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
    physical disk, no physical disk over its size, and every pinned VM on its current PM and disks. The cost is
    machine cost + migration cost (:func:`cost_parts`; no migration cost without a current placement)."""
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
    errors += _pinned_errors(problem, vm_pm, vm_disks)
    machine, migration, _ = cost_parts(problem, vm_pm)
    return errors, machine + migration


def cost_parts(problem: Problem, vm_pm: Sequence[int]) -> tuple[int, int, int]:
    """(machine cost, migration cost, migrations) of an assignment, recomputed from the raw fields: the cost of
    every PM used; a VM with a current PM migrates when its PM differs from it, at its ``migration_cost`` (default:
    its memory in GiB rounded up); a change of physical disk on the same PM is no migration."""
    pms = [t for t, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
    machine = sum(pms[j].cost for j in set(vm_pm) if 0 <= j < len(pms))
    if not problem.current:
        return machine, 0, 0
    vms = [t for t, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    migration = migrations = 0
    for i, (now, then) in enumerate(zip(vm_pm, problem.current, strict=True)):
        if then >= 0 and now != then:
            migrations += 1
            migration += problem.migration_cost[i] if problem.migration_cost else -(-vms[i].mem // 4)
    return machine, migration, migrations


def _pinned_errors(problem: Problem, vm_pm: Sequence[int], vm_disks: Sequence[Sequence[int]]) -> list[str]:
    """Every pinned VM on its current PM and physical disks."""
    errors = []
    for i in problem.pinned:
        if vm_pm[i] != problem.current[i] or list(vm_disks[i]) != list(problem.current_disks[i]):
            errors.append(f"pinned VM {i} moved from PM {problem.current[i]} disks {list(problem.current_disks[i])} "
                          f"to PM {vm_pm[i]} disks {list(vm_disks[i])}")  # fmt: skip
    return errors


def why_infeasible(problem: Problem) -> str:
    """One sentence on why ``problem`` has no answer, from what can be seen without search: a VM larger than every
    PM in some resource, or a total demand above the total supply; otherwise the packing itself (the totals fit)."""
    used = [(vm, n) for vm, n in zip(problem.vm_types, problem.vm_counts, strict=True) if n]
    pms = [(pm, n) for pm, n in zip(problem.pm_types, problem.pm_counts, strict=True) if n]
    for vm, _ in used:
        checks = (
            ("vCPU", vm.vcpu, max((pm.vcpu for pm, _ in pms), default=0)),
            ("GiB of memory", vm.mem / 4, max((pm.mem / 4 for pm, _ in pms), default=0)),
            ("virtual disks", len(vm.disks), max((len(pm.disks) for pm, _ in pms), default=0)),
            (
                "GB on its largest disk",
                max(vm.disks, default=0),
                max((d for pm, _ in pms for d in pm.disks), default=0),
            ),
        )
        for what, need, most in checks:
            if need > most:
                return f"VM type {vm.name!r} needs {need:g} {what}, more than any PM has ({most:g})"
    totals = (
        ("vCPU", sum(vm.vcpu * n for vm, n in used), sum(pm.vcpu * n for pm, n in pms)),
        ("GiB of memory", sum(vm.mem * n for vm, n in used) / 4, sum(pm.mem * n for pm, n in pms) / 4),
        ("GB of disk", sum(sum(vm.disks) * n for vm, n in used), sum(sum(pm.disks) * n for pm, n in pms)),
    )
    for what, need, have in totals:
        if need > have:
            return f"the VMs need {need:g} {what} in all, the PMs have {have:g}"
    return (
        "the totals fit; the method's search says the packing itself has no answer (a claim the checker cannot verify)"
    )


def verify(problem: Problem, res: Result) -> Result:
    """``res`` with ``verified`` and ``violations`` from :func:`check` (a result without an assignment stays
    unverified); a reported cost the checker does not recompute is a violation too. From a current placement the
    stats gain the checker's ``machine_cost``, ``migration_cost`` and ``migrations`` (so ``summary()`` shows them).
    An infeasible answer without a reason gets one (:func:`why_infeasible`)."""
    if res.status == "infeasible" and "reason" not in res.stats:
        res = replace(res, stats={**res.stats, "reason": why_infeasible(problem)})
    if res.vm_pm is None or res.vm_disks is None:
        return res
    vm_pm = res.vm_pm.tolist()
    errors, cost = check(problem, vm_pm, res.vm_disks)
    if res.cost is not None and cost != res.cost:
        errors.append(f"the method reported cost {res.cost}, the checker computes {cost}")
    stats = dict(res.stats)
    if problem.current:
        machine, migration, migrations = cost_parts(problem, vm_pm)
        stats |= {"machine_cost": machine, "migration_cost": migration, "migrations": migrations}
    return replace(res, verified=not errors, violations=tuple(errors), stats=stats)


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
