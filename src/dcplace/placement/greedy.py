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

From a current placement (:attr:`Problem.current`) a run starts from it instead (:func:`greedy_from_current`): it
keeps every VM where it is unless its PM is emptied, so it gives a feasible upper bound on machine + migration cost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcplace.config import check
from dcplace.errors import InputError
from dcplace.placement.params import Params
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
        check(self.runs >= 1, "runs", self.runs, "at least 1")


def solve_greedy(problem: Problem, stop: Stop, seed: int, params: GreedyParams) -> Result:
    """The paper's randomized greedy heuristic: the best of ``runs`` runs, with their cost statistics (from a
    current placement: :func:`greedy_from_current`, costs are machine + migration)."""
    if problem.has_current and problem.constraints:
        raise InputError("greedy does not model placement constraints together with a current placement")
    rng = np.random.default_rng(seed)
    costs: list[int] = []
    best: tuple[np.ndarray, list[list[int]]] | None = None
    done = 0
    for _ in range(params.runs):
        if done and stop.expired():
            break
        done += 1
        out = greedy_from_current(problem, rng) if problem.has_current else greedy_once(problem, rng)
        if out is None:
            continue
        c = total_cost(problem, out[0])
        if not costs or c < min(costs):
            best = out
        costs.append(c)
    if best is None:  # a heuristic that failed proves nothing: unknown, not infeasible
        why = {"reason": f"no run of {done} placed every VM"}
        return Result(problem.name, "greedy", "unknown", vms=problem.n_vms, stats=why)
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
    state = _State(problem)
    rules = _Rules(problem)
    for i in rng.permutation(problem.n_vms):
        j = state.place(int(i), rng, rules.allowed(int(i)))
        if j is None:
            return None
        rules.place(int(i), j)
    if not rules.spread_met():
        return None
    return state.vm_pm, state.vm_disks


def greedy_from_current(problem: Problem, rng: np.random.Generator) -> tuple[np.ndarray, list[list[int]]] | None:
    """One randomized run from the current placement (no placement constraints): every VM keeps its PM and disks,
    the new VMs are placed as :func:`greedy_once` places VMs; then the used PMs without pinned VMs, least vCPU-loaded
    first (ties in random order), are each emptied into the other used PMs (each VM to a random one with room) when
    that lowers machine + migration cost (the PM's cost exceeds the migration cost the moves add), else left as they
    were. Every step keeps the assignment feasible, so the answer is a feasible upper bound. None when a new VM fits
    nowhere."""
    state = _State(problem)
    cur = problem.current_pm()
    for i in np.flatnonzero(cur >= 0).tolist():
        state.put(i, int(cur[i]), list(problem.current_disks[i]))
    everywhere = np.ones(problem.n_pms, dtype=np.bool_)
    for i in rng.permutation(np.flatnonzero(cur < 0)).tolist():
        if state.place(i, rng, everywhere) is None:
            return None
    mig = problem.migration_costs()
    costs = np.repeat([p.cost for p in problem.pm_types], problem.pm_counts)
    pinned_on = np.zeros(problem.n_pms, dtype=np.bool_)
    pinned_on[cur[list(problem.pinned)]] = True
    load = np.zeros(problem.n_pms)
    np.add.at(load, state.vm_pm, [state.vms[i].vcpu for i in range(problem.n_vms)])
    load /= np.maximum([p.vcpu for p in state.pms], 1)
    shuffled = rng.permutation(problem.n_pms)
    for j in shuffled[np.argsort(load[shuffled], kind="stable")].tolist():
        if not state.used[j] or pinned_on[j]:
            continue
        movers = np.flatnonzero(state.vm_pm == j).tolist()
        saved = state.save(movers)
        state.used[j] = False
        delta = -int(costs[j])
        ok = True
        for i in movers:
            state.take(i)
            to = state.place(i, rng, state.used.copy(), new_pms=False)
            if to is None:
                ok = False
                break
            delta += int(mig[i]) * (int(cur[i] != to) - int(cur[i] != j))
        if not ok or delta >= 0:
            state.restore(saved)
    return state.vm_pm, state.vm_disks


def perturbed(
    problem: Problem, vm_pm: np.ndarray, vm_disks: list[list[int]], fraction: float, rng: np.random.Generator
) -> tuple[np.ndarray, list[list[int]]]:
    """A feasible assignment (``vm_pm``, ``vm_disks``) with a random ``fraction`` of its VMs each moved to a random
    PM with room, used or not (it stays when none has room): a scattered "current placement" to re-optimise."""
    state = _State(problem)
    for i, j in enumerate(vm_pm.tolist()):
        state.put(i, j, list(vm_disks[i]))
    everywhere = np.ones(problem.n_pms, dtype=np.bool_)
    for i in rng.choice(problem.n_vms, size=round(fraction * problem.n_vms), replace=False).tolist():
        j, disks = int(state.vm_pm[i]), state.vm_disks[i]
        state.take(i)
        if state.place(i, rng, everywhere, spread=True) is None:
            state.put(i, j, disks)
    return state.vm_pm, state.vm_disks


class _State:
    """Free CPU, memory and disk space per PM, and the assignment so far."""

    def __init__(self, problem: Problem) -> None:
        self.pms = [p for p, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
        self.vms = [v for v, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
        n_disks = max((len(p.disks) for p in self.pms), default=0)
        self.cpu = np.array([p.vcpu for p in self.pms], dtype=np.int64)
        self.mem = np.array([p.mem for p in self.pms], dtype=np.int64)
        self.disk = np.full((len(self.pms), max(n_disks, 1)), -1, dtype=np.int64)  # free GB; -1 = no such disk
        for j, p in enumerate(self.pms):
            self.disk[j, : len(p.disks)] = p.disks
        self.used = np.zeros(len(self.pms), dtype=np.bool_)
        self.vm_pm = np.full(len(self.vms), -1, dtype=np.int64)
        self.vm_disks: list[list[int]] = [[] for _ in self.vms]

    def place(
        self, i: int, rng: np.random.Generator, allowed: np.ndarray, new_pms: bool = True, spread: bool = False
    ) -> int | None:
        """Put VM ``i`` on a random allowed PM with room, a used one if any (an unused one only if ``new_pms``;
        ``spread``: used or not alike); its disks largest first, each on the first physical disk with room. The PM,
        or None (nothing changed)."""
        vm = self.vms[i]
        ok = (self.cpu >= vm.vcpu) & (self.mem >= vm.mem) & allowed
        sizes = sorted(vm.disks, reverse=True)
        if sizes:
            # Equal sizes (the catalog): enough disks with room. Mixed sizes: checked exactly below per candidate.
            ok &= (self.disk >= sizes[-1]).sum(1) >= len(sizes)
        pools = (ok,) if spread else (ok & self.used, ok & ~self.used) if new_pms else (ok & self.used,)
        for pool in pools:
            cand = np.flatnonzero(pool)
            rng.shuffle(cand)
            for j in cand.tolist():
                picks = _disks_for(self.disk[j], sizes)
                if picks is not None:
                    break
            else:
                continue
            break
        else:
            return None
        order = sorted(range(len(vm.disks)), key=lambda k: -vm.disks[k])
        placed = [0] * len(vm.disks)
        for k, d in zip(order, picks, strict=True):
            placed[k] = d
        self.put(i, j, placed)
        return j

    def put(self, i: int, j: int, disks: list[int]) -> None:
        vm = self.vms[i]
        self.vm_pm[i] = j
        self.cpu[j] -= vm.vcpu
        self.mem[j] -= vm.mem
        self.used[j] = True
        for size, d in zip(vm.disks, disks, strict=True):
            self.disk[j, d] -= size
        self.vm_disks[i] = disks

    def take(self, i: int) -> None:
        """Remove VM ``i`` from its PM (the PM keeps its ``used`` mark)."""
        vm, j = self.vms[i], int(self.vm_pm[i])
        self.cpu[j] += vm.vcpu
        self.mem[j] += vm.mem
        for size, d in zip(vm.disks, self.vm_disks[i], strict=True):
            self.disk[j, d] += size
        self.vm_pm[i] = -1
        self.vm_disks[i] = []

    def save(self, movers: list[int]) -> tuple[tuple[np.ndarray, ...], dict[int, list[int]]]:
        """The state, to :meth:`restore` after trying to move ``movers`` (only they may change meanwhile)."""
        arrays = (self.cpu.copy(), self.mem.copy(), self.disk.copy(), self.used.copy(), self.vm_pm.copy())
        return arrays, {i: self.vm_disks[i] for i in movers}

    def restore(self, saved: tuple[tuple[np.ndarray, ...], dict[int, list[int]]]) -> None:
        arrays, disks = saved
        self.cpu, self.mem, self.disk, self.used, self.vm_pm = arrays
        for i, d in disks.items():
            self.vm_disks[i] = d


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
    """Distinct physical disks for the sizes (largest first), each the first in index order with room. A PM has a
    handful of disks: a loop over a list is several times faster here than numpy's calls on such short arrays (the
    greedy heuristic's 50 runs on a 1,000-VM mix spent half their time in this function)."""
    row = free.tolist()
    taken: list[int] = []
    for s in sizes:
        for d, room in enumerate(row):
            if room >= s and d not in taken:
                taken.append(d)
                break
        else:
            return None
    return taken


def cost_of(problem: Problem, vm_pm: np.ndarray) -> int:
    """Machine cost: the cost of every PM used."""
    costs = np.repeat([p.cost for p in problem.pm_types], problem.pm_counts)
    return int(costs[np.unique(vm_pm)].sum())


def total_cost(problem: Problem, vm_pm: np.ndarray) -> int:
    """Machine cost + migration cost (the migration cost of every VM whose PM is not its current one)."""
    if not problem.has_current:
        return cost_of(problem, vm_pm)
    cur = problem.current_pm()
    moved = (cur >= 0) & (cur != vm_pm)
    return cost_of(problem, vm_pm) + int(problem.migration_costs()[moved].sum())
