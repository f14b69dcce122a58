"""The NUMA VM scheduling simulator: scenarios, the stateful shell over the compiled kernel, metrics, invariants.

Semantics (the paper's section 2 and VMAgent's ``schedgym``; the kernel in :mod:`dcplace.sim.numa_kernel` is the
single implementation):

* **Events.** Each request creates at ``arrival`` and, when releases are on, deletes at ``departure``. Events are
  sorted once by time; at equal times deletions come before creations, and creations keep trace order. (A heap is
  unnecessary: every departure time is known when the trace is read, so one presorted event array replaces it.)
  A decision is asked only for a creation; deletions are processed in between.
* **Placement.** A single-NUMA VM takes its CPU and memory from one NUMA node; a multi-NUMA VM (memory above the
  double-NUMA threshold) takes ``1/K`` of both from each of the ``K`` nodes of one machine (half on each of two).
  Action ``a`` means machine ``a // K``, node ``a % K``; for a multi-NUMA VM every node of a machine means it.
* **Episode start.** A start row is drawn uniformly from ``start_range`` over the event log (VMAgent draws
  ``randint(1000, 9999)`` rows of its event log); the episode starts at the first creation at or after that row.
  VMs created before it are not in the cluster and their deletions are ignored.
* **Warm start** (ratio ``rho``): from the start, the trace is replayed with First-Fit (VMAgent's default
  scheduler; part of the scenario, not of the policy under test) while the allocated CPU is below ``rho`` x the
  CPU of the active machines. Warm-up requests that fit nowhere are skipped and counted. The first creation seen
  with the allocation at or above ``rho`` is the first scored request; metrics count scored requests only.
  ``rho = 0`` scores from the start.
* **Non-Expansion**: the episode ends (``terminated``) at the first scored request that no active machine can host.
* **Expansion**: start with ``pms`` machines; when a request fits nowhere add ``expand_step`` machines (up to
  ``max_pms``) and retry; when it still fits nowhere at ``max_pms``, end as in Non-Expansion.
* **Releases** on ("recovering") or off ("fading", VMs never leave).
* **Oversize requests** (no machine of the cluster could host them even empty) are counted and skipped, never
  silently: the count is in every result. The CLI refuses such a trace unless asked to skip them.
* **End rule** (``end``): ``first-failure`` (default, the paper's "the environment terminates when the current VM
  request cannot be handled") as above; ``first-single-failure``: a multi-NUMA request that fits nowhere (after any
  expansion) is rejected, counted in ``rejected``, and the episode goes on; it ends at the first single-NUMA request
  that fits nowhere. A reading for the regime study (``dcplace.bench.cvd_regime``), not the paper's rule.
* **Truncation**: the episode also stops (``truncated``) at the end of the trace or after ``max_requests`` scored
  placements.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal, NamedTuple

import numpy as np
import numpy.typing as npt

from dcplace.cluster.numa import NumaCluster
from dcplace.config import check, check_types, is_whole
from dcplace.errors import InputError
from dcplace.sim import numa_kernel as K
from dcplace.sim.arrays import read_only
from dcplace.workload.table import RequestTable

Mode = Literal["non-expansion", "expansion"]
EndRule = Literal["first-failure", "first-single-failure"]
STATUS_NAMES = {
    K.DECIDE: "running",
    K.TERMINATED: "terminated",
    K.TRUNCATED: "truncated",
    K.INVALID: "invalid",
}


@dataclass(frozen=True)
class PriceModel:
    """Income of a VM: lifetime in hours x (``per_vcpu_hour`` x vCPUs + ``per_gb_hour`` x GB).

    No public Huawei Cloud price list is at hand; the defaults are the order of magnitude of public
    general-purpose list prices (a 1 vCPU / 2 GB VM earns 0.05 per hour). Only ratios between methods matter.
    A VM the trace never deletes earns until the trace's last event.
    """

    per_vcpu_hour: float = 0.04
    per_gb_hour: float = 0.005

    def __post_init__(self) -> None:
        if not (self.per_vcpu_hour >= 0 and self.per_gb_hour >= 0):
            raise InputError("prices must be non-negative")

    def income(self, table: RequestTable) -> npt.NDArray[np.float64]:
        """``(n,)`` income of each request if accepted."""
        fin = np.isfinite(table.departure)
        horizon = max(
            float(table.departure[fin].max()) if fin.any() else 0.0,
            float(table.arrival.max()) if len(table) else 0.0,
        )
        end = np.where(fin, table.departure, horizon)
        hours = (end - table.arrival) / 3600.0
        return np.asarray(hours * (self.per_vcpu_hour * table.cpu + self.per_gb_hour * table.mem))


@dataclass(frozen=True)
class Scenario:
    """The episode dynamics (see the module docstring for the exact definitions)."""

    pms: int = 50
    """Machines at the start (and throughout in Non-Expansion): the cluster's machines, in order (the CLI's
    ``--pms`` builds that many of 2 NUMA nodes of 40 CPU / 90 GB each). A cluster of machines of different sizes
    must have exactly the scenario's machines (``max_pms`` in Expansion); of a uniform one the first are used."""
    mode: Mode = "non-expansion"
    """``non-expansion``: the episode ends at the first request no machine can host; ``expansion``: the cluster
    grows by ``expand_step`` machines instead."""
    max_pms: int = 110
    """Expansion only: the cluster never grows beyond this."""
    expand_step: int = 10
    """Expansion only: machines added each time a request fits nowhere."""
    release: bool = True
    """True: VMs leave at their departure ("recovering"); False: never ("fading", VMAgent's)."""
    warm_start: float = 0.0
    """CPU allocation rate reached by the warm-up heuristic before scoring starts, in [0, 1)."""
    start_range: tuple[int, int] = (1000, 10000)
    """Half-open range of event-log rows from which the episode start is drawn (clipped to the trace; a trace
    shorter than ``lo`` rows starts at row 0)."""
    max_requests: int = 0
    """Stop (truncated) after this many scored placements; 0 = no limit."""
    end: EndRule = "first-failure"
    """What ends the episode: ``first-failure`` (the paper's: the first request that fits nowhere) or
    ``first-single-failure`` (multi-NUMA requests that fit nowhere are rejected and counted; the first single-NUMA
    one that fits nowhere ends it)."""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.pms >= 1, "pms", self.pms, "at least 1")
        if self.mode == "expansion":
            check(self.max_pms >= self.pms, "max_pms", self.max_pms, f"at least pms ({self.pms}) in expansion")
        check(self.expand_step >= 1, "expand_step", self.expand_step, "at least 1")
        check(0.0 <= self.warm_start < 1.0, "warm_start", self.warm_start, "in [0, 1)")
        lo, hi = self.start_range
        check(0 <= lo < hi, "start_range", self.start_range, "a range 0 <= lo < hi")
        check(self.max_requests >= 0, "max_requests", self.max_requests, "non-negative")

    @property
    def machines(self) -> int:
        """Machines the cluster must have (the padded size in Expansion)."""
        return self.max_pms if self.mode == "expansion" else self.pms


@dataclass(frozen=True)
class PreparedTrace:
    """A request table turned into the kernel's arrays (built once, shared by every episode)."""

    table: RequestTable
    demand: npt.NDArray[np.float64]  # (n, 2) cpu, mem
    multi: npt.NDArray[np.bool_]  # (n,)
    price: npt.NDArray[np.float64]  # (n,) income if accepted
    ev_req: npt.NDArray[np.int64]  # (E,) request of each event
    ev_dep: npt.NDArray[np.bool_]  # (E,) True for a deletion
    arrival_events: npt.NDArray[np.int64] = field(repr=False)  # (n,) event index of each creation, ascending

    @classmethod
    def build(cls, table: RequestTable, prices: PriceModel | None = None) -> PreparedTrace:
        n = len(table)
        if n == 0:
            raise InputError(f"{table.source}: the trace has no requests")
        fin = np.flatnonzero(np.isfinite(table.departure))
        times = np.concatenate([table.arrival, table.departure[fin]])
        is_dep = np.concatenate([np.zeros(n, bool), np.ones(len(fin), bool)])
        req = np.concatenate([np.arange(n, dtype=np.int64), fin.astype(np.int64)])
        # time, then deletions first, then trace order (request index; a request's own delete follows its create
        # at equal times because a zero-lifetime VM's creation must precede its deletion).
        zero_life = is_dep & (times == table.arrival[req])
        order = np.lexsort((req, ~is_dep | zero_life, times))
        ev_req = np.ascontiguousarray(req[order])
        ev_dep = np.ascontiguousarray(is_dep[order])
        return cls(
            table=table,
            demand=np.ascontiguousarray(np.stack([table.cpu, table.mem], axis=1)),
            multi=np.ascontiguousarray(table.multi_numa),
            price=(prices or PriceModel()).income(table),
            ev_req=ev_req,
            ev_dep=ev_dep,
            arrival_events=np.flatnonzero(~ev_dep).astype(np.int64),
        )

    @property
    def events(self) -> int:
        return len(self.ev_req)


def oversize_mask(cluster: NumaCluster, trace: PreparedTrace) -> npt.NDArray[np.bool_]:
    """``(n,)`` requests that no machine of ``cluster`` could host even when empty."""
    cap = cluster.capacity[:, :, :2]
    kinds, inverse = np.unique(np.c_[trace.demand, trace.multi], axis=0, return_inverse=True)
    k = cluster.numa
    ok = np.empty(len(kinds), bool)
    for i, (cpu, mem, multi) in enumerate(kinds):
        d = np.array([cpu, mem])
        if multi:
            ok[i] = bool(np.any(np.all(cap >= d / k - K.FIT_TOL, axis=(1, 2))))
        else:
            ok[i] = bool(np.any(np.all(cap >= d - K.FIT_TOL, axis=2)))
    return np.asarray(~ok[inverse.ravel()])


@dataclass(frozen=True)
class EpisodeResult:
    """Metrics of one episode (the paper's, plus what an operator asks)."""

    length: int
    """Scheduled length: scored requests placed until the episode ended."""
    income: float
    cpu_alloc_mean: float
    """Average CPU allocation rate: the mean, over scored placements, of allocated / active CPU after each."""
    mem_alloc_mean: float
    pms_in_use_mean: float
    final_cpu_alloc: float
    final_mem_alloc: float
    final_pms: int
    """Machines in the cluster at the end (grows in Expansion)."""
    expansions: int
    oversize: int
    warm_placed: int
    warm_skipped: int
    warm_cpu_alloc: float
    status: str
    start_request: int
    departures: int
    rejected: int = 0
    """Scored requests that fit nowhere and were rejected without ending the episode (``end`` rule)."""


class NumaView(NamedTuple):
    """What a NUMA policy sees when one request waits: the state as read-only arrays, and the request.

    Built by the simulator (:meth:`NumaSim.view`) and by the live engine alike, so a policy written against it acts
    in both. Actions are ``machine * numa + node``; a multi-NUMA request takes ``1/numa`` of its demand from every
    node of one machine (any node of the machine names it). Immutable; a named tuple rather than a frozen dataclass
    because one is built per decision and a tuple builds in a third of the time (0.7 vs 2.4 us measured).
    """

    free: npt.NDArray[np.float64]
    """``(machines, numa, 2)`` free CPU (cores) and memory (GB) of every NUMA node."""
    capacity: npt.NDArray[np.float64]
    """``(machines, numa, 2)`` total CPU and memory of every NUMA node."""
    vm_count: npt.NDArray[np.int64]
    """``(machines,)`` VMs on each machine."""
    usable: npt.NDArray[np.bool_]
    """``(machines,)`` machines that may receive a VM (false: drained, failed, or not yet added)."""
    active: int
    """Machines ``0 .. active - 1`` exist (Expansion grows it); the rest are padding."""
    demand: npt.NDArray[np.float64]
    """``(2,)`` CPU and memory of the waiting request (the whole VM; a multi-NUMA VM splits it evenly)."""
    multi: bool
    """Whether the waiting request spans every NUMA node of its machine."""
    request: int = -1
    """Index of the request in its trace or engine (for logging; -1 when unknown)."""
    changes: npt.NDArray[np.int64] | None = None
    """The state's change log (:mod:`dcplace.sim.numa_kernel`, ``chg``), read-only: lets a policy keep an index
    over free capacity current (:mod:`dcplace.policies.numa_index`); None when the state keeps none."""

    @property
    def machines(self) -> int:
        return int(self.free.shape[0])

    @property
    def numa(self) -> int:
        return int(self.free.shape[1])

    def feasible(self) -> npt.NDArray[np.bool_]:
        """``(machines * numa,)`` bool: the actions that can host the waiting request (usable machines only)."""
        out = np.zeros(self.machines * self.numa, np.bool_)
        K.feasible_mask(self.free, self.demand, self.multi, self.active, out)
        out &= np.repeat(self.usable, self.numa)
        return out


class NumaSim:
    """A stateful shell over the compiled kernel: reset, ask for the waiting request, step, read metrics.

    All state is numpy arrays (see :mod:`dcplace.sim.numa_kernel` for their shapes); :meth:`copy` is cheap.
    """

    def __init__(
        self,
        cluster: NumaCluster,
        trace: PreparedTrace,
        scenario: Scenario,
    ) -> None:
        mixed = not np.all(cluster.capacity == cluster.capacity[:1])
        if cluster.machines < scenario.machines or (cluster.machines > scenario.machines and mixed):
            # a mixed cluster's machines beyond the scenario's were left out without a word (its big ones, last)
            uses = "max_pms" if scenario.mode == "expansion" else "pms"
            raise InputError(f"the cluster has {cluster.machines} machines but the scenario uses {scenario.machines} "
                             f"(Scenario.{uses}, the first ones); make them equal", field=uses)  # fmt: skip
        if cluster.capacity.shape[2] < 2:
            raise InputError("the NUMA simulator needs cpu and mem resources")
        self.cluster = cluster
        self.trace = trace
        self.scenario = scenario
        self.cap = np.ascontiguousarray(cluster.capacity[: scenario.machines, :, :2])
        self.cap_prefix = np.vstack([np.zeros((1, 2)), np.cumsum(self.cap.sum(axis=1), axis=0)])
        self.oversize = oversize_mask(NumaCluster(self.cap), trace)
        self.ip = np.zeros(K.N_IP, np.int64)
        self.ip[K.P_EXPANSION] = int(scenario.mode == "expansion")
        self.ip[K.P_RELEASE] = int(scenario.release)
        self.ip[K.P_MAX_ACTIVE] = scenario.machines
        self.ip[K.P_EXPAND_STEP] = scenario.expand_step
        self.ip[K.P_MAX_REQUESTS] = scenario.max_requests
        self.fp = np.zeros(K.N_FP, np.float64)
        self.fp[K.F_WARM_RATIO] = scenario.warm_start
        m, k = self.cap.shape[:2]
        n = len(trace.table)
        self.free = self.cap.copy()  # (machines, numa, 2) float64
        self.vm_count = np.zeros(m, np.int64)  # (machines,)
        self.usable = np.ones(m, np.bool_)  # (machines,) every machine of a simulated cluster may be used
        self.used = np.zeros(2, np.float64)  # (2,) allocated cpu, mem
        self.pm_of = np.full(n, -1, np.int64)  # (n,) ledger: machine of each request
        self.node_of = np.full(n, -1, np.int64)  # (n,) ledger: node (-1 = all nodes)
        self.ctr = np.zeros(K.N_CTR, np.int64)
        self.acc = np.zeros(K.N_ACC, np.float64)
        self.chg = K.change_log(m)  # (1 + L,) machines whose free capacity changed (for indexes over it)
        self._mask = np.zeros(m * k, bool)
        self.rejected = 0  # scored requests rejected under the end rule ``first-single-failure``
        self._ro_views()

    # -- lifecycle ------------------------------------------------------------------------------------------
    def start_event(self, rng: np.random.Generator) -> int:
        """Draw the episode's first event: the first creation at or after a uniform row of ``start_range``."""
        lo, hi = self.scenario.start_range
        e = self.trace.events
        hi = min(hi, e)
        if lo >= hi:  # a trace shorter than the range starts at its beginning
            lo, hi = 0, 1
        row = int(rng.integers(lo, hi))
        i = int(np.searchsorted(self.trace.arrival_events, row))
        i = min(i, len(self.trace.arrival_events) - 1)
        return int(self.trace.arrival_events[i])

    def reset(self, seed: int | None = None, start_event: int | None = None) -> int:
        """Empty the cluster, draw the start (unless given) and advance to the first decision; return the status."""
        rng = np.random.default_rng(seed)
        if start_event is not None:
            n = len(self.trace.ev_req)
            if not is_whole(start_event) or not 0 <= start_event < n:  # an IndexError, or counted from the end (-1)
                raise InputError(f"must be a whole number from 0 to {n - 1} (an event of the trace), got "
                                 f"{start_event!r}", field="start_event")  # fmt: skip
        start = self.start_event(rng) if start_event is None else int(start_event)
        K.seed_rng(int(rng.integers(0, 2**31 - 1)))
        self.free[:] = self.cap
        self.vm_count[:] = 0
        self.used[:] = 0.0
        self.pm_of[:] = -1
        self.node_of[:] = -1
        self.ctr[:] = 0
        self.acc[:] = 0.0
        K.note_reset(self.chg)
        self.ctr[K.C_PTR] = start
        self.ctr[K.C_ACTIVE] = self.scenario.pms
        self.ctr[K.C_PHASE] = K.WARMUP if self.scenario.warm_start > 0 else K.SCORED
        self.ctr[K.C_START_REQ] = -1 if self.scenario.warm_start > 0 else self.trace.ev_req[start]
        self.rejected = 0
        return self._advance()

    def _advance(self) -> int:
        status = self._next_decision()
        while status == K.TERMINATED and self.reject_failed():
            status = self._next_decision()
        return status

    def resume(self) -> int:
        """Apply the end rule after a loop outside :meth:`step` (a compiled heuristic's) stopped at ``TERMINATED``:
        reject the failed request and advance to the next decision if the rule allows; return the status."""
        return self._advance() if self.reject_failed() else self.status

    def reject_failed(self) -> bool:
        """After ``TERMINATED``: whether the end rule rejects the failed request and goes on (then it is skipped,
        counted in ``rejected``, and the status is ``DECIDE`` until the next decision is sought)."""
        if self.status != K.TERMINATED or self.scenario.end == "first-failure":
            return False
        p = int(self.ctr[K.C_PTR])
        if not self.trace.multi[self.trace.ev_req[p]]:
            return False
        self.rejected += 1
        self.ctr[K.C_PTR] = p + 1
        self.ctr[K.C_STATUS] = K.DECIDE
        return True

    def _next_decision(self) -> int:
        t = self.trace
        return int(
            K.next_decision(
                self.free,
                self.cap_prefix,
                self.vm_count,
                self.used,
                self.pm_of,
                self.node_of,
                self.ctr,
                self.acc,
                self.chg,
                self.ip,
                self.fp,
                t.demand,
                t.multi,
                self.oversize,
                t.ev_req,
                t.ev_dep,
            )
        )

    def step(self, action: int) -> int:
        """Place the waiting request at ``action``, then advance to the next decision; return the status."""
        if self.status != K.DECIDE:
            raise RuntimeError("step() called on a finished episode; call reset()")
        t = self.trace
        s = K.apply_action(
            self.free,
            self.cap_prefix,
            self.vm_count,
            self.used,
            self.pm_of,
            self.node_of,
            self.ctr,
            self.acc,
            self.chg,
            t.demand,
            t.multi,
            t.price,
            int(action),
        )
        if s != K.DECIDE:
            return int(s)
        return self._advance()

    # -- views ----------------------------------------------------------------------------------------------
    @property
    def status(self) -> int:
        return int(self.ctr[K.C_STATUS])

    @property
    def request(self) -> int:
        """Index of the request awaiting a decision (valid while ``status == DECIDE``)."""
        return int(self.ctr[K.C_REQ])

    @property
    def n_active(self) -> int:
        return int(self.ctr[K.C_ACTIVE])

    def feasible_mask(self) -> npt.NDArray[np.bool_]:
        """``(machines * numa,)`` bool: the actions that can host the waiting request (all false when done)."""
        if self.status != K.DECIDE:
            self._mask[:] = False
        else:
            r = self.request
            K.feasible_mask(self.free, self.trace.demand[r], bool(self.trace.multi[r]), self.n_active, self._mask)
        return self._mask.copy()

    def view(self) -> NumaView:
        """What a policy sees for the waiting request (read-only arrays; valid while ``status == DECIDE``)."""
        r = int(self.ctr[K.C_REQ])
        return NumaView(
            self._free_ro, self._cap_ro, self._count_ro, self._usable_ro, int(self.ctr[K.C_ACTIVE]),
            self._demand_ro[r], bool(self._multi[r]), r, self._chg_ro,
        )  # fmt: skip

    def _ro_views(self) -> None:
        # Read-only views built once (they share memory, so they always show the current state): a view per
        # decision then costs a few attribute reads, not array constructions.
        self._free_ro = read_only(self.free)
        self._cap_ro = read_only(self.cap)
        self._count_ro = read_only(self.vm_count)
        self._usable_ro = read_only(self.usable)
        self._demand_ro = read_only(self.trace.demand)
        self._multi = self.trace.multi
        self._chg_ro = read_only(self.chg)

    def __setstate__(self, state: dict[str, object]) -> None:
        # Unpickled (an actor elsewhere): pickle copied the read-only views apart from the arrays they show.
        self.__dict__.update(state)
        self._ro_views()

    def copy(self) -> NumaSim:
        """An independent copy of the dynamic state (for look-ahead and rollouts)."""
        other = object.__new__(NumaSim)
        other.__dict__.update(self.__dict__)
        for name in ("free", "vm_count", "used", "pm_of", "node_of", "ctr", "acc", "chg", "_mask"):  # usable: constant
            setattr(other, name, getattr(self, name).copy())
        other._ro_views()
        return other

    def result(self) -> EpisodeResult:
        n = max(int(self.ctr[K.C_LENGTH]), 1)
        cp = self.cap_prefix[self.n_active]
        return EpisodeResult(
            length=int(self.ctr[K.C_LENGTH]),
            income=float(self.acc[K.A_INCOME]),
            cpu_alloc_mean=float(self.acc[K.A_CPU_SUM] / n),
            mem_alloc_mean=float(self.acc[K.A_MEM_SUM] / n),
            pms_in_use_mean=float(self.acc[K.A_INUSE_SUM] / n),
            final_cpu_alloc=float(self.used[0] / cp[0]),
            final_mem_alloc=float(self.used[1] / cp[1]),
            final_pms=self.n_active,
            expansions=int(self.ctr[K.C_EXPANSIONS]),
            oversize=int(self.ctr[K.C_OVERSIZE]),
            warm_placed=int(self.ctr[K.C_WARM_PLACED]),
            warm_skipped=int(self.ctr[K.C_WARM_SKIPPED]),
            warm_cpu_alloc=float(self.acc[K.A_WARM_CPU]),
            status=STATUS_NAMES[self.status],
            start_request=int(self.ctr[K.C_START_REQ]),
            departures=int(self.ctr[K.C_DEPARTURES]),
            rejected=self.rejected,
        )

    # -- invariants -----------------------------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Recompute the allocation from the ledger alone and compare with the state; raise AssertionError.

        Independent of the kernel: plain numpy over the ledger. Checks: no node negative or above capacity; the
        ledger's sums equal capacity - free per node; VM counts and totals match; inactive machines are empty.
        """
        live = np.flatnonzero(self.pm_of >= 0)
        k = self.cap.shape[1]
        expect = np.zeros_like(self.cap)
        d = self.trace.demand[live]
        m = self.pm_of[live]
        node = self.node_of[live]
        single = node >= 0
        np.add.at(expect, (m[single], node[single]), d[single])
        for j in range(k):
            np.add.at(expect, (m[~single], np.full((~single).sum(), j)), d[~single] / k)
        # A tolerance of 1e-9 (as for the ledger below): splitting a VM over 3+ NUMA nodes adds and subtracts d / K,
        # which is not exact in floating point (8 - 8/3 + 8/3 can be 8 + 1e-15).
        if np.any(self.free < -1e-9):
            raise AssertionError("a NUMA node has negative free capacity")
        if np.any(self.free > self.cap + 1e-9):
            raise AssertionError("a NUMA node has more free capacity than its total")
        if not np.allclose(self.cap - self.free, expect, rtol=0, atol=1e-9):
            raise AssertionError("the ledger does not match the allocated capacity")
        if not np.array_equal(np.bincount(m, minlength=len(self.vm_count)), self.vm_count):
            raise AssertionError("VM counts per machine do not match the ledger")
        if not np.allclose(self.used, d.sum(axis=0), rtol=0, atol=1e-6):
            raise AssertionError("allocated totals do not match the ledger")
        if np.any(self.vm_count[self.n_active :] != 0):
            raise AssertionError("a machine outside the active cluster hosts VMs")
        if np.any(self.trace.multi[live] & single) or np.any(~self.trace.multi[live] & ~single):
            raise AssertionError("a VM's NUMA span in the ledger differs from its request")
        if int(self.ctr[K.C_IN_USE]) != int(np.count_nonzero(self.vm_count)):
            raise AssertionError("machines-in-use counter does not match")
