"""``auto``: the method to use when in doubt. Small problems exactly (``compact``, up to ``compact_max_pms`` PMs),
large ones by column generation (``pattern``: patterns do not grow with the counts, where per-PM variables stall
CP-SAT's bound), both started from the best of 5 greedy runs where greedy is cheap; the better of greedy and the
model wins (from a current placement: compact at any size, started from the better of greedy from the current
placement and the from-scratch answer moved onto the PMs where it migrates least). A problem with placement
constraints: 50 greedy runs in a quarter of the time, then the compact model with the constraints on counts per
class (exact; the flat model above ``compact_max_pms`` PMs) in what is left; the better verified answer wins."""

from __future__ import annotations

from dataclasses import dataclass, replace

from dcplace.config import check
from dcplace.placement.checker import verify
from dcplace.placement.compact import solve_compact_from
from dcplace.placement.current import relabel
from dcplace.placement.flat import FlatParams, solve_flat
from dcplace.placement.greedy import GreedyParams, greedy_start, solve_greedy, total_cost
from dcplace.placement.params import SolverParams
from dcplace.placement.pattern import PatternParams, solve_pattern_from
from dcplace.placement.problem import Problem
from dcplace.placement.result import Result
from dcplace.placement.stop import Stop


@dataclass(frozen=True)
class AutoParams(SolverParams):
    """Parameters of ``auto``."""

    compact_max_pms: int = 200
    """PMs up to which the compact model runs; above, the pattern model (at least 1)."""

    def check(self) -> None:
        super().check()
        check(self.compact_max_pms >= 1, "compact_max_pms", self.compact_max_pms, "at least 1")


def solve_auto(problem: Problem, stop: Stop, seed: int, params: AutoParams) -> Result:
    """compact up to 200 PMs, pattern above, both from the best of 5 greedy runs; greedy + compact under constraints.
    From a current placement: compact at any size (the pattern model does not model it), started from the better
    of 5 greedy runs from the current placement and the relabelled from-scratch answer (:func:`_from_current`)."""
    if problem.constraints:
        return _constrained(problem, stop, seed, params)
    if problem.has_current:
        return _from_current(problem, stop, seed, params)
    start = greedy_start(problem, stop, seed)
    if problem.n_pms > params.compact_max_pms:
        res = solve_pattern_from(problem, stop, seed, PatternParams(workers=params.workers), start)
    else:
        res = solve_compact_from(problem, stop, seed, params.workers, start)
    if start is not None and start.cost is not None and (res.cost is None or start.cost < res.cost):
        return replace(start, method="auto", status="feasible", bound=res.bound, stats={})  # keep the better one
    return replace(res, method="auto")


def _from_current(problem: Problem, stop: Stop, seed: int, params: AutoParams) -> Result:
    """Candidates: 5 greedy runs from the current placement and (without pinned VMs) the from-scratch answer of
    ``auto`` in a third of the time, moved onto the PMs that make it migrate least (:func:`relabel`); the compact
    model from the current placement then starts from the cheaper one, and the best verified answer wins."""
    starts = [verify(problem, solve_greedy(problem, stop, seed, GreedyParams(runs=5)))]
    if not problem.pinned:
        scratch = replace(problem, current=(), current_disks=(), migration_cost=(), pinned=())
        ref = solve_auto(scratch, stop.share(1 / 3), seed, params)
        if ref.vm_pm is not None and ref.vm_disks is not None:
            vm_pm, vm_disks = relabel(problem, ref.vm_pm, ref.vm_disks)
            cost = float(total_cost(problem, vm_pm))
            moved = Result(problem.name, "auto", "feasible", cost, vms=problem.n_vms, vm_pm=vm_pm, vm_disks=vm_disks,
                           stats={"start": "from scratch, relabelled"})  # fmt: skip
            starts.append(verify(problem, moved))
    found = [r for r in starts if r.verified and r.cost is not None]
    start = min(found, key=lambda r: r.cost or 0.0) if found else None
    res = verify(problem, solve_compact_from(problem, stop, seed, params.workers, start))
    if start is not None and start.cost is not None and (res.cost is None or start.cost < res.cost):
        return replace(start, method="auto", status="feasible", bound=res.bound, stats={})
    return replace(res, method="auto")


def _constrained(problem: Problem, stop: Stop, seed: int, params: AutoParams) -> Result:
    """50 greedy runs in a quarter of the time, then the compact model with constraints (exact; up to
    ``compact_max_pms`` PMs, started from greedy's answer) or the flat model above; the better verified answer."""
    start = verify(problem, solve_greedy(problem, stop.share(0.25), seed, GreedyParams()))
    if problem.n_pms <= params.compact_max_pms:
        hint = start if start.verified and start.cost is not None else None
        res = verify(problem, solve_compact_from(problem, stop, seed, params.workers, hint))
    else:
        res = verify(problem, solve_flat(problem, stop, seed, FlatParams(workers=params.workers)))
    if start.cost is not None and start.verified and (res.cost is None or start.cost < res.cost):
        return replace(start, method="auto", status="feasible", bound=res.bound)
    return replace(res, method="auto")
