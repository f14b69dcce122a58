"""Hindsight Learning's window plans (:func:`dcplace.learn.hindsight_learning.plan_window`): optimal against an
exhaustive search from any decision of an episode, accepted by the simulator step by step, and restricted to the
allowed actions."""

from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import make_table, tiny_numa_episodes
from dcplace.cluster import NumaCluster
from dcplace.learn.hindsight_learning import plan_window
from dcplace.policies import get_policy
from dcplace.sim import NumaSim, PreparedTrace, Scenario
from dcplace.sim import numa_kernel as K
from dcplace.sim.hindsight import brute_force_length, instance_at


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ep=tiny_numa_episodes(), skip=st.integers(0, 3))
def test_window_plan_is_optimal_from_any_decision_and_the_simulator_accepts_it(ep, skip):
    """From any decision of a First-Fit episode: the plan's prefix is the brute-force optimum of the window, it keeps
    First-Fit's own choices when they already place the whole window, and stepping the simulator through the plan
    never fails before its end."""
    cluster, trace, scenario = ep
    sim = NumaSim(cluster, trace, scenario)
    status = sim.reset(seed=0)
    ff = get_policy("first-fit")
    for _ in range(skip):
        if status != K.DECIDE:
            return
        status = sim.step(ff.choose(sim.view()))
    if status != K.DECIDE:
        return
    inst = instance_at(sim, limit=6)
    rollout = sim.copy()
    prefer = np.full(inst.requests, -1, np.int64)
    for j in range(inst.requests):
        if rollout.status != K.DECIDE:
            break
        prefer[j] = ff.choose(rollout.view())
        rollout.step(int(prefer[j]))
    plan = plan_window(inst, prefer, time_limit_s=20.0)
    assert plan.optimal and plan.value == brute_force_length(inst) == plan.bound
    assert np.all(plan.actions[: plan.value] >= 0) and np.all(plan.actions[plan.value :] == -1)
    if rollout.result().length - sim.result().length >= inst.requests:  # First-Fit already places the window
        assert plan.kept == plan.value and np.array_equal(plan.actions, prefer)
    for a in plan.actions[: plan.value]:
        assert sim.status == K.DECIDE
        sim.step(int(a))
    assert sim.status != K.INVALID


def test_window_plan_respects_allowed_actions():
    # two 4-core single-node machines, two 4-core VMs that never leave: each machine takes one
    table = make_table([(0, 100, 4, 4), (1, 100, 4, 4)])
    sim = NumaSim(NumaCluster.uniform(2, numa=1, cpu=4.0, mem=90.0), PreparedTrace.build(table),
                  Scenario(pms=2, release=False, start_range=(0, 1)))  # fmt: skip
    sim.reset(seed=0)
    inst = instance_at(sim, limit=10)
    assert plan_window(inst).value == 2
    only_first = [np.array([0]), np.array([0])]
    plan = plan_window(inst, allowed=only_first)  # both restricted to machine 0: only one fits
    assert plan.value == 1 and plan.actions.tolist() == [0, -1]
