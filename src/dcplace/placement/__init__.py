"""Batch placement: problems, methods behind one ``solve``, and their results.

    from dcplace.placement import Deadline, HierarchicalParams, load_problem, solve

    res = solve(load_problem("mix1"), "hierarchical", Deadline(60), seed=0, params=HierarchicalParams(beta=0.8))
    res.status, res.cost, res.bound, res.gap, res.verified

A new method is a function ``(problem, stop, seed, params) -> Result`` registered with :func:`register_method`
(docs/placement.md has a worked example).
"""

from dcplace.placement.auto import AutoParams
from dcplace.placement.compact import CompactParams
from dcplace.placement.flat import FlatParams
from dcplace.placement.greedy import GreedyParams
from dcplace.placement.hierarchical import HierarchicalParams
from dcplace.placement.numa_batch import ConsolidateParams, NumaBatch, NumaBatchParams
from dcplace.placement.numa_batch import with_current as batch_with_current
from dcplace.placement.numa_instances import load_numa_batch
from dcplace.placement.params import Params, SolverParams, field_docs, field_error
from dcplace.placement.pattern import PatternParams
from dcplace.placement.problem import Constraint, PMType, Problem, VMType, load_problem, random_problem, with_current
from dcplace.placement.registry import (
    Method,
    claims_checked,
    get_method,
    method_names,
    params_for,
    register_method,
    register_verifier,
)
from dcplace.placement.result import Result
from dcplace.placement.solve import solve
from dcplace.placement.stop import Deadline, Stop

__all__ = [
    "AutoParams",
    "CompactParams",
    "ConsolidateParams",
    "Constraint",
    "Deadline",
    "FlatParams",
    "GreedyParams",
    "HierarchicalParams",
    "Method",
    "NumaBatch",
    "NumaBatchParams",
    "PMType",
    "Params",
    "PatternParams",
    "Problem",
    "Result",
    "SolverParams",
    "Stop",
    "VMType",
    "batch_with_current",
    "claims_checked",
    "field_docs",
    "field_error",
    "get_method",
    "load_numa_batch",
    "load_problem",
    "method_names",
    "params_for",
    "random_problem",
    "register_method",
    "register_verifier",
    "solve",
    "with_current",
]
