"""The routings' check of every pair of a pick at once (``FabricRouting.widest_all``, compiled; ``LeafRouting.
widest_all``, compiled passes per destination switch) chooses what the pair-by-pair search chooses: a pair without a
path (the same first one, for the Fabric pass), the same links taken; and an episode decided with it is the episode
decided without it, server for server."""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcplace.cluster.topology import fabric, from_networkx, preset
from dcplace.policies import get_net_policy
from dcplace.sim.netalloc_episodes import Routings, episode_requests, get_setting, new_sim, run_episode
from dcplace.sim.routing import BATCH_FROM, FabricRouting, LeafRouting, routing_for, widest_of


def _pair_by_pair(widest: Any, us: np.ndarray, v: int) -> tuple[int, set[int]]:
    """The reference: ``widest(a, b)`` (a < b) of each pair of ``v`` and a server of ``us`` in turn: the index of the
    first without a path (-1: none) and the links of the paths chosen until then."""
    links: set[int] = set()
    for i, u in enumerate(us.tolist()):
        path = widest(min(u, v), max(u, v))
        if path is None:
            return i, links
        links |= set(path)
    return -1, links


@st.composite
def _cases(draw: st.DrawFn) -> tuple:
    planes = draw(st.integers(1, 5))
    rule = draw(st.sampled_from(["ksp", "ecmp"]))
    k = draw(st.integers(1, planes if rule == "ksp" else 5))  # ksp with fewer planes than k takes longer paths
    racks_per_pod = draw(st.integers(1, 3))
    top = fabric(draw(st.integers(1, 4)), racks_per_pod * draw(st.integers(1, 3)), racks_per_pod, planes,
                 draw(st.integers(1, 3)))  # fmt: skip
    routing = FabricRouting(top, k, rule)
    levels = draw(st.lists(st.integers(0, 1_000_000), min_size=1, max_size=4))  # few values: many ties
    free = np.array(draw(st.lists(st.sampled_from(levels), min_size=len(top.link_cap), max_size=len(top.link_cap))),
                    dtype=np.int64)  # fmt: skip
    servers = draw(st.permutations(range(top.n_servers)))
    n = draw(st.integers(1, top.n_servers))
    v, us = servers[0], np.array(servers[1:n], dtype=np.int64)
    bw = draw(st.sampled_from([*levels, 1]))
    return top, routing, free, us, v, bw


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_cases())
def test_every_pair_at_once_chooses_as_pair_by_pair(case: tuple) -> None:
    top, routing, free, us, v, bw = case
    assert routing.widest_all is not None
    expected, links = _pair_by_pair(lambda a, b: widest_of(routing.candidates(a, b), free, bw), us, v)
    used = np.zeros(len(top.link_cap), dtype=np.bool_)
    assert routing.widest_all(us, v, free, bw, used) == expected
    assert set(np.flatnonzero(used).tolist()) == (links if expected < 0 else set())


def test_only_where_no_pair_needs_a_longer_path() -> None:
    """Alpha and beta have two planes: with k = 3 a pair of one pod takes a longer path, which the kernel does not
    enumerate, so the simulator asks pair by pair there; equal-cost paths only, it applies."""
    assert FabricRouting(preset("alpha"), 3, "ksp").widest_all is None
    assert FabricRouting(preset("alpha"), 3, "ecmp").widest_all is not None
    assert FabricRouting(preset("gamma"), 3, "ksp").widest_all is not None


@pytest.mark.parametrize("policy", ["tetris", "tetris-bw", "nalb-strict", "random"])
@pytest.mark.parametrize("requests", ["uniform, larger", "azure"])
def test_an_episode_on_gamma_is_the_same_with_and_without_it(policy: str, requests: str) -> None:
    """Episodes whose jobs reach their ninth server (then their pairs are checked at once): the Azure set of the
    paper's setting (up to 16 servers on gamma), and the uniform set's holds and bandwidths with sizes of up to 40
    servers' worth."""
    top = preset("gamma")
    routings = Routings(top, get_setting("paper"), 3)
    base = episode_requests(top, requests.split(",")[0], 300, 0, 0)
    rng = np.random.default_rng(0)
    req = base if requests == "azure" else replace(base, cpu=rng.integers(1, 400, len(base)),
                                                    mem=rng.integers(1, 400, len(base)))  # fmt: skip
    ends = []
    batched: list[int] = []
    for fast in (True, False):
        pol = get_net_policy(policy, seed=0)
        sim = new_sim(top, req, routings, pol)
        inner = sim._widest_all
        assert (inner is not None) == isinstance(sim.routing, FabricRouting)
        if not fast or inner is None:
            sim._widest_all = None  # the pair-by-pair search
        else:

            def counted(*args: object, inner: Any = inner) -> int:
                batched.append(1)
                return int(inner(*args))

            sim._widest_all = counted
        result = run_episode(sim, pol)
        ends.append((result.acceptance, sim.free_bw.tolist(), sim.free_cpu.tolist(),
                     {t: (a.servers.tolist(), a.links.tolist()) for t, a in sim.active.items()}))  # fmt: skip
    assert ends[0] == ends[1]
    assert batched or not isinstance(sim.routing, FabricRouting), "no request was large enough to be batched"


@st.composite
def _leaf_cases(draw: st.DrawFn) -> tuple:
    """A fabric read as a plain graph (``LeafRouting``: any tree-like network loaded from a file), any planes and
    rule (with ksp and fewer planes than k, pairs of one pod take longer paths: the general loop inside)."""
    planes = draw(st.integers(1, 4))
    racks_per_pod = draw(st.integers(1, 3))
    built = fabric(draw(st.integers(1, 6)), racks_per_pod * draw(st.integers(1, 3)), racks_per_pod, planes,
                   draw(st.integers(1, 2)))  # fmt: skip
    top = from_networkx(built.to_networkx(), name="loaded")
    routing = LeafRouting(top, draw(st.integers(1, 4)), paths=draw(st.sampled_from(["ksp", "ecmp"])))
    levels = draw(st.lists(st.integers(0, 1_000_000), min_size=1, max_size=4))
    free = np.array(draw(st.lists(st.sampled_from(levels), min_size=len(top.link_cap), max_size=len(top.link_cap))),
                    dtype=np.int64)  # fmt: skip
    servers = draw(st.permutations(range(top.n_servers)))
    n = draw(st.integers(1, top.n_servers))
    return top, routing, free, np.array(servers[1:n], dtype=np.int64), servers[0], draw(st.sampled_from([*levels, 1]))


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_leaf_cases())
def test_the_leaf_routing_checks_every_pair_as_pair_by_pair(case: tuple) -> None:
    top, routing, free, us, v, bw = case
    first, links = _pair_by_pair(lambda a, b: routing.widest(a, b, free, bw), us, v)
    failed = first >= 0
    used = np.zeros(len(top.link_cap), dtype=np.bool_)
    answer = routing.widest_all(us, v, free, bw, used)
    assert (answer >= 0) == failed
    if failed:
        assert routing.widest(*sorted((int(us[answer]), v)), free, bw) is None  # a pair without one
    assert set(np.flatnonzero(used).tolist()) == (set() if failed else links)


@st.composite
def _lopsided_cases(draw: st.DrawFn) -> tuple:
    """A random connected switch graph (a random tree and a few more links) with servers hung on random switches,
    names shuffled so that node order is not wiring order: paths whose order depends on their direction, and pairs
    with fewer shortest paths than k (ksp then takes longer ones)."""
    import networkx as nx

    n_sw = draw(st.integers(2, 9))
    names = draw(st.permutations([f"n{i:02d}" for i in range(n_sw + 16)]))
    g = nx.Graph()
    if draw(st.booleans()):  # a random tree and a few more links
        for i in range(1, n_sw):
            g.add_edge(names[i], names[draw(st.integers(0, i - 1))], capacity=1.0)
        for _ in range(draw(st.integers(0, n_sw))):
            a, b = draw(st.integers(0, n_sw - 1)), draw(st.integers(0, n_sw - 1))
            if a != b:
                g.add_edge(names[a], names[b], capacity=1.0)
        edge = range(n_sw)  # servers hang anywhere
    else:  # random layers (leaves, then two above): many equal-cost paths, more than k between two leaves
        cut = sorted(draw(st.lists(st.integers(1, n_sw - 1), min_size=2, max_size=2))) if n_sw > 2 else [1, 1]
        layers = [list(range(0, cut[0])), list(range(cut[0], cut[1])), list(range(cut[1], n_sw))]
        for low, high in itertools.pairwise(layers):
            for x in low:
                for y in high:
                    if draw(st.booleans()) or y == high[0]:
                        g.add_edge(names[x], names[y], capacity=1.0)
        g.add_nodes_from(names[i] for i in range(n_sw))
        if not nx.is_connected(g):
            for x, y in itertools.pairwise(range(n_sw)):
                g.add_edge(names[x], names[y], capacity=1.0)
        edge = layers[0]
    n_servers = draw(st.integers(2, 16))
    for j in range(n_servers):
        g.add_node(names[n_sw + j], cpu=10, mem=10)
        g.add_edge(names[n_sw + j], names[draw(st.sampled_from(list(edge)))], capacity=1.0)
    top = from_networkx(g, name="lopsided")
    k, rule = draw(st.integers(1, 4)), draw(st.sampled_from(["ksp", "ecmp"]))
    bw = draw(st.integers(1, 1_000_000))
    # Links full, just short of the request, or with room: a pair's shortest paths often fail where a longer one
    # would carry it, the case that tells ksp's longer paths from the shortest ones alone.
    levels = [0, bw - 1, bw, draw(st.integers(bw, 1_000_000))]
    free = np.array(draw(st.lists(st.sampled_from(levels), min_size=len(top.link_cap), max_size=len(top.link_cap))),
                    dtype=np.int64)  # fmt: skip
    servers = draw(st.permutations(range(top.n_servers)))
    n = draw(st.integers(2, top.n_servers))
    us = np.array(servers[1:n], dtype=np.int64)
    return top, k, rule, free, us, servers[0], bw


@settings(max_examples=800, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(_lopsided_cases())
def test_the_leaf_routings_batched_pass_agrees_with_networks_own_paths_on_lopsided_graphs(case: tuple) -> None:
    """The batched pass itself (below BATCH_FROM pairs too) against the reference routing (networkx's paths,
    ``GraphRouting``): a review found that reversing the pairs' orientation, or deciding on shortest paths a pair
    that needs longer ones, passed the fabric-shaped cases above."""
    from dcplace.sim.routing import GraphRouting

    top, k, rule, free, us, v, bw = case
    reference = GraphRouting(top, k, rule)
    first, links = _pair_by_pair(lambda a, b: widest_of(reference.candidates(a, b), free, bw), us, v)
    failed = first >= 0
    used = np.zeros(len(top.link_cap), dtype=np.bool_)
    answer = LeafRouting(top, k, paths=rule).widest_all(us, v, free, bw, used)
    assert (answer >= 0) == failed
    assert set(np.flatnonzero(used).tolist()) == (set() if failed else links)


def test_the_batched_pass_routes_each_pair_from_its_lower_server() -> None:
    """A graph (found by a random search) where the orientation decides: with k = 2 under ksp, servers n06 and n15
    have no candidate of 5 free when routed from n06's side (the lower id, as the reference routes them), and one when
    routed from n15's. The batched pass must route them as the reference does, whichever of the two came first."""
    import networkx as nx

    from dcplace.sim.routing import GraphRouting

    g = nx.Graph()
    g.add_nodes_from(["n04", "n00", "n07", "n05", "n09", "n02", "n12", "n03"])
    for name in ("n01", "n06", "n15", "n08"):
        g.add_node(name, cpu=10, mem=10)
    free_of = {
        ("n04", "n00"): 4, ("n04", "n07"): 5, ("n04", "n05"): 9, ("n04", "n06"): 9, ("n00", "n12"): 5,
        ("n07", "n02"): 5, ("n07", "n12"): 9, ("n07", "n05"): 9, ("n05", "n09"): 5, ("n05", "n02"): 4,
        ("n05", "n01"): 0, ("n02", "n03"): 4, ("n12", "n03"): 9, ("n03", "n15"): 5, ("n03", "n08"): 4,
    }  # fmt: skip
    g.add_edges_from(free_of, capacity=1.0)
    top = from_networkx(g, name="oriented")
    names = list(top.node_names)
    ends = zip(top.link_u.tolist(), top.link_v.tolist(), strict=True)
    free = np.array([free_of.get((names[u], names[v]), free_of.get((names[v], names[u]))) for u, v in ends], np.int64)
    a, b = sorted((names.index("n06"), names.index("n15")))
    routing = LeafRouting(top, 2, paths="ksp")
    expected = widest_of(GraphRouting(top, 2, "ksp").candidates(a, b), free, 5)
    assert expected is None and routing.widest(b, a, free, 5) is not None  # the orientation decides here
    for us, v in (([a], b), ([b], a)):
        used = np.zeros(len(free), dtype=np.bool_)
        assert routing.widest_all(np.array(us, dtype=np.int64), v, free, 5, used) == 0
        assert not used.any()


def test_a_job_over_a_loaded_fabric_is_batched_and_decided_as_pair_by_pair() -> None:
    """A whole-cluster job on gamma read as a plain graph (LeafRouting: 640 servers, over BATCH_FROM pairs from the
    ninth pick on) ends with the same servers and links either way."""
    from dcplace.engine import NetJob, NetworkEngine

    top = from_networkx(preset("gamma").to_networkx(), name="gamma-file")
    answers = []
    for fast in (True, False):
        engine = NetworkEngine(top, "tetris-bw")
        assert isinstance(engine.sim.routing, LeafRouting) and BATCH_FROM < 640
        if not fast:
            engine.sim._widest_all = None
        placed = engine.place(NetJob("all", 6000, 6000, 0.05))
        assert placed.accepted
        answers.append(placed.as_dict())
    assert answers[0] == answers[1]


def test_a_subclass_with_its_own_per_request_links_still_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The audit's reading that reserves bandwidth per pair (``benchmarks/audit_nara_baselines.py``,
    ``PairBandwidthSim``) keeps its own list of a request's links: a review found the simulator's new mark array took
    its name and the audit crashed."""
    import importlib.util
    import sys
    from pathlib import Path

    path = Path(__file__).parents[2] / "benchmarks" / "audit_nara_baselines.py"
    spec = importlib.util.spec_from_file_location("audit_nara_baselines", path)
    assert spec is not None and spec.loader is not None
    audit = importlib.util.module_from_spec(spec)
    monkeypatch.setitem(sys.modules, spec.name, audit)  # its dataclasses look their module up
    spec.loader.exec_module(audit)
    top = preset("alpha")
    reading = next(r for r in audit.READINGS if r.name == "bw-per-pair")
    sim = audit.PairBandwidthSim(top, audit.requests_for(top, "uniform", 0, 0, reading), routing=routing_for(top, 3))
    result = run_episode(sim, audit._before("tetris", 0))
    assert 0 < result.acceptance < 1
