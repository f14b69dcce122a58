"""nalb-learned (dcplace.policies.netalloc_scored) and its search (dcplace.learn.nalb_search)."""

from __future__ import annotations

import json

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dcplace.bench.netalloc_runner import run_policy
from dcplace.cli.main import app
from dcplace.cluster.topology import BW_SCALE, fabric, from_networkx
from dcplace.errors import InputError
from dcplace.learn.nalb_search import SearchConfig, acceptance, search
from dcplace.policies import get_net_policy
from dcplace.policies.netalloc_heuristics import LocalityBased, _Adjacency
from dcplace.policies.netalloc_scored import (
    FEATURES,
    SHIPPED,
    LearnedNalb,
    first_pick_features,
    load_weights,
    rule_json,
)
from dcplace.sim.netalloc import NetAllocSim
from dcplace.workload.netreq import NetRequests

runner = CliRunner()


def _requests(rows: list[tuple[int, int, float, int]]) -> NetRequests:
    a = np.array(rows, dtype=float).reshape(-1, 4)
    hold = a[:, 3].astype(np.int64)
    bw = np.round(a[:, 2] * BW_SCALE).astype(np.int64)
    return NetRequests(a[:, 0].astype(np.int64), a[:, 1].astype(np.int64), bw, hold, int(hold.max()))


def _strict(seed: int) -> LocalityBased:
    return LocalityBased(True, seed, True, True, "nalb-strict", own_routing=False)


def _learned(seed: int, w: tuple[float, ...]) -> LearnedNalb:
    return LearnedNalb(True, seed, True, True, "nalb-learned", own_routing=False, weights=w)


def _record(run):  # what two runs must share to be the same run
    return [(r.accepted, r.locality, r.servers_per_allocation, r.accepted_ids) for r in run.results]


@pytest.mark.parametrize(("topology", "dataset"), [("alpha", "uniform"), ("beta", "azure"), ("gamma", "alibaba")])
def test_zero_weights_are_nalb_strict_draw_for_draw(topology, dataset):
    """w = 0 scores every candidate alike, so the first pick is nalb-strict's own random draw from the same stream."""
    a = run_policy(topology, dataset, _learned(5, (0.0,) * len(FEATURES)), 64, episodes=2, seed=1, split="train")
    b = run_policy(topology, dataset, _strict(5), 64, episodes=2, seed=1, split="train")
    assert _record(a) == _record(b)


def test_zero_weights_equal_nalb_strict_on_a_graph_without_racks():
    g = nx.Graph()
    for i in range(6):
        g.add_node(f"s{i}", cpu=4, mem=4)
    g.add_node("a")
    g.add_node("b")
    for i in range(6):
        g.add_edge(f"s{i}", "a" if i < 3 else "b", capacity=2)
    g.add_edge("s2", "b", capacity=1)  # a server with two links: no rack
    g.add_edge("a", "b", capacity=3)
    top = from_networkx(g, "tiny")
    assert (top.server_rack < 0).any()
    req = _requests([(5, 3, 0.5, 3), (2, 2, 0.2, 2), (7, 7, 0.3, 4), (3, 1, 0.1, 1)] * 3)
    w = (1.0, -0.5, 2.0, 0.3, 0.7, -1.0)
    outs = []
    for pol in (_learned(3, (0.0,) * 6), _strict(3), _learned(3, w)):
        sim = NetAllocSim(top, req)
        while not sim.done:
            sim.pick(pol.choose(sim))
        sim.check_invariants()
        outs.append((sim.result().accepted, sim.result().accepted_ids))
    assert outs[0] == outs[1]


def test_features_on_a_hand_made_state():
    top = fabric(2, 2, 2, 1)  # servers 0, 1 in rack 0 and 2, 3 in rack 1; 10 CPU, 10 memory, 1 bandwidth unit each
    sim = NetAllocSim(top, _requests([(12, 5, 0.5, 5)]))
    sim.free_cpu[:] = [10, 4, 3, 3]
    sim.free_mem[:] = [10, 8, 3, 3]
    sim.free_bw[0] = BW_SCALE // 4  # server 0's link
    phi = first_pick_features(sim, _Adjacency.of(top))  # type: ignore[arg-type]
    col = {name: phi[:, i] for i, name in enumerate(FEATURES)}
    assert col["rack_fits"].tolist() == [1, 1, 0, 0]  # rack 0 has 14 CPU / 18 memory free for 12 / 5
    np.testing.assert_allclose(col["rack_room"], np.log1p([14 / 12, 14 / 12, 6 / 12, 6 / 12]))
    np.testing.assert_allclose(col["srv_cover"], [10 / 12, 4 / 12, 3 / 12, 3 / 12])
    np.testing.assert_allclose(col["srv_room"], np.log1p([10 / 12, 4 / 12, 3 / 12, 3 / 12]))
    np.testing.assert_allclose(col["uplink"], np.log1p([0.5, 2, 2, 2]))
    np.testing.assert_allclose(col["rack_free"], [0.5, 0.5, 0, 0])  # server 0 is untouched


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 2**31 - 1), w=st.lists(st.floats(-3, 3), min_size=6, max_size=6))
def test_the_first_pick_maximises_the_score_among_candidates(seed, w):
    rng = np.random.default_rng(seed)
    top = fabric(5, 4, 2, 1)
    sim = NetAllocSim(top, _requests([(int(rng.integers(1, 300)), int(rng.integers(1, 300)), 0.3, 5)]))
    sim.free_cpu[:] = rng.integers(0, 101, top.n_servers)
    sim.free_mem[:] = rng.integers(0, 101, top.n_servers)
    sim.free_bw[:] = rng.integers(0, top.link_cap + 1)
    mask = sim.action_mask()
    if not mask.any():
        return
    pol = _learned(seed, tuple(w))
    first = pol.choose(sim)
    adj = _Adjacency.of(top)
    ok = mask & adj.servers_with_bandwidth(top.n_servers, sim.free_bw, sim.request[2])
    cand = ok if ok.any() else mask
    score = first_pick_features(sim, adj) @ np.asarray(w)  # type: ignore[arg-type]
    assert cand[first]
    assert score[first] >= score[cand].max() - 1e-12


def test_the_shipped_rule_file_loads_and_runs():
    assert len(load_weights(SHIPPED)) == len(FEATURES)
    pol = get_net_policy("nalb-learned", seed=0, dataset="uniform")
    assert pol.name == "nalb-learned"
    run = run_policy("alpha", "uniform", "nalb-learned", 32, episodes=1, seed=0, check=True)
    assert 0 < run.results[0].acceptance <= 1


@pytest.mark.parametrize(
    ("text", "field"),
    [
        ("{", "not JSON"),
        ('{"format": "x"}', "field format"),
        (None, "field weights"),
        ("missing", "no such nalb-learned rule file"),
    ],
)
def test_bad_rule_files_are_input_errors_naming_file_and_field(tmp_path, text, field):
    path = tmp_path / "rule.json"
    if text is None:
        data = json.loads(rule_json([0.0] * len(FEATURES)))
        data["weights"] = [1.0, 2.0]
        path.write_text(json.dumps(data))
    elif text != "missing":
        path.write_text(text)
    with pytest.raises(InputError, match=field) as e:
        get_net_policy("nalb-learned", checkpoint=str(path))
    assert str(path) in str(e.value)
    res = runner.invoke(app, ["simulate", "netalloc", "--policy", "nalb-learned", "--checkpoint", str(path)])
    assert res.exit_code == 2


def test_search_is_seeded_and_never_picks_below_its_start_on_validation():
    cfg = SearchConfig(topologies="alpha", datasets="uniform", generations=2, pop=3, elite=1, episodes=1,
                       val_episodes=1, requests=48, seed=4)  # fmt: skip
    a, b = search(cfg), search(cfg)
    assert a.weights == b.weights and a.validation == b.validation
    assert a.validation[a.picked] >= a.validation["mean 0"]  # mean 0 is nalb-strict: the pick is at least it
    assert a.validation["mean 0"] == pytest.approx(1.0)
    pool = search(SearchConfig(**{**cfg.__dict__, "workers": 2}))
    assert pool.weights == a.weights and pool.validation == a.validation
    w = a.weights
    assert acceptance((w, "alpha", "uniform", 48, 1, 0, "test", "paper")) == pytest.approx(
        float(np.mean([r.acceptance for r in run_policy("alpha", "uniform", _learned(0, w), 48, 1, 0).results]))
    )
    for setting in ("paper", "paper-reject"):  # the search scores in the setting it is given
        assert acceptance((w, "alpha", "alibaba", 128, 1, 0, "test", setting)) == pytest.approx(
            run_policy("alpha", "alibaba", _learned(0, w), 128, 1, 0, setting=setting).results[0].acceptance
        )
    assert acceptance((w, "alpha", "alibaba", 128, 1, 0, "test", "paper")) != acceptance(
        (w, "alpha", "alibaba", 128, 1, 0, "test", "paper-reject")
    )


def test_train_command_writes_a_rule_file_that_simulate_runs(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, ["train", "nalb-learned", "--topologies", "alpha", "--datasets", "uniform",
                              "--generations", "1", "--pop", "2", "--elite", "1", "--episodes", "1",
                              "--val-episodes", "1", "--requests", "32", "--out", str(out)])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert len(load_weights(out / "nalb-learned.json")) == len(FEATURES)
    summary = json.loads((out / "train.json").read_text())
    assert len(summary["curve"]) == 1 and "mean 0" in summary["validation"]
    res = runner.invoke(app, ["simulate", "netalloc", "--policy", "nalb-learned", "--checkpoint",
                              str(out / "nalb-learned.json"), "--requests", "16", "--episodes", "1"])  # fmt: skip
    assert res.exit_code == 0, res.output


@pytest.mark.parametrize(("flag", "value"), [("--datasets", "nope"), ("--topologies", "nope"), ("--elite", "99")])
def test_train_command_bad_flags_exit_2(tmp_path, flag, value):
    res = runner.invoke(app, ["train", "nalb-learned", flag, value, "--out", str(tmp_path / "x")])
    assert res.exit_code == 2, res.output
    assert not (tmp_path / "x" / "nalb-learned.json").exists()
