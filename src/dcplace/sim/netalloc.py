"""Network-aware allocation of multi-server requests (the Nara paper's section 3.2), one server pick at a time.

Transition (one episode = one :class:`~dcplace.workload.netreq.NetRequests` sequence; time advances one step per
arrival):

1. At step ``t`` the allocations whose holding period ends at ``t`` are released, then request ``t`` waits. If the
   cluster's total free CPU or memory is below the request's, no choice of servers can serve it: it is rejected
   (reason ``capacity``) without asking the policy, and the next request waits. Otherwise a pick is awaited.
   ``on_full="wait"`` reads the authors' public environment instead (docs/netalloc.md, "When the cluster is full"):
   the request is not rejected but time passes, releasing allocations as their holding periods end, until the free
   totals cover it (rejected for capacity only if nothing is running, i.e. it exceeds the whole cluster). Time is
   then a clock of its own (``clock``: one tick per arrival and per tick waited; holding periods count ticks), and
   a failed path check is the only other way to lose a request.
2. ``pick(v)`` with a server ``v`` from ``action_mask()`` (not yet selected for this request, and holding some of the
   CPU or memory still needed):

   * **path check**: for every server ``u`` already selected, one of the ``k`` candidate paths between ``u`` and
     ``v`` (:mod:`dcplace.sim.routing`) must have at least the request's bandwidth free on every link. We connect
     *all pairs* because constraint 3 of section 3.1 asks for paths "between all v in V'" (a request's servers talk
     to each other, not only to the first one). If any pair has no such path the request is rejected (reason
     ``network``): everything taken for it is returned and the reward is ``rewards.failure``.
   * otherwise ``v`` gives ``min(free, still needed)`` of CPU and of memory. If nothing is still needed the request
     is accepted: for each pair the candidate path with the most free bandwidth on its tightest link is chosen and
     the request's bandwidth is reserved **once on every link of the union of those paths** (section 3.1 compares
     each link with ``b_r``, so a request is a virtual cluster that needs ``b_r`` on each link it uses, not ``b_r``
     per pair); the reward is ``rewards.success``. A single-server allocation uses no bandwidth.
   * else the reward is ``rewards.step`` and the next pick is awaited.
3. An action outside the mask is not a magic penalty: the request is rejected (reason ``invalid``) like a failed path
   check, and ``info`` says so. With ``any_server=True`` the action space is the paper's (section 3.2: any server
   ``v`` not yet picked for the request, "v in V, not in V_r"): a server outside the mask is a valid pick that takes
   what it still has of the request's needs (possibly nothing) and must be connected like any other; only a server
   already picked (or no server) is invalid. ``nulb`` and ``random-any`` (the paper's Random read literally) pick
   this way.

The episode ends after the last request. ``drain()`` then releases everything still running, after which every
server and link is back at its capacity (a tested invariant).

State is arrays (``free_cpu``, ``free_mem``: (servers,) int64 units; ``free_bw``: (links,) int64 micro-units) plus a
ledger of running allocations (request id -> servers, amounts, links, bandwidth, end step) so that every release is
exact and ``check_invariants`` can recompute every array from the ledger.

Metrics (``result()``): acceptance = accepted / requests; CPU, memory and per-tier bandwidth utilisation = the mean
over the episode's steps (sampled after each request is decided) of used / total; per accepted request its number of
servers and locality (0 one server, 1 one rack, 2 neighbouring racks = one pod, 3 non-neighbouring racks).
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from enum import IntEnum
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from dcplace.cluster.topology import TIER_NAMES, Topology
from dcplace.sim.arrays import read_only
from dcplace.sim.routing import BATCH_FROM, Path, Routing, routing_for, widest_of
from dcplace.workload.netreq import NetRequests

IntArray = npt.NDArray[np.int64]
BoolArray = npt.NDArray[np.bool_]

LOCALITY_NAMES = ("single server", "one rack", "neighbouring racks", "non-neighbouring racks")


@nb.njit(cache=True, nogil=True)
def _mask_into(
    free_cpu: IntArray, free_mem: IntArray, selected: BoolArray, want_cpu: bool, want_mem: bool, out: BoolArray
) -> None:
    """``out[i]`` = server ``i`` is not selected and holds free CPU (if ``want_cpu``) or memory (if ``want_mem``):
    one pass instead of numpy's five (the mask is built at every pick on every server)."""
    for i in range(out.shape[0]):
        out[i] = not selected[i] and ((want_cpu and free_cpu[i] > 0) or (want_mem and free_mem[i] > 0))


class Outcome(IntEnum):
    CONTINUE = 0
    ACCEPTED = 1
    REJECTED = 2


@dataclass(frozen=True)
class Rewards:
    """The paper's reward (section 3.2, chosen by its grid search): success, failure, every other pick; and
    ``capacity``, ours: for each request rejected for capacity without a pick (step 1 above), added to the reward
    of the pick after which it happened (those before the first pick, to the first pick). Section 3.2 has no term
    for such requests (its rewards follow actions), so it is 0 by default; at ``failure``'s value the return of an
    episode with at least one pick is exactly ``success`` x accepted + ``failure`` x not accepted, the acceptance
    ratio the paper ranks by (docs/nara.md)."""

    success: float = 10.0
    failure: float = -10.0
    step: float = 0.0
    capacity: float = 0.0


ON_FULL = ("reject", "wait")
"""What :class:`NetAllocSim` does with a request the cluster's free totals cannot hold (module docstring, step 1)."""


@dataclass(frozen=True)
class Allocation:
    servers: IntArray  # (parts,) server ids
    cpu: IntArray  # (parts,) CPU units taken from each
    mem: IntArray  # (parts,) memory units taken from each
    links: IntArray  # (links used,) link ids, each reserved once
    bw: int  # micro-units reserved on each link
    end: int  # the clock tick at whose start it is released (the step, unless requests wait: on_full)


@dataclass
class NetResult:
    """One episode's numbers."""

    requests: int
    accepted: int
    rejected: dict[str, int]
    decisions: int
    cpu_util: float
    mem_util: float
    bw_util_by_tier: dict[str, float]
    servers_per_allocation: list[int] = field(repr=False)
    locality: list[int] = field(repr=False)
    accepted_ids: list[int] = field(repr=False)
    waited: int = 0  # clock ticks spent waiting for room (``on_full="wait"``; 0 where requests are rejected)

    @property
    def acceptance(self) -> float:
        return self.accepted / self.requests if self.requests else 0.0


class NetView:
    """What a network-aware policy sees while a request waits: the simulator's state, read-only.

    Arrays are read-only views (no copies); everything a policy may read is listed here, so a policy written against
    it runs wherever a view is built.
    """

    __slots__ = ("_sim",)

    def __init__(self, sim: NetAllocSim) -> None:
        self._sim = sim

    @property
    def topology(self) -> Topology:
        return self._sim.topology

    @property
    def n_servers(self) -> int:
        return self._sim.n_servers

    @property
    def free_cpu(self) -> IntArray:
        """(servers,) free CPU units."""
        return read_only(self._sim.free_cpu)

    @property
    def free_mem(self) -> IntArray:
        """(servers,) free memory units."""
        return read_only(self._sim.free_mem)

    @property
    def free_bw(self) -> IntArray:
        """(links,) free bandwidth, micro-units."""
        return read_only(self._sim.free_bw)

    @property
    def selected(self) -> BoolArray:
        """(servers,) picked for the waiting request so far."""
        return read_only(self._sim.selected)

    @property
    def picks(self) -> tuple[int, ...]:
        """Servers picked for the waiting request, in order."""
        return tuple(self._sim.picks)

    @property
    def need_cpu(self) -> int:
        """CPU the waiting request still needs."""
        return self._sim.need_cpu

    @property
    def need_mem(self) -> int:
        return self._sim.need_mem

    @property
    def request(self) -> tuple[int, int, int, int]:
        """(cpu, mem, bw micro-units, hold) of the waiting request."""
        return self._sim.request

    @property
    def requests(self) -> NetRequests:
        return self._sim.requests

    @property
    def t(self) -> int:
        """Index of the waiting request (the step)."""
        return self._sim.t

    @property
    def done(self) -> bool:
        return self._sim.done

    @property
    def cpu_util(self) -> float:
        return self._sim.cpu_util

    @property
    def mem_util(self) -> float:
        return self._sim.mem_util

    def action_mask(self) -> BoolArray:
        """(servers,) bool: servers that can still be picked for the waiting request."""
        return self._sim.action_mask()


class NetAllocSim:
    """The simulator. See the module docstring for the exact semantics."""

    def __init__(
        self,
        topology: Topology,
        requests: NetRequests,
        k: int = 3,
        rewards: Rewards = Rewards(),
        routing: Routing | None = None,
        any_server: bool = False,
        on_full: str = "reject",
    ) -> None:
        if on_full not in ON_FULL:
            raise ValueError(f"on_full must be {' or '.join(ON_FULL)}, got {on_full!r}")
        self.on_full = on_full  # a request the free totals cannot hold: rejected, or time passes (module docstring)
        self.topology = topology
        self.any_server = any_server  # accept any server not yet picked (the paper's action space), not only the mask
        self.requests = requests
        self.rewards = rewards
        self.routing = routing if routing is not None else routing_for(topology, k)
        # The routing's own widest-candidate search where it has one (dcplace's routings do), else the loop.
        self._widest: Callable[[int, int, IntArray, int], Path | None] | None = getattr(self.routing, "widest", None)
        # And every pair of a pick at once, where it can (the Fabric routing on four planes: gamma, delta; the Leaf
        # routing: a tree-like network from a file), once a request has enough servers for it to pay.
        self._widest_all: Callable[[IntArray, int, IntArray, int, BoolArray], int] | None = getattr(
            self.routing, "widest_all", None
        )
        self.n_servers = topology.n_servers
        self._rack = topology.server_rack
        self._pod = topology.server_pod
        self._tier = topology.link_tier
        self._tier_cap = np.array([int(topology.link_cap[topology.link_tier == t].sum()) for t in range(3)])
        self._cpu_cap_total = int(topology.server_cpu.sum())
        self._mem_cap_total = int(topology.server_mem.sum())
        # Requests as Python ints: the per-pick path touches them many times.
        self._req_cpu = requests.cpu.tolist()
        self._req_mem = requests.mem.tolist()
        self._req_bw = requests.bw.tolist()
        self._req_hold = requests.hold.tolist()
        self.reset()
        self.action_mask()  # loads the compiled mask kernel now, not inside the first decision

    # --- episode control ------------------------------------------------------------------------------------------

    def reset(self) -> None:
        top = self.topology
        self.free_cpu: IntArray = top.server_cpu.copy()  # (servers,) int64
        self.free_mem: IntArray = top.server_mem.copy()  # (servers,) int64
        self.free_bw: IntArray = top.link_cap.copy()  # (links,) int64 micro-units
        self.selected: BoolArray = np.zeros(self.n_servers, dtype=np.bool_)  # (servers,) picked for this request
        self.free_cpu_total = self._cpu_cap_total
        self.free_mem_total = self._mem_cap_total
        self.bw_used_by_tier = np.zeros(3, dtype=np.int64)
        self.active: dict[int, Allocation] = {}
        self._ends: dict[int, list[int]] = {}  # clock tick -> requests whose holding period ends then
        self.t = 0  # the waiting request
        self.clock = 0  # time: == t unless on_full="wait" let time pass
        self.done = False
        # The request being allocated.
        self.need_cpu = 0
        self.need_mem = 0
        self.picks: list[int] = []
        self._took_cpu: list[int] = []
        self._took_mem: list[int] = []
        self._pair_paths: list[tuple[int, ...]] = []
        self._joined_links = np.zeros(len(top.link_cap), dtype=np.bool_)  # (links,) the pairs' links (_widest_all)
        self._joined_marked = False  # whether any is marked
        # Statistics.
        self.accepted = 0
        self.rejected = {"capacity": 0, "network": 0, "invalid": 0}
        self.decisions = 0
        self._util_sum = np.zeros(5)  # cpu, mem, three bandwidth tiers, summed over steps
        self._steps = 0
        self.servers_per_allocation: list[int] = []
        self.locality: list[int] = []
        self.accepted_ids: list[int] = []
        self._capacity_charge = 0.0  # rewards.capacity of the rejections since the last completion (or the start)
        self._begin()

    @property
    def request(self) -> tuple[int, int, int, int]:
        """(cpu, mem, bw micro-units, hold) of the waiting request."""
        t = self.t
        return self._req_cpu[t], self._req_mem[t], self._req_bw[t], self._req_hold[t]

    def _begin(self) -> None:
        """Advance to the next request that needs a pick, releasing and rejecting on the way."""
        n = len(self.requests)
        while self.t < n:
            for rid in self._ends.pop(self.clock, ()):
                self._release(rid)
            cpu, mem = self._req_cpu[self.t], self._req_mem[self.t]
            if cpu <= self.free_cpu_total and mem <= self.free_mem_total:
                self.need_cpu, self.need_mem = cpu, mem
                return
            if self.on_full == "wait" and self._ends:  # time passes to the next release (holds are >= 1)
                self.clock = min(self._ends)
                continue
            self._capacity_rejection()
        self.done = True

    def _capacity_rejection(self) -> None:
        """The request at ``t`` rejected for capacity without a pick (step 1), and time moves on."""
        self.rejected["capacity"] += 1
        self._capacity_charge += self.rewards.capacity
        self._sample()
        self.t += 1
        self.clock += 1

    def _finish(self) -> None:
        for v in self.picks:
            self.selected[v] = False
        self.picks, self._took_cpu, self._took_mem, self._pair_paths = [], [], [], []
        if self._joined_marked:
            self._joined_links[:] = False
            self._joined_marked = False
        self.need_cpu = self.need_mem = 0
        self._sample()
        self.t += 1
        self.clock += 1
        self._begin()

    @property
    def waited(self) -> int:
        """Ticks spent waiting for room (``on_full="wait"``; 0 otherwise)."""
        return self.clock - self.t

    @property
    def cpu_util(self) -> float:
        """Share of the cluster's CPU in use (running allocations and the waiting request's takes)."""
        return 1.0 - self.free_cpu_total / self._cpu_cap_total

    @property
    def mem_util(self) -> float:
        return 1.0 - self.free_mem_total / self._mem_cap_total

    def _sample(self) -> None:
        self._steps += 1
        u = self._util_sum
        u[0] += self.cpu_util
        u[1] += self.mem_util
        for tier in range(3):
            if self._tier_cap[tier]:
                u[2 + tier] += self.bw_used_by_tier[tier] / self._tier_cap[tier]

    # --- the decision --------------------------------------------------------------------------------------------

    def view(self) -> NetView:
        """The read-only view a policy decides on."""
        return NetView(self)

    def action_mask(self) -> BoolArray:
        """(servers,) bool: servers that can still be picked for the waiting request."""
        useful = np.empty(self.n_servers, dtype=np.bool_)
        _mask_into(self.free_cpu, self.free_mem, self.selected, self.need_cpu > 0, self.need_mem > 0, useful)
        return useful

    def is_valid(self, v: int) -> bool:
        if not (0 <= v < self.n_servers) or self.selected[v]:
            return False
        if self.any_server:
            return True
        return bool((self.need_cpu > 0 and self.free_cpu[v] > 0) or (self.need_mem > 0 and self.free_mem[v] > 0))

    def widest_path(self, u: int, v: int, bw: int) -> tuple[int, ...] | None:
        """The candidate path between servers u and v with the most free bandwidth on its tightest link, if that
        is at least ``bw``; None otherwise."""
        a, b = (u, v) if u < v else (v, u)
        if self._widest is not None:
            return self._widest(a, b, self.free_bw, bw)
        return widest_of(self.routing.paths(a, b, self.free_bw, bw), self.free_bw, bw)

    def pick(self, v: int) -> tuple[Outcome, float, dict[str, str]]:
        """Give server ``v`` to the waiting request. Returns (outcome, reward, info); the reward of a pick that ends
        the request includes ``rewards.capacity`` for every request then rejected for capacity (the episode's first
        pick also for those rejected before it)."""
        if self.done:
            raise RuntimeError("the episode is over; call reset()")
        self.decisions += 1
        if not self.is_valid(int(v)):
            return self._reject("invalid")
        v = int(v)
        bw = self._req_bw[self.t]
        if self._widest_all is not None and len(self.picks) >= BATCH_FROM:
            if self._widest_all(np.array(self.picks, np.int64), v, self.free_bw, bw, self._joined_links) >= 0:
                return self._reject("network")
            self._joined_marked = True
        else:
            new_paths = []
            for u in self.picks:
                path = self.widest_path(u, v, bw)
                if path is None:
                    return self._reject("network")
                new_paths.append(path)
            self._pair_paths.extend(new_paths)
        self._take(v)
        if self.need_cpu or self.need_mem:
            return Outcome.CONTINUE, self.rewards.step, {}
        self._accept(bw)
        return Outcome.ACCEPTED, self._charged(self.rewards.success), {}

    def _take(self, v: int) -> None:
        """Server ``v`` joins the request: it gives what it has of what is still needed (possibly nothing)."""
        c = min(int(self.free_cpu[v]), self.need_cpu)
        m = min(int(self.free_mem[v]), self.need_mem)
        self.free_cpu[v] -= c
        self.free_mem[v] -= m
        self.free_cpu_total -= c
        self.free_mem_total -= m
        self.need_cpu -= c
        self.need_mem -= m
        self.picks.append(v)
        self._took_cpu.append(c)
        self._took_mem.append(m)
        self.selected[v] = True

    def _accept(self, bw: int) -> None:
        taken = {link for path in self._pair_paths for link in path}
        if self._joined_marked:  # the pairs checked at once (a request's later picks)
            taken.update(np.flatnonzero(self._joined_links).tolist())
        links = np.array(sorted(taken), dtype=np.int64)
        if len(links):
            self.free_bw[links] -= bw
            self._add_tier_use(links, bw)
        servers = np.array(self.picks, dtype=np.int64)
        end = self.clock + self._req_hold[self.t]
        self.active[self.t] = Allocation(
            servers,
            np.array(self._took_cpu, dtype=np.int64),
            np.array(self._took_mem, dtype=np.int64),
            links,
            bw,
            end,
        )
        self._ends.setdefault(end, []).append(self.t)
        self.accepted += 1
        self.accepted_ids.append(self.t)
        self.servers_per_allocation.append(len(servers))
        self.locality.append(self.locality_of(servers))
        self._finish()

    def _add_tier_use(self, links: IntArray, bw: int) -> None:
        """Add ``bw`` to the used bandwidth of each link's tier (links outside the three tiers left out)."""
        tiers = self._tier[links]
        self.bw_used_by_tier += np.bincount(tiers[tiers >= 0], minlength=3) * bw

    def _reject(self, reason: str) -> tuple[Outcome, float, dict[str, str]]:
        for v, c, m in zip(self.picks, self._took_cpu, self._took_mem, strict=True):
            self.free_cpu[v] += c
            self.free_mem[v] += m
            self.free_cpu_total += c
            self.free_mem_total += m
        self.rejected[reason] += 1
        self._finish()
        return Outcome.REJECTED, self._charged(self.rewards.failure), {"rejected": reason}

    def _charged(self, reward: float) -> float:
        """``reward`` plus the capacity rejections' charge since the last completion (which this one clears)."""
        reward, self._capacity_charge = reward + self._capacity_charge, 0.0
        return reward

    def _release(self, rid: int) -> None:
        a = self.active.pop(rid)
        self.free_cpu[a.servers] += a.cpu  # an allocation's servers are distinct (the mask excludes picked ones)
        self.free_mem[a.servers] += a.mem
        self.free_cpu_total += int(a.cpu.sum())
        self.free_mem_total += int(a.mem.sum())
        if len(a.links):
            self.free_bw[a.links] += a.bw
            self._add_tier_use(a.links, -a.bw)

    def drain(self) -> None:
        """Let time run on past the last departure: each running allocation leaves at its end, in order, as
        departures do during the episode (the clock ends at the last end)."""
        for end in sorted(self._ends):
            self.clock = max(self.clock, end)
            for rid in self._ends.pop(end):
                self._release(rid)
        assert not self.active, "an allocation had no departure"

    def locality_of(self, servers: IntArray) -> int:
        if len(servers) == 1:
            return 0
        racks = self._rack[servers]
        if racks[0] >= 0 and (racks == racks[0]).all():
            return 1
        pods = self._pod[servers]
        if pods[0] >= 0 and (pods == pods[0]).all():
            return 2
        return 3

    # --- results and checks ---------------------------------------------------------------------------------------

    def result(self) -> NetResult:
        steps = max(self._steps, 1)
        u = self._util_sum / steps
        return NetResult(
            requests=len(self.requests),
            accepted=self.accepted,
            rejected=dict(self.rejected),
            decisions=self.decisions,
            cpu_util=float(u[0]),
            mem_util=float(u[1]),
            bw_util_by_tier={TIER_NAMES[t]: float(u[2 + t]) for t in range(3) if self._tier_cap[t]},
            servers_per_allocation=list(self.servers_per_allocation),
            locality=list(self.locality),
            accepted_ids=list(self.accepted_ids),
            waited=self.waited,
        )

    def check_invariants(self) -> None:
        """Recompute every free array from the ledger (running allocations plus the waiting request's takes) and
        compare; raise AssertionError on any difference."""
        top = self.topology
        cpu = top.server_cpu.copy()
        mem = top.server_mem.copy()
        bw = top.link_cap.copy()
        for a in self.active.values():
            np.subtract.at(cpu, a.servers, a.cpu)
            np.subtract.at(mem, a.servers, a.mem)
            bw[a.links] -= a.bw
            assert len(np.unique(a.servers)) == len(a.servers), "a server twice in one allocation"
            assert a.end > self.clock or self.done, "an allocation outlived its holding period"
        for v, c, m in zip(self.picks, self._took_cpu, self._took_mem, strict=True):
            cpu[v] -= c
            mem[v] -= m
        assert (cpu >= 0).all() and (mem >= 0).all(), "server resources over-committed"
        assert (bw >= 0).all(), "link bandwidth over-committed"
        assert np.array_equal(cpu, self.free_cpu), "free CPU does not match the ledger"
        assert np.array_equal(mem, self.free_mem), "free memory does not match the ledger"
        assert np.array_equal(bw, self.free_bw), "free bandwidth does not match the ledger"
        assert (self.free_bw <= top.link_cap).all(), "free bandwidth above capacity"
        assert self.free_cpu_total == int(cpu.sum()) and self.free_mem_total == int(mem.sum()), "totals drifted"
        used = top.link_cap - self.free_bw
        for tier in range(3):
            assert int(used[top.link_tier == tier].sum()) == int(self.bw_used_by_tier[tier]), "tier totals drifted"
        assert self.accepted + sum(self.rejected.values()) == self.t, "every request is accepted or rejected once"


class LiveNetSim(NetAllocSim):
    """The same state and transitions, driven by requests as they come instead of an episode's table: what a live
    cluster runs (:class:`dcplace.engine.network.NetworkEngine`). :meth:`submit` makes a request wait (or rejects it
    for capacity, as step 1 does), :meth:`~NetAllocSim.pick` decides it server by server exactly as in an episode,
    and :meth:`release` returns an allocation when its job ends (no holding periods: the client says when).
    ``hold``, a request's expected holding period in arrivals, only feeds the observation of a learned policy (Nara
    reads ``hold / hold_max``). A policy's :attr:`NetView.requests` is an empty table here (there is no episode
    ahead: only :attr:`NetView.request`, the waiting one, and ``requests.hold_max``)."""

    def __init__(
        self, topology: Topology, k: int = 3, routing: Routing | None = None, any_server: bool = False,
        hold_max: int = 100,
    ) -> None:  # fmt: skip
        empty = np.zeros(0, dtype=np.int64)
        self.last_rejection: str | None = None
        """Why the last request decided was rejected (None: it was accepted)."""
        self._waiting = False
        super().__init__(topology, NetRequests(empty, empty, empty, empty, hold_max, "live"), k, Rewards(), routing,
                         any_server)  # fmt: skip
        # Only the waiting request is ever read: one value per column, not a table that grows with every request
        # (a live service's memory grew 12 MB per 100,000 jobs).
        self._req_cpu, self._req_mem, self._req_bw, self._req_hold = (_Latest(), _Latest(), _Latest(), _Latest())
        self.drained: BoolArray = np.zeros(self.n_servers, dtype=np.bool_)
        """Servers taking no new jobs (:meth:`set_drained`): their free CPU and memory are held apart, so every policy
        sees them full."""
        self.held_cpu: IntArray = np.zeros(self.n_servers, dtype=np.int64)
        self.held_mem: IntArray = np.zeros(self.n_servers, dtype=np.int64)

    def _begin(self) -> None:
        """No table to walk: the request :meth:`submit` made wait, or none."""
        self.done = not self._waiting

    def _finish(self) -> None:
        self._waiting = False
        super()._finish()
        # what an episode's result() reports, kept per request: nothing reads it live
        self.accepted_ids.clear()
        self.servers_per_allocation.clear()
        self.locality.clear()

    def submit(self, cpu: int, mem: int, bw: int, hold: int) -> bool:
        """Request ``(cpu, mem, bw micro-units, hold)`` waits: True when a pick is awaited, False when the free
        totals cannot hold it (rejected for capacity, decided)."""
        if not self.done:
            raise RuntimeError("a request is still waiting for its picks")
        for column, value in ((self._req_cpu, cpu), (self._req_mem, mem), (self._req_bw, bw), (self._req_hold, hold)):
            column.value = int(value)
        self.done, self.last_rejection = False, None
        if cpu <= self.free_cpu_total and mem <= self.free_mem_total:
            self.need_cpu, self.need_mem, self._waiting = int(cpu), int(mem), True
            return True
        self._capacity_rejection()
        self.done = True
        return False

    def _capacity_rejection(self) -> None:
        self.last_rejection = "capacity"
        super()._capacity_rejection()

    def _reject(self, reason: str) -> tuple[Outcome, float, dict[str, str]]:
        self.last_rejection = reason
        return super()._reject(reason)

    def _accept(self, bw: int) -> None:
        rid = self.t
        super()._accept(bw)
        self.active[rid] = _frozen(replace(self.active[rid], end=LIVE_END))  # it ends when released, not after a period
        self._ends.clear()

    def _joins(self, servers: IntArray, links: IntArray) -> bool:
        """Whether ``links`` form one connected piece holding every server (none for one server)."""
        if len(servers) == 1:
            return not len(links)
        top = self.topology
        parent: dict[int, int] = {}

        def root(x: int) -> int:
            while parent.setdefault(x, x) != x:
                x = parent[x]
            return x

        for u, v in zip(top.link_u[links].tolist(), top.link_v[links].tolist(), strict=True):
            parent[root(u)] = root(v)
        return len({root(int(v)) for v in servers}) == 1 and len({root(x) for x in list(parent)}) == 1

    def set_drained(self, v: int, drained: bool) -> None:
        """Drain server ``v`` (no new job is given any of it: what it has free, and what its jobs free as they
        leave, is held apart, so it looks full) or activate it (what was held is free again). Its running jobs keep
        it. Where policies may pick any server, full or not (``any_server``: ``nulb``, ``random-any``), a drained
        one also counts as picked, which they skip (else they listed it in new jobs, with nothing taken, and it never
        emptied). Idempotent."""
        if not self.done:
            raise RuntimeError("a request is still waiting for its picks")
        if drained == bool(self.drained[v]):
            return
        if drained:
            self._hold_apart(v)  # an active server holds nothing apart: what it has free is all
        else:
            self.free_cpu[v], self.free_mem[v] = self.held_cpu[v], self.held_mem[v]
            self.free_cpu_total += int(self.held_cpu[v])
            self.free_mem_total += int(self.held_mem[v])
            self.held_cpu[v] = self.held_mem[v] = 0
        self.drained[v] = drained
        if self.any_server:
            self.selected[v] = drained

    def _release(self, rid: int) -> None:
        servers = self.active[rid].servers
        super()._release(rid)
        for v in servers[self.drained[servers]].tolist():  # what a drained server's job frees is held apart too
            self._hold_apart(v)

    def _hold_apart(self, v: int) -> None:
        """What server ``v`` has free, moved to what it holds apart (out of the free totals)."""
        self.held_cpu[v] += self.free_cpu[v]
        self.held_mem[v] += self.free_mem[v]
        self.free_cpu_total -= int(self.free_cpu[v])
        self.free_mem_total -= int(self.free_mem[v])
        self.free_cpu[v] = self.free_mem[v] = 0

    def check_invariants(self) -> None:
        """The episode simulator's invariants, with what drained servers hold apart counted as free; and a drained
        server shows nothing free, an active one holds nothing apart."""
        assert not self.free_cpu[self.drained].any() and not self.free_mem[self.drained].any(), (
            "a drained server has room"
        )
        assert not self.held_cpu[~self.drained].any() and not self.held_mem[~self.drained].any(), (
            "held on an active server"
        )
        held_cpu, held_mem = int(self.held_cpu.sum()), int(self.held_mem.sum())
        self.free_cpu += self.held_cpu
        self.free_mem += self.held_mem
        self.free_cpu_total += held_cpu
        self.free_mem_total += held_mem
        try:
            super().check_invariants()
        finally:
            self.free_cpu -= self.held_cpu
            self.free_mem -= self.held_mem
            self.free_cpu_total -= held_cpu
            self.free_mem_total -= held_mem

    def fork(self) -> LiveNetSim:
        """A copy to try a request on (an explanation's dry run): every part a request changes is its own (the free
        arrays, the tallies, the allocations' dict), the topology, routing and allocations themselves are shared
        (read-only here; a routing's caches hold the same answers for both)."""
        shared = (self.topology, self.routing, self.requests, self.rewards, self._rack, self._pod, self._tier,
                  self._tier_cap)  # fmt: skip
        memo: dict[int, Any] = {id(x): x for x in shared}
        memo[id(self.active)] = dict(self.active)  # allocations are replaced, never changed in place
        return copy.deepcopy(self, memo)

    def abandon(self) -> None:
        """The waiting request rejected as ``invalid``, what it took returned (a policy that raised mid-request)."""
        if not self.done:
            self._reject("invalid")

    def release(self, rid: int) -> None:
        """Return allocation ``rid`` (the ``t`` of its request) in full."""
        if not self.done:
            raise RuntimeError("a request is still waiting for its picks")
        self._release(rid)

    def restore(self, alloc: Allocation) -> int:
        """Take ``alloc`` again (a database reloaded) as the next request's allocation, whose ``t`` is returned:
        what it holds leaves the free arrays as when it was accepted. ValueError, nothing changed, where it does not
        fit, names a server or link twice or not in this topology, gives amounts that are not one per server, or
        links that do not join its servers."""
        if not self.done:
            raise RuntimeError("a request is still waiting for its picks")
        servers, links = alloc.servers, alloc.links
        if len(np.unique(servers)) != len(servers) or len(np.unique(links)) != len(links) or not len(servers):
            raise ValueError("no server, or a server or link twice")
        if ((servers < 0) | (servers >= self.n_servers)).any() or ((links < 0) | (links >= len(self.free_bw))).any():
            raise ValueError("a server or link this topology does not have")
        if len(alloc.cpu) != len(servers) or len(alloc.mem) != len(servers):  # numpy spread one value over all
            raise ValueError("amounts that are not one per server")
        if ((alloc.cpu < 0) | (alloc.mem < 0)).any() or alloc.bw < 0:
            raise ValueError("a negative amount")
        if not self._joins(servers, links):
            raise ValueError("links that do not join its servers")
        if ((self.free_cpu[servers] < alloc.cpu) | (self.free_mem[servers] < alloc.mem)).any():
            raise ValueError("more than its servers have free")
        if len(links) and (self.free_bw[links] < alloc.bw).any():
            raise ValueError("more bandwidth than its links have free")
        self.free_cpu[servers] -= alloc.cpu
        self.free_mem[servers] -= alloc.mem
        self.free_cpu_total -= int(alloc.cpu.sum())
        self.free_mem_total -= int(alloc.mem.sum())
        if len(links):
            self.free_bw[links] -= alloc.bw
            self._add_tier_use(links, alloc.bw)
        rid = self.t
        self.active[rid] = _frozen(replace(alloc, end=LIVE_END))
        self.t += 1
        self.clock += 1
        self.accepted += 1
        return rid


LIVE_END = np.iinfo(np.int64).max
"""The end of a live allocation: none until it is released."""


def _frozen(alloc: Allocation) -> Allocation:
    """``alloc`` with its arrays read-only: a live allocation is replaced, never changed in place (the engine reuses a
    job's listing while its allocation is the same object), and a write to one now raises instead of going unseen."""
    for x in (alloc.servers, alloc.cpu, alloc.mem, alloc.links):
        x.setflags(write=False)
    return alloc


class _Latest:
    """A live simulator's request column: the waiting request's value, whatever index is asked (only that one is)."""

    __slots__ = ("value",)

    def __init__(self) -> None:
        self.value = 0

    def __getitem__(self, t: int) -> int:
        return self.value
