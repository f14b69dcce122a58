"""The compiled heuristics' machinery: scores (one function each), ``choose``, ``top_k`` and the episode fast path.

:mod:`dcplace.policies.numa_heuristics` documents the rules and holds the public policy objects; this module holds
what both it and the index over free capacity (:mod:`dcplace.policies.numa_index`) compile against, so that neither
imports the other's module in a loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numba as nb
import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.sim import numa_kernel as K

_jit = nb.njit(cache=True, nogil=True)  # cached to __pycache__: compiled once per machine
# The scores are inlined into one compiled `score_key` (numba IR inlining), called once per scored action: a call per
# score level costs reference-count updates on every array argument (measured: `industrial` 1.7x slower with two call
# levels), while inlining every score into the pick loops bloats them (Best-Fit's pruned scan 1.25x slower).
_key = nb.njit(cache=True, nogil=True, inline="always")

# Heuristic codes (compiled dispatch; names are the public handle).
FIRST_FIT = 0
BEST_FIT = 1
INDUSTRIAL = 2
RANDOM = 3
VMAGENT_BEST_FIT = 4

#: Registry name -> compiled code.
CODES = {
    "first-fit": FIRST_FIT,
    "best-fit": BEST_FIT,
    "industrial": INDUSTRIAL,
    "random": RANDOM,
    "vmagent-best-fit": VMAGENT_BEST_FIT,
}

# Weight vector indices (the industrial rule's parameters as a compiled array).
W_CONSOLIDATE = 0
W_STRAND = 1
W_NUMA = 2
N_W = 3


@dataclass(frozen=True)
class IndustrialWeights:
    """Weights of the ``industrial`` heuristic's rules (see the module docstring)."""

    consolidate: float = 1.0
    """> 0: prefer machines already hosting VMs (rule 1); 0 disables the rule."""
    strand: float = 0.5
    """Penalty per unit of |CPU free fraction - memory free fraction| after placement (rule 3)."""
    numa: float = 0.25
    """Penalty per unit of NUMA-node free-fraction spread after placement (rule 4)."""

    def __post_init__(self) -> None:
        for name in ("consolidate", "strand", "numa"):
            value = getattr(self, name)
            if not (np.isfinite(value) and value >= 0):
                raise InputError(f"industrial weight {name!r} must be a finite number >= 0, got {value}")

    def as_array(self) -> npt.NDArray[np.float64]:
        w = np.zeros(N_W, np.float64)
        w[W_CONSOLIDATE] = self.consolidate
        w[W_STRAND] = self.strand
        w[W_NUMA] = self.numa
        return w


DEFAULT_WEIGHTS = IndustrialWeights().as_array()


# -- scores: one function each --------------------------------------------------------------------------------
@_key
def first_fit_key(free: np.ndarray, cap: np.ndarray, d: np.ndarray, multi: bool, m: int, k: int) -> float:
    """First-Fit: a constant key, so the lowest feasible index wins."""
    return 0.0


@_key
def _machine_free(free: np.ndarray, m: int, r: int) -> float:
    s = 0.0
    for j in range(free.shape[1]):
        s += free[m, j, r]
    return s


@_key
def best_fit_key(
    free: np.ndarray, cap: np.ndarray, d: np.ndarray, multi: bool, m: int, k: int
) -> tuple[float, float, float]:
    """Best-Fit: (machine CPU left, node CPU left, machine memory left) after placement."""
    pm_cpu_free = 0.0
    pm_mem_free = 0.0
    for j in range(free.shape[1]):
        pm_cpu_free += free[m, j, 0]
        pm_mem_free += free[m, j, 1]
    pm_cpu_after = pm_cpu_free - d[0]
    node_cpu_after = pm_cpu_after / free.shape[1] if multi else free[m, k, 0] - d[0]
    return (pm_cpu_after, node_cpu_after, pm_mem_free - d[1])


@_key
def vmagent_best_fit_key(free: np.ndarray, cap: np.ndarray, d: np.ndarray, multi: bool, m: int, k: int) -> float:
    """VMAgent's ``best_fit_action``: minus the node's min(CPU, memory) free fraction after placement (node 0 for a
    double-NUMA VM); negated because lower wins here."""
    K_ = free.shape[1]
    kk = 0 if multi else k
    share = d[0] / K_ if multi else d[0]
    mshare = d[1] / K_ if multi else d[1]
    rate_c = (free[m, kk, 0] - share) / cap[m, kk, 0]
    rate_m = (free[m, kk, 1] - mshare) / cap[m, kk, 1]
    return float(-min(rate_c, rate_m))


@_key
def industrial_key(
    w: np.ndarray, free: np.ndarray, cap: np.ndarray, vm_count: np.ndarray, d: np.ndarray, multi: bool, m: int, k: int
) -> tuple[float, float, float]:
    """The industrial rule: (empty machine?, CPU free fraction + strand + NUMA imbalance, node CPU left)."""
    K_ = free.shape[1]
    pm_cpu_free = 0.0
    pm_mem_free = 0.0
    pm_cpu_cap = 0.0
    pm_mem_cap = 0.0
    for j in range(K_):  # one pass: this key runs once per feasible action
        pm_cpu_free += free[m, j, 0]
        pm_mem_free += free[m, j, 1]
        pm_cpu_cap += cap[m, j, 0]
        pm_mem_cap += cap[m, j, 1]
    pm_cpu_after = pm_cpu_free - d[0]
    node_cpu_after = pm_cpu_after / K_ if multi else free[m, k, 0] - d[0]
    used_first = 0.0
    if w[W_CONSOLIDATE] > 0.0 and vm_count[m] == 0:
        used_first = 1.0
    cpu_frac = pm_cpu_after / pm_cpu_cap
    mem_frac = (pm_mem_free - d[1]) / pm_mem_cap
    strand = abs(cpu_frac - mem_frac)
    # NUMA imbalance after placement: the largest spread of node free fractions, over CPU and memory.
    imb = 0.0
    for r in range(2):
        lo = 1e300
        hi = -1e300
        for j in range(K_):
            f = free[m, j, r]
            if multi:
                f -= d[r] / K_
            elif j == k:
                f -= d[r]
            frac = f / cap[m, j, r]
            lo = min(lo, frac)
            hi = max(hi, frac)
        imb = max(imb, hi - lo)
    return (used_first, cpu_frac + w[W_STRAND] * strand + w[W_NUMA] * imb, node_cpu_after)


@_key
def score_key(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    d: np.ndarray,
    multi: bool,
    m: int,
    k: int,
) -> tuple[float, float, float]:
    """The key of heuristic ``code`` for placing ``d`` on machine ``m`` node ``k`` (lower wins), as a 3-tuple."""
    if code == BEST_FIT:
        return best_fit_key(free, cap, d, multi, m, k)
    if code == INDUSTRIAL:
        return industrial_key(w, free, cap, vm_count, d, multi, m, k)
    if code == VMAGENT_BEST_FIT:
        return (vmagent_best_fit_key(free, cap, d, multi, m, k), 0.0, 0.0)
    return (first_fit_key(free, cap, d, multi, m, k), 0.0, 0.0)


# -- pick -------------------------------------------------------------------------------------------------------
@_jit
def choose(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    d: np.ndarray,
    multi: bool,
    n_active: int,
) -> int:
    """The heuristic's action (machine * K + node) among usable machines, or -1 when nothing fits."""
    K_ = free.shape[1]
    kmax = 1 if multi else K_
    best = -1
    b0 = 0.0
    b1 = 0.0
    b2 = 0.0
    seen = 0
    for m in range(n_active):
        if code == BEST_FIT and best >= 0:
            # Prune: Best-Fit's first key is the machine's free CPU after placement; a machine whose free CPU
            # already exceeds the best key cannot win (ties must still be scored). Same decisions, far fewer
            # key computations on large, lightly loaded clusters. (Before the usable test: most machines end here.)
            if _machine_free(free, m, 0) - d[0] > b0:
                continue
        if not usable[m]:
            continue
        for k in range(kmax):
            if not K.fits(free, d, multi, m, k):
                continue
            a: int = m * K_ + k
            if code == FIRST_FIT:
                return a
            if code == RANDOM:
                seen += 1
                if np.random.random() * seen < 1.0:  # noqa: NPY002  (numba has no Generator; seeded per episode)
                    best = a
                continue
            s0, s1, s2 = score_key(code, w, free, cap, vm_count, d, multi, m, k)
            if best < 0 or s0 < b0 or (s0 == b0 and (s1 < b1 or (s1 == b1 and s2 < b2))):
                best = a
                b0 = s0
                b1 = s1
                b2 = s2
    return best


@_jit
def topk_insert(keys: np.ndarray, acts: np.ndarray, n: int, k: int, s0: float, s1: float, s2: float, a: int) -> int:
    """Insert action ``a`` with key (s0, s1, s2) into the sorted top-``k`` list (lower key first, ties: lower a)."""
    pos = n
    while pos > 0:
        p0, p1, p2 = keys[pos - 1, 0], keys[pos - 1, 1], keys[pos - 1, 2]
        if s0 < p0 or (s0 == p0 and (s1 < p1 or (s1 == p1 and s2 < p2))):
            pos -= 1
        else:
            break
    if pos >= k:
        return n
    last = min(n, k - 1)
    for i in range(last, pos, -1):
        keys[i, 0], keys[i, 1], keys[i, 2] = keys[i - 1, 0], keys[i - 1, 1], keys[i - 1, 2]
        acts[i] = acts[i - 1]
    keys[pos, 0], keys[pos, 1], keys[pos, 2] = s0, s1, s2
    acts[pos] = a
    return min(n + 1, k)


@_jit
def top_k(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    d: np.ndarray,
    multi: bool,
    n_active: int,
    k: int,
    out: np.ndarray,
    out_keys: np.ndarray,
) -> int:
    """The ``k`` best feasible actions of heuristic ``code`` in its own order, written to ``out`` (actions) and
    ``out_keys`` (``(k, 3)`` keys); returns how many (fewer when fewer fit). Its first is :func:`choose`'s pick
    (except for ``random``, which has no order: index order is used)."""
    KN = free.shape[1]
    kmax = 1 if multi else KN
    n = 0
    for m in range(n_active):
        if not usable[m]:
            continue
        if code == BEST_FIT and n == k and _machine_free(free, m, 0) - d[0] > out_keys[k - 1, 0]:
            continue  # the same pruning as choose(): this machine's first key cannot enter a full top-k
        for j in range(kmax):
            if not K.fits(free, d, multi, m, j):
                continue
            if code == RANDOM:
                s0, s1, s2 = 0.0, 0.0, 0.0
            else:
                s0, s1, s2 = score_key(code, w, free, cap, vm_count, d, multi, m, j)
            n = topk_insert(out_keys, out, n, k, s0, s1, s2, m * KN + j)
    return n


@_jit
def run_episode(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    cap_prefix: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    acc: np.ndarray,
    chg: np.ndarray,
    ip: np.ndarray,
    fp: np.ndarray,
    demand: np.ndarray,
    multi: np.ndarray,
    oversize: np.ndarray,
    price: np.ndarray,
    ev_req: np.ndarray,
    ev_dep: np.ndarray,
) -> int:
    """A whole episode with heuristic ``code`` deciding: the fast path, the simulator's own transitions."""
    while True:
        status = K.next_decision(
            free, cap_prefix, vm_count, used, pm_of, node_of, ctr, acc, chg, ip, fp, demand, multi, oversize, ev_req,
            ev_dep,
        )  # fmt: skip
        if status != K.DECIDE:
            return status
        r = ctr[K.C_REQ]
        a = choose(code, w, free, cap, vm_count, usable, demand[r], multi[r], ctr[K.C_ACTIVE])
        K.apply_action(free, cap_prefix, vm_count, used, pm_of, node_of, ctr, acc, chg, demand, multi, price, a)
