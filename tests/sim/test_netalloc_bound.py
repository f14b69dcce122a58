"""The clairvoyant acceptance bound of network-aware allocation (dcplace.sim.netalloc_bound): the CP-SAT model
against a brute force of its relaxation, and no policy ever accepting more than it."""

from __future__ import annotations

import itertools
import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from conftest import net_requests
from dcplace.cluster.topology import fabric, preset
from dcplace.errors import InputError
from dcplace.policies import get_net_policy
from dcplace.sim.netalloc_bound import (
    acceptance_bound,
    binding_steps,
    pooled_greedy,
    servers_needed,
    uplink_capacity,
)
from dcplace.sim.netalloc_episodes import Routings, get_setting, new_sim, run_episode

SMALL = fabric(2, 2, 2, 1, name="small")  # 4 servers of 10 CPU / 10 memory, 2 racks, one fabric switch
POLICIES = ("tetris", "nalb", "nalb-strict", "nulb", "nulb-mask", "random", "random-any", "tetris-cosine")

rows = st.lists(
    st.tuples(
        st.integers(1, 25),
        st.integers(1, 25),
        st.sampled_from([0.1, 0.3, 0.5, 0.7, 1.0]),
        st.integers(1, 6),
    ),
    min_size=1,
    max_size=9,
)


def _relaxation_optimum(top, req) -> int:
    """The relaxation's optimum by enumerating every subset, with its constraints at *every* step (not only the
    binding ones the model keeps)."""
    n = len(req)
    spans = servers_needed(top, req)
    up = np.where(spans >= 2, spans * req.bw, 0)
    caps = (int(top.server_cpu.sum()), int(top.server_mem.sum()), uplink_capacity(top))
    live = [[t for t in range(s + 1) if t + int(req.hold[t]) > s] for s in range(n)]
    for size in range(n, -1, -1):
        for chosen in itertools.combinations(range(n), size):
            c = set(chosen)
            if all(
                sum(int(use[t]) for t in lv if t in c) <= cap
                for lv in live
                for use, cap in zip((req.cpu, req.mem, up), caps, strict=True)
            ):
                return size
    raise AssertionError("the empty selection is always feasible")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows)
def test_bound_is_the_relaxations_optimum(r):
    req = net_requests(r)
    b = acceptance_bound(SMALL, req, time_limit_s=10)
    assert b.status == "optimal" and b.bound == b.accepted
    assert b.bound == _relaxation_optimum(SMALL, req)
    lp = acceptance_bound(SMALL, req, method="lp")
    assert lp.status == "lp" and b.bound <= lp.bound <= len(req)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows, st.integers(0, 3))
def test_no_policy_accepts_more_than_the_bound(r, seed):
    req = net_requests(r)
    bound = acceptance_bound(SMALL, req).bound
    routings = Routings(SMALL, get_setting("paper-reject"))
    for name in POLICIES:
        policy = get_net_policy(name, seed)
        res = run_episode(new_sim(SMALL, req, routings, policy), policy)
        assert res.accepted <= bound, name


def test_the_uplinks_bind_where_cpu_and_memory_do_not():
    """25 requests live together, each spanning 2 servers with a whole link of bandwidth: alpha's CPU and memory
    hold all 25, its 40 server uplinks only 20."""
    top = preset("alpha")
    req = net_requests([(11, 1, 1.0, 100)] * 25)
    assert acceptance_bound(top, req).bound == 20
    assert pooled_greedy(top, req) == 25  # the reference has no network
    routings = Routings(top, get_setting("paper-reject"))
    policy = get_net_policy("nalb-strict", 0)
    assert run_episode(new_sim(top, req, routings, policy), policy).accepted <= 20


def test_fewer_steps_give_a_looser_valid_bound():
    rng = np.random.default_rng(0)
    r = [(int(rng.integers(1, 30)), int(rng.integers(1, 30)), 0.5, int(rng.integers(1, 40))) for _ in range(120)]
    req = net_requests(r)
    full = acceptance_bound(SMALL, req, max_steps=None)
    few = acceptance_bound(SMALL, req, max_steps=3)
    assert len(binding_steps(req)) > 3
    assert full.status == "optimal" and few.bound >= full.bound
    assert acceptance_bound(SMALL, req, method="lp", max_steps=None).bound >= full.bound


def test_an_unknown_method_is_one_clear_error():
    with pytest.raises(InputError, match=r"method.*auto, cp-sat or lp"):
        acceptance_bound(SMALL, net_requests([(1, 1, 0.1, 1)]), method="simplex")


def test_pooled_greedy_by_hand():
    top = SMALL  # 40 CPU, 40 memory
    req = net_requests([(30, 5, 0.1, 2), (20, 5, 0.1, 5), (10, 30, 0.1, 1), (25, 5, 0.1, 1)])
    # 0 takes 30; 1 (20) does not fit; at step 2 request 0 has left: 2 takes 30 memory; at 3: 2 left, 3 fits
    assert pooled_greedy(top, req) == 3
    # admitting at most 25 units: 0 (30 CPU) and 2 (30 memory) are refused, 1 takes 20 CPU until step 5, so 3 (25)
    # no longer fits
    assert pooled_greedy(top, req, admit=25) == 1
    assert acceptance_bound(top, req).bound == 3


def test_the_reproduction_writes_each_cells_bound_above_every_policy(tmp_path):
    """`reproduce nara-baselines` on alpha, one episode: the bound of each cell is on the episodes the policies
    played (never below any of them), in bounds.jsonl and as Table 1's last row, and the report shows it."""
    from dcplace.bench import nara_baselines as nb
    from dcplace.bench.report import build_sections

    out = tmp_path / "nara"
    md = nb.run_reproduction(
        out,
        episodes=1,
        topologies=("alpha",),
        policies=POLICIES[:4],
        progress=False,
        setting="paper-reject",
        alpha_beta_episodes=1,
    )
    bounds = [json.loads(line) for line in (tmp_path / "nara" / "bounds.jsonl").read_text().splitlines()]
    assert {(b["topology"], b["dataset"]) for b in bounds} == {("alpha", d) for d in nb.DATASETS}
    records = [json.loads(line) for line in (tmp_path / "nara" / "records.jsonl").read_text().splitlines()]
    for b in bounds:
        played = [r for r in records if (r["topology"], r["dataset"]) == (b["topology"], b["dataset"])]
        assert len(played) == 4 and all(r["acceptance_per_episode"][0] <= b["bound_per_episode"][0] for r in played)
    row = next(line for line in md.splitlines() if line.startswith(f"| {nb.BOUND_LABEL} |"))
    assert row.count("|") == 5 and f"{bounds[0]['bound_mean']:.2f}" in row
    nara = next(s for s in build_sections(tmp_path) if s.id == "nara")
    table1 = [t for t in nara.tables if t.title.startswith("Table 1")]
    assert len(table1) == 3 and all(t.rows[-1][0] == nb.BOUND_LABEL for t in table1)
