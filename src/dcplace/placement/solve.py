"""One entry point for every batch-placement method: ``solve(problem, method, time_limit, seed, workers)``.

Placement constraints (colocation, anti-colocation, spread) are modelled by ``flat`` and ``greedy``; ``auto`` runs
both on a constrained problem. Methods implemented so far: ``flat`` (the paper's formulation, the reference;
:mod:`dcplace.placement.flat`),
``compact`` (CP-SAT on counts, exact; :mod:`dcplace.placement.compact`), ``pattern``
(column generation with an LP bound; :mod:`dcplace.placement.pattern`), ``greedy`` (the paper's randomized heuristic,
best of ``runs`` with statistics), and ``auto`` (compact up to 200 PMs, pattern above, both started from the best of
5 greedy runs). Every returned assignment is verified by :mod:`dcplace.placement.checker`; ``verified`` is true
only when the checker accepted it.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from dcplace.errors import InputError
from dcplace.placement.checker import check
from dcplace.placement.greedy import cost_of, greedy_once
from dcplace.placement.problem import Problem

METHODS = ("auto", "flat", "compact", "pattern", "hierarchical", "greedy")
GREEDY_START_MAX = 10**7  # VMs x PMs above which auto and pattern start without greedy
AUTO_COMPACT_MAX_PMS = 200  # above this, per-PM variables stall CP-SAT's bound; patterns do not grow with counts


@dataclass
class Result:
    instance: str
    method: str
    status: str  # optimal, feasible, infeasible, unknown
    cost: float | None
    bound: float | None
    wall_s: float
    vms: int
    vm_pm: np.ndarray | None = field(default=None, repr=False)
    vm_disks: list[list[int]] | None = field(default=None, repr=False)
    verified: bool = False
    violations: list[str] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)

    @property
    def gap(self) -> float | None:
        if self.cost is None or self.bound is None or self.cost == 0:
            return None
        return (self.cost - self.bound) / self.cost

    @property
    def pms_used(self) -> int:
        return 0 if self.vm_pm is None else len(np.unique(self.vm_pm))

    def summary(self) -> dict[str, Any]:
        return {
            "instance": self.instance,
            "method": self.method,
            "status": self.status,
            "cost": self.cost,
            "bound": self.bound,
            "gap": self.gap,
            "wall_s": self.wall_s,
            "pms_used": self.pms_used,
            "vms": self.vms,
            "verified": self.verified,
            **({"violations": self.violations} if self.violations else {}),
            **self.stats,
        }


def _verify(problem: Problem, res: Result) -> Result:
    if res.vm_pm is not None and res.vm_disks is not None:
        errors, cost = check(problem, res.vm_pm.tolist(), res.vm_disks)
        res.violations = errors
        res.verified = not errors
        if res.cost is not None and cost != res.cost:
            res.violations.append(f"the method reported cost {res.cost}, the checker computes {cost}")
            res.verified = False
    return res


def solve_greedy(problem: Problem, seed: int = 0, runs: int = 50, time_limit: float = math.inf) -> Result:
    """Up to ``runs`` randomized runs (fewer if ``time_limit`` runs out; ``runs_done`` says how many)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(seed)
    costs: list[int] = []
    best: tuple[np.ndarray, list[list[int]]] | None = None
    done = 0
    for _ in range(runs):
        if done and time.perf_counter() - t0 > time_limit:
            break
        done += 1
        out = greedy_once(problem, rng)
        if out is None:
            continue
        c = cost_of(problem, out[0])
        if not costs or c < min(costs):
            best = out
        costs.append(c)
    wall = time.perf_counter() - t0
    if best is None:
        reason = f"no run of {done} placed every VM"
        return Result(problem.name, "greedy", "infeasible", None, None, wall, problem.n_vms, stats={"reason": reason})
    arr = np.array(costs, dtype=float)
    stats = {
        "runs": done,
        "runs_feasible": len(costs),
        "cost_mean": float(arr.mean()),
        "cost_std": float(arr.std()),
        "cost_min": float(arr.min()),
        "cost_max": float(arr.max()),
    }
    return Result(problem.name, "greedy", "feasible", float(arr.min()), None, wall, problem.n_vms, *best, stats=stats)


def solve_compact(
    problem: Problem, time_limit: float = 60.0, seed: int = 0, workers: int = 2, hint: Result | None = None
) -> Result:
    from dcplace.placement.compact import CompactModel, Infeasible

    t0 = time.perf_counter()
    try:
        model = CompactModel(problem)
    except Infeasible as exc:
        wall = time.perf_counter() - t0
        return Result(
            problem.name, "compact", "infeasible", None, None, wall, problem.n_vms, stats={"reason": str(exc)}
        )
    if hint is not None and hint.vm_pm is not None and hint.vm_disks is not None:
        model.hint(hint.vm_pm, hint.vm_disks)
    return _run_cp(problem, "compact", model, t0, time_limit, seed, workers)


FLAT_MAX_DISK_VARIABLES = 200_000  # the flat model's y variables above which it is not built (minutes to build)


def solve_flat(problem: Problem, time_limit: float = 60.0, seed: int = 0, workers: int = 2) -> Result:
    from dcplace.placement.flat import FlatModel

    t0 = time.perf_counter()
    size = flat_disk_variables(problem)
    if size > FLAT_MAX_DISK_VARIABLES:
        why = {"reason": f"the flat model needs {size:,} disk variables (over {FLAT_MAX_DISK_VARIABLES:,}); "
                         "use compact or pattern"}  # fmt: skip
        return Result(problem.name, "flat", "unknown", None, None, time.perf_counter() - t0, problem.n_vms, stats=why)
    return _run_cp(problem, "flat", FlatModel(problem), t0, time_limit, seed, workers)


def flat_disk_variables(problem: Problem) -> int:
    """How many y variables the flat model would create (counted per type pair, without building it)."""
    total = 0
    for vt, vc in zip(problem.vm_types, problem.vm_counts, strict=True):
        for pt, pc in zip(problem.pm_types, problem.pm_counts, strict=True):
            if vt.vcpu > pt.vcpu or vt.mem > pt.mem or len(vt.disks) > len(pt.disks):
                continue
            total += vc * pc * sum(sum(size <= cap for cap in pt.disks) for size in vt.disks)
    return total


def _run_cp(problem: Problem, method: str, model: Any, t0: float, time_limit: float, seed: int, workers: int) -> Result:
    """Solve a CP-SAT model (``model.model``, ``model.decode``) in what is left of ``time_limit``."""
    from ortools.sat.python import cp_model

    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(time_limit - (time.perf_counter() - t0), 0.1)
    solver.parameters.num_workers = workers
    solver.parameters.random_seed = seed
    code = solver.solve(model.model)
    wall = time.perf_counter() - t0
    status = {
        cp_model.OPTIMAL: "optimal",
        cp_model.FEASIBLE: "feasible",
        cp_model.INFEASIBLE: "infeasible",
    }.get(code, "unknown")
    if status in ("optimal", "feasible"):
        vm_pm, vm_disks = model.decode(solver)
        # Costs are integers; CP-SAT reports doubles (1.0000000000000004 happens), so round them back.
        cost = float(round(solver.objective_value))
        return Result(problem.name, method, status, cost, _int_bound(solver.best_objective_bound), wall,
                      problem.n_vms, vm_pm, vm_disks)  # fmt: skip
    bound = _int_bound(solver.best_objective_bound) if status == "unknown" else None
    return Result(problem.name, method, status, None, bound, wall, problem.n_vms)


def solve_pattern(problem: Problem, time_limit: float, seed: int, workers: int, start: Result | None) -> Result:
    from dcplace.placement.pattern import realise
    from dcplace.placement.pattern import solve_pattern as run

    t0 = time.perf_counter()
    used: list[tuple[int, tuple[int, ...]]] = []
    if start is not None and start.vm_pm is not None:
        vt, pt = problem.vm_type_of(), problem.pm_type_of()
        per_pm: dict[int, list[int]] = {}
        for t, j in zip(vt.tolist(), start.vm_pm.tolist(), strict=True):
            per_pm.setdefault(j, [0] * len(problem.vm_types))[t] += 1
        used = [(int(pt[j]), tuple(c)) for j, c in per_pm.items()]
    status, cost, bound, chosen, stats = run(problem, time_limit, seed, workers, used)
    if cost is None:
        return Result(
            problem.name, "pattern", status, None, bound, time.perf_counter() - t0, problem.n_vms, stats=stats
        )
    vm_pm, vm_disks = realise(problem, chosen)
    real = float(cost_of(problem, vm_pm))  # dropping surplus VMs can leave a chosen PM empty: cost only falls
    return Result(problem.name, "pattern", status if real == cost else "feasible", real, bound,
                  time.perf_counter() - t0, problem.n_vms, vm_pm, vm_disks, stats=stats)  # fmt: skip


def _greedy_start(problem: Problem, seed: int) -> Result:
    """The best of 5 greedy runs, or an empty result when greedy would cost too much (VMs x PMs > 10^7)."""
    if problem.n_vms * problem.n_pms > GREEDY_START_MAX:
        return Result(problem.name, "greedy", "unknown", None, None, 0.0, problem.n_vms)
    return solve_greedy(problem, seed, runs=5)


def _auto_constrained(problem: Problem, time_limit: float, seed: int, workers: int) -> Result:
    """A constrained problem: the flat model (which states every constraint) in the time left after 50 greedy runs;
    the better verified answer wins."""
    t0 = time.perf_counter()
    start = _verify(problem, solve_greedy(problem, seed, time_limit=time_limit / 4))
    res = _verify(problem, solve_flat(problem, time_limit - (time.perf_counter() - t0), seed, workers))
    best = res
    if start.cost is not None and start.verified and (res.cost is None or start.cost < res.cost):
        start.bound, start.status, best = res.bound, "feasible", start
    best.method = "auto"
    best.wall_s = time.perf_counter() - t0
    return best


def _int_bound(bound: float) -> float:
    """A lower bound on an integer objective, rounded up (with a tolerance for the solver's float noise)."""
    return float(math.ceil(bound - 1e-6))


def solve(
    problem: Problem,
    method: str = "auto",
    time_limit: float = 60.0,
    seed: int = 0,
    workers: int = 2,
    hierarchy: dict[str, Any] | None = None,
) -> Result:
    """Solve with ``method`` within ``time_limit`` seconds; the result is verified by the independent checker.
    ``hierarchy``: options of the hierarchical method (packs, swads, beta, objective)."""
    if method not in METHODS:
        raise InputError(f"--method must be one of {', '.join(METHODS)}, got {method!r}")
    if time_limit <= 0:
        raise InputError(f"--time-limit must be positive, got {time_limit}")
    if workers < 1:
        raise InputError(f"--workers must be at least 1, got {workers}")
    if problem.constraints and method in ("compact", "pattern", "hierarchical"):
        raise InputError(f"--method {method} does not model placement constraints; use flat, greedy or auto")
    if problem.constraints and method == "auto":
        return _auto_constrained(problem, time_limit, seed, workers)
    if method == "greedy":
        return _verify(problem, solve_greedy(problem, seed, time_limit=time_limit))
    if method == "compact":
        return _verify(problem, solve_compact(problem, time_limit, seed, workers))
    if method == "flat":
        return _verify(problem, solve_flat(problem, time_limit, seed, workers))
    if method == "hierarchical":
        from dcplace.placement.hierarchical import solve_hierarchical

        t0 = time.perf_counter()
        vm_pm, vm_disks, stats = solve_hierarchical(problem, time_limit, seed, workers, **(hierarchy or {}))
        wall = time.perf_counter() - t0
        if vm_pm is None:
            return Result(problem.name, "hierarchical", "unknown", None, None, wall, problem.n_vms, stats=stats)
        bound = stats.get("pattern_bound") or None  # the pattern first level carries the LP bound
        res = Result(problem.name, "hierarchical", "feasible", float(cost_of(problem, vm_pm)), bound, wall,
                     problem.n_vms, vm_pm, vm_disks, stats=stats)  # fmt: skip
        return _verify(problem, res)
    if method == "pattern":
        t0 = time.perf_counter()
        start = _greedy_start(problem, seed)
        res = solve_pattern(problem, time_limit - (time.perf_counter() - t0), seed, workers, start)
        res.wall_s = time.perf_counter() - t0
        return _verify(problem, res)
    # auto: small instances exactly (compact), large ones by column generation (pattern); both start from greedy
    # where greedy is cheap (it scans every PM for every VM).
    t0 = time.perf_counter()
    start = _greedy_start(problem, seed)
    left = time_limit - (time.perf_counter() - t0)
    if problem.n_pms > AUTO_COMPACT_MAX_PMS:
        res = solve_pattern(problem, left, seed, workers, start)
    else:
        res = solve_compact(problem, left, seed, workers, start)
    res.method = "auto"
    res.wall_s = time.perf_counter() - t0
    if start.cost is not None and (res.cost is None or start.cost < res.cost):  # keep the better of the two
        start.method, start.bound, start.wall_s, start.stats = "auto", res.bound, res.wall_s, {}
        start.status = "feasible"
        return _verify(problem, start)
    return _verify(problem, res)
