"""Heuristic NUMA schedulers: filter -> score -> pick, each score one compiled function.

The filter is shared (:func:`dcplace.sim.numa_kernel.fits`: a single-NUMA VM fits a node whose free CPU and memory
both cover it; a multi-NUMA VM fits a machine whose every node covers its share; drained or failed machines are not
usable). A score is a lexicographic key, lower is better, ties broken by the lower action index (machine first, then
node). The best-scoring feasible action wins.

* ``first-fit`` (:func:`first_fit_key`): the first feasible action in machine, node order (VMAgent's and the
  paper's First-Fit).
* ``best-fit`` (:func:`best_fit_key`): the paper's Best-Fit, the machine with the least remaining CPU after
  placement; ties broken by the least remaining CPU on the chosen node, then the least remaining machine memory,
  then the lower index.
* ``industrial`` (:func:`industrial_key`): our stand-in for the paper's unpublished "Internal-Scheduler" (a
  best-fit variant with domain rules). Key = (rule 1, rule 2 + rule 3 + rule 4, node CPU left):

  1. *consolidate*: machines already hosting VMs before empty ones (keeps empty machines whole for large VMs);
  2. *best fit, normalised*: the machine's CPU free fraction after placement (so heterogeneous machines compare);
  3. *anti-stranding*: + ``strand`` x |CPU free fraction - memory free fraction| (a machine out of memory with CPU
     left, or the reverse, strands the other resource);
  4. *NUMA balance*: + ``numa`` x the spread of node free fractions (a double-NUMA VM needs room on every node).

  ``benchmarks/bench_industrial_ablation.py`` measures each rule's contribution (``docs/policies.md``).
* ``random``: uniform among feasible actions (numba's generator, seeded by the simulator at every reset).
* ``vmagent-best-fit`` (:func:`vmagent_best_fit_key`): VMAgent's shipped ``best_fit_action``, kept to explain its
  published numbers: it picks the node whose min(CPU, memory) free fraction after placement is *largest* (node 0
  for double-NUMA VMs), which is closer to worst-fit than to best-fit.

The same compiled :func:`choose` serves the simulator's fast path (:func:`run_episode`), one decision through the
public :class:`~dcplace.policies.base.NumaPolicy` API (:class:`Heuristic`), explanations (:func:`top_k` with its
keys) and the learned schedulers' candidate filter (the union of heuristics' top-k). Why compiled, and why codes
instead of passing score functions around: numba caches a function that receives another compiled function as an
argument per process only (measured: every run recompiles, ~1.5 s), so the scores are dispatched by a small integer
code inside compiled code and each score stays its own function.

Writing a new heuristic does not need any of this: subclass :class:`~dcplace.policies.base.ScoredNumaPolicy` and
write one numpy score (``docs/policies.md`` has a worst-fit in ten lines).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.policies import numa_index as NI
from dcplace.policies.base import NumaPolicy
from dcplace.policies.numa_index import HeuristicIndex
from dcplace.policies.numa_scores import (
    BEST_FIT,
    CODES,
    DEFAULT_WEIGHTS,
    FIRST_FIT,
    INDUSTRIAL,
    N_W,
    RANDOM,
    VMAGENT_BEST_FIT,
    W_CONSOLIDATE,
    W_NUMA,
    W_STRAND,
    IndustrialWeights,
    best_fit_key,
    choose,
    first_fit_key,
    industrial_key,
    run_episode,
    score_key,
    top_k,
    topk_insert,
    vmagent_best_fit_key,
)
from dcplace.policies.registry import register
from dcplace.sim import numa_kernel as K
from dcplace.sim.numa import NumaSim, NumaView

__all__ = [
    "BEST_FIT",
    "CODES",
    "DEFAULT_WEIGHTS",
    "FIRST_FIT",
    "INDUSTRIAL",
    "N_W",
    "RANDOM",
    "VMAGENT_BEST_FIT",
    "W_CONSOLIDATE",
    "W_NUMA",
    "W_STRAND",
    "Heuristic",
    "IndustrialWeights",
    "best_fit_key",
    "choose",
    "first_fit_key",
    "heuristic_code",
    "industrial_key",
    "run_episode",
    "score_key",
    "top_k",
    "topk_insert",
    "vmagent_best_fit_key",
    "warm_up_jit",
]


# -- the public policy objects ----------------------------------------------------------------------------------
def heuristic_code(name: str) -> int:
    """The compiled code of a heuristic, by registry name."""
    try:
        return CODES[name]
    except KeyError:
        raise InputError(f"unknown heuristic {name!r}; choose from {', '.join(CODES)}") from None


@dataclass(frozen=True)
class Heuristic(NumaPolicy):
    """A compiled heuristic by name. ``choose`` decides one request from a view; ``run`` finishes a simulator
    episode inside compiled code (same decisions, no Python per request); ``rank`` gives the top candidates with
    their keys, for explanations and candidate filters."""

    heuristic: str
    weights: IndustrialWeights = field(default_factory=IndustrialWeights)
    code: int = field(init=False, repr=False, compare=False)
    """The compiled code (from the name)."""
    _wa: npt.NDArray[np.float64] = field(init=False, repr=False, compare=False)
    _index: HeuristicIndex | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", heuristic_code(self.heuristic))  # validates the name
        object.__setattr__(self, "_wa", self.weights.as_array())

    @property
    def name(self) -> str:
        return self.heuristic

    def _w(self) -> npt.NDArray[np.float64]:
        return self._wa

    def choose(self, view: NumaView) -> int:
        index = self.index() if self.code != FIRST_FIT else None
        if index is not None and index.usable_for(view):
            return index.choose(view.demand, view.multi, view.active)
        return int(
            choose(
                self.code, self._wa, view.free, view.capacity, view.vm_count, view.usable, view.demand,
                view.multi, view.active,
            )
        )  # fmt: skip

    def rank(self, view: NumaView, n: int) -> list[tuple[int, tuple[float, ...]]]:
        acts = np.zeros(max(n, 1), np.int64)
        keys = np.zeros((max(n, 1), 3))
        index = self.index()
        if index is not None and index.usable_for(view):
            got = index.top_k(view.demand, view.multi, view.active, n, acts, keys)
            return [(int(acts[i]), tuple(float(x) for x in keys[i])) for i in range(got)]
        got = top_k(
            self.code, self._w(), view.free, view.capacity, view.vm_count, view.usable, view.demand, view.multi,
            view.active, n, acts, keys,
        )  # fmt: skip
        return [(int(acts[i]), tuple(float(x) for x in keys[i])) for i in range(got)]

    def index(self) -> HeuristicIndex | None:
        """This heuristic's index over free capacity (:mod:`dcplace.policies.numa_index`), made on first use; None
        for ``random`` (no index: its draws follow the scan order)."""
        if self.code == RANDOM:
            return None
        if self._index is None:
            from dcplace.policies.numa_index import HeuristicIndex

            object.__setattr__(self, "_index", HeuristicIndex(self.code, self._wa))
        return self._index

    def run(self, sim: NumaSim) -> int:
        """Finish the episode in compiled code: with the index over free capacity from
        :data:`~dcplace.policies.numa_index.INDEX_MIN_MACHINES` machines up, with the scan below (same decisions)."""
        if sim.status != K.DECIDE:
            return sim.status
        t = sim.trace
        # First-Fit keeps the scan: it stops at the first feasible machine, which the index does not beat (measured).
        big = sim.cap.shape[0] >= NI.INDEX_MIN_MACHINES and self.code != FIRST_FIT
        index = self.index() if big else None
        if index is not None:
            index.bind(sim.free, sim.cap, sim.vm_count, sim.usable, sim.chg)
            req_type = index.types_for(t.demand, t.multi)
            return int(
                NI.run_episode_indexed(
                    self.code, self._w(), sim.free, sim.cap, sim.cap_prefix, sim.vm_count, sim.usable, sim.used,
                    sim.pm_of, sim.node_of, sim.ctr, sim.acc, sim.chg, sim.ip, sim.fp, t.demand, t.multi,
                    sim.oversize, t.price, t.ev_req, t.ev_dep, req_type, *index.arrays(),
                )
            )  # fmt: skip
        return int(
            run_episode(
                self.code, self._w(), sim.free, sim.cap, sim.cap_prefix, sim.vm_count, sim.usable, sim.used,
                sim.pm_of, sim.node_of, sim.ctr, sim.acc, sim.chg, sim.ip, sim.fp, t.demand, t.multi, sim.oversize,
                t.price, t.ev_req, t.ev_dep,
            )
        )  # fmt: skip


def warm_up_jit() -> None:
    """Compile (or load from the cache) every heuristic's code path outside any timed region."""
    free = np.ones((2, 2, 2))
    usable = np.ones(2, np.bool_)
    d = np.array([0.5, 0.5])
    out = np.zeros(2, np.int64)
    keys = np.zeros((2, 3))
    for code in CODES.values():
        choose(code, DEFAULT_WEIGHTS, free, free, np.zeros(2, np.int64), usable, d, False, 2)
        top_k(code, DEFAULT_WEIGHTS, free, free, np.zeros(2, np.int64), usable, d, True, 2, 2, out, keys)


_DOCS = {
    "first-fit": "first feasible machine/node in index order",
    "best-fit": "least remaining machine CPU after placement (ties: node CPU, machine memory, index)",
    "industrial": "best-fit variant: used machines first, normalised fit, anti-stranding, NUMA balance",
    "random": "uniformly random feasible action",
    "vmagent-best-fit": "VMAgent's shipped best_fit_action (largest min free fraction: near worst-fit)",
}


def _factory(name: str) -> Callable[[], NumaPolicy]:
    return lambda: Heuristic(name)


for _name in CODES:
    register(_name, _factory(_name), _DOCS[_name])
