"""The one place CP-SAT is set up: time limit from a :class:`~dcplace.placement.stop.Stop`, workers, seed, status
names, and the objective and bound rounded back to the integers they are (CP-SAT reports doubles:
1.0000000000000004 happens).

Interrupts: CP-SAT's own SIGINT handler (on by default) ends the search and returns its best answer as if the time
limit had been reached, and swallows the signal, so a caller cannot tell an interrupted solve from a finished one (a
reproduction used to record such a cut-short cell as complete). :func:`run_cp` turns that handler off and solves in
a helper thread while the main thread waits: a SIGINT (``KeyboardInterrupt``) or SIGTERM (the CLI's
:class:`~dcplace.errors.Terminated`) stops the search and is raised again, so nothing downstream records the answer.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from ortools.sat.python import cp_model

from dcplace.placement.problem import Problem
from dcplace.placement.result import Result
from dcplace.placement.stop import Stop, interruptible

_STATUS = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible", cp_model.INFEASIBLE: "infeasible"}


@dataclass(frozen=True)
class CpAnswer:
    """What one CP-SAT run gives: ``status`` (optimal, feasible, infeasible, unknown), the integer ``cost`` of the
    solution found (None without one; meaningless without an objective), the integer ``bound`` (rounded up, None
    when infeasible), and the ``solver`` to read values from."""

    status: str
    cost: float | None
    bound: float | None
    solver: cp_model.CpSolver

    @property
    def found(self) -> bool:
        return self.status in ("optimal", "feasible")


def int_bound(bound: float) -> float:
    """A lower bound on an integer objective, rounded up (with a tolerance for the solver's float noise)."""
    return float(math.ceil(bound - 1e-6))


def run_cp(
    model: cp_model.CpModel, stop: Stop, *, workers: int = 1, seed: int | None = None, least: float = 0.0
) -> CpAnswer:
    """Solve ``model`` within ``stop`` (but at least ``least`` seconds); ``seed`` None keeps CP-SAT's own."""
    solver = cp_model.CpSolver()
    seconds = max(stop.remaining(), least)
    if math.isfinite(seconds):
        solver.parameters.max_time_in_seconds = seconds
    solver.parameters.num_workers = workers
    if seed is not None:
        solver.parameters.random_seed = seed
    status = _STATUS.get(cp_model.CpSolverStatus(_solve_interruptibly(solver, model)), "unknown")
    found = status in ("optimal", "feasible")
    cost = float(round(solver.objective_value)) if found else None
    bound = int_bound(solver.best_objective_bound) if status != "infeasible" else None
    return CpAnswer(status, cost, bound, solver)


def _solve_interruptibly(solver: cp_model.CpSolver, model: cp_model.CpModel) -> int:
    """``solver.solve(model)`` with CP-SAT's SIGINT handler off, stopped by an interrupt (module docstring)."""
    solver.parameters.catch_sigint_signal = False
    return int(interruptible(lambda: solver.solve(model), solver.stop_search))


class AssignmentModel(Protocol):
    """A CP-SAT model of a :class:`~dcplace.placement.problem.Problem` that decodes to a full assignment."""

    model: cp_model.CpModel

    def decode(self, solver: cp_model.CpSolver) -> tuple[np.ndarray, list[list[int]]]: ...


def solve_model(problem: Problem, method: str, model: AssignmentModel, stop: Stop, seed: int, workers: int) -> Result:
    """Solve an assignment model (compact or flat) within ``stop`` (at least 0.1 s) and decode its answer."""
    ans = run_cp(model.model, stop, workers=workers, seed=seed, least=0.1)
    if ans.found:
        vm_pm, vm_disks = model.decode(ans.solver)
        return Result(problem.name, method, ans.status, ans.cost, ans.bound, vms=problem.n_vms, vm_pm=vm_pm,
                      vm_disks=vm_disks)  # fmt: skip
    return Result(problem.name, method, ans.status, None, ans.bound, vms=problem.n_vms)
