"""Compiled transitions of the NUMA VM scheduling simulator (numba, over plain numpy arrays).

This module is the single source of the simulator's semantics and holds the transitions only: feasibility,
place, release, the event walk (:func:`next_decision`) and the accounting of a decision (:func:`apply_action`).
Policies (heuristic scores, the learned schedulers) live in :mod:`dcplace.policies`; the fast episode loop of the
compiled heuristics (:func:`dcplace.policies.numa_heuristics.run_episode`), the step-by-step shell that the
Gymnasium environment and Python policies use (:class:`dcplace.sim.numa.NumaSim`) and the live engine all call
the functions below, so the paths cannot drift apart.

State (all arrays, no per-machine objects; ``M`` machines, ``K`` NUMA nodes, ``R`` resources, ``n`` requests):

* ``free``: ``(M, K, R)`` float64, free capacity of each NUMA node;
* ``vm_count``: ``(M,)`` int64, VMs on each machine;
* ``used``: ``(R,)`` float64, allocated total of each resource (running sum, for O(1) metrics);
* ``pm_of``: ``(n,)`` int64 ledger, the machine holding request ``r`` (-1 never placed, -2 released);
* ``node_of``: ``(n,)`` int64 ledger, its NUMA node (-1: spread evenly over all ``K`` nodes);
* ``ctr``: ``(N_CTR,)`` int64 counters and ``acc``: ``(N_ACC,)`` float64 accumulators (indices below);
* ``chg``: ``(1 + L,)`` int64 change log, a ring of the last ``L`` machines whose free capacity changed:
  ``chg[0]`` counts every change ever noted, change ``q`` is at ``chg[1 + q % L]`` (:func:`note_change`). Writing
  it costs O(1) per place / release; an index over free capacity
  (:mod:`dcplace.policies.numa_index`) reads it to update only what changed, and rebuilds when more than ``L``
  changes passed since it last looked (or after :func:`note_reset`).

Why compiled loops and not vectorised numpy: one decision at 100 machines is ~200 floating-point comparisons;
numpy's per-call overhead (~1 us per array operation, a dozen operations per decision) would cap the simulator near
the 50,000 decisions/s that the target asks to double. The measured comparison is in ``docs/benchmarks.md``.
"""

from __future__ import annotations

import numba as nb
import numpy as np

# ----------------------------------------------------------------------------------------------------------------
# Codes shared with Python.
# Status after next_decision / apply_action.
DECIDE = 0  # a creation request waits for a decision (at least one action is feasible)
TERMINATED = 1  # a request could not be hosted (after any allowed expansion): the episode ends
TRUNCATED = 2  # the trace (or the request budget) ran out
INVALID = 3  # the action taken was infeasible: the request failed and the episode ends

# Phases.
WARMUP = 0
SCORED = 1

# ctr indices
C_PTR = 0  # next event to process
C_ACTIVE = 1  # machines currently in the cluster (expansion grows it)
C_PHASE = 2
C_LENGTH = 3  # scored placements (the paper's scheduled length)
C_STATUS = 4
C_OVERSIZE = 5  # requests no machine of the largest cluster could ever host: counted and skipped
C_WARM_PLACED = 6
C_WARM_SKIPPED = 7  # warm-up requests that did not fit (skipped: warm-up only builds the initial state)
C_EXPANSIONS = 8
C_IN_USE = 9  # machines hosting at least one VM
C_REQ = 10  # the request awaiting a decision (valid when status == DECIDE)
C_DEPARTURES = 11  # departures processed (placed VMs released)
C_START_REQ = 12  # first scored request (-1 before the scored phase starts)
C_PENDING = 13  # the creation request advance() stopped at (feasibility not yet checked)
N_CTR = 14

# acc indices
A_INCOME = 0
A_CPU_SUM = 1  # sum over scored placements of the CPU allocation rate after the placement
A_MEM_SUM = 2
A_INUSE_SUM = 3
A_WARM_CPU = 4  # CPU allocation rate when the scored phase started
N_ACC = 5

# int parameter indices
P_EXPANSION = 0  # 1: expansion mode
P_RELEASE = 1  # 1: departures free resources ("recovering"); 0: never ("fading")
P_MAX_ACTIVE = 2
P_EXPAND_STEP = 3
P_MAX_REQUESTS = 4  # 0: unlimited
N_IP = 5

# float parameter indices
F_WARM_RATIO = 0
N_FP = 1

#: Feasibility tolerance (cores, GB): a demand fits where ``free >= d - FIT_TOL``. Free capacity is a float64 running
#: sum, and VMs with thirds of cores (Huawei-East-1's 4/3- and 8/3-core types, halves of them on double-NUMA VMs) leave
#: rounding in it after they go: a node with exactly ``d`` free can hold ``d - 3.6e-15``, which an exact comparison
#: refused (found by the hindsight plans' replay, issue 15). Half the invariant checks' 1e-9 (``NumaSim.check``), so a
#: placement the tolerance admits leaves at worst ``-FIT_TOL`` free and never trips them; the same value as
#: :data:`dcplace.placement.migration.PLAN_TOL`. Far below any real demand (the smallest is 1/3 core).
FIT_TOL = 5e-10

_jit = nb.njit(cache=True, nogil=True)  # cached to __pycache__: compiled once per machine
jit_inline = nb.njit(cache=True, nogil=True, inline="always")
"""For the transitions every decision runs: inlined into the caller at numba's level. A call that is not inlined
increfs and decrefs each array argument (numba's reference-count pruning misses functions whose branches end the
arrays' lives at different points), two atomic operations per array per call: in Best-Fit's compiled episode at
5,000 machines these took about 38 % of the samples (``perf``), and inlining the hot path gave 1.4-1.5x (see
docs/benchmarks.md, "Best-Fit and the other rules"). The price: more to compile, once per numba cache."""


def change_log(machines: int) -> np.ndarray:
    """A new, empty change log (``chg`` above) with a ring of ``max(machines, 1024)`` entries: an index that falls
    further behind than the cluster's size rebuilds, which costs no more than replaying the changes."""
    return np.zeros(1 + max(int(machines), 1024), np.int64)


@_jit
def note_change(chg: np.ndarray, m: int) -> None:
    """Record that machine ``m``'s free capacity (or usability) changed."""
    L = chg.shape[0] - 1
    chg[1 + chg[0] % L] = m
    chg[0] += 1


@_jit
def note_reset(chg: np.ndarray) -> None:
    """Record that any machine may have changed (a reset, a bulk edit): every index reading ``chg`` rebuilds."""
    chg[0] += chg.shape[0]


@_jit
def fits(free: np.ndarray, d: np.ndarray, multi: bool, m: int, k: int) -> bool:
    """Whether request demand ``d`` (R,) fits on machine ``m`` at node ``k`` (any node if ``multi``), to
    :data:`FIT_TOL`."""
    K = free.shape[1]
    R = free.shape[2]
    if multi:
        for j in range(K):
            for r in range(R):
                if free[m, j, r] < d[r] / K - FIT_TOL:
                    return False
        return True
    for r in range(R):
        if free[m, k, r] < d[r] - FIT_TOL:
            return False
    return True


@_jit
def any_fits(free: np.ndarray, d: np.ndarray, multi: bool, n_active: int) -> bool:
    """Whether request ``d`` fits any active machine. Scans from the last machine: policies fill machines from the
    front, so the back holds the emptiest ones and the answer comes in a few steps while the cluster has room (at
    20,000 machines with the first 2,000 full, the forward scan cost 170 us per decision)."""
    K = free.shape[1]
    for m in range(n_active - 1, -1, -1):
        if multi:
            if fits(free, d, True, m, 0):
                return True
        else:
            for k in range(K):
                if fits(free, d, False, m, k):
                    return True
    return False


@_jit
def feasible_mask(free: np.ndarray, d: np.ndarray, multi: bool, n_active: int, out: np.ndarray) -> None:
    """Fill ``out`` (M*K,) bool with the feasible actions (machine * K + node; both nodes of a machine for multi)."""
    M, K = free.shape[0], free.shape[1]
    out[:] = False
    for m in range(min(n_active, M)):
        if multi:
            if fits(free, d, True, m, 0):
                for k in range(K):
                    out[m * K + k] = True
        else:
            for k in range(K):
                out[m * K + k] = fits(free, d, False, m, k)


@_jit
def first_feasible(free: np.ndarray, d: np.ndarray, multi: bool, n_active: int) -> int:
    """The first feasible action in machine, node order, or -1: how the warm-up fills the cluster (the scenario's
    rule, VMAgent's default warm-up scheduler, not a policy's choice)."""
    K = free.shape[1]
    kmax = 1 if multi else K
    for m in range(n_active):
        for k in range(kmax):
            if fits(free, d, multi, m, k):
                return int(m * K + k)
    return -1


@jit_inline
def place(
    free: np.ndarray,
    vm_count: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    chg: np.ndarray,
    d: np.ndarray,
    multi: bool,
    r: int,
    action: int,
) -> None:
    """Allocate request ``r`` at ``action`` (which must be feasible), record it in the ledger and the change log."""
    K = free.shape[1]
    R = free.shape[2]
    m = action // K
    if multi:
        for j in range(K):
            for q in range(R):
                free[m, j, q] -= d[q] / K
        node_of[r] = -1
    else:
        k = action % K
        for q in range(R):
            free[m, k, q] -= d[q]
        node_of[r] = k
    for q in range(R):
        used[q] += d[q]
    pm_of[r] = m
    if vm_count[m] == 0:
        ctr[C_IN_USE] += 1
    vm_count[m] += 1
    note_change(chg, m)


@jit_inline
def release(
    free: np.ndarray,
    vm_count: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    chg: np.ndarray,
    demand: np.ndarray,
    r: int,
) -> None:
    """Return exactly what the ledger says request ``r`` took (nothing if it was never placed), its demand
    ``demand[r]`` (``demand`` the ``(n, R)`` table, read in place: a row view per departure costs two atomic
    reference-count updates); note the change."""
    m = pm_of[r]
    if m < 0:
        return
    K = free.shape[1]
    R = free.shape[2]
    k = node_of[r]
    if k < 0:
        for j in range(K):
            for q in range(R):
                free[m, j, q] += demand[r, q] / K
    else:
        for q in range(R):
            free[m, k, q] += demand[r, q]
    for q in range(R):
        used[q] -= demand[r, q]
    vm_count[m] -= 1
    if vm_count[m] == 0:
        ctr[C_IN_USE] -= 1
    pm_of[r] = -2
    ctr[C_DEPARTURES] += 1
    note_change(chg, m)


@jit_inline
def advance(
    free: np.ndarray,
    cap_prefix: np.ndarray,
    vm_count: np.ndarray,
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
    ev_req: np.ndarray,
    ev_dep: np.ndarray,
) -> int:
    """Walk the events up to the next creation request that needs a scored decision, without checking that it fits.

    Processes departures (when releases are on), skips oversize requests (counted) and runs the warm-up phase with
    the warm-up heuristic until the CPU allocation rate reaches the warm-start ratio. Returns DECIDE with
    ``ctr[C_PENDING]`` set to the waiting request (the caller then checks that something fits: :func:`next_decision`
    scans, an index answers from its tree, and both call :func:`expand_or_end` while nothing fits), or TRUNCATED.
    """
    E = ev_req.shape[0]
    p = ctr[C_PTR]
    while True:
        while p < E and ev_dep[p]:
            if ip[P_RELEASE] == 1:
                release(free, vm_count, used, pm_of, node_of, ctr, chg, demand, ev_req[p])
            p += 1
        if p >= E:
            ctr[C_PTR] = p
            ctr[C_STATUS] = TRUNCATED
            return TRUNCATED
        r = ev_req[p]
        if oversize[r]:
            ctr[C_OVERSIZE] += 1
            p += 1
            continue
        n_active = ctr[C_ACTIVE]
        if ctr[C_PHASE] == WARMUP:
            if used[0] < fp[F_WARM_RATIO] * cap_prefix[n_active, 0]:
                a = first_feasible(free, demand[r], multi[r], n_active)
                if a >= 0:
                    place(free, vm_count, used, pm_of, node_of, ctr, chg, demand[r], multi[r], r, a)
                    ctr[C_WARM_PLACED] += 1
                else:
                    ctr[C_WARM_SKIPPED] += 1
                p += 1
                continue
            ctr[C_PHASE] = SCORED
            ctr[C_START_REQ] = r
            acc[A_WARM_CPU] = used[0] / cap_prefix[n_active, 0]
        ctr[C_PTR] = p
        if ip[P_MAX_REQUESTS] > 0 and ctr[C_LENGTH] >= ip[P_MAX_REQUESTS]:
            ctr[C_STATUS] = TRUNCATED
            return TRUNCATED
        ctr[C_PENDING] = r
        return DECIDE


@_jit
def expand_or_end(ctr: np.ndarray, ip: np.ndarray) -> bool:
    """The waiting request fits on no active machine: grow the cluster by a step (Expansion, below the maximum) and
    return True (check again), or end the episode (TERMINATED) and return False."""
    if ip[P_EXPANSION] == 1 and ctr[C_ACTIVE] < ip[P_MAX_ACTIVE]:
        ctr[C_ACTIVE] = min(ctr[C_ACTIVE] + ip[P_EXPAND_STEP], ip[P_MAX_ACTIVE])
        ctr[C_EXPANSIONS] += 1
        return True
    ctr[C_STATUS] = TERMINATED
    return False


@_jit
def next_decision(
    free: np.ndarray,
    cap_prefix: np.ndarray,
    vm_count: np.ndarray,
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
    ev_req: np.ndarray,
    ev_dep: np.ndarray,
) -> int:
    """Advance to the next creation request that needs a scored decision and return the status.

    :func:`advance`, then a scan for a feasible action; while there is none, grow the cluster in expansion mode
    (:func:`expand_or_end`). Returns DECIDE with ``ctr[C_REQ]`` set, or a final status.
    """
    status = advance(
        free, cap_prefix, vm_count, used, pm_of, node_of, ctr, acc, chg, ip, fp, demand, multi, oversize, ev_req, ev_dep
    )
    if status != DECIDE:
        return status
    r = ctr[C_PENDING]
    while not any_fits(free, demand[r], multi[r], ctr[C_ACTIVE]):
        if not expand_or_end(ctr, ip):
            return TERMINATED
    ctr[C_REQ] = r
    ctr[C_STATUS] = DECIDE
    return DECIDE


@jit_inline
def apply_action(
    free: np.ndarray,
    cap_prefix: np.ndarray,
    vm_count: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    acc: np.ndarray,
    chg: np.ndarray,
    demand: np.ndarray,
    multi: np.ndarray,
    price: np.ndarray,
    action: int,
) -> int:
    """Place the waiting request at ``action`` and account for it; INVALID (episode over) if infeasible."""
    r = ctr[C_REQ]
    K = free.shape[1]
    n_active = ctr[C_ACTIVE]
    m = action // K
    d = demand[r]  # one row view (each costs atomic reference-count updates)
    if action < 0 or m >= n_active or not fits(free, d, multi[r], m, action % K):
        ctr[C_STATUS] = INVALID
        return INVALID
    place(free, vm_count, used, pm_of, node_of, ctr, chg, d, multi[r], r, action)
    ctr[C_LENGTH] += 1
    acc[A_INCOME] += price[r]
    acc[A_CPU_SUM] += used[0] / cap_prefix[n_active, 0]
    acc[A_MEM_SUM] += used[1] / cap_prefix[n_active, 1]
    acc[A_INUSE_SUM] += ctr[C_IN_USE]
    ctr[C_PTR] += 1
    ctr[C_STATUS] = DECIDE
    return DECIDE


@_jit
def seed_rng(seed: int) -> None:
    """Seed numba's own generator (used by the RANDOM heuristic inside compiled code)."""
    np.random.seed(seed)  # noqa: NPY002  (numba keeps its own legacy-API state)
