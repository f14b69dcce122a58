"""The built-in placement methods, registered by name behind one :func:`solve` (see :mod:`.registry`).

For a :class:`~dcplace.placement.problem.Problem` (VMs with disks onto PMs with disks, paper 004):

* ``auto`` (:mod:`.auto`): compact up to 200 PMs, pattern above, both from the best of 5 greedy runs; for a problem
  with placement constraints, greedy then compact (up to 200 PMs; flat above); from a current placement, compact
  (any size) from 5 greedy runs;
* ``flat`` (:mod:`.flat`): the paper's formulation, the reference; models placement constraints;
* ``compact`` (:mod:`.compact`): CP-SAT on counts, exact; models placement constraints (counts per class);
* ``pattern`` (:mod:`.pattern`): column generation with an LP bound;
* ``hierarchical`` (:mod:`.hierarchical`): packs onto swads, each swad solved by ``compact`` through :func:`solve`;
* ``greedy`` (:mod:`.greedy`): the paper's randomized heuristic, best of ``runs`` with statistics; models placement
  constraints.

For a :class:`~dcplace.placement.numa_batch.NumaBatch` (topology-aware batches on double-NUMA servers):
``pattern`` (:mod:`.numa_pattern`: column generation over server configurations with NUMA-node patterns, exact
pricing, the integer master, a constraint-aware realisation); ``relaxation-guided`` (:mod:`.numa_batch`); from a
current placement, ``consolidate`` (servers used + migration cost, pinned VMs kept); ``auto`` runs ``pattern`` (or
``relaxation-guided`` for data off its grid, ``consolidate`` from a current placement).

A problem with a current placement (machine + migration cost, pinned VMs) is solved by ``auto``, ``compact`` and
``greedy``; the others refuse it with the reason.

Every returned assignment is verified by the problem type's independent checker; ``verified`` is true only when the
checker accepted it.
"""

from __future__ import annotations

from dcplace.placement import checker, numa_batch, numa_pattern
from dcplace.placement.auto import AutoParams, solve_auto
from dcplace.placement.compact import CompactParams, solve_compact
from dcplace.placement.flat import FlatParams, solve_flat
from dcplace.placement.greedy import GreedyParams, solve_greedy
from dcplace.placement.hierarchical import HierarchicalParams, solve_hierarchical
from dcplace.placement.numa_batch import NumaBatch, NumaBatchParams, solve_relaxation_guided
from dcplace.placement.pattern import NO_CURRENT as PATTERN_NO_CURRENT
from dcplace.placement.pattern import PatternParams, solve_pattern
from dcplace.placement.problem import Problem
from dcplace.placement.registry import register_method, register_verifier, solve

HIERARCHICAL_NO_CURRENT = "its packs and swads are drawn without regard to where VMs are now"
FLAT_NO_CURRENT = "not modelled yet; the compact model is exact for it"

__all__ = ["solve"]

register_verifier(Problem, checker.verify)
register_verifier(NumaBatch, numa_batch.verify)
register_method("auto", solve_auto, AutoParams, constraints=True, current=True)
register_method("flat", solve_flat, FlatParams, constraints=True, current=FLAT_NO_CURRENT)
register_method("compact", solve_compact, CompactParams, constraints=True, current=True)
register_method("pattern", solve_pattern, PatternParams, current=PATTERN_NO_CURRENT)
register_method("hierarchical", solve_hierarchical, HierarchicalParams, constraints=True,
                current=HIERARCHICAL_NO_CURRENT)  # fmt: skip
register_method("greedy", solve_greedy, GreedyParams, constraints=True, current=True)
register_method("relaxation-guided", solve_relaxation_guided, NumaBatchParams, NumaBatch, constraints=True)
register_method("pattern", numa_pattern.solve_numa_pattern, numa_pattern.NumaPatternParams, NumaBatch,
                constraints=True)  # fmt: skip
register_method("auto", numa_pattern.solve_numa_auto, NumaBatchParams, NumaBatch, constraints=True, current=True)
register_method("consolidate", numa_pattern.solve_consolidate_improved, numa_batch.ConsolidateParams, NumaBatch,
                constraints=True, current=True)  # fmt: skip
