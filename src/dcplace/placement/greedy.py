"""The paper's randomized greedy heuristic (section V-B), vectorised over the PMs.

VMs in a random order; for each, the PMs already in use are scanned in a random order, then the unused ones, and the
first PM that can take the VM wins (CPU, memory, and a disk assignment: the VM's virtual disks, largest first, each on
the first physical disk, in index order, with room and not already holding one of this VM's disks). Scanning a
uniformly random order and taking the first feasible PM is the same as drawing uniformly among the feasible ones,
which is what the vectorised code does.

Placement constraints (if the problem has any) narrow each VM's candidate PMs: a colocated VM goes where its group
already is, an anti-colocated one avoids the PMs / racks the other sets hold, a spread group takes new racks until it
spans ``min_racks`` and never more than ``max_per_rack`` per rack. A run that paints itself into a corner fails like
a run that runs out of room.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcplace.placement.params import Params, field_error
from dcplace.placement.problem import Problem
from dcplace.placement.result import Result
from dcplace.placement.stop import Stop

GREEDY_START_MAX = 10**7  # VMs x PMs above which auto and pattern start without greedy


@dataclass(frozen=True)
class GreedyParams(Params):
    """Parameters of the randomized greedy heuristic."""

    runs: int = 50
    """Randomized runs (at least 1; fewer when the stop criterion ends them, at least one is always done)."""

    def check(self) -> None:
        if self.runs < 1:
            raise field_error("runs", "be at least 1", self.runs)


def solve_greedy(problem: Problem, stop: Stop, seed: int, params: GreedyParams) -> Result:
    """The paper's randomized greedy heuristic: the best of ``runs`` runs, with their cost statistics."""
    rng = np.random.default_rng(seed)
    costs: list[int] = []
    best: tuple[np.ndarray, list[list[int]]] | None = None
    done = 0
    for _ in range(params.runs):
        if done and stop.expired():
            break
        done += 1
        out = greedy_once(problem, rng)
        if out is None:
            continue
        c = cost_of(problem, out[0])
        if not costs or c < min(costs):
            best = out
        costs.append(c)
    if best is None:
        why = {"reason": f"no run of {done} placed every VM"}
        return Result(problem.name, "greedy", "infeasible", vms=problem.n_vms, stats=why)
    arr = np.array(costs, dtype=float)
    stats = {
        "runs": done,
        "runs_feasible": len(costs),
        "cost_mean": float(arr.mean()),
        "cost_std": float(arr.std()),
        "cost_min": float(arr.min()),
        "cost_max": float(arr.max()),
    }
    return Result(problem.name, "greedy", "feasible", float(arr.min()), None, vms=problem.n_vms, vm_pm=best[0],
                  vm_disks=best[1], stats=stats)  # fmt: skip


def greedy_start(problem: Problem, stop: Stop, seed: int) -> Result | None:
    """The best of 5 greedy runs to start an exact method from, or None where greedy costs too much (VMs x PMs above
    ``GREEDY_START_MAX``: it scans every PM for every VM)."""
    if problem.n_vms * problem.n_pms > GREEDY_START_MAX:
        return None
    return solve_greedy(problem, stop, seed, GreedyParams(runs=5))


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
    rules = _Rules(problem)
    for i in rng.permutation(len(vms)):
        vm = vms[i]
        ok = (cpu >= vm.vcpu) & (mem >= vm.mem) & rules.allowed(int(i))
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
        rules.place(int(i), j)
        cpu[j] -= vm.vcpu
        mem[j] -= vm.mem
        used[j] = True
        order = sorted(range(len(vm.disks)), key=lambda k: -vm.disks[k])
        placed = [0] * len(vm.disks)
        for k, d in zip(order, picks, strict=True):
            placed[k] = d
            disk[j, d] -= vm.disks[k]
        vm_disks[i] = placed
    if not rules.spread_met():
        return None
    return vm_pm, vm_disks


class _Rules:
    """Which PMs each VM may still take under the problem's placement constraints, updated as VMs are placed."""

    def __init__(self, problem: Problem) -> None:
        self.rack = problem.rack_of()
        self.n = problem.n_pms
        self.cons = problem.constraints
        self.of_vm: dict[int, list[tuple[int, int]]] = {}  # VM -> (constraint, set)
        for n, c in enumerate(self.cons):
            for k, members in enumerate(c.sets):
                for i in members:
                    self.of_vm.setdefault(i, []).append((n, k))
        # constraint -> unit -> the set holding it (colocate, anti-colocate) or the VMs in it (spread)
        self.where: dict[int, dict[int, int]] = {n: {} for n in range(len(self.cons))}

    def _unit(self, n: int) -> np.ndarray:
        return np.arange(self.n) if self.cons[n].level == "pm" else self.rack

    def allowed(self, i: int) -> np.ndarray:
        ok = np.ones(self.n, dtype=np.bool_)
        for n, k in self.of_vm.get(i, []):
            c, seen, unit = self.cons[n], self.where[n], self._unit(n)
            if not seen:
                continue
            taken = np.array(list(seen), dtype=np.int64)
            if c.kind == "colocate":
                ok &= unit == taken[0]
            elif c.kind == "anti-colocate":
                other = np.array([u for u, kk in seen.items() if kk != k], dtype=np.int64)
                ok &= ~np.isin(unit, other)
            else:
                if len(seen) < c.min_racks:
                    ok &= ~np.isin(unit, taken)
                if c.max_per_rack:
                    full = np.array([u for u, cnt in seen.items() if cnt >= c.max_per_rack], dtype=np.int64)
                    ok &= ~np.isin(unit, full)
        return ok

    def spread_met(self) -> bool:
        """Every spread group reached its rack count (checked once all VMs are placed)."""
        return all(len(self.where[n]) >= c.min_racks for n, c in enumerate(self.cons) if c.kind == "spread")

    def place(self, i: int, j: int) -> None:
        for n, k in self.of_vm.get(i, []):
            c = self.cons[n]
            u = j if c.level == "pm" else int(self.rack[j])
            if c.kind == "spread":
                self.where[n][u] = self.where[n].get(u, 0) + 1
            else:
                self.where[n].setdefault(u, k)


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
