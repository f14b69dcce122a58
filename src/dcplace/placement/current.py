"""The movable part of a problem that starts from a current placement, in the counting models' terms.

VMs of one type with different migration costs are not interchangeable for the objective, so the counting models
work on *classes*: one per (VM type, migration cost) among the VMs that are not pinned (a type whose VMs all cost
the same, e.g. the memory-proportional default, stays one class). Pinned VMs leave the problem: they keep their PM
and physical disks, so each PM's CPU, memory and every physical disk shrink by what its pinned VMs use (exact:
disk exclusivity only concerns the disks of one VM, so other VMs see a pinned VM's disks as used space only), and a
PM holding a pinned VM is used whatever the answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import numpy as np

from dcplace.placement.problem import PMType, Problem, VMType


@dataclass(frozen=True)
class Movable:
    """``problem``: the classes as VM types (class-major VM numbering) on the residual PMs (same PM numbering as
    the original; PM types run-length encoded so identical neighbours stay identical). ``members[k]``: the original
    VM numbers of class ``k`` (ascending); ``cost[k]``: its per-VM migration cost; ``current[k, j]``: how many of
    its VMs are on PM ``j`` now; ``fixed[j]``: PM ``j`` holds a pinned VM; ``busy[j]``: PM ``j`` holds any VM now
    (PMs that are not interchangeable with their identical neighbours)."""

    problem: Problem
    members: tuple[np.ndarray, ...]
    cost: np.ndarray
    current: np.ndarray
    fixed: np.ndarray
    busy: np.ndarray

    @property
    def order(self) -> np.ndarray:
        """(movable VMs,) the original VM number of each class-major VM number."""
        return np.concatenate([*self.members, np.zeros(0, np.int64)]).astype(np.int64)

    def constant(self) -> int:
        """Migration cost if every VM that has a current PM moved: ``sum_{k,j} cost_k current[k, j]``."""
        return int((self.cost[:, None] * self.current).sum()) if len(self.cost) else 0


def movable(problem: Problem) -> Movable:
    """The :class:`Movable` view of ``problem`` (which has a current placement)."""
    pms = [p for p, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
    vms = [v for v, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    cur = problem.current_pm()
    cost = problem.migration_costs()
    vt = problem.vm_type_of()
    pinned = np.zeros(problem.n_vms, np.bool_)
    pinned[list(problem.pinned)] = True
    cpu = [p.vcpu for p in pms]
    mem = [p.mem for p in pms]
    disks = [list(p.disks) for p in pms]
    fixed = np.zeros(len(pms), np.bool_)
    for i in np.flatnonzero(pinned).tolist():
        j = int(cur[i])
        fixed[j] = True
        cpu[j] -= vms[i].vcpu
        mem[j] -= vms[i].mem
        for size, d in zip(vms[i].disks, problem.current_disks[i], strict=True):
            disks[j][d] -= size
    residual = [PMType(p.name, cpu[j], mem[j], tuple(disks[j]), p.cost) for j, p in enumerate(pms)]
    pm_types: list[PMType] = []
    pm_counts: list[int] = []
    for p in residual:
        if pm_types and pm_types[-1] == p:
            pm_counts[-1] += 1
        else:
            pm_types.append(p)
            pm_counts.append(1)
    keys = sorted({(int(vt[i]), int(cost[i])) for i in np.flatnonzero(~pinned).tolist()})
    several = {t for t, _ in keys if sum(tt == t for tt, _ in keys) > 1}
    vm_types: list[VMType] = []
    members: list[np.ndarray] = []
    for t, c in keys:
        ids = np.flatnonzero(~pinned & (vt == t) & (cost == c))
        vtype = problem.vm_types[t]
        vm_types.append(replace(vtype, name=f"{vtype.name}@{c}") if t in several else vtype)
        members.append(ids.astype(np.int64))
    current = np.zeros((len(keys), len(pms)), np.int64)
    for k, ids in enumerate(members):
        on = cur[ids]
        np.add.at(current[k], on[on >= 0], 1)
    busy = np.zeros(len(pms), np.bool_)
    busy[cur[cur >= 0]] = True
    sub = Problem(problem.name, tuple(vm_types), tuple(len(m) for m in members), tuple(pm_types), tuple(pm_counts))
    return Movable(sub, tuple(members), np.array([c for _, c in keys], np.int64), current, fixed, busy)


def fill(
    problem: Problem, view: Movable, groups: dict[tuple[int, int], list[list[int]]]
) -> tuple[np.ndarray, list[list[int]]]:
    """The assignment of ``problem`` whose movable VMs follow ``groups`` (per (class, PM): one physical-disk list
    per VM of the class placed there): on every (class, PM) keep ``min(n, c)`` of the VMs now on that PM there, each
    on the disk list with most of its current disks (those disks on the virtual disks that held them), and fill the
    other places with the class's new VMs and those from PMs that keep fewer than they had; pinned VMs stay. Every
    VM that moves sits now on a PM with no free place of its class, so the migrations are the fewest the counts
    allow (``compact``'s exactness argument)."""
    cur = problem.current_pm()
    vm_pm = cur.copy()
    vm_disks = [list(d) for d in problem.current_disks]
    for k, ids in enumerate(view.members):
        keep: dict[int, list[int]] = {}
        movers: list[int] = []
        for j in range(problem.n_pms):
            on = ids[cur[ids] == j].tolist()
            n = len(groups.get((k, j), []))
            keep[j] = on[:n]
            movers += on[n:]
        movers += ids[cur[ids] < 0].tolist()
        for j in range(problem.n_pms):
            sets = list(groups.get((k, j), []))
            for i in keep[j]:
                held = problem.current_disks[i]
                best = max(range(len(sets)), key=lambda q: len(set(sets[q]) & set(held)))
                vm_disks[i] = _keep_order(sets.pop(best), held)
            for disks in sets:
                i = movers.pop()
                vm_pm[i] = j
                vm_disks[i] = list(disks)
    return vm_pm, vm_disks


def _keep_order(disks: list[int], held: Sequence[int]) -> list[int]:
    """``disks`` reordered so that every virtual disk whose current physical disk is among them keeps it."""
    free = [d for d in disks if d not in held]
    return [d if d in disks else free.pop() for d in held]


def relabel(
    problem: Problem, vm_pm: np.ndarray, vm_disks: Sequence[Sequence[int]]
) -> tuple[np.ndarray, list[list[int]]]:
    """A from-scratch answer moved onto the PMs so that it migrates least: the PMs of one type are interchangeable
    from scratch, so each used PM's content (counts per class, disk lists) may go to any PM of its type. Content
    ``b`` on PM ``p`` keeps ``sum_k m_k min(n_b[k], c[k, p])`` of migration cost; a linear assignment per PM type
    (OR-Tools, empty contents padding) maximises the total, and :func:`fill` places the VMs. Machine cost is
    unchanged; for problems without pinned VMs (a pinned VM's PM cannot take just any content)."""
    from ortools.graph.python import linear_sum_assignment

    view = movable(problem)
    assert not problem.pinned, "relabel needs a problem without pinned VMs"
    cls = np.empty(problem.n_vms, np.int64)
    for k, ids in enumerate(view.members):
        cls[ids] = k
    content: dict[int, dict[int, list[list[int]]]] = {}
    for i, j in enumerate(np.asarray(vm_pm).tolist()):
        content.setdefault(j, {}).setdefault(int(cls[i]), []).append(list(vm_disks[i]))
    pm_type = problem.pm_type_of()
    groups: dict[tuple[int, int], list[list[int]]] = {}
    for t in range(len(problem.pm_types)):
        pms = np.flatnonzero(pm_type == t).tolist()
        bins = [content[j] for j in pms if j in content]
        if not bins:
            continue
        solver = linear_sum_assignment.SimpleLinearSumAssignment()
        for b in range(len(pms)):
            for q, p in enumerate(pms):
                gain = 0
                if b < len(bins):
                    gain = sum(int(view.cost[k]) * min(len(v), int(view.current[k, p])) for k, v in bins[b].items())
                solver.add_arc_with_cost(b, q, -gain)
        if solver.solve() != solver.OPTIMAL:
            raise RuntimeError("the linear assignment of contents to PMs failed")
        for b, content_b in enumerate(bins):
            p = pms[solver.right_mate(b)]
            for k, sets in content_b.items():
                groups[(k, p)] = sets
    return fill(problem, view, groups)
