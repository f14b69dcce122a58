"""One set of transitions: a trace replayed through the live engine gives the simulator's placements, decision by
decision, for every heuristic (the synthetic trace always; Huawei-East-1 when the shared data is present)."""

from __future__ import annotations

import numpy as np
import pytest

from dcplace.cluster.numa import NumaCluster
from dcplace.engine.stream import REJECTED, engine_for, run_stream
from dcplace.policies import get_policy
from dcplace.policies.numa_heuristics import CODES
from dcplace.sim.episodes import prepare
from dcplace.sim.numa import NumaSim, PreparedTrace, Scenario
from dcplace.sim.numa_kernel import C_PTR, DECIDE, TERMINATED
from dcplace.workload.synthetic import synthetic_trace
from dcplace.workload.table import RequestTable
from dcplace.workload.traces import load_trace, trace_available

DETERMINISTIC = sorted(set(CODES) - {"random"})
"""The heuristics whose decisions the engine must repeat: ``random`` draws from the engine's own stream
(``PlacementEngine(seed=...)``; tests/engine/test_engine.py), not a simulator episode's."""


def simulator_actions(trace: PreparedTrace, pms: int, policy: str, seed: int = 7) -> tuple[np.ndarray, int]:
    """(n,) action of each request decided by ``dcplace simulate numa``'s simulator from the trace's first row
    (-3 not reached) and the final status."""
    cluster = NumaCluster.uniform(pms)
    sim = NumaSim(cluster, trace, Scenario(pms=pms, release=True, warm_start=0.0, start_range=(0, 1)))
    pol = get_policy(policy)
    actions = np.full(len(trace.table), -3, np.int64)
    status = sim.reset(seed=seed)
    while status == DECIDE:
        r = sim.request
        a = pol.choose(sim.view())
        actions[r] = a
        status = sim.step(a)
    if status == TERMINATED:  # the request that fit nowhere is the event the episode stopped at
        actions[trace.ev_req[sim.ctr[C_PTR]]] = REJECTED
    sim.check_invariants()
    return actions, status


def _canonical(actions: np.ndarray, trace: PreparedTrace) -> np.ndarray:
    """Multi-NUMA placements name the machine (any node of it is the same action): keep node 0."""
    out = actions.copy()
    placed = out >= 0
    out[placed & trace.multi] -= out[placed & trace.multi] % 2
    return out


def check_equivalent(trace: PreparedTrace, pms: int, policy: str) -> None:
    sim_actions, status = simulator_actions(trace, pms, policy)
    engine = engine_for(NumaCluster.uniform(pms), policy)
    n_sim = int(np.sum(sim_actions != -3))
    res = run_stream(engine, trace, max_requests=n_sim, samples=0)
    engine.check_invariants()
    assert res.requests == n_sim
    got, want = _canonical(res.actions, trace), _canonical(sim_actions, trace)
    diff = np.flatnonzero(got != want)
    assert len(diff) == 0, (
        f"{policy}: first difference at request {diff[0]}: engine {got[diff[0]]}, sim {want[diff[0]]}"
    )
    if status == TERMINATED:  # the simulator's episode ends where the engine first rejects
        assert res.rejected == 1 and res.first_rejection == res.accepted


@pytest.fixture(scope="module")
def synthetic() -> PreparedTrace:
    return prepare(synthetic_trace(n=1500, seed=3), 32.0)


@pytest.mark.parametrize("policy", DETERMINISTIC)
def test_engine_replays_simulator_decisions(synthetic: PreparedTrace, policy: str) -> None:
    check_equivalent(synthetic, 60, policy)


@pytest.mark.parametrize("policy", ["first-fit", "best-fit"])
def test_engine_rejects_where_the_simulator_ends(synthetic: PreparedTrace, policy: str) -> None:
    _, status = simulator_actions(synthetic, 8, policy)
    assert status == TERMINATED  # 8 machines are too few for this trace
    check_equivalent(synthetic, 8, policy)


@pytest.fixture(scope="module")
def huawei_head() -> PreparedTrace:
    """The first 12,000 requests of Huawei-East-1 (the whole trace, 116,313 requests, is replayed for every
    heuristic by ``benchmarks/bench_engine.py --check``; here the test time stays small)."""
    t = load_trace("huawei-east-1")
    n = 12_000
    head = RequestTable.from_arrays(
        t.arrival[:n], t.departure[:n], t.cpu[:n], t.mem[:n], vmid=t.vmid[:n], source=f"{t.source}[:{n}]"
    )
    return prepare(head, 32.0)


@pytest.mark.skipif(not trace_available("huawei-east-1"), reason="needs the shared Huawei-East-1 trace")
@pytest.mark.parametrize("policy", DETERMINISTIC)
def test_huawei_east_1_replay(huawei_head: PreparedTrace, policy: str) -> None:
    check_equivalent(huawei_head, 150, policy)


def test_schedrl_decides_in_the_engine_as_in_the_simulator(synthetic: PreparedTrace) -> None:
    """SchedRL's network is trained for one machine count (50): the engine keeps 50 machines in 64 slots (its
    arrays grow by doubling), so the network refused every engine view and ``serve --policy schedrl`` could never
    place. The view is now cut to the trained count where no machine sits past it: decision by decision the
    simulator's; and a cluster of another size is still refused."""
    check_equivalent(synthetic, 50, "schedrl")
    from dcplace.engine import PlacementEngine, VmRequest
    from dcplace.errors import InputError

    forty = engine_for(NumaCluster.uniform(40), "schedrl")
    with pytest.raises(InputError, match="trained for 50 machines and cannot act on 40: run it on 50 machines"):
        forty.place(VmRequest("v", 1.0, 1.0))
    # 50 machines with the hole of a removed one among them (a newcomer's walkthrough: refused) decide as the same
    # 50 machines registered without it
    holed, plain = PlacementEngine(2, "schedrl"), PlacementEngine(2, "schedrl")
    for m in range(51):
        holed.add_machine(f"pm{m}", [44, 44], [128, 128])
        if m != 5:
            plain.add_machine(f"pm{m}", [44, 44], [128, 128])
    holed.remove_machine("pm5")
    sizes = np.random.default_rng(4).choice([1, 2, 4, 8, 16], 300)
    for e in (holed, plain):
        got = [e.place(VmRequest(f"v{i}", float(x), float(2 * x)), explain=False) for i, x in enumerate(sizes)]
        e.check_invariants()
        assert all(d.accepted for d in got)
    assert [r.machine for r in holed.vms()] == [r.machine for r in plain.vms()]
    # a VM that fits nowhere: the simulator never asks the network then, the engine does (argmax of nothing, a 500)
    big = holed.place(VmRequest("big", 60.0, 8.0))
    assert not big.accepted and big.code == "no-fit"  # type: ignore[union-attr]
    holed.check_invariants()
