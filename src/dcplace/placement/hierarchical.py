"""The paper's two-level hierarchical decomposition (section V-D): VMs split into packs, PMs into swads; packs
assigned to swads by a small first-level model; each used swad's VMs placed on its PMs independently (in parallel).

First level (the paper's): minimise the number of swads used, such that per swad the packs' total vCPU, memory and
disk space fit the swad's totals, their total number of virtual disks is at most ``beta`` times the swad's number of
physical disks (the safety margin), and each pack's largest VM (vCPU, memory) fits the swad's largest PM.
``first_level="cost"`` minimises instead the summed cost of the cheapest PMs that could carry each swad's load (a
cost-aware first level, ours). Second level: the exact ``compact`` model per used swad, in a process pool. If a
swad's subproblem is infeasible, ``beta`` is lowered by 0.1 and the first level is solved again (the paper's
"search on beta").
"""

from __future__ import annotations

import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np
from ortools.sat.python import cp_model

from dcplace.placement.problem import Problem


@dataclass
class Split:
    packs: list[np.ndarray]  # global VM ids per pack
    swads: list[np.ndarray]  # global PM ids per swad


def random_split(problem: Problem, packs: int, swads: int, seed: int) -> Split:
    """The paper's random split into equal-size packs and swads."""
    rng = np.random.default_rng(seed)
    return Split(
        [np.sort(a) for a in np.array_split(rng.permutation(problem.n_vms), packs)],
        [np.sort(a) for a in np.array_split(rng.permutation(problem.n_pms), swads)],
    )


def _sub(problem: Problem, vms: np.ndarray, pms: np.ndarray) -> tuple[Problem, np.ndarray, np.ndarray]:
    """The subproblem of some VMs and PMs, and its type-major order mapped back to global ids."""
    vt, pt = problem.vm_type_of()[vms], problem.pm_type_of()[pms]
    vm_order = vms[np.argsort(vt, kind="stable")]
    pm_order = pms[np.argsort(pt, kind="stable")]
    vcount = np.bincount(vt, minlength=len(problem.vm_types))
    pcount = np.bincount(pt, minlength=len(problem.pm_types))
    sub = Problem(
        "sub",
        tuple(t for t, c in zip(problem.vm_types, vcount, strict=True) if c),
        tuple(int(c) for c in vcount if c),
        tuple(t for t, c in zip(problem.pm_types, pcount, strict=True) if c),
        tuple(int(c) for c in pcount if c),
    )
    return sub, vm_order, pm_order


def first_level(problem: Problem, split: Split, beta: float, objective: str, time_limit: float) -> list[int] | None:
    """Swad of each pack, or None if the first level is infeasible."""
    vts = [t for t, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    pms = [t for t, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]

    def need(ids: np.ndarray) -> tuple[int, int, int, int, int, int]:
        vs = [vts[i] for i in ids]
        return (sum(v.vcpu for v in vs), sum(v.mem for v in vs), sum(len(v.disks) for v in vs),
                sum(sum(v.disks) for v in vs), max(v.vcpu for v in vs), max(v.mem for v in vs))  # fmt: skip

    def have(ids: np.ndarray) -> tuple[int, int, int, int, int, int]:
        ps = [pms[j] for j in ids]
        return (sum(p.vcpu for p in ps), sum(p.mem for p in ps), sum(len(p.disks) for p in ps),
                sum(sum(p.disks) for p in ps), max(p.vcpu for p in ps), max(p.mem for p in ps))  # fmt: skip

    needs = [need(p) for p in split.packs]
    haves = [have(s) for s in split.swads]
    m = cp_model.CpModel()
    a = {}
    for i, n in enumerate(needs):
        for s, h in enumerate(haves):
            if n[4] <= h[4] and n[5] <= h[5]:
                a[(i, s)] = m.new_bool_var(f"a{i}_{s}")
    for i in range(len(needs)):
        opts = [v for (ii, _), v in a.items() if ii == i]
        if not opts:
            return None
        m.add_exactly_one(opts)
    used = [m.new_bool_var(f"u{s}") for s in range(len(haves))]
    for s, h in enumerate(haves):
        on = [(i, v) for (i, ss), v in a.items() if ss == s]
        for _, v in on:
            m.add(v <= used[s])
        for r in (0, 1, 3):
            m.add(sum(needs[i][r] * v for i, v in on) <= h[r])
        m.add(sum(needs[i][2] * v for i, v in on) <= int(beta * h[2]))
    if objective == "cost":
        # Cost-aware: each swad pays for the cheapest set of its PMs whose vCPU covers its load (an LP-free proxy:
        # the swad's cost per vCPU, cheapest first, times the vCPU it must host).
        per_cpu = [min(pms[j].cost / pms[j].vcpu for j in sw) for sw in split.swads]
        m.minimize(sum(round(per_cpu[s] * needs[i][0]) * v for (i, s), v in a.items()))
    else:
        m.minimize(sum(used))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = time_limit
    solver.parameters.num_workers = 1
    if solver.solve(m) not in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        return None
    out = [0] * len(needs)
    for (i, s), v in a.items():
        if solver.value(v):
            out[i] = s
    return out


def _solve_swad(args: tuple[Problem, float]) -> tuple[str, np.ndarray | None, list[list[int]] | None, float]:
    from dcplace.placement.solve import solve_compact

    sub, limit = args
    res = solve_compact(sub, limit, 0, 1)
    return res.status, res.vm_pm, res.vm_disks, res.wall_s


def solve_hierarchical(
    problem: Problem,
    time_limit: float,
    seed: int,
    workers: int,
    packs: int = 25,
    swads: int = 25,
    beta: float = 0.7,
    objective: str = "swads",
) -> tuple[np.ndarray | None, list[list[int]] | None, dict[str, float]]:
    """(VM -> PM, disks, stats); None when no beta down to 0.1 gives feasible subproblems in time."""
    t0 = time.perf_counter()
    split = random_split(problem, packs, swads, seed)
    b = beta
    while b >= 0.1 - 1e-9 and time.perf_counter() - t0 < time_limit:
        left = time_limit - (time.perf_counter() - t0)
        assign = first_level(problem, split, b, objective, min(10.0, left / 4))
        if assign is None:
            b = round(b - 0.1, 2)
            continue
        jobs, maps = [], []
        for s in sorted(set(assign)):
            vms = np.concatenate([split.packs[i] for i, ss in enumerate(assign) if ss == s])
            sub, vm_order, pm_order = _sub(problem, vms, split.swads[s])
            jobs.append(sub)
            maps.append((vm_order, pm_order))
        # Swads run ``workers`` at a time; keep a fifth of what is left for building models and the pool itself.
        left = time_limit - (time.perf_counter() - t0)
        rounds = -(-len(jobs) // workers)
        per_swad = max(0.8 * left / rounds, 0.2)
        with ProcessPoolExecutor(max_workers=workers) as pool:
            results = list(pool.map(_solve_swad, [(sub, per_swad) for sub in jobs]))
        if any(r[1] is None for r in results):
            if any(r[0] == "unknown" for r in results):  # out of time, not infeasible: lowering beta won't help
                break
            b = round(b - 0.1, 2)
            continue
        vm_pm = np.full(problem.n_vms, -1, dtype=np.int64)
        vm_disks: list[list[int]] = [[] for _ in range(problem.n_vms)]
        for (_, sub_pm, sub_disks, _), (vm_order, pm_order) in zip(results, maps, strict=True):
            assert sub_pm is not None and sub_disks is not None
            vm_pm[vm_order] = pm_order[sub_pm]
            for local, glob in enumerate(vm_order.tolist()):
                vm_disks[glob] = sub_disks[local]
        stats = {
            "beta": b,
            "swads_used": float(len(jobs)),
            "swad_seconds_sum": float(sum(r[3] for r in results)),
            "swads_optimal": float(sum(r[0] == "optimal" for r in results)),
        }
        return vm_pm, vm_disks, stats
    return None, None, {"beta": b}
