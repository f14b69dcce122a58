"""The paper's routing (issue 16): k = 3 shortest simple paths including longer ones where fewer equal-cost paths
exist, checked against every simple path networkx lists; NALB's and NULB's bandwidth-weighted routing; the
calibrated uniform request set against the paper's Table 1; same seed, same numbers."""

from __future__ import annotations

import itertools

import networkx as nx
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcplace.bench.netalloc_runner import run_policy
from dcplace.cluster.topology import BW_SCALE, from_networkx, preset
from dcplace.policies.netalloc_heuristics import LocalityBased, Tetris
from dcplace.sim.netalloc import NetAllocSim
from dcplace.sim.netalloc_episodes import episode_requests, episode_seed, run_episode
from dcplace.sim.routing import FabricRouting, GraphRouting, LeafRouting, WeightedRouting, routing_for, select
from dcplace.workload.netreq import UNIFORM_BOUNDS, generate


def _links(g: nx.Graph, nodes: list[int]) -> tuple[int, ...]:
    return tuple(int(g.edges[a, b]["link"]) for a, b in itertools.pairwise(nodes))


def reference(top, u: int, v: int, k: int = 3) -> list[tuple[int, ...]]:
    """The module's semantics from every simple path networkx lists: the shortest rotated and cut, then the next
    ones by (hops, node order)."""
    g = top.to_networkx()
    every = sorted(nx.all_simple_paths(g, u, v), key=lambda p: (len(p), p))
    shortest = [p for p in every if len(p) == len(every[0])]
    out = select([_links(g, p) for p in shortest], u, v, k)
    longer = [p for p in every if len(p) > len(every[0])]
    return out + [_links(g, p) for p in longer[: k - len(out)]]


@pytest.mark.parametrize("name", ["alpha", "beta"])
def test_k_shortest_simple_paths_match_networkx_on_the_small_presets(name):
    top = preset(name)
    fab, leaf, gen = FabricRouting(top), LeafRouting(top), GraphRouting(top)
    rng = np.random.default_rng(0)
    pairs = list(itertools.combinations(range(top.n_servers), 2))
    for i in rng.choice(len(pairs), 60, replace=False):
        u, v = pairs[i]
        want = reference(top, u, v)
        assert fab.candidates(u, v) == want, (u, v)
        assert leaf.candidates(u, v) == want, (u, v)
        assert gen.candidates(u, v) == want, (u, v)


def test_longer_paths_fill_in_only_where_equal_cost_paths_are_fewer_than_k():
    alpha = FabricRouting(preset("alpha"))  # 2 planes: 2 equal-cost paths between racks
    assert len(alpha.candidates(0, 1)) == 1  # one rack: a leaf has one simple path to its neighbour
    same_pod, other_pod = alpha.candidates(0, 12), alpha.candidates(0, 39)
    assert [len(p) for p in same_pod] == [4, 4, 10] and [len(p) for p in other_pod] == [6, 6, 8]
    gamma = FabricRouting(preset("gamma"))  # 4 planes: never needs a longer path
    assert {len(p) for v in (40, 80, 639) for p in gamma.candidates(0, v)} <= {4, 6}
    ecmp = routing_for(preset("alpha"), paths="ecmp")
    assert len(ecmp.candidates(0, 12)) == 2 and ecmp.candidates(0, 12) == same_pod[:2]


def test_equal_cost_variant_is_the_first_reading():
    top = preset("beta")
    fab, gen = FabricRouting(top, paths="ecmp"), GraphRouting(top, paths="ecmp")
    for u, v in itertools.combinations(range(0, top.n_servers, 3), 2):
        assert fab.candidates(u, v) == gen.candidates(u, v)
        hops = {len(p) for p in fab.candidates(u, v)}
        assert len(hops) == 1


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**31 - 1), st.sampled_from(["alpha", "beta"]))
def test_weighted_routing_is_the_k_lightest_usable_paths(seed, name):
    top = preset(name)
    rng = np.random.default_rng(seed)
    free = rng.integers(0, BW_SCALE + 1, top.n_links).astype(np.int64)
    bw = int(rng.integers(BW_SCALE // 10, BW_SCALE))
    u, v = (int(x) for x in rng.choice(top.n_servers, 2, replace=False))
    paths = WeightedRouting(top).paths(u, v, free, bw)
    g = top.to_networkx()
    usable = nx.subgraph_view(g, filter_edge=lambda a, b: free[g.edges[a, b]["link"]] >= bw)

    def weight(a, b, d):
        return BW_SCALE / max(int(free[d["link"]]), 1)

    assert len(paths) <= 3
    if not nx.has_path(usable, u, v):
        assert paths == []
        return
    assert paths, "a usable path exists"
    costs = [sum(BW_SCALE / max(int(free[e]), 1) for e in p) for p in paths]
    assert costs == sorted(costs)
    assert costs[0] == pytest.approx(nx.dijkstra_path_length(usable, u, v, weight=weight))
    for p in paths:
        assert all(free[e] >= bw for e in p)
        assert len(set(p)) == len(p)
    assert len(set(paths)) == len(paths)


def test_weighted_routing_on_a_generic_graph_uses_the_whole_graph():
    g = nx.Graph()
    for h in ("a", "b"):
        g.add_node(h, cpu=4, mem=4)
    g.add_edge("a", "b", capacity=1)
    g.add_edge("a", "s", capacity=1)
    g.add_edge("s", "b", capacity=1)
    top = from_networkx(g)
    paths = WeightedRouting(top).paths(0, 1, top.link_cap.copy(), BW_SCALE // 2)
    assert [len(p) for p in paths] == [1, 2]


# --- the calibrated request set ---------------------------------------------------------------------------------


def test_uniform_sizes_are_the_calibrated_bounds_and_the_first_reading_is_kept():
    assert UNIFORM_BOUNDS["uniform"] == (1, 22) and UNIFORM_BOUNDS["uniform-v1"] == (1, 100)
    assert UNIFORM_BOUNDS["uniform-max"] == (1, 25)
    new = generate("uniform", 4000, 0, 400, 400)
    old = generate("uniform-v1", 4000, 0, 400, 400)
    assert new.cpu.min() == 1 and new.cpu.max() == 22 and new.mem.max() == 22
    assert old.cpu.max() == 100


PAPER = {"alpha": {"tetris": 0.61, "random": 0.35}, "beta": {"tetris": 0.60, "random": 0.37}}


@pytest.mark.parametrize("name", ["alpha", "beta"])
def test_tetris_and_random_match_table1_and_section_5_3(name):
    """Table 1 within 0.05, Tetris the best of the paper's baselines, and Tetris's allocations on at most 5 servers
    (section 5.3: 99 %)."""
    runs = {p: run_policy(preset(name), "uniform", p, 128, 5, 0) for p in ("tetris", "random", "nalb", "nulb")}
    acc = {p: r.summary()["acceptance_mean"] for p, r in runs.items()}
    for p, want in PAPER[name].items():
        assert abs(acc[p] - want) <= 0.05, (p, acc[p])
    assert acc["tetris"] == max(acc.values())
    spa = np.concatenate([np.array(r.servers_per_allocation) for r in runs["tetris"].results])
    assert (spa > 5).mean() <= 0.02


@pytest.mark.parametrize("policy", ["nalb", "tetris"])
@pytest.mark.parametrize("setting", ["paper", "v1"])
def test_same_seed_same_numbers(policy, setting):
    a, b = (run_policy(preset("beta"), "uniform", policy, 64, 2, 7, setting=setting).summary() for _ in range(2))
    for s in (a, b):
        s.pop("wall_s")
        s.pop("decisions_per_s")
    assert a == b


def test_v1_setting_is_the_first_reading():
    """v1: equal-cost paths, sizes 1..100, cosine Tetris, NALB on the simulator's routing; results keep the name
    asked for. Checked against the episode built by hand."""
    top = preset("alpha")
    for name, policy in (("tetris", Tetris(cosine=True)), ("nalb", LocalityBased(True, episode_seed(0, 0)))):
        run = run_policy(top, "uniform", name, 64, 1, 0, setting="v1")
        assert run.policy == name
        req = episode_requests(top, "uniform-v1", 64, 0, 0)
        assert req.cpu.max() > 25
        sim = NetAllocSim(top, req, routing=routing_for(top, paths="ecmp"))
        assert run_episode(sim, policy).accepted_ids == run.results[0].accepted_ids


def test_on_request_counts_every_request_once():
    """The progress callback of simulate netalloc: every request decided is counted once, rejections for capacity
    (decided without a pick) included, and the numbers do not change; where a full cluster makes requests wait too."""
    top = preset("alpha")
    for setting in ("paper-reject", "paper"):
        counts: list[int] = []
        with_bar = run_policy(top, "alibaba", "tetris", 128, 2, 0, on_request=counts.append, setting=setting)
        plain = run_policy(top, "alibaba", "tetris", 128, 2, 0, setting=setting)
        assert sum(counts) == 2 * 128 and all(c >= 1 for c in counts)
        assert [r.accepted_ids for r in with_bar.results] == [r.accepted_ids for r in plain.results]
        lost = sum(r.rejected["capacity"] for r in plain.results)
        assert lost > 0 if setting == "paper-reject" else lost == 0  # the case the count must not miss


@pytest.mark.parametrize("topology", ["alpha", "beta"])
@pytest.mark.parametrize("dataset", ["uniform", "azure", "alibaba"])
def test_agent_trained_in_the_paper_setting_loads_and_beats_tetris(topology, dataset):
    """The shipped agents trained in the paper setting (docs/nara.md), the ``nara`` defaults on the paper's sets, on
    the topology each was trained on: evaluated, not retrained; greedy, so the same seeded episodes give the same
    numbers. On alpha through the default (no checkpoint named), which must be the ``-paper`` file. Above Tetris on
    uniform and azure; on alibaba the agents are +6 % over Tetris on 100 test episodes but near it on 2
    (docs/reproductions.md), so there only "at Tetris's level" is checked (a broken agent is near Random's 0.40)."""
    from dcplace.learn.nara_policy import shipped_agent

    path = shipped_agent(dataset, topology)
    assert path.name == f"{topology}-{dataset}-paper.pt"
    top = preset(topology)
    checkpoint = None if topology == "alpha" else str(path)
    agent = run_policy(top, dataset, "nara", 128, 2, 0, checkpoint=checkpoint).summary()["acceptance_mean"]
    tetris = run_policy(top, dataset, "tetris", 128, 2, 0).summary()["acceptance_mean"]
    if dataset == "alibaba":
        assert agent > tetris - 0.03
    else:
        assert agent > tetris + 0.02


@pytest.mark.parametrize("dataset", ["uniform", "azure", "alibaba"])
def test_agent_of_the_paper_max_setting_loads_and_beats_tetris_on_alpha(dataset):
    """The agents trained before the load was read as a mean are the ``paper-max`` setting's defaults (its ``-max``
    sets): evaluated, not retrained."""
    from dcplace.learn.nara_policy import shipped_agent

    assert shipped_agent(f"{dataset}-max").name == f"alpha-{dataset}-paper-max.pt"
    top = preset("alpha")
    agent = run_policy(top, dataset, "nara", 128, 2, 0, setting="paper-max").summary()
    tetris = run_policy(top, dataset, "tetris", 128, 2, 0, setting="paper-max").summary()
    assert agent["acceptance_mean"] > tetris["acceptance_mean"] + 0.05
