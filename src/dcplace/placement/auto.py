"""``auto``: the method to use when in doubt. Small problems exactly (``compact``, up to ``compact_max_pms`` PMs),
large ones by column generation (``pattern``: patterns do not grow with the counts, where per-PM variables stall
CP-SAT's bound), both started from the best of 5 greedy runs where greedy is cheap; the better of greedy and the
model wins (from a current placement: compact at any size, pattern refuses it). A problem with placement
constraints: 50 greedy runs in a quarter of the time, then the flat model
(which states every constraint) in what is left; the better verified answer wins."""

from __future__ import annotations

from dataclasses import dataclass, replace

from dcplace.placement.checker import verify
from dcplace.placement.compact import solve_compact_from
from dcplace.placement.flat import FlatParams, solve_flat
from dcplace.placement.greedy import GreedyParams, greedy_start, solve_greedy
from dcplace.placement.params import SolverParams, field_error
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
        if self.compact_max_pms < 1:
            raise field_error("compact_max_pms", "be at least 1", self.compact_max_pms)


def solve_auto(problem: Problem, stop: Stop, seed: int, params: AutoParams) -> Result:
    """compact up to 200 PMs, pattern above, both from the best of 5 greedy runs; greedy + flat under constraints.
    From a current placement: compact at any size (the pattern model does not model it), from 5 greedy runs that
    start from the current placement."""
    if problem.constraints:
        return _constrained(problem, stop, seed, params)
    start = greedy_start(problem, stop, seed)
    if problem.n_pms > params.compact_max_pms and not problem.has_current:
        res = solve_pattern_from(problem, stop, seed, PatternParams(workers=params.workers), start)
    else:
        res = solve_compact_from(problem, stop, seed, params.workers, start)
    if start is not None and start.cost is not None and (res.cost is None or start.cost < res.cost):
        return replace(start, method="auto", status="feasible", bound=res.bound, stats={})  # keep the better one
    return replace(res, method="auto")


def _constrained(problem: Problem, stop: Stop, seed: int, params: AutoParams) -> Result:
    start = verify(problem, solve_greedy(problem, stop.share(0.25), seed, GreedyParams()))
    res = verify(problem, solve_flat(problem, stop, seed, FlatParams(workers=params.workers)))
    if start.cost is not None and start.verified and (res.cost is None or start.cost < res.cost):
        return replace(start, method="auto", status="feasible", bound=res.bound)
    return replace(res, method="auto")
