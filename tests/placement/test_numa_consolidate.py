"""Re-optimising a topology-aware batch from its current placement (issue 14 part 1, NUMA side): ``consolidate``
keeps pinned VMs, never costs more than staying, moves nothing when moving is dear, and every answer passes the
NUMA checker extended with pinned VMs and the recomputed migration cost."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from test_numa_batch import write_dataset

from dcplace.errors import InputError
from dcplace.placement import Deadline, solve
from dcplace.placement.numa_batch import NumaBatch, check, moves_cost, verify, with_current
from dcplace.placement.numa_instances import load_numa_batch


def _placed(tmp_path_factory, seed: int) -> tuple[NumaBatch, np.ndarray, np.ndarray] | None:
    batch = load_numa_batch(str(write_dataset(tmp_path_factory.mktemp("d"), seed)))
    try:
        res = solve(batch, "relaxation-guided", Deadline(20))
    except InputError:
        return None
    assert res.vm_pm is not None and res.vm_node is not None
    return batch, res.vm_pm.copy(), res.vm_node.copy()


def _scatter(batch: NumaBatch, server: np.ndarray, node: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Move every unconstrained VM to an unused server where it fits (a wasteful but valid current placement)."""
    server, node = server.copy(), node.copy()
    free = batch.node_free.copy()
    for i in range(batch.vms):
        share = [0.5, 0.5] if batch.numa[i] == 2 else [float(node[i] == 0), float(node[i] == 1)]
        for k in (0, 1):
            free[server[i], k] -= np.array([batch.cpu[i], batch.ram[i]]) * share[k]
    for i in range(batch.vms):
        if batch.strategy[i]:
            continue
        for s in range(batch.servers):
            if s in set(server.tolist()):
                continue
            k = -1 if batch.numa[i] == 2 else 0
            need = np.array([batch.cpu[i], batch.ram[i]]) * (0.5 if k == -1 else 1.0)
            nodes = (0, 1) if k == -1 else (0,)
            if all(np.all(free[s, q] >= need) for q in nodes):
                old = [0.5, 0.5] if batch.numa[i] == 2 else [float(node[i] == 0), float(node[i] == 1)]
                for q in (0, 1):
                    free[server[i], q] += np.array([batch.cpu[i], batch.ram[i]]) * old[q]
                for q in nodes:
                    free[s, q] -= need
                server[i], node[i] = s, k
                break
    return server, node


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000), weight=st.sampled_from([0.0, 1.0, 1e6]))
def test_consolidate_is_verified_keeps_pinned_vms_and_never_costs_more_than_staying(tmp_path_factory, seed, weight):
    got = _placed(tmp_path_factory, seed)
    assume(got is not None)
    batch, packed, node = got
    server, node = _scatter(batch, packed, node)
    rng = np.random.default_rng(seed)
    pinned = rng.choice(batch.vms, size=3, replace=False)
    base = with_current(batch, server, node, pinned=pinned)
    problem = with_current(batch, server, node, weight * base.migration_costs(), pinned)
    res = solve(problem, "auto", Deadline(20))
    assert res.method == "consolidate" and res.verified, res.violations
    assert (res.vm_pm[pinned] == server[pinned]).all() and (res.vm_node[pinned] == node[pinned]).all()
    staying = len(set(server.tolist()))
    assert res.bound <= res.cost <= staying  # staying put costs `staying` servers and no migration
    assert res.stats["servers"] + res.stats["migration_cost"] == pytest.approx(res.cost)
    if weight >= 1e6:
        assert res.stats["migrations"] == 0
    if weight == 0.0 and staying > len(set(packed.tolist())):
        # a scattered VM left room on its old server, so emptying the first scattered server that is tried pays
        assert res.stats["servers"] < staying


def test_new_vms_are_placed_and_a_scratch_batch_is_unchanged(tmp_path_factory):
    got = None
    seed = 0
    while got is None:
        got = _placed(tmp_path_factory, seed)
        seed += 1
    batch, server, node = got
    new = np.array([i for i in range(batch.vms) if not batch.strategy[i]][:3])
    server[new] = -1
    node[new] = -1
    res = solve(with_current(batch, server, node), "consolidate", Deadline(20))
    assert res.verified and (res.vm_pm >= 0).all()
    scratch = solve(batch, "auto", Deadline(20))
    assert scratch.method == "auto" and "migrations" not in scratch.stats and "unconstrained_servers" in scratch.stats


def test_checker_catches_a_moved_pinned_vm_and_errors_name_the_field(tmp_path_factory):
    got = None
    seed = 0
    while got is None:
        got = _placed(tmp_path_factory, seed)
        seed += 1
    batch, server, node = got
    problem = with_current(batch, server, node, pinned=[0])
    res = solve(problem, "consolidate", Deadline(20))
    other = next(s for s in range(batch.servers) if s != server[0])
    moved = res.vm_pm.copy()
    moved[0] = other
    cost, count = moves_cost(problem, moved.tolist())
    bad = verify(problem, replace(res, vm_pm=moved, cost=None))
    assert any("pinned VM 0 moved" in v for v in bad.violations) and count >= 1 and cost > 0
    assert check(problem, res.vm_pm.tolist(), res.vm_node.tolist()) == []
    with pytest.raises(InputError, match="does not exist") as err:
        with_current(batch, np.where(np.arange(batch.vms) == 0, batch.servers, server), node)
    assert err.value.field == "current"
    with pytest.raises(InputError, match="pinned but has no current server"):
        with_current(batch, np.where(np.arange(batch.vms) == 0, -1, server), node, pinned=[0])
    crowded = np.zeros(batch.vms, np.int64)
    with pytest.raises(InputError, match="current placement puts"):
        with_current(batch, crowded, np.where(batch.numa == 2, -1, 0))
    with pytest.raises(InputError, match="does not start from a current placement"):
        solve(problem, "relaxation-guided", Deadline(5))
