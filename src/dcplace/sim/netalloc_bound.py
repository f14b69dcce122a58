"""How many of an episode's requests any allocator could accept: a clairvoyant upper bound, and two references.

The Nara paper compares acceptance ratios only with each other; a margin over a baseline says nothing about how
much was there to win. For one episode of :class:`~dcplace.sim.netalloc.NetAllocSim` (request ``t`` arrives at
step ``t`` and, once accepted, holds its CPU, memory and bandwidth until the start of step ``t + hold``):

* :func:`acceptance_bound`: the largest number of requests that *any* allocator could accept knowing the whole
  episode in advance, of a relaxation. The cluster is pooled: a request may take its CPU and memory from any servers
  in any shares (the simulator's ``min(free, still needed)`` picks can split a request over servers arbitrarily, so
  pooling loses only the network and integrality of servers), and the network enters only through the server
  uplinks: a request larger than one server's CPU or memory spans at least ``n_min`` servers, each of whose uplinks
  carries its bandwidth, so the live multi-server requests need ``sum n_min * bw`` of the servers' total uplink
  capacity (one request on one server uses no bandwidth, as in the simulator). CP-SAT maximises the number of
  accepted requests subject to, at every step, the live accepted requests fitting the pooled CPU, memory and uplink
  capacity; a constraint is kept only at the steps after which some request leaves (between departures the live
  set only grows). The answer's ``bound`` is the relaxation's optimum where CP-SAT proves it (alpha to gamma, under
  2 s), otherwise a proven bound on it (CP-SAT's, or the LP relaxation's by GLOP: delta, under 2 s), so it holds
  for every allocator, online or not, learned or not. Tests (``tests/sim/test_netalloc_bound.py``, hypothesis):
  CP-SAT's optimum equals a brute force over every subset checked at every step, the LP's is never below it, and no
  policy ever accepts more.
* :func:`pooled_greedy`: the same pooled cluster, *online*: accept every request whose CPU and memory are free in
  total, optionally only those at most ``admit`` units in both. Not a bound (an allocator that fails a request
  keeps room for later ones), but the acceptance of a perfect packer without a network that never refuses what
  fits: a learned allocator that matches it has nothing left to gain except by refusing requests on purpose.

docs/netalloc.md ("How much was there to win") has the measurements.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dcplace.cluster.topology import Topology
from dcplace.errors import InputError
from dcplace.sim.netalloc_episodes import episode_requests
from dcplace.workload.netreq import NetRequests

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class AcceptanceBound:
    """:func:`acceptance_bound`'s answer for one episode: ``bound`` (proven: no allocator accepts more),
    ``accepted`` (the best selection CP-SAT found for the relaxation, ``<= bound``; equal when ``status`` is
    ``optimal``; 0 when ``status`` is ``lp``: the bound is the LP's), ``requests`` and the wall time."""

    bound: int
    accepted: int
    requests: int
    status: str
    wall_s: float

    @property
    def ratio(self) -> float:
        """The bound as an acceptance ratio."""
        return self.bound / self.requests if self.requests else 0.0


def servers_needed(topology: Topology, requests: NetRequests) -> IntArray:
    """The fewest servers each request can span: its CPU and memory over the largest server's, rounded up."""
    cmax, mmax = int(topology.server_cpu.max()), int(topology.server_mem.max())
    return np.maximum(-(-requests.cpu // cmax), -(-requests.mem // mmax)).astype(np.int64)


def uplink_capacity(topology: Topology) -> int:
    """The servers' total uplink bandwidth (micro-units): every link with a server at one end."""
    s = topology.n_servers
    touches = (topology.link_u < s) | (topology.link_v < s)
    return int(topology.link_cap[touches].sum())


def binding_steps(requests: NetRequests) -> list[IntArray]:
    """The live requests at each step after which some request leaves (and at the last step): the only steps whose
    capacity constraints are not implied by a later one's (between two departures the live set only grows)."""
    n = len(requests)
    end = np.arange(n, dtype=np.int64) + requests.hold
    leaves = np.zeros(n + 1, dtype=bool)
    leaves[np.minimum(end, n)] = True  # a request leaves at the start of step end
    out: list[IntArray] = []
    for s in range(n):
        if leaves[s + 1] or s == n - 1:
            out.append(np.flatnonzero(end[: s + 1] > s).astype(np.int64))
    return out


def _constraints(
    topology: Topology, requests: NetRequests, max_steps: int | None
) -> tuple[list[tuple[IntArray, IntArray, int]], npt.NDArray[np.bool_]]:
    """The relaxation's rows ``(requests, weights, capacity)``, only those the live requests can exceed, and which
    requests can never be accepted (larger than the cluster, or than its uplinks)."""
    caps = (int(topology.server_cpu.sum()), int(topology.server_mem.sum()), uplink_capacity(topology))
    spans = servers_needed(topology, requests)
    # a request's bandwidth on the uplinks it must use: none on one server, n_min * bw when it must span servers
    up_use = np.where(spans >= 2, spans * requests.bw, 0).astype(np.int64)
    uses = (requests.cpu, requests.mem, up_use)
    never = np.zeros(len(requests), dtype=bool)
    for use, cap in zip(uses, caps, strict=True):
        never |= use > cap
    steps = binding_steps(requests)
    if max_steps is not None and len(steps) > max_steps:
        keep = np.unique(np.linspace(0, len(steps) - 1, max_steps).round().astype(np.int64))
        steps = [steps[int(i)] for i in keep]
    rows = []
    for live in steps:
        for use, cap in zip(uses, caps, strict=True):
            w = use[live]
            if int(w.sum()) > cap:
                rows.append((live, w, cap))
    return rows, never


def acceptance_bound(
    topology: Topology,
    requests: NetRequests,
    time_limit_s: float = 10.0,
    seed: int = 0,
    max_steps: int | None = 400,
    method: str = "auto",
) -> AcceptanceBound:
    """The clairvoyant pooled bound of the module docstring for one episode. ``method``: ``cp-sat`` (the
    relaxation's integer optimum, or CP-SAT's proven bound when ``time_limit_s`` runs out; one worker, ``seed``),
    ``lp`` (GLOP's linear-programming optimum, rounded down: a bound on the integer one, within a few requests of
    it on delta, in under a second) or ``auto`` (CP-SAT up to 1,000 requests, else the LP). ``max_steps`` caps the
    steps constrained (evenly spaced among :func:`binding_steps`): dropping constraints keeps the bound valid, only
    looser (delta's 4,096-request episodes have 1,476 binding steps, 2.5 million terms); None keeps every step."""
    if method not in ("auto", "cp-sat", "lp"):
        raise InputError(f"must be auto, cp-sat or lp, got {method!r}", field="method")
    n = len(requests)
    t0 = time.perf_counter()
    if n == 0:
        return AcceptanceBound(0, 0, 0, "optimal", 0.0)
    rows, never = _constraints(topology, requests, max_steps)
    if method == "lp" or (method == "auto" and n > 1000):
        bound = _lp_bound(n, rows, never)
        return AcceptanceBound(bound, 0, n, "lp", time.perf_counter() - t0)
    from ortools.sat.python import cp_model  # only here: ortools and highspy cannot share a process

    model = cp_model.CpModel()
    x = [model.new_bool_var(f"x{t}") for t in range(n)]
    for t in np.flatnonzero(never):
        model.add(x[int(t)] == 0)
    for live, w, cap in rows:
        model.add(cp_model.LinearExpr.weighted_sum([x[int(t)] for t in live], [int(v) for v in w]) <= cap)
    model.maximize(sum(x))
    solver = cp_model.CpSolver()
    solver.parameters.max_time_in_seconds = float(time_limit_s)
    solver.parameters.num_workers = 1
    solver.parameters.random_seed = int(seed)
    solver.parameters.catch_sigint_signal = False  # see dcplace.sim.hindsight.exact_length
    status = solver.solve(model)
    if status == cp_model.OPTIMAL:
        accepted = round(solver.objective_value)
        return AcceptanceBound(accepted, accepted, n, "optimal", time.perf_counter() - t0)
    if status == cp_model.FEASIBLE:  # CP-SAT's proven bound, never above the LP's
        accepted = round(solver.objective_value)
        bound = min(int(np.floor(solver.best_objective_bound + 1e-6)), _lp_bound(n, rows, never))
        return AcceptanceBound(bound, accepted, n, "feasible", time.perf_counter() - t0)
    # no answer in time (CP-SAT's bound is then meaningless, e.g. 0): the LP's
    return AcceptanceBound(_lp_bound(n, rows, never), 0, n, "lp", time.perf_counter() - t0)


def episode_bounds(
    topology: Topology, dataset: str, n_requests: int, seed: int, episodes: int, split: str = "test"
) -> list[AcceptanceBound]:
    """:func:`acceptance_bound` of each of the seeded episodes a run of ``episodes`` plays
    (:func:`dcplace.sim.netalloc_episodes.episode_requests`: the same requests every policy of that run sees);
    ``dataset`` as drawn (a setting's name for it, or a request file)."""
    return [
        acceptance_bound(topology, episode_requests(topology, dataset, n_requests, seed, e, split))
        for e in range(episodes)
    ]


def _lp_bound(n: int, rows: list[tuple[IntArray, IntArray, int]], never: npt.NDArray[np.bool_]) -> int:
    """The LP relaxation's optimum (GLOP), rounded down after a small allowance for its tolerances."""
    from ortools.linear_solver import pywraplp  # only here: ortools and highspy cannot share a process

    solver = pywraplp.Solver.CreateSolver("GLOP")
    x = [solver.NumVar(0.0, 0.0 if never[t] else 1.0, f"x{t}") for t in range(n)]
    for live, w, cap in rows:
        row = solver.Constraint(-solver.infinity(), float(cap))
        for t, v in zip(live.tolist(), w.tolist(), strict=True):
            row.SetCoefficient(x[t], float(v))
    objective = solver.Objective()
    for v in x:
        objective.SetCoefficient(v, 1.0)
    objective.SetMaximization()
    if solver.Solve() != pywraplp.Solver.OPTIMAL:
        raise RuntimeError("GLOP did not solve the acceptance relaxation's LP; it is always feasible and bounded")
    return min(n, int(np.floor(objective.Value() + 1e-4)))


def pooled_greedy(topology: Topology, requests: NetRequests, admit: int | None = None) -> int:
    """Requests accepted online by the pooled cluster of the module docstring: each in turn if its CPU and memory
    are free in total (and, with ``admit``, neither exceeds ``admit`` units). Not a bound; a reference."""
    free_cpu, free_mem = int(topology.server_cpu.sum()), int(topology.server_mem.sum())
    n = len(requests)
    back_cpu = np.zeros(n + 1, dtype=np.int64)
    back_mem = np.zeros(n + 1, dtype=np.int64)
    cpu, mem, hold = requests.cpu.tolist(), requests.mem.tolist(), requests.hold.tolist()
    accepted = 0
    for t in range(n):
        free_cpu += int(back_cpu[t])
        free_mem += int(back_mem[t])
        c, m = cpu[t], mem[t]
        if c <= free_cpu and m <= free_mem and (admit is None or max(c, m) <= admit):
            free_cpu -= c
            free_mem -= m
            accepted += 1
            end = min(t + hold[t], n)
            back_cpu[end] += c
            back_mem[end] += m
    return accepted
