"""The hindsight bound of a NUMA episode: the most requests any scheduler, knowing the whole future, could place.

An episode (Non-Expansion, end rule ``first-failure``) starts from the warm-up's state, which is the same for every
policy (the warm-up is the scenario's First-Fit), and scores the creation requests ``1, 2, ...`` in trace order; it
ends at the first request that fits nowhere. Its length under the best possible policy is

    L* = max { k : requests 1..k can each be placed at its arrival, without moving any VM,
                   so that no NUMA node is ever over its capacity }.

An instance (:class:`HindsightInstance`) holds the warm-up VMs still live (fixed: machine, node, demand, departure),
the scored requests (arrival, departure, demand, multi-NUMA) and whether releases are on. Capacity only has to be
checked at arrivals (between them VMs only leave). At request ``j``'s arrival the live scored VMs are ``i <= j`` with
``departure_i > arrival_j`` (the simulator processes departures before creations at equal times), or all ``i <= j``
when releases are off; a warm VM is live while ``departure > arrival_j``.

* :func:`aggregate_bound` (any size, a proven upper bound on L*): a relaxation that lets VMs move between nodes at
  every instant and pools the cluster: if at request ``k``'s arrival the live VMs' total CPU or memory (warm and
  scored, ``1..k``) exceeds the cluster's, no policy places ``1..k``, so ``L* <= k - 1``; the bound is that for the
  smallest such ``k`` (the number of scored requests in the trace, or ``limit``, if there is none). Valid with
  releases on or off; the warm VMs' placement does not matter to it (only their totals).
* :func:`packing_bound` (any size, a proven upper bound on L*, never above the aggregate one): the same relaxation
  with the warm VMs kept on their nodes and necessary conditions for packing the live VMs into the nodes' residuals
  (counts and volumes of the VMs at least as large as each size, multi-NUMA VMs needing a machine; its docstring).
* :func:`repack_bound` (any size, proven, never above the packing bound): the first arrival whose live VMs CP-SAT
  proves cannot be packed into the nodes even with migration (:func:`instant_packable`, integer counts per type
  and node), the instants a greedy repacking packs skipped; scanned in order or bisected, from any start (e.g. a
  length a plan reached).
* :func:`window_bound` (proven, never above the bound it starts from): :func:`instants_packable` at the last
  arrivals before ``k``, each VM kept on one node across them (migration once instead of at every arrival), bisected
  over ``k``.
* :func:`exact_length` (small instances): CP-SAT over the time-indexed placement, warm VMs fixed where they are.
  Variables ``x[j, a]`` (request ``j`` at action ``a``: a node for a single-NUMA VM, a machine for a multi-NUMA one),
  ``placed_j = sum_a x[j, a] <= 1``; constraints: prefix ``placed_j >= placed_{j+1}``, and for every arrival ``j``,
  node and resource: fixed live use + sum of the live placed requests' shares <= capacity; objective: max
  ``sum_j placed_j``. Returns the value and whether CP-SAT proved it optimal (otherwise its proven bound).
* :func:`no_migration_check` (any size, decision form, e.g. 50 machines and ~1,000 requests): can requests
  ``1..k`` all be placed without moving a VM? ``feasible`` with a plan (``L* >= k``; re-checked by
  :func:`replay_plan`), ``infeasible`` (``L* < k``: by :func:`packing_bound` or CP-SAT over one cumulative per node
  and resource in request-index time) or ``unknown``.
* :func:`brute_force_length` (tiny instances, tests only): the online episode itself, searched over every choice.
* :func:`window_model` (Hindsight Learning's labels, :mod:`dcplace.learn.hindsight_learning`): the same model over a
  window from *any* decision (:func:`instance_at`: every VM live there fixed), each request's actions pruned to the
  nodes where the fixed VMs leave it room (no plan loses one) and optionally to a given set (a policy's candidates),
  capacity checked at each arrival on the nodes that request can take (use on a node grows only at an arrival placed
  there); objective ``max (n + 1) * sum_j placed_j + sum_j x[j, prefer_j]`` (the longest prefix, then the most
  preferred actions): :func:`window_model`, solved by :func:`dcplace.learn.hindsight_learning.plan_window`.

``ortools`` is imported inside the CP-SAT functions only (``highspy`` and ``ortools`` cannot share a process).
"""

from __future__ import annotations

import itertools
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dcplace.cluster.numa import NumaCluster
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import start_seed
from dcplace.sim.numa import NumaSim, PreparedTrace, Scenario

F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]
_TOL = 1e-9


@dataclass(frozen=True)
class HindsightInstance:
    """The future of one episode from its first scored request (shapes below; ``M`` machines, ``K`` nodes)."""

    capacity: F64  # (M, K, 2) cores, GB of every NUMA node
    fixed_machine: I64  # (w,) machine of each live warm-up VM
    fixed_node: I64  # (w,) its node, -1 = spread evenly over all K nodes
    fixed_demand: F64  # (w, 2) its cores, GB (whole VM)
    fixed_departure: F64  # (w,) seconds; inf = never leaves
    arrival: F64  # (n,) seconds, non-decreasing: the scored requests in order
    departure: F64  # (n,) seconds
    demand: F64  # (n, 2)
    multi: B  # (n,)
    release: bool

    @property
    def requests(self) -> int:
        return len(self.arrival)

    def live_scored(self, j: int) -> B:
        """``(j + 1,)``: which of requests ``0..j`` are live at request ``j``'s arrival (``j`` itself is)."""
        if not self.release:
            return np.ones(j + 1, bool)
        live = np.asarray(self.departure[: j + 1] > self.arrival[j])
        live[j] = True
        return live

    def live_fixed(self, j: int) -> B:
        if not self.release:
            return np.ones(len(self.fixed_departure), bool)
        return np.asarray(self.fixed_departure > self.arrival[j])

    def fixed_use(self, j: int) -> F64:
        """``(M, K, 2)``: what the warm VMs live at request ``j``'s arrival take from every node."""
        use = np.zeros_like(self.capacity)
        k = self.capacity.shape[1]
        live = self.live_fixed(j)
        m, node, d = self.fixed_machine[live], self.fixed_node[live], self.fixed_demand[live]
        single = node >= 0
        np.add.at(use, (m[single], node[single]), d[single])
        for n in range(k):  # a multi-NUMA VM takes 1/K of its demand from every node
            np.add.at(use, (m[~single], np.full(int((~single).sum()), n)), d[~single] / k)
        return use


def instance_from_sim(sim: NumaSim, limit: int) -> HindsightInstance:
    """The instance of ``sim``'s episode, which must wait at its first scored decision, over at most ``limit``
    scored requests (the creations from there on, oversize ones skipped as the simulator does)."""
    if sim.status != K.DECIDE or int(sim.ctr[K.C_LENGTH]) != 0:
        raise ValueError("instance_from_sim needs a simulator at its first scored decision")
    return instance_at(sim, limit)


def instance_at(sim: NumaSim, limit: int) -> HindsightInstance:
    """The future of ``sim`` from the decision it waits at (any decision of an episode): every VM live now is fixed
    where it is (warm-up and already scored alike), and the scored requests are the waiting one and the next
    creations, at most ``limit`` of them. The hindsight window of :func:`plan_window`."""
    if sim.status != K.DECIDE:
        raise ValueError("instance_at needs a simulator waiting at a decision")
    t = sim.trace
    tab = t.table
    live = np.flatnonzero(sim.pm_of >= 0)
    p = int(sim.ctr[K.C_PTR])
    ev = t.ev_req[p:][~t.ev_dep[p:]]
    ev = ev[~sim.oversize[ev]][:limit]
    return HindsightInstance(
        capacity=sim.cap[: sim.n_active].copy(),
        fixed_machine=sim.pm_of[live].copy(),
        fixed_node=sim.node_of[live].copy(),
        fixed_demand=t.demand[live].copy(),
        fixed_departure=tab.departure[live].copy(),
        arrival=tab.arrival[ev].copy(),
        departure=tab.departure[ev].copy(),
        demand=t.demand[ev].copy(),
        multi=t.multi[ev].copy(),
        release=bool(sim.scenario.release),
    )


def aggregate_bound(inst: HindsightInstance) -> int:
    """A proven upper bound on L* (module docstring): ``k - 1`` for the first ``k`` whose live total exceeds the
    cluster's CPU or memory, else the number of requests. O(n log n + w log w)."""
    n = inst.requests
    if n == 0:
        return 0
    total = inst.capacity.sum(axis=(0, 1))  # (2,)
    warm = inst.fixed_demand.sum(axis=0)
    if not inst.release:
        use = warm + np.cumsum(inst.demand, axis=0)
    else:
        # Events in the simulator's order: time, then deletions before creations (a zero-lifetime request's own
        # deletion after its creation, in request order), then request order, creation before deletion.
        fin = np.flatnonzero(np.isfinite(inst.departure))
        f_fin = np.flatnonzero(np.isfinite(inst.fixed_departure))
        time = np.r_[inst.arrival, inst.departure[fin], inst.fixed_departure[f_fin]]
        tier = np.r_[np.ones(n), (inst.departure[fin] == inst.arrival[fin]).astype(float), np.zeros(len(f_fin))]
        req = np.r_[np.arange(n), fin, np.full(len(f_fin), -1)]
        kind = np.r_[np.zeros(n), np.ones(len(fin) + len(f_fin))]
        delta = np.vstack([inst.demand, -inst.demand[fin], -inst.fixed_demand[f_fin]]).reshape(-1, 2)
        order = np.lexsort((kind, req, tier, time))
        cum = warm + np.cumsum(delta[order], axis=0)
        at = np.empty(n, np.int64)
        at[req[order][kind[order] == 0].astype(np.int64)] = np.flatnonzero(kind[order] == 0)
        use = cum[at]
    over = np.flatnonzero(np.any(use > total + _TOL, axis=1))
    return int(over[0]) if len(over) else n


def _node_counts(res: F64, part: F64) -> F64:
    """``res`` ``(..., 2)`` free CPU, GB per node: how many parts of size ``part`` ``(2,)`` fit each node (a zero
    component does not limit)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.where(part > 0, np.floor(res / np.where(part > 0, part, 1.0) + _TOL), np.inf)
    return np.asarray(np.maximum(q.min(axis=-1), 0.0))


def packing_bound(inst: HindsightInstance) -> int:
    """A proven upper bound on L*, never above :func:`aggregate_bound`: ``k - 1`` for the first ``k`` at whose arrival
    the live scored VMs ``1..k`` cannot be packed even with migration, by one of these necessary conditions.

    Relaxation: at request ``j``'s arrival the warm VMs live then are fixed where they are (node residuals
    ``res_n = capacity_n - fixed use_n``), the live scored VMs may sit anywhere, each a *part* ``(c, m)`` on one node
    (a multi-NUMA VM: ``K`` parts ``(c/K, m/K)``, one per node of one machine). For every threshold ``T`` among the
    parts' sizes and their projections ``(c, 0)``, ``(0, m)``:

    1. *count*: the parts that dominate ``T`` (both components ``>=``) number at most
       ``sum_n min(floor(res_n,cpu / T_cpu), floor(res_n,mem / T_mem))`` (each takes at least ``T`` of its node);
    2. *volume*: for each resource ``r``, their total ``r`` is at most ``sum of res_n,r`` over the nodes with
       ``res_n >= T`` (the other nodes can host none of them);
    3. *machines*: the multi-NUMA VMs whose part dominates ``T`` number at most ``sum over machines of min over the
       machine's nodes`` of the count in 1 (each puts a part on every node of its machine).

    With ``T = (0, 0)``, 2 is the pooled check of :func:`aggregate_bound` less the warm VMs' fixed nodes. O(k n) over
    the requests up to :func:`aggregate_bound`."""
    agg = aggregate_bound(inst)
    M, K_, _ = inst.capacity.shape
    parts = np.where(inst.multi[:, None], inst.demand / K_, inst.demand)  # (n, 2)
    nparts = np.where(inst.multi, K_, 1)
    sizes = np.unique(parts[: agg + 1] if agg < inst.requests else parts, axis=0)
    proj = np.vstack([sizes, sizes * [1.0, 0.0], sizes * [0.0, 1.0], np.zeros((1, 2))])
    thresholds = np.unique(proj, axis=0)
    for j in range(min(agg, inst.requests)):
        live = np.flatnonzero(inst.live_scored(j))
        res = np.maximum(inst.capacity - inst.fixed_use(j), 0.0)  # (M, K, 2)
        flat = res.reshape(-1, 2)
        p, w, mu = parts[live], nparts[live], inst.multi[live]
        for t in thresholds:
            dom = np.all(p >= t - _TOL, axis=1)
            if not dom.any():
                continue
            cnt = _node_counts(flat, t)
            if w[dom].sum() > cnt.sum() + _TOL:
                return j
            ok_nodes = np.all(flat >= t - _TOL, axis=1)
            if np.any((p[dom] * w[dom, None]).sum(axis=0) > flat[ok_nodes].sum(axis=0) + _TOL):
                return j
            md = dom & mu
            if md.any() and md.sum() > cnt.reshape(M, K_).min(axis=1).sum() + _TOL:
                return j
    return agg


def _live_parts(inst: HindsightInstance, j: int) -> tuple[F64, F64, B]:
    """Node residuals ``(M, K, 2)`` at request ``j``'s arrival (warm VMs on their nodes) and the live scored VMs'
    demands ``(v, 2)`` and multi-NUMA flags ``(v,)``."""
    live = np.flatnonzero(inst.live_scored(j))
    return inst.capacity - inst.fixed_use(j), inst.demand[live], inst.multi[live]


def greedy_packs(inst: HindsightInstance, j: int) -> bool:
    """Whether a greedy repacking (multi-NUMA VMs first, then by memory, then CPU, decreasing; each on the feasible
    node or machine with the least memory left) places every live scored VM at request ``j``'s arrival into the
    node residuals. True is a witness that the instant is packable with migration; False proves nothing."""
    res, d, mu = _live_parts(inst, j)
    K_ = res.shape[1]
    flat = res.reshape(-1, 2)
    for i in sorted(range(len(d)), key=lambda i: (not mu[i], -d[i, 1], -d[i, 0])):
        if mu[i]:
            ok = np.flatnonzero(np.all(res >= d[i] / K_ - _TOL, axis=(1, 2)))
            if not len(ok):
                return False
            res[ok[np.argmin(res[ok, :, 1].sum(axis=1))]] -= d[i] / K_
        else:
            ok = np.flatnonzero(np.all(flat >= d[i] - _TOL, axis=1))
            if not len(ok):
                return False
            flat[ok[np.argmin(flat[ok, 1])]] -= d[i]
    return True


def instant_packable(inst: HindsightInstance, j: int, time_limit_s: float = 5.0, seed: int = 0) -> bool | None:
    """Whether the live scored VMs at request ``j``'s arrival can be packed into the node residuals (VMs may
    migrate; warm VMs stay on their nodes): :func:`instants_packable` at the single instant ``j``. Returns True
    (packable), False (proved not packable) or None (undecided within ``time_limit_s``)."""
    return instants_packable(inst, [j], time_limit_s, seed)


def instants_packable(inst: HindsightInstance, js: list[int], time_limit_s: float = 5.0, seed: int = 0) -> bool | None:
    """Whether the live scored VMs at the arrivals of requests ``js`` can be packed into the node residuals at
    every one of those instants *with each VM on the same node at every instant it is live at* (no migration between
    the instants; free placement otherwise; warm VMs stay on their nodes). CP-SAT over integer counts
    ``n[c, node]`` (``n[c, machine]`` for multi-NUMA ones) of each class ``c`` = (type, which of the instants the VM
    is live at), ``sum n[c, .] = count of c``, per instant, node and resource ``sum of the live classes' use <=
    residual``. Demands are rounded down and residuals up (CPU in 1/300 core, memory in 1/100 GB), so the model is a
    relaxation of the no-migration problem (any plan gives such counts) and "infeasible" proves that requests
    ``0..max(js)`` cannot all be placed. One instant is :func:`instant_packable`'s model (migration everywhere); more
    instants tie the VMs that span them. Returns True, False (proved) or None (undecided within ``time_limit_s``)."""
    from ortools.sat.python import cp_model  # only here: ortools and highspy cannot share a process

    js = sorted(set(js))
    last = js[-1]
    lives = np.zeros((last + 1, len(js)), bool)
    for t, j in enumerate(js):
        lives[: j + 1, t] = inst.live_scored(j)
    vms = np.flatnonzero(lives.any(axis=1))
    M, K_, _ = inst.capacity.shape
    scale = np.array([300.0, 100.0])
    caps = [np.ceil(np.maximum(inst.capacity - inst.fixed_use(j), 0.0) * scale - 1e-6).astype(np.int64) for j in js]
    keys = np.c_[inst.demand[vms], inst.multi[vms].astype(float), lives[vms].astype(float)]
    kinds, count = np.unique(keys, axis=0, return_counts=True)
    model = cp_model.CpModel()
    use: list[list[list[list[Any]]]] = [[[[] for _ in range(2)] for _ in range(M * K_)] for _ in js]
    for key, n in zip(kinds, count, strict=True):
        c, m, multi, pattern = key[0], key[1], bool(key[2]), [int(i) for i in np.flatnonzero(key[3:])]
        share = np.floor(np.array([c, m]) / (K_ if multi else 1) * scale + 1e-6).astype(np.int64)
        slots = [[mm * K_ + k for k in range(K_)] for mm in range(M)] if multi else [[a] for a in range(M * K_)]
        terms = []
        for nodes in slots:
            room = min([int(n), *(int(caps[i][a // K_, a % K_, r] // share[r]) for i in pattern for a in nodes
                                  for r in range(2) if share[r] > 0)])  # fmt: skip
            if room <= 0:
                continue
            x = model.new_int_var(0, room, "")
            terms.append(x)
            for i in pattern:
                for a in nodes:
                    for r in range(2):
                        if share[r] > 0:
                            use[i][a][r].append(int(share[r]) * x)
        if not terms:
            return False
        model.add(sum(terms) == int(n))
    for t in range(len(js)):
        for a in range(M * K_):
            for r in range(2):
                if use[t][a][r]:
                    model.add(sum(use[t][a][r]) <= int(caps[t][a // K_, a % K_, r]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = int(seed)
    solver.parameters.catch_sigint_signal = False  # see exact_length
    status = solver.solve(model)
    if status == cp_model.INFEASIBLE:
        return False
    return True if status in (cp_model.OPTIMAL, cp_model.FEASIBLE) else None


def repack_bound(
    inst: HindsightInstance, time_limit_s: float = 4.0, max_solves: int = 8, start: int = 0, search: str = "scan"
) -> int:
    """A proven upper bound on L*, never above :func:`packing_bound`: a request ``j`` (from ``start``, below the
    packing bound) whose live set :func:`instant_packable` proves cannot be packed even with migration (no policy
    places ``1..j``), else the packing bound. :func:`greedy_packs` skips the instants it packs; at most
    ``max_solves`` CP-SAT calls of ``time_limit_s`` each, so the result depends on the time limit (an undecided
    instant is passed over), never its validity. ``start``: where the search begins, e.g. a length a plan is known
    to reach (every instant below it packs, so solves there are wasted); any ``start`` gives a valid bound.
    ``search``: ``scan`` tests the instants in order and returns the first proven one; ``bisect`` halves the range
    between ``start`` and the smallest instant proven so far (packable or undecided: go up; proven: go down), which
    reaches far above ``start`` with few solves (packability is not monotone in ``j``, so bisecting may miss a
    smaller proven instant, never return an unproven one)."""
    if start < 0:
        raise ValueError(f"start must be at least 0, got {start}")
    if search not in ("scan", "bisect"):
        raise ValueError(f"search must be scan or bisect, got {search!r}")
    bound = packing_bound(inst)
    solves = 0
    if search == "bisect":
        lo, hi = start, bound  # hi: the packing bound or an instant proven not packable
        while lo < hi and solves < max_solves:
            j = (lo + hi) // 2
            if not greedy_packs(inst, j):
                solves += 1
                if instant_packable(inst, j, time_limit_s) is False:
                    hi = j
                    continue
            lo = j + 1
        return hi
    for j in range(start, bound):
        if greedy_packs(inst, j):
            continue
        if solves >= max_solves:
            break
        solves += 1
        if instant_packable(inst, j, time_limit_s) is False:
            return j
    return bound


def episode_bounds(
    cluster: NumaCluster, trace: PreparedTrace, scenario: Scenario, episodes: int, seed: int, kind: str = "aggregate"
) -> list[int]:
    """:func:`aggregate_bound` (``kind``: ``packing``, the tighter :func:`packing_bound`, seconds per episode at 50
    machines; ``repack``, :func:`repack_bound` with its defaults, up to a minute and more) of each episode of
    :func:`dcplace.sim.episodes.run_episodes` with the same arguments (same starts), over at most
    ``scenario.max_requests`` requests when it is set. Non-Expansion, end rule ``first-failure`` only
    (a ValueError otherwise: the bound would not hold)."""
    if scenario.mode != "non-expansion" or scenario.end != "first-failure":
        raise ValueError("the hindsight bound holds for Non-Expansion episodes ending at the first failure only")
    bounds = {"aggregate": aggregate_bound, "packing": packing_bound, "repack": repack_bound}
    if kind not in bounds:
        raise ValueError(f"kind must be one of {', '.join(bounds)}, got {kind!r}")
    bound = bounds[kind]
    sim = NumaSim(cluster, trace, scenario)
    limit = scenario.max_requests or len(trace.table)
    out = []
    for i in range(episodes):
        ok = sim.reset(seed=start_seed(seed, i)) == K.DECIDE
        out.append(bound(instance_from_sim(sim, limit)) if ok else 0)
    return out


def _actions(inst: HindsightInstance, j: int) -> list[int]:
    """Actions that could ever host request ``j`` (on an empty cluster): nodes, or machine * K for multi-NUMA."""
    m_count, k = inst.capacity.shape[:2]
    d = inst.demand[j]
    if inst.multi[j]:
        return [m * k for m in range(m_count) if np.all(inst.capacity[m] + _TOL >= d / k)]
    return [m * k + node for m in range(m_count) for node in range(k) if np.all(inst.capacity[m, node] + _TOL >= d)]


def _share(inst: HindsightInstance, j: int, a: int) -> list[tuple[int, int, F64]]:
    """``(machine, node, amount)`` that request ``j`` takes at action ``a``."""
    k = inst.capacity.shape[1]
    m = a // k
    if inst.multi[j]:
        return [(m, node, inst.demand[j] / k) for node in range(k)]
    return [(m, a % k, inst.demand[j])]


def brute_force_length(inst: HindsightInstance) -> int:
    """L* by searching every online choice (exponential; for tests on a handful of requests)."""
    n = inst.requests
    best = 0

    def free_at(j: int, chosen: list[int]) -> F64:
        free = inst.capacity - inst.fixed_use(j)
        live = inst.live_scored(j)
        for i, a in enumerate(chosen):
            if live[i]:
                for m, node, amount in _share(inst, i, a):
                    free[m, node] -= amount
        return free

    def search(chosen: list[int]) -> None:
        nonlocal best
        best = max(best, len(chosen))
        j = len(chosen)
        if j == n or best == n:
            return
        for a in _actions(inst, j):
            free = free_at(j, [*chosen, a])
            if np.all(free >= -_TOL):
                search([*chosen, a])

    search([])
    return best


@dataclass(frozen=True)
class ExactResult:
    """CP-SAT's answer: ``value`` placed requests; ``bound`` its proven upper bound (== value when ``optimal``)."""

    value: int
    bound: int
    optimal: bool
    wall_s: float


@dataclass(frozen=True)
class WindowPlan(ExactResult):
    """A hindsight plan of a window: ``actions[j]`` is where request ``j`` goes (a node ``m * K + k``, or ``m * K``
    for a multi-NUMA VM; -1 past the placed prefix), ``value`` the placed prefix, ``kept`` how many placed requests
    take the preferred action."""

    actions: I64  # (n,)
    kept: int


def _room_actions(inst: HindsightInstance, j: int) -> list[int]:
    """Actions of request ``j`` where the VMs fixed at the window's start and live at its arrival leave room (the
    placed scored requests only take more, so no plan loses an action by this pruning)."""
    room = inst.capacity - inst.fixed_use(j)
    k = inst.capacity.shape[1]
    d = inst.demand[j]
    if inst.multi[j]:
        return [m * k for m in range(room.shape[0]) if np.all(room[m] + _TOL >= d / k)]
    return [m * k + node for m in range(room.shape[0]) for node in range(k) if np.all(room[m, node] + _TOL >= d)]


def _prefix_model(inst: HindsightInstance, actions: list[list[int]]) -> tuple[Any, list[dict[int, Any]], list[Any]]:
    """The time-indexed CP-SAT model of the module docstring over the given actions of each request: returns
    ``(model, x, placed)`` without an objective."""
    from ortools.sat.python import cp_model  # only here: ortools and highspy cannot share a process

    n = inst.requests
    scale = 1000.0  # capacities and demands to integers (milli-cores, MB): exact for the traces' values
    model = cp_model.CpModel()
    # Variables: x[j][a] = request j placed at action a; placed[j] = it is placed at all.
    x = [{a: model.new_bool_var(f"x{j}_{a}") for a in actions[j]} for j in range(n)]
    placed = [model.new_bool_var(f"placed{j}") for j in range(n)]
    for j in range(n):
        # A request is placed at most once, and placed exactly when one of its actions is taken.
        model.add(sum(x[j].values()) == placed[j])
        # The episode is a prefix: request j + 1 only if request j.
        if j + 1 < n:
            model.add(placed[j + 1] <= placed[j])
    # Capacity at every arrival: warm VMs still live plus the live placed requests fit every node and resource.
    # Use on a node only grows at an arrival placed there, so the nodes request j can take are the ones to check.
    for j in range(n):
        room = np.floor((inst.capacity - inst.fixed_use(j)) * scale + 1e-6).astype(np.int64)
        own = {(m, node) for a in x[j] for m, node, _ in _share(inst, j, a)}
        live = np.flatnonzero(inst.live_scored(j))
        terms: dict[tuple[int, int, int], list[tuple[int, Any]]] = {}
        for i in live:
            for a, var in x[i].items():
                for m, node, amount in _share(inst, int(i), a):
                    if (m, node) in own:
                        for r in range(2):
                            terms.setdefault((m, node, r), []).append((round(float(amount[r]) * scale), var))
        for (m, node, r), lin in terms.items():
            model.add(sum(c * v for c, v in lin) <= int(room[m, node, r]))
    return model, x, placed


@dataclass
class WindowModel:
    """The CP-SAT model of a window (:func:`window_model`), its variables, and how to read a plan from a solver."""

    model: Any  # cp_model.CpModel
    x: list[dict[int, Any]]  # x[j][a]: request j at action a
    placed: list[Any]  # placed[j]
    keep: list[Any]  # x[j][prefer_j] of the requests whose preferred action is in the model
    big: int  # n + 1: the weight of one placed request in the objective

    def decode(self, solver: Any, status: str, wall_s: float) -> WindowPlan:
        """The plan in ``solver`` after a solve that ended with ``status`` (optimal, feasible, infeasible, unknown);
        a solve that timed out before any solution gives the empty plan (value 0) with CP-SAT's bound."""
        n = len(self.x)
        chosen = np.full(n, -1, np.int64)
        if status == "infeasible":
            raise RuntimeError("CP-SAT calls the window infeasible; the empty prefix is feasible")
        bound = int(np.floor(solver.best_objective_bound / self.big + 1e-9))
        if status not in ("optimal", "feasible"):
            return WindowPlan(value=0, bound=bound, optimal=False, wall_s=wall_s, actions=chosen, kept=0)
        for j in range(n):
            for a, var in self.x[j].items():
                if solver.boolean_value(var):
                    chosen[j] = a
        value = int((chosen >= 0).sum())
        kept = sum(int(solver.boolean_value(v)) for v in self.keep)
        return WindowPlan(value=value, bound=max(bound, value), optimal=status == "optimal", wall_s=wall_s,
                          actions=chosen, kept=kept)  # fmt: skip


def window_model(
    inst: HindsightInstance, prefer: I64 | None = None, allowed: list[I64 | None] | None = None
) -> WindowModel:
    """The model of a hindsight-optimal plan of the window ``inst`` (:func:`instance_at`): the longest placeable
    prefix, and among the plans placing it the one keeping most preferred actions ``prefer[j]`` (-1: none; e.g. a
    policy's own choices, so the plan departs from them only where the future needs it). ``allowed[j]``, when given
    and not None, restricts request ``j`` to those actions (e.g. a policy's candidates: the plan is then optimal among
    the plans such a policy could follow, and the model stays small over long windows).

    Objective: ``max (n + 1) * sum_j placed_j + sum_j x[j, prefer_j]`` (the tie-break can never buy a shorter
    prefix); the preferred actions are a complete solution hint. Solved by :func:`exact_length` here, and by
    :func:`dcplace.learn.hindsight_learning.plan_window` through :func:`dcplace.placement.cpsat.run_cp` (the
    simulator layer does not import the optimiser's)."""
    n = inst.requests
    k = inst.capacity.shape[1]
    if prefer is not None:  # a multi-NUMA request's action is its machine's node 0 here (any node names it)
        prefer = np.where(inst.multi & (prefer >= 0), prefer - prefer % k, prefer)
    actions = [_room_actions(inst, j) for j in range(n)]
    if allowed is not None:
        for j, only in enumerate(allowed[:n]):
            if only is not None:
                keep_j = {int(a) - (int(a) % k if inst.multi[j] else 0) for a in only}
                keep_j |= {int(prefer[j])} if prefer is not None else set()
                actions[j] = [a for a in actions[j] if a in keep_j]
    model, x, placed = _prefix_model(inst, actions)
    keep = []
    if prefer is not None:
        for j in range(n):
            a = int(prefer[j])
            if a in x[j]:
                keep.append(x[j][a])
        # The preferred actions as a complete hint: the prefix they place, every other variable 0.
        hinted = 0
        while hinted < n and int(prefer[hinted]) in x[hinted]:
            hinted += 1
        for j in range(n):
            model.add_hint(placed[j], int(j < hinted))
            for a, var in x[j].items():
                model.add_hint(var, int(j < hinted and a == int(prefer[j])))
    big = n + 1
    model.maximize(big * sum(placed) + sum(keep))
    return WindowModel(model, x, placed, keep, big)


def exact_length(inst: HindsightInstance, time_limit_s: float = 10.0, seed: int = 0) -> ExactResult:
    """L* by CP-SAT (module docstring), or CP-SAT's proven bound when ``time_limit_s`` runs out."""
    from ortools.sat.python import cp_model  # only here: ortools and highspy cannot share a process

    wm = window_model(inst)
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = int(seed)
    # CP-SAT's own SIGINT handler resets SIGINT to the C default when the solve ends, after which Ctrl-C kills the
    # process instead of raising KeyboardInterrupt (what the CLI's exit 130 and the atomic outputs rely on).
    solver.parameters.catch_sigint_signal = False
    status = solver.solve(wm.model)
    names = {cp_model.OPTIMAL: "optimal", cp_model.FEASIBLE: "feasible", cp_model.INFEASIBLE: "infeasible"}
    plan = wm.decode(solver, names.get(status, "unknown"), solver.wall_time)
    if plan.value == 0 and status not in names:
        raise RuntimeError(f"CP-SAT found no solution ({solver.status_name(status)}); the empty prefix is feasible")
    return ExactResult(value=plan.value, bound=plan.bound, optimal=plan.optimal, wall_s=plan.wall_s)


@dataclass(frozen=True)
class NoMigrationResult:
    """:func:`no_migration_check`'s answer for requests ``0..k-1``: ``status`` ``feasible`` (``actions`` a plan that
    places all ``k``, re-checked by :func:`replay_plan`: ``L* >= k``), ``infeasible`` (a proof that no plan places
    them: ``L* < k``) or ``unknown`` (undecided within the time limit). ``by`` says what decided it: ``cp-sat``,
    ``packing-bound`` (:func:`packing_bound` ``< k``, a relaxation with migration), ``no-room`` (a request fits no
    node even beside the warm VMs alone), ``hint`` (the hint itself places all ``k``), or ``""``. ``exact``: the
    model's integers are the instance's values exactly (otherwise CP-SAT's ``infeasible`` is reported as
    ``unknown``)."""

    status: str
    k: int
    actions: I64 | None  # (k,) when feasible: node m * K + n, or m * K for a multi-NUMA VM
    wall_s: float
    exact: bool
    by: str


def _live_ends(inst: HindsightInstance, k: int) -> tuple[I64, I64]:
    """In request-index time over requests ``0..k-1``: ``end[i]`` the first request at whose arrival scored request
    ``i`` is no longer live (it is live at ``i..end[i]-1``), and ``fixed_end[w]`` the same for warm VM ``w`` (live at
    ``0..fixed_end[w]-1``). Departures before creations at equal times, as :meth:`HindsightInstance.live_scored`."""
    arrival = inst.arrival[:k]
    if not inst.release:
        return np.full(k, k, np.int64), np.full(len(inst.fixed_departure), k, np.int64)
    end = np.maximum(np.searchsorted(arrival, inst.departure[:k], side="left"), np.arange(k) + 1)
    return end.astype(np.int64), np.searchsorted(arrival, inst.fixed_departure, side="left").astype(np.int64)


def _parts(inst: HindsightInstance, k: int) -> tuple[F64, F64]:
    """What each of requests ``0..k-1`` and each warm VM takes from one node: ``(k, 2)`` and ``(w, 2)``."""
    K_ = inst.capacity.shape[1]
    req = np.where(inst.multi[:k, None], inst.demand[:k] / K_, inst.demand[:k])
    fixed = np.where((inst.fixed_node < 0)[:, None], inst.fixed_demand / K_, inst.fixed_demand)
    return req, fixed


def _integer_scale(values: F64, max_denominator: int = 10_000) -> int | None:
    """The smallest integer ``s`` with every ``s * v`` an integer (``v`` read as the fraction it is within float
    precision, e.g. 4/3 cores of a shared VM), or None when some value is no such fraction."""
    from fractions import Fraction
    from math import lcm

    s = 1
    for v in np.unique(values):
        f = Fraction(float(v)).limit_denominator(max_denominator)
        if abs(float(f) - float(v)) > 1e-12 * max(1.0, abs(float(v))):
            return None
        s = lcm(s, f.denominator)
        if s > 10**6:
            return None
    return s


def replay_plan(inst: HindsightInstance, actions: I64) -> int:
    """An independent check of a no-migration plan of requests ``0..len(actions)-1``: at every arrival, the warm VMs
    and the placed requests live then (:meth:`HindsightInstance.live_scored`), each where the plan put it, must fit
    every node (a tolerance of 1e-9). Returns the first request at whose arrival some node is over its capacity or
    whose action does not exist, or -1 when the plan fits."""
    M, K_, _ = inst.capacity.shape
    k = len(actions)
    part, _ = _parts(inst, k)
    acts = np.asarray(actions, np.int64)
    if np.any((acts < 0) | (acts >= M * K_)):
        return int(np.flatnonzero((acts < 0) | (acts >= M * K_))[0])
    machine = acts // K_
    for j in range(k):
        use = inst.capacity - inst.fixed_use(j)
        live = np.flatnonzero(inst.live_scored(j))
        single = live[~inst.multi[live]]
        np.subtract.at(use, (machine[single], acts[single] % K_), part[single])
        multi = live[inst.multi[live]]
        for n in range(K_):
            np.subtract.at(use, (machine[multi], np.full(len(multi), n)), part[multi])
        if np.any(use < -K.FIT_TOL):  # the simulator's own tolerance: a plan accepted here is one it accepts
            return j
    return -1


def simulator_replay(sim: NumaSim, plan: npt.ArrayLike) -> str:
    """Step the simulator itself through ``plan`` from ``sim``'s current decision (on a copy; ``sim`` must wait at
    the first request of the plan): ``ok`` when it places every request of the plan, else where and by how much it
    refused. The second, independent check of a plan beside :func:`replay_plan` (that one re-adds the plan's loads
    in numpy; this one is the simulator the policies run in, so ``ok`` means a scheduler taking these actions gets
    this length)."""
    s = sim.copy()
    acts = np.asarray(plan, np.int64)
    for j, a in enumerate(acts):
        if s.status != K.DECIDE:
            return f"ended before request {j}"
        v = s.view()
        if not 0 <= a < v.machines * v.numa:
            return f"request {j}: action {int(a)} does not exist"
        m = int(a) // v.numa
        need = v.demand / v.numa if v.multi else v.demand
        free = v.free[m] if v.multi else v.free[m, int(a) % v.numa][None]
        if s.step(int(a)) == K.INVALID:
            return f"refused request {j} at {int(a)}: min(free - need) = {float((free - need).min()):.3g}"
    return "ok" if int(s.ctr[K.C_LENGTH]) == len(acts) else "short"


def _symmetric_machines(inst: HindsightInstance, fixed_end: I64) -> list[list[int]]:
    """Groups (two or more, increasing) of machines that no plan can tell apart: the same capacities and no warm VM
    live on them at the first arrival (warm VMs only leave, so never one)."""
    M = inst.capacity.shape[0]
    warm = np.zeros(M, bool)
    warm[inst.fixed_machine[fixed_end > 0]] = True
    groups: dict[bytes, list[int]] = {}
    for m in np.flatnonzero(~warm):
        groups.setdefault(inst.capacity[m].tobytes(), []).append(int(m))
    return [g for g in groups.values() if len(g) > 1]


def canonical_plan(inst: HindsightInstance, actions: I64, groups: list[list[int]]) -> I64:
    """The plan ``actions`` (-1: none) with the machines of each group relabelled in the order of their first use and,
    on every machine of a group whose nodes have equal capacities, the nodes in the order of their first single-NUMA
    VM: the representative that :func:`no_migration_check`'s symmetry breaking keeps (the same placements up to
    interchangeable machines and nodes, so it fits exactly when ``actions`` does)."""
    K_ = inst.capacity.shape[1]
    acts = np.asarray(actions, np.int64).copy()
    placed = acts >= 0
    machine = np.where(placed, acts // K_, -1)
    node = np.where(placed, acts % K_, -1)
    new_machine = machine.copy()
    for g in groups:
        first = {m: np.flatnonzero(machine == m) for m in g}
        order = sorted(g, key=lambda m: int(first[m][0]) if len(first[m]) else len(acts) + g.index(m))
        for src, dst in zip(order, g, strict=True):
            new_machine[machine == src] = dst
    new_node = node.copy()
    for g in groups:
        for m in g:
            if not np.all(inst.capacity[m] == inst.capacity[m, 0]):
                continue
            on = np.flatnonzero((new_machine == m) & ~inst.multi[: len(acts)])
            seen: list[int] = []
            for i in on:
                if int(node[i]) not in seen:
                    seen.append(int(node[i]))
            perm = {old: new for new, old in enumerate(seen + [n for n in range(K_) if n not in seen])}
            for i in on:
                new_node[i] = perm[int(node[i])]
    multi = inst.multi[: len(acts)]
    return np.where(placed, new_machine * K_ + np.where(multi, 0, new_node), -1).astype(np.int64)


def no_migration_check(
    inst: HindsightInstance,
    k: int,
    time_limit_s: float = 60.0,
    seed: int = 0,
    hint: I64 | None = None,
    symmetry: bool = False,
    precheck: bool = True,
    float_safe: bool = False,
    closest: bool = False,
) -> NoMigrationResult:
    """Whether requests ``0..k-1`` can ALL be placed at their arrivals without ever moving a VM, the warm VMs fixed
    where they are: ``feasible`` (``L* >= k``, with a plan re-checked by :func:`replay_plan`), ``infeasible``
    (``L* < k``, proved) or ``unknown`` after about ``time_limit_s`` (CP-SAT, one worker, ``seed``).

    With ``precheck``, first (cheap, seconds at 50 machines): :func:`packing_bound` ``< k`` proves ``infeasible``,
    and a ``hint`` that already places all ``k`` (:func:`replay_plan`) proves ``feasible``.

    The model (decision form: every request placed, no ``placed`` variables): ``x[i, a]`` request ``i`` at action
    ``a``, ``sum_a x[i, a] == 1``, the actions pruned to where the warm VMs live at its arrival leave room (as
    :func:`_room_actions`: warm VMs only leave). Time is the request index: request ``i`` is live at the arrivals
    ``i..end_i - 1`` (:func:`_live_ends`; the simulator's order, departures before creations at equal times), a warm
    VM at ``0..fixed_end - 1``. Per node and resource, one CP-SAT cumulative over the optional fixed intervals
    ``[i, end_i)``, each present when ``x[i, a]`` (a multi-NUMA request's machine variable is present on every node of
    the machine with ``demand / K``), the warm VMs as fixed intervals ``[0, fixed_end)``, capacity the node's.
    Measured against linear constraints at the *maximal* arrivals only (an arrival after which some VM leaves, and
    the last: between them the live set only grows), chained ``u_t = u_{t-1} + arrived - left <= room_t``: on two
    held-out episodes at 50 machines (docs/cvd-rl.md, "A no-migration check") the cumulative model found plans at
    k = 440, 610 and 620 in 8-12 s where the linear one found none in 60 s, so only the cumulative one is kept.

    Integers: each resource is scaled by the smallest integer that makes every capacity and per-node share an
    integer (:func:`_integer_scale`); the traces' values are such fractions (whole GB; cores in thirds for the shared
    small VMs, 4/3 and 8/3), so the model is the instance itself. A value that is no such fraction falls back to
    1/1000 with demands rounded up and capacities down: a plan found still fits, CP-SAT's ``infeasible`` is then
    reported as ``unknown``.

    ``float_safe``: every request's share of a resource whose values are not dyadic (cores in thirds) takes 1/1000
    of a unit more, so each placement of a plan found leaves a margin far above float error; CP-SAT's ``infeasible``
    is then reported as ``unknown``. Made for a simulator that compares floats exactly, where a node's free CPU
    carries the rounding of every third of a core ever placed on it and exact fits were refused (free - need =
    -3.6e-15 at 50 machines, docs/cvd-rl.md). ``NumaSim`` compares to ``numa_kernel.FIT_TOL`` since 2026-11-26 and
    accepts the exact plans, so the default (off) is what to use with it; the option stays for simulators that do
    not.

    ``symmetry`` (off by default: on the same episodes it doubled CP-SAT's presolve and slowed or lost the plans,
    and decided no infeasible case): the machines of :func:`_symmetric_machines` (same capacities, no warm VM) are
    used in index order (the first request on machine ``t + 1`` of a group comes after the first on machine ``t``),
    and on each with equal node capacities node ``n + 1`` takes a single-NUMA VM only after node ``n`` has. Every plan
    has such a representative (:func:`canonical_plan`), so feasibility is unchanged. ``hint`` (per request, -1: none;
    e.g. a heuristic's choices) is made canonical and given to CP-SAT as a partial solution hint.

    ``closest`` (with a ``hint``): among the plans, the one that agrees with the hint on the most requests (CP-SAT
    maximises the count within the time limit; the best plan found is returned, ``feasible`` as before). A plain
    feasibility plan is an arbitrary one among many (docs/cvd-rl.md, "A plan as a teacher?": 7.6 % agreement with
    Best-Fit's choices on one episode); the closest plan's departures from a heuristic are the ones the future
    needs."""
    from ortools.sat.python import cp_model  # only here: ortools and highspy cannot share a process

    t0 = time.perf_counter()
    M, K_, _ = inst.capacity.shape
    k = max(min(int(k), inst.requests), 0)

    def answer(status: str, by: str, plan: I64 | None = None, exact: bool = True) -> NoMigrationResult:
        return NoMigrationResult(status, k, plan, time.perf_counter() - t0, exact, by)

    h = np.full(k, -1, np.int64)
    if hint is not None:
        n_h = min(k, len(hint))
        h[:n_h] = np.asarray(hint, np.int64)[:n_h]
        h = np.where(inst.multi[:k] & (h >= 0), h - h % K_, h)
    if k == 0:
        return answer("feasible", "hint", h)
    if precheck:
        if np.all(h >= 0) and replay_plan(inst, h) < 0:
            return answer("feasible", "hint", h)
        if packing_bound(inst) < k:
            return answer("infeasible", "packing-bound")
    end, fixed_end = _live_ends(inst, k)
    req_part, fixed_part = _parts(inst, k)
    fixed_on = np.flatnonzero(fixed_end > 0)
    # Integers, per resource: exact where every value is a small fraction (the traces'), else conservative.
    exact = True
    cap_i = np.zeros(inst.capacity.shape, np.int64)
    req_i = np.zeros((k, 2), np.int64)
    fix_i = np.zeros(fixed_part.shape, np.int64)
    for r in range(2):
        s = _integer_scale(np.r_[inst.capacity[..., r].ravel(), req_part[:, r], fixed_part[fixed_on, r]])
        if s is not None and float_safe and s & (s - 1):  # not a power of two: float sums of such values round
            exact = False
            cap_i[..., r] = np.round(inst.capacity[..., r] * s * 1000)
            req_i[:, r] = np.round(req_part[:, r] * s * 1000) + 1
            fix_i[:, r] = np.round(fixed_part[:, r] * s * 1000)
        elif s is not None:
            cap_i[..., r] = np.round(inst.capacity[..., r] * s)
            req_i[:, r] = np.round(req_part[:, r] * s)
            fix_i[:, r] = np.round(fixed_part[:, r] * s)
        else:
            exact = False
            cap_i[..., r] = np.floor(inst.capacity[..., r] * 1000 + 1e-6)
            req_i[:, r] = np.ceil(req_part[:, r] * 1000 - 1e-6)
            fix_i[:, r] = np.ceil(fixed_part[:, r] * 1000 - 1e-6)
    # The warm VMs' nodes, and their use of every node at every arrival (a difference array over request time).
    w_nodes = {
        int(w): [(int(inst.fixed_machine[w]), int(inst.fixed_node[w]))]
        if inst.fixed_node[w] >= 0
        else [(int(inst.fixed_machine[w]), n) for n in range(K_)]
        for w in fixed_on
    }
    step = np.zeros((k + 1, M, K_, 2), np.int64)
    for w, nodes in w_nodes.items():
        for m, n in nodes:
            step[0, m, n] += fix_i[w]
            step[min(int(fixed_end[w]), k), m, n] -= fix_i[w]
    room = cap_i[None] - np.cumsum(step, axis=0)[:k]  # (k, M, K, 2)
    actions: list[list[int]] = []
    for i in range(k):
        fit = np.all(room[i] >= req_i[i], axis=-1)  # (M, K)
        acts = [m * K_ for m in np.flatnonzero(fit.all(axis=1))] if inst.multi[i] else np.flatnonzero(fit.ravel())
        actions.append([int(a) for a in acts])
        if not actions[-1]:
            return answer("infeasible" if exact else "unknown", "no-room" if exact else "", exact=exact)
    model = cp_model.CpModel()
    x = [{a: model.new_bool_var(f"x{i}_{a}") for a in actions[i]} for i in range(k)]
    for i in range(k):
        model.add_exactly_one(x[i].values())
    # Capacity: one cumulative per node and resource over request time.
    on_node: dict[tuple[int, int], list[tuple[int, Any]]] = {}
    for i in range(k):
        for a, var in x[i].items():
            for n in range(K_) if inst.multi[i] else [a % K_]:
                on_node.setdefault((a // K_, n), []).append((i, var))
    interval: dict[int, Any] = {}
    for (m, n), terms in on_node.items():
        for r in range(2):
            ivs, demands = [], []
            for i, var in terms:
                if req_i[i, r] > 0:
                    if var.index not in interval:
                        interval[var.index] = model.new_optional_fixed_size_interval_var(i, int(end[i] - i), var, "")
                    ivs.append(interval[var.index])
                    demands.append(int(req_i[i, r]))
            if not ivs:
                continue
            warm: dict[int, int] = {}  # the warm VMs' use of this node by the request time they leave
            for w, nodes in w_nodes.items():
                if (m, n) in nodes and fix_i[w, r] > 0:
                    e = min(int(fixed_end[w]), k)
                    warm[e] = warm.get(e, 0) + int(fix_i[w, r])
            for e, d in warm.items():
                ivs.append(model.new_fixed_size_interval_var(0, e, ""))
                demands.append(d)
            model.add_cumulative(ivs, demands, int(cap_i[m, n, r]))
    groups = _symmetric_machines(inst, fixed_end) if symmetry else []
    if groups:
        _break_symmetry(model, inst, x, groups)
    h = canonical_plan(inst, h, groups)
    for i in range(k):
        if h[i] in x[i]:
            for a, var in x[i].items():
                model.add_hint(var, int(a == h[i]))
    if closest:
        model.maximize(sum(x[i][int(h[i])] for i in range(k) if h[i] in x[i]))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = max(float(time_limit_s) - (time.perf_counter() - t0), 0.1)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = int(seed)
    solver.parameters.catch_sigint_signal = False  # see exact_length
    status = solver.solve(model)
    if status in (cp_model.OPTIMAL, cp_model.FEASIBLE):
        plan = np.array([next(a for a, v in x[i].items() if solver.boolean_value(v)) for i in range(k)], np.int64)
        bad = replay_plan(inst, plan)
        if bad >= 0:
            raise RuntimeError(f"CP-SAT's plan overloads a node at request {bad}: a modelling error")
        return answer("feasible", "cp-sat", plan, exact)
    if status == cp_model.INFEASIBLE and exact:
        return answer("infeasible", "cp-sat")
    return answer("unknown", "", exact=exact)


def _break_symmetry(model: Any, inst: HindsightInstance, x: list[dict[int, Any]], groups: list[list[int]]) -> None:
    """The symmetry breaking of :func:`no_migration_check` (``symmetry``), the order :func:`canonical_plan` gives:
    ``use(i, hi) <= y_lo[i - 1]`` with ``y_lo[i] <= y_lo[i - 1] + use(i, lo)`` (``y_lo[i]`` can be 1 only when machine
    ``lo`` took a request ``<= i``) for consecutive machines ``lo < hi`` of a group, and the same per node for the
    single-NUMA requests on each machine of a group whose nodes have equal capacities."""
    K_ = inst.capacity.shape[1]
    by_machine = [{} for _ in x]  # type: list[dict[int, list[Any]]]
    for i, xi in enumerate(x):
        for a, var in xi.items():
            by_machine[i].setdefault(a // K_, []).append(var)

    def chain(first: list[Any], then: list[Any]) -> None:
        """Per request: ``then[i]`` (a sum of literals) only after some ``first[i' < i]``."""
        before: Any = 0
        for f, t in zip(first, then, strict=True):
            if t is not None and not isinstance(t, int):
                model.add(t <= before)
            y = model.new_bool_var("")
            model.add(y <= before + (f if f is not None else 0))
            before = y

    for g in groups:
        for lo, hi in itertools.pairwise(g):
            chain([sum(by_machine[i].get(lo, [])) for i in range(len(x))],
                  [sum(by_machine[i].get(hi, [])) for i in range(len(x))])  # fmt: skip
        for m in g:
            if not np.all(inst.capacity[m] == inst.capacity[m, 0]):
                continue
            singles = [i for i in range(len(x)) if not inst.multi[i]]
            for n in range(K_ - 1):
                chain([x[i].get(m * K_ + n) for i in singles], [x[i].get(m * K_ + n + 1) for i in singles])


def window_bound(
    inst: HindsightInstance, lo: int, hi: int, window: int = 20, time_limit_s: float = 30.0, max_solves: int = 8
) -> tuple[int, list[dict[str, Any]]]:
    """A proven upper bound on L* at most ``hi`` (itself one, e.g. :func:`repack_bound`), given that ``lo`` is
    reachable (a plan's length; only steers the search): bisects ``k`` in ``(lo, hi]``, each time
    :func:`instants_packable` at the ``window`` arrivals before ``k`` (the VMs live before them placed freely, none
    moving after: a relaxation between the repack bound's single instant and the full no-migration check); a proof
    lowers the bound to ``k - 1``, anything else moves the search up. At most ``max_solves`` checks of
    ``time_limit_s``; returns the bound and one record per check (``k``, ``status``, ``s``). The result depends on
    the time limit, never its validity."""
    if window < 1 or not 0 <= lo <= hi:
        raise ValueError(f"need window >= 1 and 0 <= lo <= hi, got window {window}, lo {lo}, hi {hi}")
    checks = []
    for _ in range(max_solves):
        if lo >= hi:
            break
        k = (lo + hi + 1) // 2
        t0 = time.perf_counter()
        packs = instants_packable(inst, list(range(max(0, k - window), k)), time_limit_s)
        status = {True: "packable", False: "infeasible", None: "unknown"}[packs]
        checks.append({"k": k, "status": status, "s": round(time.perf_counter() - t0, 1)})
        if packs is False:
            hi = k - 1
        else:
            lo = k
    return hi, checks
