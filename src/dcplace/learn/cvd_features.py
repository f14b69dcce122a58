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
    if KN == 2:  # the usual case, without the scratch arrays below (same divisions, same order)
        c0, m0 = free_m[0, 0] / cap_m[0, 0], free_m[0, 1] / cap_m[0, 1]
        c1, m1 = free_m[1, 0] / cap_m[1, 0], free_m[1, 1] / cap_m[1, 1]
        if c0 < c1 or (c0 == c1 and m0 < m1):
            c0, m0, c1, m1 = c1, m1, c0, m0
        out[0], out[1], out[2], out[3] = c0, m0, c1, m1
        return
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


#: Unit roundoff of float64 (``2**-53``): the error bounds of :func:`mlp_values` are in units of it.
UNIT_ROUNDOFF = 2.0**-53


@nb.njit(cache=True, nogil=True, fastmath={"contract"})
def mlp_values(
    x: np.ndarray,
    n: int,
    w0: np.ndarray,
    b0: np.ndarray,
    wh: np.ndarray,
    bh: np.ndarray,
    wl: np.ndarray,
    bl: float,
    amp: np.ndarray,
    bmax: np.ndarray,
    h: np.ndarray,
    g: np.ndarray,
    out: np.ndarray,
    err: np.ndarray,
) -> None:
    """The value MLP (``Linear, ReLU`` x ``L - 1``, then ``Linear`` to one output) of rows ``x[:n]`` (F wide) in
    float64, with an a-priori bound on how far *any* float64 evaluation of it (numpy's BLAS in any summation order,
    with or without fused multiply-adds) can be from this one: ``out[r]`` the value, ``err[r]`` the bound.

    Shapes: ``w0`` (F, H), ``b0`` (H,); ``wh`` (L-2, H, H), ``bh`` (L-2, H); ``wl`` (H,), ``bl``; scratch ``h``,
    ``g`` (>= n, H). ``amp[l] = max_j sum_k |W_l[k, j]|`` and ``bmax[l] = max_j |b_l[j]|`` per linear layer (L).

    The bound. A dot product of length ``K`` plus a bias computed in floating point in any order is within
    ``gamma_{K+1} (sum_k |w_kj| |h_k| + |b_j|)`` of the exact one, ``gamma_n = n u / (1 - n u)`` (Higham, Accuracy
    and Stability of Numerical Algorithms, 3.1); an input off by at most ``E`` per entry moves the exact output by
    at most ``amp E``; ReLU does not increase a difference. So if every computed hidden vector of any evaluation is
    within ``E_l`` of the exact one (``E_0 = 0``: the rows are the same bits), then
    ``E_{l+1} = amp_{l+1} E_l + gamma (amp_{l+1} (|h_l|_inf + 2 E_l) + bmax_{l+1})`` holds for every evaluation
    (``|h_l|_inf + 2 E_l`` bounds the other evaluation's hidden vector from this one's); two evaluations differ by
    at most ``2 E_L``, which ``err`` holds (times 2 for the rounding of the bound itself and a margin).

    All rows go through a layer together (the layer's weights are read once per decision, from L1); products and
    sums may fuse (``fastmath={"contract"}``: the bound allows any order, fused or not; nothing else is relaxed)."""
    L = wh.shape[0] + 2
    H = w0.shape[1]
    F = w0.shape[0]
    u = UNIT_ROUNDOFF
    gam = (F + 1) * u / (1.0 - (F + 1) * u)
    for r in range(n):
        top = 0.0
        for k in range(F):
            top = max(top, abs(x[r, k]))
        err[r] = gam * (amp[0] * top + bmax[0])  # E_1, held in err while the layers run
        for j in range(H):
            h[r, j] = b0[j]
    for k in range(F):
        for r in range(n):
            xk = x[r, k]
            for j in range(H):
                h[r, j] += xk * w0[k, j]
    gam = (H + 1) * u / (1.0 - (H + 1) * u)
    for li in range(L - 1):
        last = li == L - 2
        a = amp[li + 1]
        bm = bmax[li + 1]
        for r in range(n):
            top = 0.0
            for j in range(H):
                v = max(h[r, j], 0.0)
                h[r, j] = v
                top = max(top, v)
            e = err[r]
            err[r] = a * e + gam * (a * (top + 2.0 * e) + bm)
            if last:
                acc = 0.0
                for k in range(H):
                    acc += h[r, k] * wl[k]
                out[r] = acc + bl
            else:
                for j in range(H):
                    g[r, j] = bh[li, j]
        if last:
            break
        w = wh[li]
        for k in range(H):
            for r in range(n):
                hk = h[r, k]
                if hk != 0.0:  # a ReLU zero adds nothing (the bound holds for this evaluation all the same)
                    for j in range(H):
                        g[r, j] += hk * w[k, j]
        h, g = g, h
    for r in range(n):
        err[r] *= 2.0


@_jit
def guarded_best(
    free: np.ndarray,
    cap: np.ndarray,
    d: np.ndarray,
    multi: bool,
    lookahead: bool,
    types: np.ndarray,
    tmulti: np.ndarray,
    weight: np.ndarray,
    rtypes: np.ndarray,
    rtmulti: np.ndarray,
    rweight: np.ndarray,
    machine_td: bool,
    gamma: float,
    ctx: np.ndarray,
    actions: np.ndarray,
    n_cand: int,
    w0: np.ndarray,
    b0: np.ndarray,
    wh: np.ndarray,
    bh: np.ndarray,
    wl: np.ndarray,
    bl: float,
    amp: np.ndarray,
    bmax: np.ndarray,
    now: np.ndarray,
    cand: np.ndarray,
    vals: np.ndarray,
    errs: np.ndarray,
    h: np.ndarray,
    g: np.ndarray,
) -> int:
    """The decomposed network's choice among ``actions[:n_cand]`` in one compiled call, *when it is certain*: the
    index of the best benefit ``V(cand) - V(now)`` (``machine_td``: ``r + gamma V(cand) - V(now)``, ``r`` the delta
    reward with the probes ``rtypes``/``rtmulti``/``rweight``), or -1 when the best and another candidate are
    within the evaluations' error bounds of each other (:func:`mlp_values`), where a float64 evaluation in another
    summation order (numpy's BLAS) might rank them the other way; the caller then decides with that evaluation.

    Rows as :func:`fill_pair_rows` (then ``ctx``, the decision's context, in the last ``len(ctx)`` columns of every
    row); scratch: ``now``, ``cand`` (>= n_cand, F), ``vals``, ``errs`` (2, >= n_cand), ``h``, ``g`` (>= n_cand, H). A
    candidate's tolerance is its two values' bounds plus ``4 u`` of the magnitudes for the rounding of the benefit's
    own arithmetic (``8 u`` with the reward); the answer stands when the best benefit minus its tolerance exceeds
    every other benefit plus its tolerance, so the other evaluation's first maximum is the same candidate."""
    fill_pair_rows(free, cap, d, multi, lookahead, types, tmulti, weight, actions, n_cand, now, cand)
    cw = ctx.shape[0]
    F = now.shape[1]
    for c in range(n_cand):
        for i in range(cw):
            now[c, F - cw + i] = ctx[i]
            cand[c, F - cw + i] = ctx[i]
    mlp_values(cand, n_cand, w0, b0, wh, bh, wl, bl, amp, bmax, h, g, vals[0], errs[0])
    mlp_values(now, n_cand, w0, b0, wh, bh, wl, bl, amp, bmax, h, g, vals[1], errs[1])
    u = UNIT_ROUNDOFF
    best = -1
    for c in range(n_cand):
        vc = vals[0, c]
        vn = vals[1, c]
        if machine_td:
            r = delta_reward(free, cap, d, multi, actions[c], rtypes, rtmulti, rweight)
            b = r + gamma * vc - vn
            tol = gamma * errs[0, c] + errs[1, c] + 8.0 * u * (abs(r) + gamma * abs(vc) + abs(vn) + abs(b))
        else:
            b = vc - vn
            tol = errs[0, c] + errs[1, c] + 4.0 * u * (abs(vc) + abs(vn) + abs(b))
        vals[0, c] = b
        errs[0, c] = tol
        if best < 0 or b > vals[0, best]:
            best = c
    for c in range(n_cand):
        if c != best and not (vals[0, best] - errs[0, best] > vals[0, c] + errs[0, c]):
            return -1
    return best
