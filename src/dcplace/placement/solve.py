"""The built-in placement methods, registered by name behind one :func:`solve` (see :mod:`.registry`).

For a :class:`~dcplace.placement.problem.Problem` (VMs with disks onto PMs with disks, paper 004):

* ``auto`` (:mod:`.auto`): compact up to 200 PMs, pattern above, both from the best of 5 greedy runs; greedy + flat
  for a problem with placement constraints;
* ``flat`` (:mod:`.flat`): the paper's formulation, the reference; models placement constraints;
* ``compact`` (:mod:`.compact`): CP-SAT on counts, exact;
* ``pattern`` (:mod:`.pattern`): column generation with an LP bound;
* ``hierarchical`` (:mod:`.hierarchical`): packs onto swads, each swad solved by ``compact`` through :func:`solve`;
* ``greedy`` (:mod:`.greedy`): the paper's randomized heuristic, best of ``runs`` with statistics; models placement
  constraints.

For a :class:`~dcplace.placement.numa_batch.NumaBatch` (topology-aware batches on double-NUMA servers):
``relaxation-guided`` (:mod:`.numa_batch`), also registered as ``auto``.

Every returned assignment is verified by the problem type's independent checker; ``verified`` is true only when the
checker accepted it.
"""

from __future__ import annotations

from dcplace.placement import checker, numa_batch
from dcplace.placement.auto import AutoParams, solve_auto
from dcplace.placement.compact import CompactParams, solve_compact
from dcplace.placement.flat import FlatParams, solve_flat
from dcplace.placement.greedy import GreedyParams, solve_greedy
from dcplace.placement.hierarchical import HierarchicalParams, solve_hierarchical
from dcplace.placement.numa_batch import NumaBatch, NumaBatchParams, solve_relaxation_guided
from dcplace.placement.pattern import PatternParams, solve_pattern
from dcplace.placement.problem import Problem
from dcplace.placement.registry import register_method, register_verifier, solve

__all__ = ["solve"]

register_verifier(Problem, checker.verify)
register_verifier(NumaBatch, numa_batch.verify)
register_method("auto", solve_auto, AutoParams, constraints=True)
register_method("flat", solve_flat, FlatParams, constraints=True)
register_method("compact", solve_compact, CompactParams)
register_method("pattern", solve_pattern, PatternParams)
register_method("hierarchical", solve_hierarchical, HierarchicalParams)
register_method("greedy", solve_greedy, GreedyParams, constraints=True)
register_method("relaxation-guided", solve_relaxation_guided, NumaBatchParams, NumaBatch, constraints=True)
register_method("auto", solve_relaxation_guided, NumaBatchParams, NumaBatch, constraints=True)
