"""The cross-entropy method (Rubinstein 1999) for direct policy search: a Gaussian over a weight vector, refitted to
the best draws of every generation. Used by ``nalb-learned``'s search (:mod:`dcplace.learn.nalb_search`) and the
NUMA rule search (``benchmarks/cvd_policy_search.py``).

Each generation :meth:`CEM.ask` draws ``pop`` vectors, the current mean first (so the search scores its own centre
and can keep it), the rest ``mean + std * N(0, 1)`` from the caller's generator; :meth:`CEM.tell` takes their
fitness (higher is better), remembers the best draw seen, and refits mean and standard deviation to the ``elite``
best, smoothed ``0.7`` new / ``0.3`` old (so one lucky generation does not collapse the spread). Deterministic given
the generator: the same seed draws the same vectors.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

F64 = npt.NDArray[np.float64]
NEW, OLD = 0.7, 0.3  # the refit's smoothing (two literals: 1 - 0.7 is not 0.3 in floating point)


@dataclass
class CEM:
    mean: F64
    std: F64
    pop: int
    elite: int
    best_w: F64 = field(init=False)
    best_f: float = field(default=-np.inf, init=False)

    def __post_init__(self) -> None:
        self.mean = np.asarray(self.mean, np.float64).copy()
        self.std = np.broadcast_to(np.asarray(self.std, np.float64), self.mean.shape).copy()
        self.best_w = self.mean.copy()

    def ask(self, rng: np.random.Generator) -> F64:
        """``(pop, k)``: the mean, then ``pop - 1`` draws around it."""
        return np.vstack([self.mean, self.mean + self.std * rng.standard_normal((self.pop - 1, len(self.mean)))])

    def tell(self, draws: F64, fit: npt.ArrayLike) -> npt.NDArray[np.int64]:
        """Refit to the ``elite`` best of ``draws`` by ``fit``; returns the order, best first (ties: earlier draw)."""
        f = np.asarray(fit, np.float64)
        order: npt.NDArray[np.int64] = np.argsort(-f, kind="stable")
        if f[order[0]] > self.best_f:
            self.best_f, self.best_w = float(f[order[0]]), draws[order[0]].copy()
        top = draws[order[: self.elite]]
        self.mean = NEW * top.mean(axis=0) + OLD * self.mean
        self.std = NEW * top.std(axis=0) + OLD * self.std
        return order
