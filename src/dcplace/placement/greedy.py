"""The paper's randomized greedy heuristic (section V-B), vectorised over the PMs.

VMs in a random order; for each, the PMs already in use are scanned in a random order, then the unused ones, and the
first PM that can take the VM wins (CPU, memory, and a disk assignment: the VM's virtual disks, largest first, each on
the first physical disk, in index order, with room and not already holding one of this VM's disks). Scanning a
uniformly random order and taking the first feasible PM is the same as drawing uniformly among the feasible ones,
which is what the vectorised code does.
"""

from __future__ import annotations

import numpy as np

from dcplace.placement.problem import Problem


def greedy_once(problem: Problem, rng: np.random.Generator) -> tuple[np.ndarray, list[list[int]]] | None:
    """One randomized run: (VM -> PM, VM -> physical disks), or None when some VM fits nowhere."""
    pms = [p for p, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
    vms = [v for v, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    n_disks = max((len(p.disks) for p in pms), default=0)
    cpu = np.array([p.vcpu for p in pms], dtype=np.int64)
    mem = np.array([p.mem for p in pms], dtype=np.int64)
    disk = np.full((len(pms), max(n_disks, 1)), -1, dtype=np.int64)  # free GB; -1 = no such disk
    for j, p in enumerate(pms):
        disk[j, : len(p.disks)] = p.disks
    used = np.zeros(len(pms), dtype=np.bool_)
    vm_pm = np.full(len(vms), -1, dtype=np.int64)
    vm_disks: list[list[int]] = [[] for _ in vms]
    for i in rng.permutation(len(vms)):
        vm = vms[i]
        ok = (cpu >= vm.vcpu) & (mem >= vm.mem)
        sizes = sorted(vm.disks, reverse=True)
        if sizes:
            # Equal sizes (the catalog): enough disks with room. Mixed sizes: checked exactly below per candidate.
            ok &= (disk >= sizes[-1]).sum(1) >= len(sizes)
        for pool in (ok & used, ok & ~used):
            cand = np.flatnonzero(pool)
            rng.shuffle(cand)
            for j in cand.tolist():
                picks = _disks_for(disk[j], sizes)
                if picks is not None:
                    break
            else:
                continue
            break
        else:
            return None
        vm_pm[i] = j
        cpu[j] -= vm.vcpu
        mem[j] -= vm.mem
        used[j] = True
        order = sorted(range(len(vm.disks)), key=lambda k: -vm.disks[k])
        placed = [0] * len(vm.disks)
        for k, d in zip(order, picks, strict=True):
            placed[k] = d
            disk[j, d] -= vm.disks[k]
        vm_disks[i] = placed
    return vm_pm, vm_disks


def _disks_for(free: np.ndarray, sizes: list[int]) -> list[int] | None:
    """Distinct physical disks for the sizes (largest first), each the first in index order with room."""
    taken: list[int] = []
    for s in sizes:
        room = np.flatnonzero(free >= s)
        room = room[~np.isin(room, taken)]
        if not len(room):
            return None
        taken.append(int(room[0]))
    return taken


def cost_of(problem: Problem, vm_pm: np.ndarray) -> int:
    costs = np.repeat([p.cost for p in problem.pm_types], problem.pm_counts)
    return int(costs[np.unique(vm_pm)].sum())
