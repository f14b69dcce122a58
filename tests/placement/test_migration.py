"""Migration plans and evacuation, checked against the independent replay checker and a brute-force search."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dcplace.errors import InputError
from dcplace.placement.migration import (
    ClusterPlacement,
    MigrationPlan,
    Move,
    Placement,
    evacuate,
    plan_migrations,
)
from dcplace.placement.plan_check import check_plan, min_moves

FAST = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _random_fit(rng: np.random.Generator, free: np.ndarray, d: np.ndarray, multi: bool, machines: np.ndarray):
    """A random place with room among ``machines`` (updating ``free``), or None."""
    k_nodes = free.shape[1]
    opts = []
    for m in machines:
        if multi:
            if np.all(free[m] >= d / k_nodes):
                opts.append((int(m), -1))
        else:
            opts += [(int(m), k) for k in range(k_nodes) if np.all(free[m, k] >= d)]
    if not opts:
        return None
    m, k = opts[rng.integers(len(opts))]
    if multi:
        free[m] -= d / k_nodes
    else:
        free[m, k] -= d
    return m, k


@st.composite
def instances(draw, max_vms: int = 5):
    """A tiny cluster, a feasible current placement and a feasible target of the same VMs, made one of two ways:

    * ``shuffle``: identical machines, a random packing, and the target relabels the machines by a random
      permutation (and may swap the two nodes of a machine): full machines exchanging their VMs, the cycles that
      need staging; an optional spare machine (usable or not) may serve as the staging room;
    * ``random``: random capacities, any machine may hold VMs now (drained ones included), the target is an
      independent random packing onto the usable machines (pinned VMs keep their place).
    """
    shuffle = draw(st.booleans())
    n_machines = draw(st.integers(2, 3))
    k_nodes = draw(st.integers(1, 2))
    n_vms = draw(st.integers(1, max_vms))
    sizes = n_machines * k_nodes * 2
    if shuffle:
        cap = np.full((n_machines, k_nodes, 2), float(draw(st.integers(2, 4))))
    else:
        cap = np.array(draw(st.lists(st.integers(2, 4), min_size=sizes, max_size=sizes)), float)
        cap = cap.reshape(n_machines, k_nodes, 2)
    demand = np.array(draw(st.lists(st.integers(1, 3), min_size=2 * n_vms, max_size=2 * n_vms)), float)
    demand = demand.reshape(n_vms, 2)
    multi = np.array(draw(st.lists(st.booleans(), min_size=n_vms, max_size=n_vms))) & (k_nodes > 1)
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    free = cap.copy()
    cur_m, cur_k = np.full(n_vms, -1), np.full(n_vms, -1)
    for v in rng.permutation(n_vms):
        p = _random_fit(rng, free, demand[v], bool(multi[v]), np.arange(n_machines))
        if p is not None:
            cur_m[v], cur_k[v] = p
    placed = cur_m >= 0
    want_pin = np.array(draw(st.lists(st.booleans(), min_size=n_vms, max_size=n_vms)))
    if shuffle:
        perm = rng.permutation(n_machines)
        flip = rng.random(n_machines) < 0.5
        tgt_m = np.where(placed, perm[np.maximum(cur_m, 0)], -1)
        tgt_k = np.where(placed & ~multi & flip[tgt_m], (k_nodes - 1) - cur_k, cur_k)
        pinned = want_pin & placed & (tgt_m == cur_m) & (multi | (tgt_k == cur_k))
        spare = draw(st.sampled_from(["none", "usable", "drained"]))
        usable = np.ones(n_machines, bool)
        if spare != "none":
            cap = np.concatenate([cap, cap[:1]])
            usable = np.append(usable, spare == "usable")
        state = ClusterPlacement.build(cap, demand, multi, cur_m, cur_k, usable=usable, pinned=pinned)
        return state, Placement(tgt_m, tgt_k)
    usable = np.array(draw(st.lists(st.booleans(), min_size=n_machines, max_size=n_machines)))
    usable[draw(st.integers(0, n_machines - 1))] = True
    pinned = want_pin & placed & usable[np.maximum(cur_m, 0)]
    free = cap.copy()
    tgt_m, tgt_k = cur_m.copy(), cur_k.copy()
    for v in np.flatnonzero(pinned):
        if multi[v]:
            free[cur_m[v]] -= demand[v] / k_nodes
        else:
            free[cur_m[v], cur_k[v]] -= demand[v]
    for v in rng.permutation(n_vms):
        if not placed[v] or pinned[v]:
            continue
        p = _random_fit(rng, free, demand[v], bool(multi[v]), np.flatnonzero(usable))
        if p is None:
            return None  # no reshuffle found: the tests skip it
        tgt_m[v], tgt_k[v] = p
    state = ClusterPlacement.build(cap, demand, multi, cur_m, cur_k, usable=usable, pinned=pinned)
    return state, Placement(tgt_m, tgt_k)


@FAST
@given(instances(), st.integers(0, 2))
def test_plans_are_safe_and_stuck_only_when_brute_force_agrees(inst, max_staging: int) -> None:
    assume(inst is not None)
    state, target = inst
    plan = plan_migrations(state, target, max_staging=max_staging)
    report = check_plan(state, target, plan)
    assert report.ok, report.errors
    assert plan.verified
    assert not any(state.pinned[mv.vm] for mv in plan.moves)
    best = min_moves(state, target, max_staging)
    if plan.complete:
        assert best is not None and plan.n_moves >= best
        assert plan.staging_moves <= max_staging
    else:
        assert best is None, (plan.reason, best)
        assert plan.stuck and set(plan.stuck) <= set(plan.left)
    # The greedy alone (no exact fallback) is always safe, never better than the optimum.
    greedy = plan_migrations(state, target, max_staging=max_staging, exact_limit=0)
    assert check_plan(state, target, greedy).ok
    if greedy.complete:
        assert best is not None and greedy.n_moves >= best


@FAST
@given(instances(), st.integers(0, 6), st.floats(0, 20))
def test_budget_gives_a_safe_prefix(inst, max_moves: int, max_gb: float) -> None:
    assume(inst is not None)
    state, target = inst
    full = plan_migrations(state, target)
    for kw in ({"max_moves": max_moves}, {"max_gb": max_gb}):
        cut = plan_migrations(state, target, **kw)  # type: ignore[arg-type]
        assert check_plan(state, target, cut).ok
        assert cut.moves == full.moves[: cut.n_moves]  # a prefix of the unbudgeted plan
        if "max_moves" in kw:
            assert cut.n_moves <= max_moves
        else:
            assert cut.gb_moved <= max_gb + 1e-9
        assert cut.truncated == (cut.n_moves < full.n_moves) or bool(full.stuck)
        if full.complete and cut.truncated:
            assert cut.left and not cut.stuck


def _swaps(pairs: int, multi: bool, free_machine: bool) -> tuple[ClusterPlacement, Placement]:
    """``pairs`` swap cycles: machines 2i and 2i+1 are full with one VM each, the target exchanges them."""
    k_nodes = 2 if multi else 1
    n = 2 * pairs + int(free_machine)
    cap = np.full((n, k_nodes, 2), 8.0)
    demand = np.tile([8.0 * k_nodes, 8.0 * k_nodes], (2 * pairs, 1))
    cur = np.arange(2 * pairs)
    tgt = cur ^ 1
    node = np.full(2 * pairs, -1 if multi else 0)
    state = ClusterPlacement.build(cap, demand, np.full(2 * pairs, multi), cur, node)
    return state, Placement(tgt, node)


@pytest.mark.parametrize("multi", [False, True])
@pytest.mark.parametrize("pairs", [1, 3])
def test_swap_cycles_take_one_staging_move_each(pairs: int, multi: bool) -> None:
    state, target = _swaps(pairs, multi, free_machine=True)
    plan = plan_migrations(state, target)
    assert plan.complete and plan.method == "greedy"
    assert plan.staging_moves == pairs and plan.n_moves == 3 * pairs
    if pairs == 1:
        assert min_moves(state, target, 2) == 3  # the optimum, by brute force


def test_rotation_takes_one_staging_move() -> None:
    cap = np.full((4, 1, 2), 4.0)
    state = ClusterPlacement.build(cap, [[4, 4]] * 3, [False] * 3, [0, 1, 2], [0, 0, 0])
    target = Placement(np.array([1, 2, 0]), np.zeros(3, np.int64))
    plan = plan_migrations(state, target, exact_limit=0)
    assert plan.complete and plan.staging_moves == 1 and plan.n_moves == 4


def test_swap_without_room_is_stuck_and_says_which() -> None:
    state, target = _swaps(1, False, free_machine=False)
    plan = plan_migrations(state, target)
    assert not plan.complete and plan.stuck == (0, 1) and plan.left == (0, 1) and plan.moves == ()
    assert "no safe order exists" in plan.reason
    assert min_moves(state, target, 4) is None


def test_staging_allowance_is_respected() -> None:
    state, target = _swaps(3, False, free_machine=True)
    plan = plan_migrations(state, target, max_staging=2)
    assert not plan.complete and len(plan.stuck) == 2 and plan.staging_moves == 2
    assert check_plan(state, target, plan).ok


def test_exact_search_finds_what_the_greedy_misses() -> None:
    # Found by random search: with one staging move allowed, the greedy stages a VM whose room it then needs; the
    # exact search finds the 3-move plan that the brute force says is the shortest.
    cap = np.full((4, 2, 2), 2.0)
    state = ClusterPlacement.build(
        cap,
        [[1, 1], [1, 3], [3, 2], [3, 1]],
        [False, True, False, True],
        [2, 0, -1, 1],
        [0, -1, -1, -1],
        usable=[True, True, True, False],
    )
    target = Placement(np.array([1, 0, -1, 2]), np.array([0, -1, -1, -1]))
    greedy = plan_migrations(state, target, max_staging=1, exact_limit=0)
    assert not greedy.complete and greedy.stuck and check_plan(state, target, greedy).ok
    plan = plan_migrations(state, target, max_staging=1)
    assert plan.complete and plan.method == "exact" and plan.n_moves == min_moves(state, target, 1) == 3


def _plan_of(moves: list[tuple[int, int, int, int, int, bool]], **kw: object) -> MigrationPlan:
    mv = tuple(Move(*m) for m in moves)
    fields = {"complete": True, "stuck": (), "left": (), "truncated": False, "reason": "", "moving": 2,
              "staging_moves": sum(m.staging for m in mv), "gb_moved": 0.0, "cost": 0.0, "method": "hand",
              "plan_s": 0.0}  # fmt: skip
    fields.update(kw)
    return MigrationPlan(moves=mv, **fields)  # type: ignore[arg-type]


def test_checker_rejects_bad_plans() -> None:
    state, target = _swaps(1, False, free_machine=True)
    good = plan_migrations(state, target)
    assert check_plan(state, target, good).ok
    cases = {
        "over capacity": _plan_of([(0, 0, 0, 1, 0, False), (1, 1, 0, 0, 0, False)], gb_moved=16.0, cost=16.0),
        "the move says": _plan_of(
            [(0, 1, 0, 2, 0, True), (1, 1, 0, 0, 0, False), (0, 2, 0, 1, 0, False)], gb_moved=24.0, cost=24.0
        ),
        "does not exist": _plan_of([(0, 0, 0, 3, 0, True)], complete=False, left=(0, 1)),
        "not at their target": _plan_of([], complete=True),
        "staging flag": _plan_of(
            [(0, 0, 0, 2, 0, False), (1, 1, 0, 0, 0, False), (0, 2, 0, 1, 0, False)],
            staging_moves=0,
            gb_moved=24.0,
            cost=24.0,
        ),
        "summary": replace(good, gb_moved=good.gb_moved + 1),
        "neither its target": _plan_of([(0, 0, 0, 2, 0, True)], complete=False, left=(0, 1), gb_moved=8.0, cost=8.0),
    }
    for needle, plan in cases.items():
        report = check_plan(state, target, plan)
        assert not report.ok and any(needle in e for e in report.errors), (needle, report.errors)
    for kw, needle in (({"pinned": [True, False]}, "pinned"), ({"usable": [True, True, False]}, "may not receive")):
        other = ClusterPlacement.build(state.capacity, state.demand, state.multi, state.current.machine,
                                       state.current.node, **kw)  # type: ignore[arg-type]  # fmt: skip
        assert any(needle in e for e in check_plan(other, target, good).errors)


def test_target_moving_a_pinned_vm_is_refused() -> None:
    cap = np.full((2, 1, 2), 4.0)
    state = ClusterPlacement.build(cap, [[1, 1]], [False], [0], [0], pinned=[True])
    with pytest.raises(InputError, match="pinned VM 0"):
        plan_migrations(state, Placement(np.array([1]), np.array([0])))


@pytest.mark.parametrize(
    ("machine", "node", "match"),
    [
        ((1, 1), (0, 0), "target placement puts machine 1 node 0 over capacity"),
        ((2, 1), (0, 0), "machine 2, which may not receive VMs"),
        ((-1, 1), (-1, 0), "removes VM 0"),
        ((0, 1), (1, 0), "node 1, machines have 1 nodes"),
        ((3, 1), (0, 0), "machine 3, which does not exist"),
    ],
)
def test_bad_targets_are_input_errors(machine: tuple[int, int], node: tuple[int, int], match: str) -> None:
    cap = np.full((3, 1, 2), 4.0)
    state = ClusterPlacement.build(cap, [[3, 3], [2, 2]], [False, False], [0, 1], [0, 0], usable=[True, True, False])
    with pytest.raises(InputError, match=match):
        plan_migrations(state, Placement(np.array(machine), np.array(node)))


def test_current_state_over_capacity_is_an_input_error() -> None:
    state = ClusterPlacement.build(np.full((2, 1, 2), 4.0), [[3, 3], [2, 2]], [False, False], [0, 0], [0, 0])
    with pytest.raises(InputError, match="current placement puts machine 0 node 0 over capacity"):
        plan_migrations(state, Placement(np.array([0, 1]), np.array([0, 0])))


def test_drain_moves_only_the_drained_vms() -> None:
    cap = np.full((3, 2, 2), 10.0)
    state = ClusterPlacement.build(
        cap, [[4, 4], [2, 2], [6, 6], [3, 3]], [False, True, False, False], [0, 0, 1, 2], [0, -1, 1, 0]
    )
    ev = evacuate(state, [0])
    assert ev.plan.complete and ev.plan.verified and ev.evicted == () and ev.unplaced == ()
    assert sorted(mv.vm for mv in ev.plan.moves) == [0, 1]
    assert all(mv.src_machine == 0 and mv.dst_machine != 0 for mv in ev.plan.moves)
    assert ev.plan.gb_moved == 6.0


def test_failed_machine_vms_are_placed_from_nowhere() -> None:
    cap = np.full((3, 1, 2), 10.0)
    state = ClusterPlacement.build(cap, [[4, 4], [2, 2], [6, 6]], [False] * 3, [0, 0, 1], [0, 0, 0], pinned=[1, 0, 0])
    ev = evacuate(state, [0], failed=True)
    assert ev.plan.complete and {mv.vm for mv in ev.plan.moves} == {0, 1}
    assert all(mv.src_machine == -1 for mv in ev.plan.moves) and ev.plan.gb_moved == 0.0
    assert not ev.state.usable[0] and ev.state.current.machine[0] == -1


def test_drain_refuses_pinned_vms() -> None:
    cap = np.full((2, 1, 2), 10.0)
    state = ClusterPlacement.build(cap, [[4, 4]], [False], [0], [0], pinned=[True])
    with pytest.raises(InputError, match="pinned"):
        evacuate(state, [0])


def test_fragmented_room_evicts_the_fewest_vms() -> None:
    # Machines 0 and 1 (one node of 4) hold 2 each; machine 2 is drained with a VM of 4: it fits only if one
    # VM moves from machine 0 to machine 1 (or back): one eviction, which must go first.
    cap = np.full((3, 1, 2), 4.0)
    state = ClusterPlacement.build(cap, [[2, 2], [2, 2], [4, 4]], [False] * 3, [0, 1, 2], [0, 0, 0])
    ev = evacuate(state, [2])
    assert ev.plan.complete and len(ev.evicted) == 1 and ev.unplaced == ()
    assert [mv.vm for mv in ev.plan.moves] == [ev.evicted[0], 2]
    none = evacuate(state, [2], allow_evictions=False)
    assert none.unplaced == (2,) and none.plan.moves == ()


@FAST
@given(instances(max_vms=6), st.integers(0, 2), st.booleans())
def test_evacuation_plans_are_verified(inst, machine: int, failed: bool) -> None:
    assume(inst is not None)
    state, _ = inst
    machine = min(machine, state.machines - 1)
    on = np.flatnonzero(state.current.machine == machine)
    assume(failed or not state.pinned[on].any())
    ev = evacuate(state, [machine], failed=failed)
    assert check_plan(ev.state, ev.target, ev.plan).ok
    assert set(ev.evacuated) == {int(v) for v in on}
    for v in ev.evacuated:
        assert v in ev.unplaced or ev.target.machine[v] != machine
    moved = {mv.vm for mv in ev.plan.moves}
    assert moved <= set(ev.evacuated) | set(ev.evicted)


SIZES = st.sampled_from([-1.0, 0.0, 1 / 3, 0.5, 2.0, 1e-6])


@given(st.integers(1, 3).flatmap(lambda r: st.lists(st.lists(SIZES, min_size=r, max_size=r), min_size=1, max_size=40)))
def test_the_checkers_grouping_of_equal_rows_is_exact(rows: list[list[float]]) -> None:
    # plan_check groups VMs of one size (and one node) to add them at once: every row in exactly one group, each
    # group's rows equal, groups distinct, as np.unique(axis=0) would find them
    from dcplace.placement.plan_check import _distinct_rows

    a = np.array(rows)
    first, group = _distinct_rows(a)
    assert len(first) == len(np.unique(a, axis=0))
    assert np.array_equal(a[first][group], a) and len({tuple(r) for r in a[first].tolist()}) == len(first)


def _guarded(over_start: bool = False) -> ClusterPlacement:
    """3 machines x 2 nodes of 8 cores and 8 GB: VM 0 (2, 6) at (0, 0), VM 1 split (4, 4) on machine 1, VM 2 (1, 3)
    at (2, 1), VM 3 (8, 1) filling the cores of (2, 0) (``over_start``: VM 0 takes 9 GB, over from the start)."""
    demand = [[2, 9 if over_start else 6], [4, 4], [1, 3], [8, 1]]
    return ClusterPlacement.build(np.full((3, 2, 2), 8.0), demand, [False, True, False, False], [0, 1, 2, 2],
                                  [0, -1, 1, 0])  # fmt: skip


@pytest.mark.parametrize(
    ("moves", "goal", "kw", "needle"),
    [
        # a mutation review (2026-11-28): each guard below could be removed with every test still passing
        (
            [(0, 0, 0, 2, 1, False)],
            {0: (2, 1)},
            {"gb_moved": 6.0, "cost": 6.0},
            "puts machine 2 node 1 over capacity in resource 1",
        ),  # memory only: 3 GB + 6 on 8
        (
            [(1, 1, -1, 2, -1, False)],
            {1: (2, -1)},
            {"gb_moved": 4.0, "cost": 4.0},
            "puts machine 2 node 0 over capacity in resource 0",
        ),  # a split VM loads every node, node 0 included
        ([(1, 1, -1, 0, 1, False)], {1: (0, -1)}, {}, "multi-NUMA VM 1 needs node -1, got 1"),
        ([(0, 0, 0, 1, 2, False)], {0: (1, 0)}, {}, "node 2 does not exist"),
        ([(0, 0, 0, 1, -1, False)], {0: (1, 0)}, {}, "node -1 does not exist"),
        ([(0, 0, 1, 1, 0, False)], {0: (1, 0)}, {"gb_moved": 6.0, "cost": 6.0}, "VM 0 is at (0, 0), the move says"),
        ([(0, 0, 0, 0, 0, False)], {}, {"gb_moved": 6.0, "cost": 6.0}, "VM 0 does not change place"),
        (
            [(0, 0, 0, 0, 1, True)],
            {0: (1, 0)},
            {"complete": False, "left": (0,), "gb_moved": 6.0, "cost": 6.0},
            "VM 0 ends at (0, 1), neither its target nor where it started",
        ),
        ([], {}, {"complete": False, "left": (0,)}, "0 VMs are not at their target but the plan reports 1 left"),
        ([(0, 0, 0, 1, 0, False)], {0: (1, 0)}, {"gb_moved": 6.0, "cost": 7.0}, "summary"),
    ],
)
def test_the_plan_checker_catches_each_bad_move(moves: list[Any], goal: dict[int, Any], kw: dict[str, Any],
                                                needle: str) -> None:  # fmt: skip
    state = _guarded()
    m, k = state.current.machine.copy(), state.current.node.copy()
    for v, (mm, kk) in goal.items():
        m[v], k[v] = mm, kk
    report = check_plan(state, Placement(m, k), _plan_of(moves, **kw))
    assert not report.ok and any(needle in e for e in report.errors), report.errors
    ok = _plan_of([(0, 0, 0, 1, 0, False)], gb_moved=6.0, cost=6.0)  # the same checker passes a good plan
    tgt = Placement(np.array([1, 1, 2, 2]), state.current.node.copy())
    assert check_plan(state, tgt, ok).ok, check_plan(state, tgt, ok).errors


def test_the_plan_checker_refuses_a_start_over_capacity() -> None:
    state = _guarded(over_start=True)
    report = check_plan(state, state.current, _plan_of([]))
    assert not report.ok and "the current state is over capacity on machine 0 node 0" in report.errors
