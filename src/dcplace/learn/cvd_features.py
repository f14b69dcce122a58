"""Compiled pieces of CVD-RL's decision step (the top-k filter is the heuristics' own,
:func:`dcplace.policies.numa_heuristics.top_k`): the per-machine rows the Q-network reads, and the
capacity measure behind the delta reward (``../shared/papers/002_0cf75b9bf5d3860a.txt``, sections 4.1-4.3).

Everything here reads the simulator's arrays (``free``: ``(M, K, 2)``, ``cap``, ``vm_count``) directly, so one
decision costs a few microseconds of compiled code plus one small matrix product, at any cluster size.

Rows. The Q-network scores one machine at a time (the decomposition operator, eq. 7). A *row* describes a machine:

* with look-ahead (eq. 9) the row is the machine's state after the candidate placement: the free CPU and memory
  fraction of each NUMA node, nodes sorted by free CPU (then memory) so that mirrored machines read alike
  (``2K`` numbers); a machine the action does not touch is its current state;
* without look-ahead the row is the current state, the request (CPU and memory as fractions of a node, multi-NUMA
  flag) and the action on this machine one-hot (not here / node 0 / ... / node K-1), ``2K + 3 + K + 1`` numbers;
* optionally (``slots_feature``, on by default) the machine-state part ends with the machine's slots (below) as a
  fraction of an empty machine's: the capacity measure the delta reward is made of, handed to the network as a
  feature so that it need not rediscover floor arithmetic from free fractions (docs/cvd-rl.md measures both).

The capacity measure (for the delta reward). ``slots(free_m)`` = sum over the probe request types tau of
``p_tau`` x the number of tau-requests machine ``m`` could still host if it received only those; summed over
machines it is the expected number of further requests the cluster can take. The delta reward is
``1 - (slots the placement consumed - slots the same request consumes on an empty machine)``: 1 for the placed
request, less when the placement fragments a machine (consumes more than the request's own room), more when it
fills a gap that nothing else could use. Subtracting the empty-machine consumption removes the part that depends
only on the request's size (a 64-core VM consumes ~50 slots wherever it goes), which the network, seeing machine
states only, could not predict; what is left depends on the decision.
"""

from __future__ import annotations

import numba as nb
import numpy as np

_jit = nb.njit(cache=True, nogil=True)


@_jit
def state_row(free_m: np.ndarray, cap_m: np.ndarray, out: np.ndarray) -> None:
    """Free fractions of one machine, nodes sorted by (free CPU, free memory) descending: ``out[2 * rank + r]``."""
    KN = free_m.shape[0]
    order = np.arange(KN)
    fr = np.empty((KN, 2))
    for j in range(KN):
        fr[j, 0] = free_m[j, 0] / cap_m[j, 0]
        fr[j, 1] = free_m[j, 1] / cap_m[j, 1]
    for i in range(1, KN):  # insertion sort, K is 2 in practice
        x = order[i]
        p = i
        while p > 0 and (
            fr[order[p - 1], 0] < fr[x, 0] or (fr[order[p - 1], 0] == fr[x, 0] and fr[order[p - 1], 1] < fr[x, 1])
        ):
            order[p] = order[p - 1]
            p -= 1
        order[p] = x
    for rank in range(KN):
        out[2 * rank] = fr[order[rank], 0]
        out[2 * rank + 1] = fr[order[rank], 1]


@_jit
def after_free(free: np.ndarray, d: np.ndarray, multi: bool, a: int, out: np.ndarray) -> None:
    """Machine ``a // K``'s free capacity after placing ``d`` at action ``a`` (eqs. 1-2), into ``out`` (K, 2)."""
    KN = free.shape[1]
    m = a // KN
    for j in range(KN):
        for r in range(2):
            out[j, r] = free[m, j, r]
    if multi:
        for j in range(KN):
            for r in range(2):
                out[j, r] -= d[r] / KN
    else:
        j = a % KN
        for r in range(2):
            out[j, r] -= d[r]


@_jit
def machine_row(
    free_m: np.ndarray, cap_m: np.ndarray, types: np.ndarray, tmulti: np.ndarray, weight: np.ndarray, out: np.ndarray
) -> None:
    """A machine's state part of a row: sorted free fractions, then (when ``types`` is not empty) its slots as a
    fraction of an empty machine's."""
    state_row(free_m, cap_m, out)
    if types.shape[0]:
        out[2 * free_m.shape[0]] = pm_slots(free_m, types, tmulti, weight) / pm_slots(cap_m, types, tmulti, weight)


@_jit
def now_row(
    free_m: np.ndarray,
    cap_m: np.ndarray,
    d: np.ndarray,
    multi: bool,
    lookahead: bool,
    types: np.ndarray,
    tmulti: np.ndarray,
    weight: np.ndarray,
    out: np.ndarray,
) -> None:
    """A machine's row with no placement on it (``out`` zeroed by the caller): its state, and without look-ahead
    the request and the action one-hot set to "not here"."""
    machine_row(free_m, cap_m, types, tmulti, weight, out)
    if not lookahead:
        KN = free_m.shape[0]
        S = 2 * KN + (1 if types.shape[0] else 0)  # width of the machine-state part
        out[S] = (d[0] / KN if multi else d[0]) / cap_m[0, 0]
        out[S + 1] = (d[1] / KN if multi else d[1]) / cap_m[0, 1]
        out[S + 2] = 1.0 if multi else 0.0
        out[S + 3] = 1.0  # action on this machine: none


@_jit
def cand_row(
    free: np.ndarray,
    cap: np.ndarray,
    d: np.ndarray,
    multi: bool,
    a: int,
    lookahead: bool,
    types: np.ndarray,
    tmulti: np.ndarray,
    weight: np.ndarray,
    now: np.ndarray,
    buf: np.ndarray,
    out: np.ndarray,
) -> None:
    """The row of action ``a``'s machine under the action: its state after the placement (look-ahead), or its
    ``now`` row with the action one-hot moved to the chosen node."""
    KN = free.shape[1]
    m = a // KN
    if lookahead:
        after_free(free, d, multi, a, buf)
        machine_row(buf, cap[m], types, tmulti, weight, out)
        return
    S = 2 * KN + (1 if types.shape[0] else 0)
    out[:] = now
    out[S + 3] = 0.0
    out[S + 4 + (0 if multi else a % KN)] = 1.0


@_jit
def fill_rows(
    free: np.ndarray,
    cap: np.ndarray,
    n_active: int,
    d: np.ndarray,
    multi: bool,
    lookahead: bool,
    types: np.ndarray,
    tmulti: np.ndarray,
    weight: np.ndarray,
    base: np.ndarray,
    cand: np.ndarray,
    cand_pm: np.ndarray,
    actions: np.ndarray,
    n_cand: int,
) -> None:
    """Rows of every active machine with no placement (``base``, ``(M, F)``) and of each candidate action
    (``cand``, ``(C, F)``; its machine in ``cand_pm``). Rows beyond ``n_active`` are zero. ``types`` empty: no
    slots feature."""
    base[:] = 0.0
    buf = np.empty((free.shape[1], 2))
    for m in range(n_active):
        now_row(free[m], cap[m], d, multi, lookahead, types, tmulti, weight, base[m])
    for c in range(n_cand):
        cand_pm[c] = actions[c] // free.shape[1]
        cand_row(free, cap, d, multi, actions[c], lookahead, types, tmulti, weight, base[cand_pm[c]], buf, cand[c])


@_jit
def pm_slots(free_m: np.ndarray, types: np.ndarray, multi: np.ndarray, weight: np.ndarray) -> float:
    """Expected requests machine ``free_m`` (K, 2) could still host: sum_tau weight_tau x slots for type tau."""
    KN = free_m.shape[0]
    total = 0.0
    for t in range(types.shape[0]):
        c, mm = types[t, 0], types[t, 1]
        if multi[t]:
            n = 1e18
            for j in range(KN):
                n = min(n, np.floor(min(free_m[j, 0] / (c / KN), free_m[j, 1] / (mm / KN)) + 1e-9))
        else:
            n = 0.0
            for j in range(KN):
                n += np.floor(min(free_m[j, 0] / c, free_m[j, 1] / mm) + 1e-9)
        total += weight[t] * max(n, 0.0)
    return total


@_jit
def delta_reward(
    free: np.ndarray,
    cap: np.ndarray,
    d: np.ndarray,
    multi: bool,
    a: int,
    types: np.ndarray,
    tmulti: np.ndarray,
    weight: np.ndarray,
) -> float:
    """1 for the placed request minus the capacity (in expected requests) the placement consumed beyond what the
    same request consumes on an empty machine of the same kind (see module doc)."""
    KN = free.shape[1]
    m = a // KN
    buf = np.empty((KN, 2))
    after_free(free, d, multi, a, buf)
    used = pm_slots(free[m], types, tmulti, weight) - pm_slots(buf, types, tmulti, weight)
    empty = cap[m].copy()
    after_free(cap[m : m + 1], d, multi, a % KN, buf)
    ideal = pm_slots(empty, types, tmulti, weight) - pm_slots(buf, types, tmulti, weight)
    return 1.0 - (used - ideal)


@_jit
def fill_pair_rows(
    free: np.ndarray,
    cap: np.ndarray,
    d: np.ndarray,
    multi: bool,
    lookahead: bool,
    types: np.ndarray,
    tmulti: np.ndarray,
    weight: np.ndarray,
    actions: np.ndarray,
    n_cand: int,
    now: np.ndarray,
    cand: np.ndarray,
) -> None:
    """For acting with the decomposed network: only the candidates' machines matter (the other machines' values
    cancel in the argmax), so fill ``now`` (C, F) with each candidate machine's row as it is and ``cand`` (C, F)
    with its row under the candidate action. Cost: O(candidates), whatever the cluster size."""
    buf = np.empty((free.shape[1], 2))
    for c in range(n_cand):
        m = actions[c] // free.shape[1]
        now[c, :] = 0.0
        now_row(free[m], cap[m], d, multi, lookahead, types, tmulti, weight, now[c])
        cand_row(free, cap, d, multi, actions[c], lookahead, types, tmulti, weight, now[c], buf, cand[c])
