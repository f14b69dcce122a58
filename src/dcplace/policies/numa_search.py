"""A parametric scoring rule for NUMA placement whose weights a search finds (issue 15: the honest upper line for
online rules in CVD-RL's paper regime).

The rule scores every action ``a = (machine m, node k)`` by ``s(a) = - w . phi(a)`` (higher wins, among feasible
actions; ties: the lower action index), with the features, all read *after* placing the waiting request on ``a``:

====  ==================  =============================================================================================
 i    name                phi_i(a)
====  ==================  =============================================================================================
 0    ``cpu``             machine CPU free fraction (Best-Fit's key, normalised)
 1    ``node_cpu``        free fraction of the chosen node's CPU (a multi-NUMA request: the machine's mean)
 2    ``mem``             machine memory free fraction
 3    ``empty``           1 if the machine hosted no VM before the placement
 4    ``imbalance``       spread (max - min over nodes) of the node CPU free fractions plus that of memory
 5    ``slots``           expected further requests the placement removes from machine m:
                          ``sum_t p_t (n_t(m before) - n_t(m after))``, ``n_t`` how many requests of type t fit
                          (single-NUMA: summed over nodes; multi-NUMA: every node covers its share), ``p_t`` the
                          type's frequency in the trace the rule was made for
 6..  ``lost:TYPE``       for each *large* type T: ``(n_T(m before) - n_T(m after)) / (1 + N_T)``, ``N_T`` the
                          number of requests of type T the whole cluster could host before the placement: losing
                          room for T costs more the scarcer that room is (an episode ends at the first request
                          that fits nowhere, in this regime a large double-NUMA VM)
====  ==================  =============================================================================================

``w = (1, 0, ..., 0)`` is Best-Fit's first key (normalised). ``benchmarks/cvd_policy_search.py`` searches the weights
by the cross-entropy method on training starts and writes a rule file (weights, request types, frequencies and the
large types, so the rule means the same on any trace) that :func:`searched_rule` loads.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import numba as nb
import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.policies.base import ScoredNumaPolicy
from dcplace.sim import numa_kernel as K
from dcplace.sim.numa import NumaView, PreparedTrace

BASE_FEATURES = ("cpu", "node_cpu", "mem", "empty", "imbalance", "slots")
FORMAT = "dcplace-searched-rule"
_EPS = 1e-9
_jit = nb.njit(cache=True, nogil=True)


def request_types(
    trace: PreparedTrace,
) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
    """The trace's request types ``(T, 2)`` (CPU, memory), their multi-NUMA flags ``(T,)`` and frequencies ``(T,)``
    (summing to 1), sorted by (CPU, memory, multi)."""
    kinds, counts = np.unique(np.c_[trace.demand, trace.multi.astype(float)], axis=0, return_counts=True)
    return (
        np.ascontiguousarray(kinds[:, :2]),
        np.ascontiguousarray(kinds[:, 2] > 0),
        counts / counts.sum(),
    )


def large_types(
    demand: npt.NDArray[np.float64], freq: npt.NDArray[np.float64], n: int = 3, min_freq: float = 0.01
) -> list[int]:
    """Indices of the ``n`` types with the most CPU (then memory) among those at least ``min_freq`` of the requests."""
    keep = [t for t in range(len(freq)) if freq[t] >= min_freq]
    keep.sort(key=lambda t: (-demand[t, 0], -demand[t, 1]))
    return keep[:n]


@_jit
def _count(fr: np.ndarray, share: np.ndarray, multi: bool) -> float:
    """Requests of one type (per-node share ``share``) that fit in one machine's free ``fr`` ``(K, 2)``."""
    tot = 0.0
    lo = 1e300
    for j in range(fr.shape[0]):
        n = max(np.floor(min(fr[j, 0] / share[0], fr[j, 1] / share[1]) + _EPS), 0.0)
        tot += n
        lo = min(lo, n)
    return lo if multi else tot


@_jit
def rule_features(
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    active: int,
    d: np.ndarray,
    multi: bool,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    freq: np.ndarray,
    large: np.ndarray,
    out: np.ndarray,
) -> np.ndarray:
    """Fill ``out`` ``(machines * numa, F)`` with phi of every feasible action (see the module docstring) and return
    the feasibility mask ``(machines * numa,)``; rows of infeasible actions are left as they were."""
    M, K_, _ = free.shape
    T = tdem.shape[0]
    share = np.empty((T, 2))
    for t in range(T):
        for r in range(2):
            share[t, r] = tdem[t, r] / K_ if tmulti[t] else tdem[t, r]
    before = np.zeros((M, T))
    total = np.zeros(T)
    for m in range(active):
        if not usable[m]:
            continue
        for t in range(T):
            before[m, t] = _count(free[m], share[t], tmulti[t])
            total[t] += before[m, t]
    feas = np.zeros(M * K_, np.bool_)
    after = np.empty((K_, 2))
    kmax = 1 if multi else K_
    for m in range(active):
        if not usable[m]:
            continue
        ccap = 0.0
        mcap = 0.0
        for j in range(K_):
            ccap += cap[m, j, 0]
            mcap += cap[m, j, 1]
        for k in range(kmax):
            if not K.fits(free, d, multi, m, k):
                continue
            for j in range(K_):
                for r in range(2):
                    if multi:
                        after[j, r] = free[m, j, r] - d[r] / K_
                    elif j == k:
                        after[j, r] = free[m, j, r] - d[r]
                    else:
                        after[j, r] = free[m, j, r]
            a = m * K_ + k
            feas[a] = True
            csum = 0.0
            msum = 0.0
            for j in range(K_):
                csum += after[j, 0]
                msum += after[j, 1]
            out[a, 0] = csum / ccap
            out[a, 1] = csum / ccap if multi else after[k, 0] / cap[m, k, 0]
            out[a, 2] = msum / mcap
            out[a, 3] = 1.0 if vm_count[m] == 0 else 0.0
            imb = 0.0
            for r in range(2):
                lo = 1e300
                hi = -1e300
                for j in range(K_):
                    f = after[j, r] / cap[m, j, r]
                    lo = min(lo, f)
                    hi = max(hi, f)
                imb += hi - lo
            out[a, 4] = imb
            slots = 0.0
            for t in range(T):
                slots += freq[t] * (before[m, t] - _count(after, share[t], tmulti[t]))
            out[a, 5] = slots
            for i in range(large.shape[0]):
                t = large[i]
                out[a, 6 + i] = (before[m, t] - _count(after, share[t], tmulti[t])) / (1.0 + total[t])
            if multi:  # any node of the machine names a multi-NUMA placement
                for j in range(1, K_):
                    feas[a + j] = True
                    out[a + j] = out[a]
    return feas


@_jit
def rule_choose(
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    active: int,
    d: np.ndarray,
    multi: bool,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    freq: np.ndarray,
    large: np.ndarray,
    buf: np.ndarray,
) -> int:
    """The action with the largest ``-w . phi`` among feasible ones (ties: the lower index), or -1."""
    feas = rule_features(free, cap, vm_count, usable, active, d, multi, tdem, tmulti, freq, large, buf)
    best = -1
    bs = 0.0
    for a in range(feas.shape[0]):
        if not feas[a]:
            continue
        s = 0.0
        for i in range(w.shape[0]):
            s -= w[i] * buf[a, i]
        if best < 0 or s > bs:
            best = a
            bs = s
    return best


@dataclass(frozen=True)
class RuleSpec:
    """What a searched rule is: its weights and the request types its features count."""

    weights: tuple[float, ...]
    demand: tuple[tuple[float, float], ...]
    multi: tuple[bool, ...]
    freq: tuple[float, ...]
    large: tuple[int, ...]

    def __post_init__(self) -> None:
        T = len(self.demand)
        if not (len(self.multi) == len(self.freq) == T and T > 0):
            raise InputError(f"rule: demand, multi and freq must have one entry per type, got {T}, "
                             f"{len(self.multi)}, {len(self.freq)}")  # fmt: skip
        if any(not 0 <= t < T for t in self.large):
            raise InputError(f"rule: large types must index the {T} types, got {list(self.large)}")
        if len(self.weights) != len(BASE_FEATURES) + len(self.large):
            raise InputError(f"rule: weights must have {len(BASE_FEATURES) + len(self.large)} entries (features "
                             f"{', '.join(self.feature_names)}), got {len(self.weights)}")  # fmt: skip
        if not all(np.isfinite(self.weights)):
            raise InputError(f"rule: weights must be finite, got {list(self.weights)}")

    @property
    def feature_names(self) -> tuple[str, ...]:
        return BASE_FEATURES + tuple(
            f"lost:{self.demand[t][0]:g}c{self.demand[t][1]:g}g{'-multi' if self.multi[t] else ''}" for t in self.large
        )

    @classmethod
    def for_trace(cls, trace: PreparedTrace, weights: npt.ArrayLike | None = None, n_large: int = 3) -> RuleSpec:
        """The feature set for ``trace``'s request types; ``weights`` None: Best-Fit's (``cpu`` = 1, others 0)."""
        d, mu, p = request_types(trace)
        large = large_types(d, p, n_large)
        w = np.zeros(len(BASE_FEATURES) + len(large)) if weights is None else np.asarray(weights, float)
        if weights is None:
            w[0] = 1.0
        return cls(
            tuple(float(x) for x in w),
            tuple((float(a), float(b)) for a, b in d),
            tuple(bool(x) for x in mu),
            tuple(float(x) for x in p),
            tuple(int(t) for t in large),
        )

    def with_weights(self, weights: npt.ArrayLike) -> RuleSpec:
        return RuleSpec(tuple(float(x) for x in np.asarray(weights, float)), self.demand, self.multi, self.freq,
                        self.large)  # fmt: skip

    def to_json(self, **extra: object) -> str:
        return json.dumps(
            {"format": FORMAT, "features": list(self.feature_names), "weights": list(self.weights),
             "demand": [list(x) for x in self.demand], "multi": list(self.multi), "freq": list(self.freq),
             "large": list(self.large), **extra},
            indent=1,
        )  # fmt: skip

    @classmethod
    def load(cls, path: str | Path) -> RuleSpec:
        """Read a rule file written by :meth:`to_json`; a missing or foreign file is an :class:`InputError`."""
        try:
            data = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as e:
            raise InputError(f"{path}: cannot read a searched rule ({e})") from None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise InputError(f"{path}: not a searched rule (format must be {FORMAT!r})")
        try:
            return cls(
                tuple(float(x) for x in data["weights"]),
                tuple((float(a), float(b)) for a, b in data["demand"]),
                tuple(bool(x) for x in data["multi"]),
                tuple(float(x) for x in data["freq"]),
                tuple(int(x) for x in data["large"]),
            )
        except (KeyError, TypeError, ValueError) as e:
            raise InputError(f"{path}: searched rule field missing or malformed ({e})") from None


class SearchedRule(ScoredNumaPolicy):
    """``s(a) = -w . phi(a)`` over the features of the module docstring (higher wins)."""

    name = "searched-rule"

    def __init__(self, spec: RuleSpec) -> None:
        self.spec = spec
        self.w = np.asarray(spec.weights, float)
        self.demand = np.asarray(spec.demand, float).reshape(-1, 2)
        self.multi = np.asarray(spec.multi, bool)
        self.freq = np.asarray(spec.freq, float)
        self.large = np.asarray(spec.large, np.int64)
        self._buf = np.zeros((0, len(self.w)))

    def features(self, view: NumaView) -> npt.NDArray[np.float64]:
        """``(machines * numa, F)``: phi of every feasible action; NaN rows for infeasible ones."""
        out = np.full((view.machines * view.numa, len(self.w)), np.nan)
        rule_features(
            view.free, view.capacity, view.vm_count, view.usable, view.active, np.asarray(view.demand, float),
            bool(view.multi), self.demand, self.multi, self.freq, self.large, out,
        )  # fmt: skip
        return out

    def score(self, view: NumaView) -> npt.NDArray[np.float64]:
        return np.asarray(-(np.nan_to_num(self.features(view)) @ self.w), np.float64)

    def choose(self, view: NumaView) -> int:
        if self._buf.shape[0] != view.machines * view.numa:
            self._buf = np.zeros((view.machines * view.numa, len(self.w)))
        return int(
            rule_choose(
                self.w, view.free, view.capacity, view.vm_count, view.usable, view.active,
                np.asarray(view.demand, float), bool(view.multi), self.demand, self.multi, self.freq, self.large,
                self._buf,
            )
        )  # fmt: skip


def searched_rule(checkpoint: str | None = None) -> SearchedRule:
    """The rule in a rule file written by ``benchmarks/cvd_policy_search.py`` (``checkpoint``), for
    ``--policy dcplace.policies.numa_search:searched_rule --checkpoint FILE``. No rule is shipped or registered by
    name: the search found none that beats Best-Fit (docs/cvd-rl.md, "Direct policy search")."""
    if checkpoint is None:
        raise InputError(
            "the searched rule needs its rule file (checkpoint), written by benchmarks/cvd_policy_search.py"
        )
    return SearchedRule(RuleSpec.load(checkpoint))
