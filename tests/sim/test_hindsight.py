"""The hindsight bound: CP-SAT's exact length equals an exhaustive search of the online episode on tiny instances,
the aggregate relaxation is never below it, and no heuristic ever places more than either; the end rule."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, assume, given, settings

from conftest import make_table, tiny_instance, tiny_numa_episodes
from dcplace.cluster import NumaCluster
from dcplace.policies import get_policy
from dcplace.sim import NumaSim, PreparedTrace, Scenario
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import finish
from dcplace.sim.hindsight import (
    aggregate_bound,
    brute_force_length,
    exact_length,
    instance_from_sim,
    packing_bound,
    repack_bound,
)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ep=tiny_numa_episodes())
def test_exact_equals_brute_force_and_bounds_every_heuristic(ep):
    assume((tiny := tiny_instance(ep)) is not None)
    sim, inst = tiny
    brute = brute_force_length(inst)
    exact = exact_length(inst, time_limit_s=20.0)
    assert exact.optimal
    assert exact.value == brute
    assert aggregate_bound(inst) >= packing_bound(inst) >= repack_bound(inst) >= brute
    # scanning from any start (e.g. a length a plan reached) still bounds: only the scan's cost changes
    for start in (0, 1, brute, brute + 1):
        for search in ("scan", "bisect"):
            assert packing_bound(inst) >= repack_bound(inst, start=start, search=search) >= brute
    for name in ("first-fit", "best-fit", "industrial", "random"):
        s = sim.copy()
        finish(s, get_policy(name))
        assert min(s.result().length, inst.requests) <= brute, name


def test_aggregate_bound_is_the_capacity_ceiling_without_releases():
    # 1 machine, 2 nodes of 4 cores: 4 + 4 + 1 cores fit 8 only as far as the second request
    table = make_table([(0, 100, 4, 4), (1, 100, 4, 4), (2, 100, 1, 1)])
    sim = NumaSim(NumaCluster.uniform(1, cpu=4.0, mem=90.0), PreparedTrace.build(table), Scenario(pms=1,
                  release=False, start_range=(0, 1)))  # fmt: skip
    sim.reset(seed=0)
    inst = instance_from_sim(sim, limit=10)
    assert aggregate_bound(inst) == 2 == brute_force_length(inst)


def test_aggregate_bound_counts_releases_in_the_simulators_order():
    # the first VM leaves at t=1, exactly when the second arrives: deletions first, so both fit one 4-core node
    table = make_table([(0, 1, 4, 4), (1, 100, 4, 4)])
    for release, expect in ((True, 2), (False, 1)):
        sim = NumaSim(NumaCluster.uniform(1, numa=1, cpu=4.0, mem=90.0), PreparedTrace.build(table),
                      Scenario(pms=1, release=release, start_range=(0, 1)))  # fmt: skip
        sim.reset(seed=0)
        inst = instance_from_sim(sim, limit=10)
        assert aggregate_bound(inst) == expect == brute_force_length(inst)


def test_packing_bound_sees_what_pooling_misses():
    # 1 machine of 2 nodes (4 cores each): the warm-up puts a 3-core VM on node 0, a 1-core VM goes anywhere; a
    # multi-NUMA 4-core VM (40 GB, above the 32 GB threshold) needs 2 cores on both nodes: the pooled CPU
    # (3 + 1 + 4 <= 8) allows it, node 0 (1 core left) does not
    table = make_table([(0, 100, 3, 1), (1, 100, 1, 1), (2, 100, 4, 40)])
    scenario = Scenario(pms=1, release=True, start_range=(0, 1), warm_start=0.25)
    sim = NumaSim(NumaCluster.uniform(1, cpu=4.0, mem=90.0), PreparedTrace.build(table), scenario)
    assert sim.reset(seed=0) == K.DECIDE
    inst = instance_from_sim(sim, limit=10)
    assert inst.multi.tolist() == [False, True] and len(inst.fixed_demand) == 1
    assert aggregate_bound(inst) == 2
    assert packing_bound(inst) == 1 == brute_force_length(inst)


def test_repack_bound_sees_what_the_packing_conditions_miss():
    # 1 machine of 2 nodes (4 cores each), no warm-up: 3 + 3 + 2 cores fit the pooled 8 and every count and volume
    # condition, but the third VM finds 1 core on each node however the first two sit
    table = make_table([(0, 100, 3, 1), (1, 100, 3, 1), (2, 100, 2, 1)])
    sim = NumaSim(NumaCluster.uniform(1, cpu=4.0, mem=90.0), PreparedTrace.build(table),
                  Scenario(pms=1, release=True, start_range=(0, 1)))  # fmt: skip
    assert sim.reset(seed=0) == K.DECIDE
    inst = instance_from_sim(sim, limit=10)
    assert aggregate_bound(inst) == packing_bound(inst) == 3
    assert repack_bound(inst) == 2 == brute_force_length(inst)
    assert repack_bound(inst, search="bisect") == 2 == repack_bound(inst, start=2, search="bisect")
    with pytest.raises(ValueError, match="search"):
        repack_bound(inst, search="binary")


def test_instance_needs_the_first_scored_decision():
    table = make_table([(0, 1, 1, 1), (1, 1, 1, 1)])
    sim = NumaSim(NumaCluster.uniform(1), PreparedTrace.build(table), Scenario(pms=1, start_range=(0, 1)))
    sim.reset(seed=0)
    sim.step(0)
    with pytest.raises(ValueError):
        instance_from_sim(sim, limit=5)


def test_first_single_failure_rejects_double_numa_and_ends_at_a_single():
    # 1 machine of 2 x (8 cores, 32 GB): a 16-core double-NUMA VM fills it, the next double fails (rejected under
    # first-single-failure), a single 4-core fails and ends the episode.
    table = make_table([(0, 100, 16, 40), (1, 100, 16, 40), (2, 100, 4, 4), (3, 100, 1, 1)])
    cluster = NumaCluster.uniform(1, cpu=8.0, mem=32.0)
    for end, length, rejected in (("first-failure", 1, 0), ("first-single-failure", 1, 1)):
        sc = Scenario(pms=1, start_range=(0, 1), end=end)  # type: ignore[arg-type]
        for policy in ("first-fit", "best-fit"):
            sim = NumaSim(cluster, PreparedTrace.build(table), sc)
            sim.reset(seed=0)
            status = finish(sim, get_policy(policy))
            res = sim.result()
            assert (status, res.length, res.rejected) == (K.TERMINATED, length, rejected)
            sim.check_invariants()
    # a single that fits after the rejected double keeps the episode going, on the fast and the step path alike
    table = make_table([(0, 100, 16, 40), (1, 100, 16, 40), (2, 1, 1, 1), (3, 1, 1, 1)], threshold=32.0)
    cluster = NumaCluster.uniform(1, cpu=9.0, mem=32.0)
    sc = Scenario(pms=1, start_range=(0, 1), end="first-single-failure")
    fast = NumaSim(cluster, PreparedTrace.build(table), sc)
    fast.reset(seed=0)
    finish(fast, get_policy("first-fit"))
    step = NumaSim(cluster, PreparedTrace.build(table), sc)
    step.reset(seed=0)
    while step.status == K.DECIDE:
        step.step(get_policy("first-fit").choose(step.view()))
    assert fast.result() == step.result()
    assert (fast.result().length, fast.result().rejected) == (3, 1)
