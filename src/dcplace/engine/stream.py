"""Streams that go on: a trace replayed through the live engine, a rejected request counted and the stream continued.

The paper's episodes end at the first request that does not fit ("length until the first failure"). An operator's
cluster does not stop there: the request is refused and the next one comes. :func:`run_stream` replays a
:class:`~dcplace.sim.numa.PreparedTrace` through :class:`~dcplace.engine.engine.PlacementEngine` (creations are
:meth:`~PlacementEngine.place` calls, deletions :meth:`~PlacementEngine.release` calls of the VMs that were placed,
in the simulator's event order) and measures acceptance, rejections by reason, and machines in use and allocation
over time.

A rejection's reason is the class (:mod:`dcplace.engine.explain`) holding the most machines for that request
(ties in the order cpu, mem, numa, drained, failed), or ``declined`` / ``invalid`` when the policy refused although a
machine could host it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt

from dcplace.cluster.numa import NumaCluster
from dcplace.engine.engine import PlacementEngine, Rejection, VmRequest
from dcplace.engine.explain import REASONS
from dcplace.sim.numa import PreparedTrace

NOT_REACHED = -3
REJECTED = -1


@dataclass(frozen=True)
class StreamSample:
    """The cluster after ``event`` events (trace time ``time`` seconds)."""

    event: int
    time: float
    requests: int
    accepted: int
    vms: int
    machines_in_use: int
    cpu_alloc: float
    """Allocated CPU / CPU of the cluster's machines."""
    mem_alloc: float


@dataclass(frozen=True)
class StreamResult:
    """A stream's outcome."""

    policy: str
    machines: int
    requests: int
    accepted: int
    rejected: int
    rejections: dict[str, int]
    """Rejected requests by reason (module docstring)."""
    first_rejection: int
    """Requests accepted before the first rejection (the paper's length; ``requests`` when none)."""
    departures: int
    wall_s: float
    samples: list[StreamSample] = field(default_factory=list)
    actions: npt.NDArray[np.int64] = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    """``(n,)`` action (machine slot * numa + node) of every request of the trace; -1 rejected, -3 not reached."""

    @property
    def acceptance(self) -> float:
        return self.accepted / self.requests if self.requests else 1.0

    def as_record(self) -> dict[str, Any]:
        return {
            "policy": self.policy,
            "machines": self.machines,
            "requests": self.requests,
            "accepted": self.accepted,
            "rejected": self.rejected,
            "acceptance": self.acceptance,
            "rejections": self.rejections,
            "first_rejection": self.first_rejection,
            "departures": self.departures,
            "wall_s": self.wall_s,
            "timeline": [s.__dict__ for s in self.samples],
        }


def engine_for(cluster: NumaCluster, policy: str = "best-fit", seed: int = 0) -> PlacementEngine:
    """An in-memory engine holding ``cluster``'s machines (ids ``pm-0``, ``pm-1``, ... in the cluster's order);
    ``seed``: the engine's own random stream (:class:`PlacementEngine`)."""
    engine = PlacementEngine(cluster.numa, policy, seed=seed)
    cap = cluster.capacity[:, :, :2]
    for m in range(cluster.machines):
        engine.add_machine(f"pm-{m}", cap[m, :, 0].tolist(), cap[m, :, 1].tolist())
    return engine


def rejection_reason(rej: Rejection) -> str:
    if rej.code != "no-fit" or rej.explanation is None:
        return rej.code
    inf = rej.explanation.infeasible
    return max(REASONS, key=lambda r: (inf[r], -REASONS.index(r)))


def run_stream(
    engine: PlacementEngine,
    trace: PreparedTrace,
    policy: str | None = None,
    start_event: int = 0,
    max_requests: int = 0,
    samples: int = 100,
    release: bool = True,
    prefix: str = "",
) -> StreamResult:
    """Replay ``trace`` from ``start_event`` through ``engine`` (``policy``: its default when None); stop after
    ``max_requests`` creations (0: the whole trace). ``samples``: timeline points (evenly spaced in events).
    ``prefix``: put before each request's row number to make its VM id (an engine that holds VMs already: ids
    that cannot be theirs). VMs that arrived before ``start_event`` are not the trace's here: their departures are
    skipped."""
    import time

    t0 = time.perf_counter()
    n = len(trace.table)
    actions = np.full(n, NOT_REACHED, np.int64)
    placed = np.zeros(n, np.bool_)
    reasons = dict.fromkeys((*REASONS, "declined", "invalid"), 0)
    ev_req, ev_dep = trace.ev_req, trace.ev_dep
    demand, multi = trace.demand, trace.multi
    arrival, departure = trace.table.arrival, trace.table.departure
    s = engine.state
    kn = engine.numa
    cap = engine.stats()["capacity"]
    requests = accepted = departures = 0
    first = -1
    timeline: list[StreamSample] = []
    end = len(ev_req)
    last = end
    if max_requests:  # sample over the events the stream will reach, not the whole trace
        i0 = int(np.searchsorted(trace.arrival_events, start_event))
        last = int(trace.arrival_events[min(i0 + max_requests, len(trace.arrival_events) - 1)]) + 1
    every = max(1, (last - start_event) // max(samples, 1))
    for e in range(start_event, end):
        r = int(ev_req[e])
        if ev_dep[e]:
            if release and placed[r]:
                engine.release(f"{prefix}{r}")
                placed[r] = False
                departures += 1
        else:
            if max_requests and requests >= max_requests:
                break
            requests += 1
            vm = f"{prefix}{r}"
            d = engine.place(VmRequest(vm, float(demand[r, 0]), float(demand[r, 1]), bool(multi[r])), policy,
                             explain=False)  # fmt: skip
            if isinstance(d, Rejection):
                actions[r] = REJECTED
                reasons[rejection_reason(d)] += 1
                if first < 0:
                    first = accepted
            else:
                v = s.slot_of_vm[vm]
                actions[r] = int(s.pm_of[v]) * kn + int(max(s.node_of[v], 0))
                placed[r] = True
                accepted += 1
        if samples and (e - start_event) % every == 0:
            timeline.append(
                StreamSample(
                    e, float(departure[r] if ev_dep[e] else arrival[r]), requests, accepted, len(s.slot_of_vm),
                    int(np.count_nonzero(s.vm_count)), float(s.used[0] / cap["cpu"]), float(s.used[1] / cap["mem"]),
                )
            )  # fmt: skip
    return StreamResult(
        policy=engine.policy(policy).name,
        machines=len(s.slot_of_machine),
        requests=requests,
        accepted=accepted,
        rejected=requests - accepted,
        rejections={k: v for k, v in reasons.items() if v},
        first_rejection=accepted if first < 0 else first,
        departures=departures,
        wall_s=time.perf_counter() - t0,
        samples=timeline,
        actions=actions,
    )
