"""Heuristic NUMA schedulers: a feasibility filter, then a score; the best-scoring feasible action wins.

The filter is shared (a single-NUMA VM fits a node whose free CPU and memory both cover it; a multi-NUMA VM fits
a machine whose every node covers its share). The scores are lexicographic keys, lower is better, ties broken by
the lower action index (machine first, then node); they are compiled in :func:`dcplace.sim.numa_kernel.score_key`
and exposed here by name.

* ``first-fit``: the first feasible action in machine, node order (VMAgent's and the paper's First-Fit).
* ``best-fit``: the paper's Best-Fit, the machine with the least remaining CPU after placement; ties broken by the
  least remaining CPU on the chosen node, then the least remaining machine memory, then the lower index.
* ``industrial``: our stand-in for the paper's unpublished "Internal-Scheduler" (a best-fit variant with domain
  rules). Key = (rule 1, rule 2 + rule 3 + rule 4, node CPU left):

  1. *consolidate*: machines already hosting VMs before empty ones (keeps empty machines whole for large VMs);
  2. *best fit, normalised*: the machine's CPU free fraction after placement (so heterogeneous machines compare);
  3. *anti-stranding*: + ``strand`` x |CPU free fraction - memory free fraction| (a machine out of memory with CPU
     left, or the reverse, strands the other resource);
  4. *NUMA balance*: + ``numa`` x the spread of node free fractions (a double-NUMA VM needs room on every node).

  ``benchmarks/bench_industrial_ablation.py`` measures each rule's contribution (``docs/policies.md``).
* ``random``: uniform among feasible actions (numba's generator, seeded per episode).
* ``vmagent-best-fit``: VMAgent's shipped ``best_fit_action``, kept to explain its published numbers: it picks the
  node whose min(CPU, memory) free fraction after placement is *largest* (node 0 for double-NUMA VMs), which is
  closer to worst-fit than to best-fit.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from dcplace.policies.registry import Policy, register
from dcplace.sim import numa_kernel as K
from dcplace.sim.numa import NumaSim, heuristic_code


@dataclass(frozen=True)
class Heuristic:
    """A compiled heuristic, by name: ``act`` decides one request, ``run`` finishes an episode in compiled code."""

    name: str

    @property
    def code(self) -> int:
        return heuristic_code(self.name)

    def act(self, sim: NumaSim) -> int:
        return sim.choose(self.code)

    def run(self, sim: NumaSim) -> int:
        return sim.run(self.code)


_DOCS = {
    "first-fit": "first feasible machine/node in index order",
    "best-fit": "least remaining machine CPU after placement (ties: node CPU, machine memory, index)",
    "industrial": "best-fit variant: used machines first, normalised fit, anti-stranding, NUMA balance",
    "random": "uniformly random feasible action",
    "vmagent-best-fit": "VMAgent's shipped best_fit_action (largest min free fraction: near worst-fit)",
}


def _factory(name: str) -> Callable[[], Policy]:
    return lambda: Heuristic(name)


for _name in K.HEURISTIC_CODES:
    register(_name, _factory(_name), _DOCS[_name])
