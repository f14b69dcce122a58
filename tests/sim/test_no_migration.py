"""The no-migration check (issue 15): on tiny random instances requests ``0..k-1`` are feasible exactly when
``k <= L*`` (the exhaustive search), with or without the cheap prechecks and the symmetry breaking; every plan passes
the independent replay, and so does its canonical form; a case where migration would help and no plan exists."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings

from conftest import make_table, tiny_instance, tiny_numa_episodes
from dcplace.cluster import NumaCluster
from dcplace.sim import NumaSim, PreparedTrace, Scenario
from dcplace.sim import numa_kernel as K
from dcplace.sim.hindsight import (
    _integer_scale,
    _live_ends,
    _symmetric_machines,
    brute_force_length,
    canonical_plan,
    instance_from_sim,
    instants_packable,
    no_migration_check,
    packing_bound,
    repack_bound,
    replay_plan,
    simulator_replay,
    window_bound,
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ep=tiny_numa_episodes())
def test_feasible_exactly_up_to_the_exhaustive_length(ep):
    assume((tiny := tiny_instance(ep)) is not None)
    _, inst = tiny
    brute = brute_force_length(inst)
    _, fixed_end = _live_ends(inst, inst.requests)
    groups = _symmetric_machines(inst, fixed_end)
    for k in range(1, inst.requests + 1):
        for symmetry, precheck in ((False, True), (False, False), (True, False)):
            res = no_migration_check(inst, k, time_limit_s=20.0, symmetry=symmetry, precheck=precheck)
            assert res.exact and res.k == k
            assert res.status == ("feasible" if k <= brute else "infeasible"), (k, brute, symmetry, precheck, res)
            if res.status == "feasible":
                assert res.actions is not None and len(res.actions) == k
                assert replay_plan(inst, res.actions) == -1
                assert replay_plan(inst, canonical_plan(inst, res.actions, groups)) == -1
                # the plan as a hint decides at once
                again = no_migration_check(inst, k, hint=res.actions)
                assert (again.status, again.by) == ("feasible", "hint")


def _two_node_instance(rows):
    sim = NumaSim(NumaCluster.uniform(1, cpu=4.0, mem=90.0), PreparedTrace.build(make_table(rows)),
                  Scenario(pms=1, release=True, start_range=(0, 1)))  # fmt: skip
    assert sim.reset(seed=0) == K.DECIDE
    return instance_from_sim(sim, limit=10)


def test_migration_would_help_but_no_plan_exists():
    # 1 machine, 2 nodes of 4 cores. A (2 cores, stays) arrives first; G (4 cores, leaves at t=3) needs the other
    # node, so B (2 cores, t=2, leaves at t=6) must share A's node and C (2 cores, t=4, stays) then takes G's; when
    # B has left, D (4 cores, t=6) needs a whole node, but A and C hold one each. Moving C next to A would make room:
    # every instant is packable with migration (so every relaxation allows 5), yet at most 4 can be placed.
    inst = _two_node_instance([(0, 100, 2, 1), (1, 2, 4, 1), (2, 4, 2, 1), (4, 100, 2, 1), (6, 100, 4, 1)])
    assert inst.requests == 5
    assert packing_bound(inst) == repack_bound(inst) == 5
    assert brute_force_length(inst) == 4
    assert no_migration_check(inst, 4).status == "feasible"
    res = no_migration_check(inst, 5)
    assert (res.status, res.by) == ("infeasible", "cp-sat")
    # the replay sees what a wrong plan does: C on A's node overloads node 0 at C's arrival (B is still there)
    assert replay_plan(inst, np.array([0, 1, 0, 0])) == 3
    assert replay_plan(inst, np.array([0, 1, 0, 1])) == -1


def test_integer_scale_reads_thirds_of_cores():
    assert _integer_scale(np.array([40.0, 4.0 / 3.0, 8.0 / 3.0, 12.0])) == 3
    assert _integer_scale(np.array([90.0, 8.0, 24.0])) == 1
    assert _integer_scale(np.array([0.5, 0.25])) == 4
    assert _integer_scale(np.array([np.pi])) is None


def test_float_safe_leaves_a_margin_for_thirds_of_cores():
    # 1 machine, 2 nodes of 4 cores: three 4/3-core VMs fill node 0 exactly, then a 4-core VM fills node 1; the
    # exact check places all four, the float-safe one will not fill a node exactly with thirds (and proves nothing)
    third = 4.0 / 3.0
    inst = _two_node_instance([(0, 100, third, 1), (1, 100, third, 1), (2, 100, third, 1), (3, 100, 4, 1)])
    assert no_migration_check(inst, 4, precheck=False).status == "feasible"
    safe = no_migration_check(inst, 4, precheck=False, float_safe=True)
    assert (safe.status, safe.exact) == ("unknown", False)
    assert no_migration_check(inst, 3, precheck=False, float_safe=True).status == "feasible"


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ep=tiny_numa_episodes())
def test_the_closest_plan_keeps_every_feasible_choice_of_the_hint(ep):
    """``closest``: a feasible plan that agrees with the hint as much as any plan can. A hint that is itself a plan
    comes back unchanged (without the precheck that would return it at once); a hint cut short (its last choice
    dropped) is completed, its kept choices all honoured (the completed hint is a plan agreeing with all of them)."""
    assume((tiny := tiny_instance(ep)) is not None)
    _, inst = tiny
    k = brute_force_length(inst)
    assume(k > 0)
    plan = no_migration_check(inst, k, time_limit_s=20.0).actions
    assert plan is not None
    same = no_migration_check(inst, k, time_limit_s=20.0, hint=plan, precheck=False, closest=True)
    assert same.status == "feasible" and np.array_equal(same.actions, plan)
    cut = plan.copy()
    cut[-1] = -1
    res = no_migration_check(inst, k, time_limit_s=20.0, hint=cut, precheck=False, closest=True)
    assert res.status == "feasible" and replay_plan(inst, res.actions) == -1
    assert np.array_equal(res.actions[:-1], plan[:-1])


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ep=tiny_numa_episodes())
def test_instants_with_no_migration_between_pack_whatever_a_plan_places(ep):
    """Whenever requests ``0..k-1`` have a plan, any set of their arrivals packs with each VM kept on one node (so
    a proof that some set does not pack is a proof that ``L* < k``), and the window bound never cuts below L*."""
    assume((tiny := tiny_instance(ep)) is not None)
    _, inst = tiny
    brute = brute_force_length(inst)
    for k in range(1, brute + 1):
        assert instants_packable(inst, list(range(k)), time_limit_s=20.0) is True
        assert instants_packable(inst, [0, k - 1], time_limit_s=20.0) is True
    hi = packing_bound(inst)
    bound, checks = window_bound(inst, min(brute, hi), hi, window=3, time_limit_s=20.0)
    assert brute <= bound <= hi and all(c["status"] in ("packable", "infeasible") for c in checks)


def test_instants_tied_by_the_vms_that_span_them_prove_what_migration_hides():
    # the instance of test_migration_would_help_but_no_plan_exists (requests A G B C D): each arrival packs alone
    # and so do C's and D's together, but at B's arrival G holds a whole node, so A and B share the other; they stay
    # there through C's arrival, C takes G's node, and at D's arrival A and C hold one node each: D fits nowhere
    inst = _two_node_instance([(0, 100, 2, 1), (1, 2, 4, 1), (2, 4, 2, 1), (4, 100, 2, 1), (6, 100, 4, 1)])
    assert all(instants_packable(inst, [j]) for j in range(5))
    assert instants_packable(inst, [3, 4]) is True
    assert instants_packable(inst, [2, 3, 4]) is False
    assert window_bound(inst, 4, 5, window=3)[0] == 4 == brute_force_length(inst)
    assert window_bound(inst, 4, 5, window=2)[0] == 5  # too short a window proves nothing; 5 is still a bound
    with pytest.raises(ValueError, match="window"):
        window_bound(inst, 4, 5, window=0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ep=tiny_numa_episodes())
def test_the_simulator_accepts_a_plan_exactly_when_the_numpy_replay_does(ep):
    """simulator_replay (the simulator stepped through a plan) and replay_plan (the loads re-added in numpy) are the
    two independent checks of a clairvoyant plan: they must agree on every plan, feasible or not."""
    assume((tiny := tiny_instance(ep)) is not None)
    sim, inst = tiny
    brute = brute_force_length(inst)
    assume(brute > 0)
    res = no_migration_check(inst, brute, time_limit_s=20.0)
    assert res.status == "feasible" and res.actions is not None
    assert simulator_replay(sim, res.actions) == "ok"
    n_actions = inst.capacity.shape[0] * inst.capacity.shape[1]
    for j in range(len(res.actions)):
        for a in range(n_actions):
            plan = np.array(res.actions, np.int64)
            plan[j] = a
            said = simulator_replay(sim, plan)
            assert (said == "ok") == (replay_plan(inst, plan) == -1), (j, a, said)
            # a refusal says where: the simulator refused the action, or ended (no action fits the request)
            assert said == "ok" or said.startswith(("refused request", "ended before request")), said
    assert simulator_replay(sim, [n_actions]) == f"request 0: action {n_actions} does not exist"
