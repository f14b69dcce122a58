"""Shared fixtures: tiny traces written by the tests themselves."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np
import pytest
from hypothesis import strategies as st

from dcplace.cluster.topology import BW_SCALE
from dcplace.workload.netreq import NetRequests
from dcplace.workload.table import RequestTable

if TYPE_CHECKING:
    from dcplace.engine import PlacementEngine
    from dcplace.engine.journal import JournalEntry


def net_requests(rows: list[tuple[int, int, float, int]]) -> NetRequests:
    """A network-allocation request set from rows of (cpu, mem, bw in link units, hold)."""
    a = np.array(rows, dtype=float).reshape(-1, 4)
    hold = a[:, 3].astype(np.int64)
    return NetRequests(
        a[:, 0].astype(np.int64),
        a[:, 1].astype(np.int64),
        np.round(a[:, 2] * BW_SCALE).astype(np.int64),
        hold,
        int(hold.max()),
    )


def make_table(rows: list[tuple[float, float, float, float]], threshold: float = 32.0) -> RequestTable:
    """rows of (arrival, lifetime, cpu, mem)."""
    a = np.array(rows, dtype=float).reshape(-1, 4)
    return RequestTable.from_arrays(a[:, 0], a[:, 0] + a[:, 1], a[:, 2], a[:, 3]).with_double_numa_threshold(threshold)


@pytest.fixture
def tiny_csv(tmp_path):
    p = tmp_path / "tiny.csv"
    p.write_text("vmid,cpu,mem,at,lt\n0,4,16,0,100\n1,1,2,5,50\n2,16,64,7,30\n3,2,4,7,10\n")
    return p


FLAVOURS = [(1, 1), (2, 4), (4, 8), (8, 16), (8, 32), (16, 32), (16, 64)]


@st.composite
def tiny_numa_episodes(draw):
    """A tiny trace (warm-up and scored requests), 1-2 machines of 2 nodes, releases on or off, a warm start: the
    hindsight tests' instances (small enough for an exhaustive search)."""
    from dcplace.cluster import NumaCluster
    from dcplace.sim import PreparedTrace, Scenario

    n = draw(st.integers(1, 10))
    gaps = draw(st.lists(st.integers(0, 5), min_size=n, max_size=n))
    lives = draw(st.lists(st.integers(0, 30), min_size=n, max_size=n))
    kinds = draw(st.lists(st.integers(0, len(FLAVOURS) - 1), min_size=n, max_size=n))
    arrival = np.cumsum(gaps).astype(float)
    table = make_table([(arrival[i], lives[i], *FLAVOURS[kinds[i]]) for i in range(n)], threshold=16.0)
    machines = draw(st.integers(1, 2))
    cluster = NumaCluster.uniform(machines, cpu=draw(st.sampled_from([8.0, 16.0])), mem=32.0)
    scenario = Scenario(pms=machines, release=draw(st.booleans()), warm_start=draw(st.sampled_from([0.0, 0.3])),
                        start_range=(0, 1))  # fmt: skip
    return cluster, PreparedTrace.build(table), scenario


def tiny_instance(ep, limit: int = 7):  # type: ignore[no-untyped-def]
    """The simulator of a :func:`tiny_numa_episodes` episode at its first scored decision and its hindsight instance
    of at most ``limit`` requests, or None when the episode scores nothing."""
    from dcplace.sim import NumaSim
    from dcplace.sim import numa_kernel as K
    from dcplace.sim.hindsight import instance_from_sim

    sim = NumaSim(*ep)
    if sim.reset(seed=0) != K.DECIDE:
        return None
    return sim, instance_from_sim(sim, limit=limit)


def journal_replay(entries: list[JournalEntry]) -> tuple[dict[str, tuple[object, ...]], dict[str, tuple[object, ...]]]:
    """The VMs (id -> machine, node, cpu, mem, multi, pinned) and machines (id -> status, rack, capacity per node)
    that the journal's events build from an empty cluster: an independent reading of what the journal says."""
    vms: dict[str, tuple[object, ...]] = {}
    machines: dict[str, tuple[object, ...]] = {}
    for e in entries:
        if e.event == "placed":
            assert e.vm not in vms, f"placed twice without a release: {e}"
            pinned = bool((e.detail or {}).get("pinned", False))
            vms[e.vm] = (e.machine, e.node, e.cpu, e.mem, e.multi, pinned)  # type: ignore[index]
        elif e.event == "moved":
            assert e.detail is not None and vms[e.vm][0] == e.detail["from"]  # type: ignore[index]
            vms[e.vm] = (e.machine, e.node, *vms[e.vm][2:])  # type: ignore[index]
        elif e.event in ("pinned", "unpinned"):
            vms[e.vm] = (*vms[e.vm][:5], e.event == "pinned")  # type: ignore[index]
        elif e.event in ("released", "dropped"):
            assert vms.pop(e.vm)[:2] == (e.machine, e.node)  # type: ignore[arg-type]
        elif e.event == "machine-added":
            d = e.detail or {}
            machines[e.machine] = ("active", d.get("rack"), d.get("capacity"))  # type: ignore[index]
        elif e.event == "machine-removed":
            del machines[e.machine]  # type: ignore[arg-type]
        elif e.event == "machine-changed":
            d = e.detail or {}
            was = machines[e.machine]  # type: ignore[index]
            assert (was[1], was[2]) == (d["from_rack"], d["from_capacity"]), (was, e)
            machines[e.machine] = (was[0], d["rack"], d["capacity"])  # type: ignore[index]
        elif e.event.startswith("machine-"):
            machines[e.machine] = (e.event.removeprefix("machine-"), *machines[e.machine][1:])  # type: ignore[index]
        else:  # a journal-resumed entry would mean a gap: these tests never turn the journal off
            assert e.event == "rejected" and e.machine is None, e
    return vms, machines


def journal_tables(e: PlacementEngine) -> tuple[dict[str, tuple[object, ...]], dict[str, tuple[object, ...]]]:
    vms = {v.id: (v.machine, v.node, v.cpu, v.mem, v.multi, v.id in e.pinned) for v in e.vms()}
    machines = {m.id: (m.status, m.rack, [[c, g] for c, g in zip(m.cpu, m.mem, strict=True)]) for m in e.machines()}
    return vms, machines
