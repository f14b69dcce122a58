"""Network-aware allocation: topologies, routing, request sets, simulator semantics and invariants, baselines, env."""

from __future__ import annotations

import itertools
import re
import warnings
from fractions import Fraction

import gymnasium as gym
import networkx as nx
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

import dcplace.envs  # noqa: F401  (registers the environments)
from conftest import net_requests as requests
from dcplace.bench.netalloc_runner import run_policy
from dcplace.cluster.topology import BW_SCALE, PRESETS, fabric, from_networkx, load_topology, preset
from dcplace.errors import InputError
from dcplace.policies import get_net_policy, policy_names
from dcplace.policies.netalloc_heuristics import uniform_pick
from dcplace.sim.netalloc import NetAllocSim, Outcome, Rewards
from dcplace.sim.netalloc_episodes import get_setting
from dcplace.sim.routing import (
    CountingRouting,
    FabricRouting,
    GraphRouting,
    LeafRouting,
    routing_for,
    servers_are_leaves,
    widest_of,
)
from dcplace.workload.netreq import (
    DATASETS,
    LOAD_READING,
    SCALE,
    TARGET_LOAD,
    TRAIN_SHARE,
    average_load,
    build_tables,
    generate,
    read_requests,
    shipped_table,
)
from dcplace.workload.traces import shared_data_dir

# --- topologies -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(PRESETS))
def test_presets_have_the_papers_table_8(name):
    spec = PRESETS[name]
    top = preset(name)
    assert top.n_servers == spec.servers_per_rack * spec.racks
    assert (np.bincount(top.server_rack) == spec.servers_per_rack).all()
    assert top.tier_oversubscription() == (spec.server_rack, spec.rack_fabric)
    assert (top.server_cpu == 10).all() and (top.server_mem == 10).all()
    for tier, cap in enumerate(spec.capacity):
        assert (top.link_cap[top.link_tier == tier] == round(cap * BW_SCALE)).all()


def test_beta_halves_server_rack_and_doubles_rack_fabric_oversubscription():
    a, b = preset("alpha").tier_oversubscription(), preset("beta").tier_oversubscription()
    assert b[0] == a[0] / 2 and b[1] == a[1] * 2


def test_beta_is_the_table8_fabric_with_non_neighbouring_racks():
    """Table 8's ratios for beta also allow one pod of 8 racks (two spine uplinks per fabric switch); only the preset
    (2 pods of 4) has the non-neighbouring racks section 4.2 speaks of (docs/netalloc.md, "The last four cells")."""
    beta, one_pod = preset("beta"), fabric(5, 8, 8, 2, 2)
    assert one_pod.tier_oversubscription() == beta.tier_oversubscription() == (Fraction(5, 2), Fraction(4))
    assert len(set(beta.server_pod.tolist())) == 2 and len(set(one_pod.server_pod.tolist())) == 1


def test_generic_graph_from_networkx_and_files(tmp_path):
    import networkx as nx

    g = nx.Graph()
    g.add_node("a", cpu=10, mem=10)
    g.add_node("b", cpu=5, mem=8)
    g.add_node("sw")
    g.add_edge("a", "sw", capacity=1.0)
    g.add_edge("b", "sw", capacity=0.5, tier=0)
    top = from_networkx(g)
    assert top.n_servers == 2 and top.n_links == 2 and list(top.server_mem) == [10, 8]
    f = tmp_path / "t.csv"
    f.write_text("source,target,capacity\nh1,tor,1\nh2,tor,1\ntor,core,2\nh3,core,1\n")
    top = load_topology(str(f))
    assert top.n_servers == 3 and top.node_names[:3] == ("h1", "h2", "h3")


@pytest.mark.parametrize(
    ("text", "needle"),
    [
        (
            '{"nodes": [{"name": "a", "cpu": 1, "mem": 1}, {"name": "b", "cpu": 1, "mem": 1}], "links": []}',
            "has no path",
        ),
        (
            '{"nodes": [{"name": "a", "cpu": 1, "mem": 1}], "links": [{"source": "a", "target": "x", "capacity": 1}]}',
            "links[0]",
        ),
        (
            '{"nodes": [{"name": "a", "cpu": 1, "mem": 1}, {"name": "s"}], "links": [{"source": "a", "target": "s", '
            '"capacity": 0}]}',
            "links[0].capacity': must be a number from 1e-06 to",
        ),
        ('{"nodes": [{"name": "a", "cpu": -1}], "links": []}', "nodes[0].cpu"),
        # a server with memory and no CPU divided by zero in the utilisation (ZeroDivisionError)
        ('{"nodes": [{"name": "a", "mem": 10}], "links": []}', "nodes[0].cpu': node 'a' has cpu 0 and mem 10"),
        ('{"nodes": [{"name": " ", "cpu": 1, "mem": 1}], "links": []}', "nodes[0].name': a node's name must not"),
        (  # a second link between the same pair doubled its bandwidth without a word
            '{"nodes": [{"name": "a", "cpu": 1, "mem": 1}, {"name": "s"}], "links": [{"source": "a", "target": "s", '
            '"capacity": 1}, {"source": "s", "target": "a", "capacity": 1}]}',
            "links[1].target': a second link between 's' and 'a'",
        ),
        ("{not json", "line 1: not valid JSON (Expecting property name enclosed in double quotes at column 2)"),
    ],
)
def test_bad_topology_files_are_one_clear_error(tmp_path, text, needle):
    f = tmp_path / "t.json"
    f.write_text(text)
    with pytest.raises(InputError, match=None) as info:
        load_topology(str(f))
    assert needle in str(info.value) and str(f) in str(info.value)


def test_bad_csv_topology_names_line_and_field(tmp_path):
    f = tmp_path / "t.csv"
    f.write_text("source,target,capacity\nh1,tor,1\nh2,tor,-3\n")
    with pytest.raises(InputError) as info:
        load_topology(str(f))
    assert "line 3" in str(info.value) and "capacity" in str(info.value)


# --- routing ------------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["alpha", "beta", "gamma"])
def test_structural_routing_agrees_with_networkx(name):
    top = preset(name)
    fab, gen = FabricRouting(top), GraphRouting(top)
    rng = np.random.default_rng(0)
    pairs = list(itertools.combinations(range(top.n_servers), 2))
    if len(pairs) > 400:
        pairs = [pairs[i] for i in rng.choice(len(pairs), 400, replace=False)]
    for u, v in pairs:
        assert fab.candidates(u, v) == gen.candidates(u, v), (u, v)


def _tree_like(seed: int) -> nx.Graph:
    """A random tree-like fabric: servers on racks, racks wired to random fabric switches, fabric switches to random
    spines (some parallel-free, uneven: many equal-cost paths of different counts), and a cross link or two."""
    rng = np.random.default_rng(seed)
    g = nx.Graph()
    racks = int(rng.integers(2, 7))
    fabric = [f"f{i}" for i in range(int(rng.integers(1, 5)))]
    spines = [f"s{i}" for i in range(int(rng.integers(1, 4)))]
    for r in range(racks):
        for h in range(int(rng.integers(1, 4))):
            g.add_node(f"h{r}.{h}", cpu=4, mem=8)
            g.add_edge(f"h{r}.{h}", f"r{r}", capacity=1)
        for f in rng.choice(fabric, int(rng.integers(1, len(fabric) + 1)), replace=False):
            g.add_edge(f"r{r}", str(f), capacity=2)
    for f in fabric:
        for sp in rng.choice(spines, int(rng.integers(1, len(spines) + 1)), replace=False):
            g.add_edge(f, str(sp), capacity=4)
    if racks > 2 and rng.random() < 0.5:
        g.add_edge("r0", "r2", capacity=1)
    return g


@pytest.mark.parametrize("seed", range(12))
def test_leaf_routing_agrees_with_networkx_on_generated_fabrics(seed):
    top = from_networkx(_tree_like(seed))
    assert servers_are_leaves(top)
    assert isinstance(routing_for(top), LeafRouting)
    leaf, gen = LeafRouting(top, k=4), GraphRouting(top, k=4)
    for u, v in itertools.combinations(range(top.n_servers), 2):
        assert leaf.candidates(u, v) == gen.candidates(u, v), (u, v)


@pytest.mark.parametrize("name", ["alpha", "gamma"])
def test_leaf_routing_agrees_with_networkx_on_the_presets_as_plain_graphs(name):
    top = preset(name)
    assert isinstance(routing_for(top), FabricRouting)  # presets keep their structural routing (same numbers)
    leaf, gen = LeafRouting(top), GraphRouting(top)
    rng = np.random.default_rng(1)
    pairs = list(itertools.combinations(range(top.n_servers), 2))
    for i in rng.choice(len(pairs), 300, replace=False):
        u, v = pairs[i]
        assert leaf.candidates(u, v) == gen.candidates(u, v), (u, v)


def _general(seed: int) -> nx.Graph:
    """A generated fabric made general: some servers multi-homed (a second link to a random switch), some wired to
    each other (so a shortest path may pass through a server), one random switch-switch link (rarely disconnected:
    then topologies refuse it)."""
    rng = np.random.default_rng(seed)
    g = _tree_like(seed)
    servers = sorted(n for n in g if n.startswith("h"))
    switches = sorted(n for n in g if not n.startswith("h"))
    for h in rng.choice(servers, int(rng.integers(1, len(servers) // 2 + 2)), replace=False):
        g.add_edge(str(h), str(rng.choice(switches)), capacity=1)
    for _ in range(int(rng.integers(0, 3))):
        a, b = rng.choice(servers, 2, replace=False)
        g.add_edge(str(a), str(b), capacity=1)
    a, b = rng.choice(switches, 2, replace=False)
    g.add_edge(str(a), str(b), capacity=3)
    return g


def test_multi_homed_servers_use_the_counting_routing():
    g = _tree_like(3)
    g.add_edge("h0.0", "f0", capacity=1)
    top = from_networkx(g)
    assert not servers_are_leaves(top)
    assert isinstance(routing_for(top), CountingRouting)
    assert isinstance(routing_for(top, generic=True), GraphRouting)


@pytest.mark.parametrize("seed", range(12))
@pytest.mark.parametrize("paths", ["ksp", "ecmp"])
def test_counting_routing_agrees_with_networkx_on_general_graphs(seed, paths):
    top = from_networkx(_general(seed))
    count, gen = CountingRouting(top, k=4, paths=paths), GraphRouting(top, k=4, paths=paths)
    for u, v in itertools.combinations(range(top.n_servers), 2):
        assert count.candidates(u, v) == gen.candidates(u, v), (u, v)


def test_counting_routing_on_servers_wired_to_servers():
    """Leaf servers whose one neighbour is the other server of the pair, or a server that forwards."""
    g = nx.Graph()
    for h in ("h0", "h1", "h2", "h3", "h4", "h5"):
        g.add_node(h, cpu=2, mem=2)
    edges = [("h0", "h1"), ("h1", "r"), ("h2", "r"), ("h3", "r"), ("h4", "h5"), ("h5", "r"), ("r", "s"), ("h5", "s")]
    for a, b in edges:  # h0 and h4 hang off servers that forward
        g.add_edge(a, b, capacity=1)
    top = from_networkx(g)
    count, gen = CountingRouting(top, k=3), GraphRouting(top, k=3)
    for u, v in itertools.combinations(range(top.n_servers), 2):
        assert count.candidates(u, v) == gen.candidates(u, v), (u, v)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10**6), k=st.integers(1, 5), general=st.booleans(), bw=st.integers(1, 4))
def test_widest_without_building_the_candidates_is_the_loops_choice(seed, k, general, bw):
    """The counting routings' compiled widest-candidate search picks what the simulator's loop picks over the
    candidates, on random free-bandwidth states (ties included: few distinct values)."""
    graph = _general(seed) if general else _tree_like(seed)
    assume(nx.is_connected(graph))  # a few generated graphs are not: topologies refuse them
    top = from_networkx(graph)
    routings = [routing_for(top, k), CountingRouting(top, k), GraphRouting(top, k)]
    assert isinstance(routings[0], LeafRouting if servers_are_leaves(top) else CountingRouting)
    rng = np.random.default_rng(seed)
    for _ in range(3):
        free_bw = rng.integers(0, 6, top.n_links).astype(np.int64)
        for u, v in itertools.combinations(range(top.n_servers), 2):
            want = widest_of(routings[2].candidates(u, v), free_bw, bw)
            for r in routings:
                assert r.widest(u, v, free_bw, bw) == want, (type(r).__name__, u, v)


@pytest.mark.parametrize("name", ["alpha", "gamma"])
def test_leaf_widest_matches_the_structural_routing_on_presets(name):
    top = preset(name)
    leaf, fab = LeafRouting(top), FabricRouting(top)
    rng = np.random.default_rng(2)
    pairs = list(itertools.combinations(range(top.n_servers), 2))
    for i in rng.choice(len(pairs), 300, replace=False):
        u, v = pairs[i]
        free_bw = rng.integers(0, 4, top.n_links).astype(np.int64) * BW_SCALE
        assert leaf.widest(u, v, free_bw, BW_SCALE) == fab.widest(u, v, free_bw, BW_SCALE), (u, v)


def test_path_counts_follow_rack_and_pod():
    r = FabricRouting(preset("gamma"))  # 4 planes, 1 spine per plane, pods of 2 racks of 40
    assert len(r.candidates(0, 1)) == 1  # same rack
    assert len(r.candidates(0, 40)) == 3  # same pod: 4 planes, k = 3
    assert len(r.candidates(0, 80)) == 3  # other pod
    used = {p[1] for v in range(40, 80) for p in r.candidates(0, v)}
    assert len(used) == 4  # the rotation spreads pairs over all four planes


# --- request sets -------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dataset", (*DATASETS, "uniform-max", "azure-max", "alibaba-max"))
def test_calibrated_holding_periods_hit_the_average_load(dataset):
    loads = []
    for seed in range(40):
        r = generate(dataset, 128, seed, 400, 400)
        assert (r.cpu >= 1).all() and (r.cpu <= 100).all() and (r.mem >= 1).all() and (r.mem <= 100).all()
        assert (r.bw >= 0.1 * BW_SCALE).all() and (r.bw <= BW_SCALE).all()
        assert (r.hold >= 1).all() and (r.hold <= r.hold_max).all()
        loads.append(average_load(r.cpu, r.mem, r.hold, 400, 400, LOAD_READING[dataset]))
    assert abs(np.mean(loads) - TARGET_LOAD[dataset]) < 0.05


def test_average_load_by_hand():
    # Two requests of 10 CPU on capacity 20: step 0 has request 0 (hold 2), step 1 has both -> (0.5 + 1.0) / 2.
    # Memory 1 each: shares 0.05, 0.1; their mean per step 0.275, 0.55 -> 0.4125.
    cpu = np.array([10, 10])
    assert average_load(cpu, np.array([1, 1]), np.array([2, 1]), 20, 20, "max") == pytest.approx(0.75)
    assert average_load(cpu, np.array([1, 1]), np.array([2, 1]), 20, 20, "mean") == pytest.approx(0.4125)
    with pytest.raises(ValueError, match="load reading"):
        average_load(cpu, cpu, cpu, 20, 20, "min")


def test_splits_are_disjoint_draws_with_similar_means():
    """Appendix H: 20 % train, 80 % test (the -v1 sets: 80 % train)."""
    for dataset in SCALE:
        tr, te = shipped_table(dataset, "train"), shipped_table(dataset, "test")
        share = tr.count.sum() / (tr.count.sum() + te.count.sum())
        assert abs(share - TRAIN_SHARE[dataset]) < 0.001
        assert abs(tr.mean()[0] - te.mean()[0]) < 3


@pytest.mark.skipif(shared_data_dir() is None, reason="needs ../shared/data")
def test_shipped_tables_are_rebuilt_from_the_traces():
    data = shared_data_dir()
    assert data is not None
    for dataset in SCALE:
        for split, table in build_tables(dataset, data).items():
            shipped = shipped_table(dataset, split)
            assert np.array_equal(table.cpu, shipped.cpu) and np.array_equal(table.count, shipped.count)


def test_request_file_errors(tmp_path):
    f = tmp_path / "r.csv"
    f.write_text("cpu,mem,bw,hold\n10,10,0.5,3\n10,10,0,3\n")
    with pytest.raises(InputError) as info:
        read_requests(f)
    assert "line 3" in str(info.value) and "'bw'" in str(info.value)
    f.write_text("cpu,mem,bw,hold\n10,1.5,0.5,3\n")
    with pytest.raises(InputError, match="line 2"):
        read_requests(f)


# --- simulator semantics ------------------------------------------------------------------------------------------


def small() -> NetAllocSim:
    """2 pods x 1 rack x 2 servers, 1 plane; request 0: 20 CPU (two servers), bw 0.6; request 1: 5 CPU on one."""
    top = fabric(2, 2, 1, 1)
    return NetAllocSim(top, requests([(20, 20, 0.6, 5), (5, 5, 0.9, 5), (10, 10, 0.5, 5)]))


def test_accepted_request_reserves_bandwidth_once_per_link_of_its_paths():
    sim = small()
    assert sim.pick(0)[:2] == (Outcome.CONTINUE, 0.0)
    assert sim.pick(1)[:2] == (Outcome.ACCEPTED, 10.0)
    assert sim.free_bw[0] == sim.free_bw[1] == round(0.4 * BW_SCALE)
    assert (sim.free_bw[2:] == sim.topology.link_cap[2:]).all()
    # Request 1 fits on server 2 alone: no bandwidth.
    assert sim.pick(2)[0] == Outcome.ACCEPTED
    assert (sim.free_bw[2:] == sim.topology.link_cap[2:]).all()
    sim.check_invariants()


def test_path_failure_leaves_no_trace():
    top = fabric(3, 1, 1, 1)  # one rack of three servers
    sim = NetAllocSim(top, requests([(15, 15, 0.7, 9), (15, 15, 0.5, 9)]))
    sim.pick(0)
    sim.pick(1)  # request 0 over servers 0 and 1 (0.7 on both uplinks); 5 left on server 1
    before = (sim.free_cpu.copy(), sim.free_mem.copy(), sim.free_bw.copy(), set(sim.active))
    assert sim.pick(1)[0] == Outcome.CONTINUE  # request 1 takes server 1's last 5 ...
    outcome, reward, info = sim.pick(2)  # ... then server 2: server 1's uplink has only 0.3 of 0.5
    assert (outcome, reward, info) == (Outcome.REJECTED, -10.0, {"rejected": "network"})
    after = (sim.free_cpu, sim.free_mem, sim.free_bw, set(sim.active))
    for x, y in zip(before[:3], after[:3], strict=True):
        assert np.array_equal(x, y)
    assert before[3] == after[3] == {0}
    sim.check_invariants()


def test_paths_between_pods_need_bandwidth_on_every_tier():
    top = fabric(1, 2, 1, 1, capacity=(1.0, 1.0, 0.4))  # two pods of one server; spine links 0.4
    sim = NetAllocSim(top, requests([(20, 20, 0.3, 9), (20, 20, 0.3, 9)]))
    sim.pick(0)
    assert sim.pick(1)[0] == Outcome.ACCEPTED  # all six links of the path get 0.3
    assert (sim.free_bw == top.link_cap - round(0.3 * BW_SCALE)).all()
    assert sim.done  # request 1 cannot fit: no capacity left (rejected without a decision)
    assert sim.rejected["capacity"] == 1


def test_invalid_action_rejects_with_reason():
    sim = small()
    sim.pick(0)
    assert sim.pick(0) == (Outcome.REJECTED, -10.0, {"rejected": "invalid"})
    assert sim.rejected["invalid"] == 1 and (sim.free_cpu == 10).all()


def test_capacity_rejection_needs_no_decision():
    sim = NetAllocSim(fabric(1, 1, 1, 1), requests([(10, 10, 0.5, 5), (1, 1, 0.5, 5)]))
    sim.pick(0)
    assert sim.done and sim.rejected["capacity"] == 1 and sim.decisions == 1


def test_departures_free_resources_at_their_step():
    sim = NetAllocSim(fabric(2, 1, 1, 1), requests([(20, 20, 0.5, 1), (20, 20, 0.5, 1)]))
    sim.pick(0)
    sim.pick(1)
    assert sim.t == 1 and (sim.free_cpu == 10).all() and (sim.free_bw == sim.topology.link_cap).all()


@st.composite
def scenarios(draw):
    spr = draw(st.integers(1, 4))
    racks_per_pod = draw(st.integers(1, 2))
    racks = racks_per_pod * draw(st.integers(1, 3))
    planes = draw(st.integers(1, 3))
    top = fabric(spr, racks, racks_per_pod, planes, draw(st.integers(1, 2)), capacity=(1.0, 1.0, 2.0))
    n = draw(st.integers(1, 25))
    rows = [
        (draw(st.integers(1, 30)), draw(st.integers(1, 30)), draw(st.floats(0.05, 1.0)), draw(st.integers(1, 8)))
        for _ in range(n)
    ]
    return top, requests(rows), draw(st.integers(0, 2**32 - 1)), draw(st.floats(0.0, 0.2))


def test_a_full_cluster_makes_the_request_wait_for_room_when_asked():
    """on_full="wait" (the authors' public environment): the request that does not fit waits until the running one
    ends, and is then served; with the default it is rejected for capacity."""
    reqs = requests([(10, 10, 0.5, 3), (1, 1, 0.5, 5), (10, 10, 0.5, 2)])
    sim = NetAllocSim(fabric(1, 1, 1, 1), reqs)
    sim.pick(0)
    assert sim.done and sim.rejected["capacity"] == 2 and sim.waited == 0
    sim = NetAllocSim(fabric(1, 1, 1, 1), reqs, on_full="wait")
    assert sim.pick(0)[0] == Outcome.ACCEPTED  # request 0 at tick 0, holding 3 ticks
    assert (sim.t, sim.clock, sim.waited) == (1, 3, 2)  # request 1 waited ticks 1 and 2; at 3 request 0 left
    sim.check_invariants()
    assert sim.pick(0)[0] == Outcome.ACCEPTED  # at tick 3, holding 5: ends at 8
    assert (sim.t, sim.clock, sim.waited) == (2, 8, 6)
    assert sim.pick(0)[0] == Outcome.ACCEPTED and sim.done
    assert sim.result().rejected == {"capacity": 0, "network": 0, "invalid": 0} and sim.result().waited == 6
    with pytest.raises(ValueError, match="on_full"):
        NetAllocSim(fabric(1, 1, 1, 1), reqs, on_full="queue")


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenarios(), st.sampled_from(["reject", "wait"]))
def test_ledger_invariants_hold_under_any_picks(scenario, on_full):
    top, reqs, seed, p_invalid = scenario
    rng = np.random.default_rng(seed)
    sim = NetAllocSim(top, reqs, on_full=on_full)
    while not sim.done:
        mask = sim.action_mask()
        assert mask.any()
        v = int(rng.integers(top.n_servers)) if rng.random() < p_invalid else int(rng.choice(np.flatnonzero(mask)))
        accepted_before = set(sim.active)
        t = sim.t
        outcome, _, _ = sim.pick(v)
        if outcome == Outcome.REJECTED:
            assert t not in sim.active and set(sim.active) <= accepted_before
        sim.check_invariants()
        assert (sim.free_bw >= 0).all() and (sim.free_bw <= top.link_cap).all()
        assert (sim.free_cpu >= 0).all() and (sim.free_cpu <= top.server_cpu).all()
    res = sim.result()
    assert res.accepted + sum(res.rejected.values()) == len(reqs)
    if on_full == "wait":  # only a request larger than the whole cluster is lost for capacity
        too_big = (reqs.cpu > top.server_cpu.sum()) | (reqs.mem > top.server_mem.sum())
        assert res.rejected["capacity"] == int(too_big.sum())
        assert sim.clock == sim.t + sim.waited
    else:
        assert sim.clock == sim.t and sim.waited == 0
    sim.drain()
    sim.check_invariants()
    assert np.array_equal(sim.free_cpu, top.server_cpu) and np.array_equal(sim.free_mem, top.server_mem)
    assert np.array_equal(sim.free_bw, top.link_cap)


# --- baselines ----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("policy", policy_names("netalloc"))
def test_every_baseline_keeps_the_ledger_and_only_picks_masked_servers(policy):
    run = run_policy("beta", "alibaba", policy, 64, episodes=2, seed=3, check=True)
    s = run.summary()
    assert s["rejected"]["invalid"] == 0
    assert 0 < s["acceptance_mean"] <= 1
    again = run_policy("beta", "alibaba", policy, 64, episodes=2, seed=3).summary()
    assert again["acceptance_per_episode"] == s["acceptance_per_episode"]
    assert again["cpu_util_mean"] == s["cpu_util_mean"] and again["locality"] == s["locality"]


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), n=st.integers(1, 5000), share=st.floats(0.0, 1.0))
def test_uniform_pick_draws_what_generator_choice_draws(seed, n, share):
    """The random baselines' pick is ``rng.choice(np.flatnonzero(mask))``'s server, from the same stream state."""
    mask = np.random.default_rng(seed ^ 1).random(n) < share
    mask[seed % n] = True
    a, b = np.random.default_rng(seed), np.random.default_rng(seed)
    for _ in range(5):
        assert uniform_pick(a, mask) == int(b.choice(np.flatnonzero(mask)))
    assert a.integers(0, 2**40) == b.integers(0, 2**40)  # the streams moved alike
    with pytest.raises(ValueError):
        uniform_pick(a, np.zeros(n, np.bool_))


@settings(max_examples=60, deadline=None)
@given(seed=st.integers(0, 2**32 - 1), need_cpu=st.integers(0, 3), need_mem=st.integers(0, 3))
def test_action_mask_is_the_numpy_formula(seed, need_cpu, need_mem):
    rng = np.random.default_rng(seed)
    top = fabric(5, 4, 2, 1)
    sim = NetAllocSim(top, requests([(4, 4, 0.1, 5)]))
    sim.free_cpu[:] = rng.integers(0, 3, top.n_servers)
    sim.free_mem[:] = rng.integers(0, 3, top.n_servers)
    sim.selected[:] = rng.random(top.n_servers) < 0.3
    sim.need_cpu, sim.need_mem = need_cpu, need_mem
    want = np.zeros(top.n_servers, np.bool_)
    if need_cpu > 0:
        want |= sim.free_cpu > 0
    if need_mem > 0:
        want |= sim.free_mem > 0
    assert np.array_equal(sim.action_mask(), want & ~sim.selected)


def test_tetris_cosine_follows_cosine_then_rack_penalty():
    top = fabric(3, 2, 2, 1)  # servers 0-2 rack 0, 3-5 rack 1, one pod
    sim = NetAllocSim(top, requests([(16, 4, 0.1, 5)]))
    sim.free_cpu[:] = [2, 10, 10, 10, 10, 10]
    sim.free_mem[:] = [2, 10, 10, 1, 10, 10]
    sim.free_cpu_total, sim.free_mem_total = int(sim.free_cpu.sum()), int(sim.free_mem.sum())
    tetris = get_net_policy("tetris-cosine")
    assert tetris.choose(sim) == 3  # (10, 1) is most aligned with (16, 4)
    sim.pick(3)  # need (6, 3) now; in rack 1, server 4 (10, 10) beats server 0 (2, 2)x0.1
    assert tetris.choose(sim) == 4


def test_tetris_follows_the_dot_product_then_rack_penalty():
    top = fabric(3, 2, 2, 1)
    sim = NetAllocSim(top, requests([(16, 4, 0.1, 5)]))
    sim.free_cpu[:] = [2, 10, 10, 10, 3, 10]
    sim.free_mem[:] = [2, 9, 10, 1, 3, 10]
    sim.free_cpu_total, sim.free_mem_total = int(sim.free_cpu.sum()), int(sim.free_mem.sum())
    tetris = get_net_policy("tetris")
    assert tetris.choose(sim) == 2  # 16x10 + 4x10 = 200, the most (server 5 ties, the lower id wins)
    sim.pick(2)  # need (6, 0): rack 0's server 1 scores 60; rack 1's server 5 60 x 0.1
    assert tetris.choose(sim) == 1


def test_nulb_searches_its_rack_first():
    top = fabric(4, 2, 2, 1)
    sim = NetAllocSim(top, requests([(40, 40, 0.1, 5)]))
    pol = get_net_policy("nulb", seed=1)
    first = pol.choose(sim)
    sim.pick(first)
    second = pol.choose(sim)
    assert top.server_rack[second] == top.server_rack[first]


def test_nalb_strict_does_not_cross_thin_links():
    top = fabric(2, 2, 2, 1)  # two racks of two in one pod
    sim = NetAllocSim(top, requests([(30, 30, 0.5, 5)]))
    sim.free_bw[1] = 0  # server 1's uplink is full
    pol = get_net_policy("nalb-strict", seed=0)
    first = pol.choose(sim)
    assert first != 1
    sim.pick(first)
    assert pol.choose(sim) != 1


# --- environment --------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("topology", ["alpha", "beta"])
def test_env_passes_check_env(topology):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        env = gym.make("dcplace/NetAlloc-v0", topology=topology, dataset="azure")
        check_env(env.unwrapped, skip_render_check=True)


def test_env_episode_scores_like_the_simulator():
    env = gym.make("dcplace/NetAlloc-v0", topology="alpha", requests=16).unwrapped
    obs, _ = env.reset(seed=5)
    assert obs["nodes"].shape == (50, 4) and obs["edge_index"].shape == (2, 104) and obs["state"].shape == (3,)
    total, done, rng = 0.0, False, np.random.default_rng(0)
    while not done:
        assert obs["action_mask"].any()
        a = int(rng.choice(np.flatnonzero(obs["action_mask"])))
        obs, r, done, trunc, info = env.step(a)
        total += r
        assert not trunc and info["outcome"] in ("continue", "accepted", "rejected")
    res = env.sim.result()
    assert total == 10 * res.accepted - 10 * res.rejected["network"]
    assert not obs["action_mask"].any()


def test_env_where_a_full_cluster_makes_requests_wait():
    """``on_full="wait"`` (the ``paper`` setting): the same episode as the default loses no request for capacity, and
    the gymnasium checker still passes; a bad value is one clear error."""
    lost = {}
    for on_full in ("reject", "wait"):
        env = gym.make("dcplace/NetAlloc-v0", topology="alpha", dataset="alibaba", requests=128, on_full=on_full)
        env.reset(seed=0)  # an episode where it fills (seeds 2-4 never do)
        sim, done, tetris = env.unwrapped.sim, False, get_net_policy("tetris", 0, "alibaba")
        while not done:  # Tetris packs well enough to fill the cluster (random picks fail paths first)
            _obs, _r, done, _trunc, _info = env.step(tetris.choose(sim.view()))
        lost[on_full] = (sim.rejected["capacity"], sim.waited)
        sim.check_invariants()
    assert lost["reject"][0] > 0 and lost["wait"][0] == 0 and lost["wait"][1] > 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(gym.make("dcplace/NetAlloc-v0", dataset="alibaba", on_full="wait").unwrapped, skip_render_check=True)
    with pytest.raises(InputError, match="on_full"):
        gym.make("dcplace/NetAlloc-v0", on_full="queue")


def test_env_same_seed_same_requests():
    env = gym.make("dcplace/NetAlloc-v0", topology="alpha").unwrapped
    a, _ = env.reset(seed=11)
    b, _ = env.reset(seed=11)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_fraction_presets_reject_impossible_ratios():
    from dcplace.cluster.topology import fabric_from_oversubscription

    with pytest.raises(InputError, match="whole number"):
        fabric_from_oversubscription(10, 4, Fraction(3), Fraction(2))


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), dataset=st.sampled_from(["uniform", "alibaba"]), tiny=st.booleans())
def test_capacity_reward_at_the_failure_value_makes_the_return_count_every_request(seed, dataset, tiny):
    """With ``Rewards(capacity=failure)`` the return is success x accepted + failure x not accepted for any policy
    (capacity rejections included); the default (0) leaves capacity rejections out of the return. ``tiny``: two
    servers, where requests are also rejected before the first pick (they were not charged)."""
    top = fabric(2, 1, 1, 1) if tiny else load_topology("alpha")
    req = generate(dataset, 64, seed, int(top.server_cpu.sum()), int(top.server_mem.sum()))
    assume(not NetAllocSim(top, req).done)  # an episode without a pick has no reward to carry the charges
    totals = []
    for cap in (0.0, -10.0):
        sim = NetAllocSim(top, req, rewards=Rewards(capacity=cap))
        rng = np.random.default_rng(seed)
        total = 0.0
        while not sim.done:
            _, r, _ = sim.pick(int(rng.choice(np.flatnonzero(sim.action_mask()))))
            total += r
        totals.append((total, sim.accepted, sim.rejected["capacity"]))
    (t0, acc0, cap0), (t1, acc1, cap1) = totals
    assert (acc0, cap0) == (acc1, cap1)  # the reward changes no transition
    assert t1 == 10.0 * acc1 - 10.0 * (len(req) - acc1)
    assert t0 == t1 + 10.0 * cap1


def test_capacity_rejections_are_charged_to_the_pick_that_let_them_happen():
    top = fabric(2, 1, 1, 1)  # one rack of two servers, 20 CPU units
    req = requests([(20, 1, 0.1, 3), (5, 1, 0.1, 1), (5, 1, 0.1, 1), (1, 1, 0.1, 1)])
    sim = NetAllocSim(top, req, rewards=Rewards(capacity=-7.0))
    assert sim.pick(0)[:2] == (Outcome.CONTINUE, 0.0)
    # completing request 0 fills the cluster until step 3: requests 1 and 2 are rejected for capacity at once
    assert sim.pick(1)[:2] == (Outcome.ACCEPTED, 10.0 - 2 * 7.0)
    assert sim.rejected["capacity"] == 2 and sim.t == 3
    assert sim.pick(0)[:2] == (Outcome.ACCEPTED, 10.0)  # request 3 fits again
    assert sim.done and sim.accepted == 2


def test_setting_names_are_the_settings():
    """The settings' names as a type (config fields) and the CLI's copy of it name exactly the settings there are."""
    from typing import get_args

    from dcplace.cli.common import NetSettingName
    from dcplace.sim.netalloc_episodes import SETTINGS, SettingName

    assert set(get_args(SettingName)) == set(SETTINGS) == set(get_args(NetSettingName))


def test_the_paper_setting_loses_no_request_to_a_full_cluster(tmp_path):
    """``paper`` (the default: the authors' environment): the same episodes as ``paper-reject``, but a request that
    meets a full cluster waits, so none is lost for capacity; the clairvoyant bound, a relaxation of the rejecting
    simulator, is reported only where requests are rejected."""
    from dcplace.bench.nara_baselines import run_bounds

    reject = run_policy("alpha", "alibaba", "tetris", 128, 2, 0, setting="paper-reject").summary()
    wait = run_policy("alpha", "alibaba", "tetris", 128, 2, 0).summary()
    assert reject["rejected"]["capacity"] > 0 and wait["rejected"]["capacity"] == 0
    assert wait["acceptance_mean"] > reject["acceptance_mean"]
    assert get_setting("paper").on_full == "wait" and get_setting("paper-reject").on_full == "reject"
    for setting in ("paper", "paper-reject"):
        runs = {("alpha", "alibaba", "tetris"): run_policy("alpha", "alibaba", "tetris", 128, 1, 0, setting=setting)}
        bounds = run_bounds(tmp_path, runs, 0, setting, progress=False)
        written = (tmp_path / "bounds.jsonl").read_text()
        if setting == "paper":
            assert bounds == {} and written == ""
        else:
            assert set(bounds) == {("alpha", "alibaba")} and written.count("\n") == 1


@pytest.mark.parametrize(
    ("rows", "needle"),
    [
        ("h1,tor1,1,0\nh2,tor1,1,0\nh1,tor1,1,0\n", "line 4, field 'target': a second link between 'h1' and 'tor1'"),
        (",tor1,1,0\nh2,tor1,1,0\n", "line 2, field 'source': a node's name must not be empty"),
    ],
)
def test_a_topology_csv_is_not_changed_without_a_word(tmp_path, rows, needle):
    """A repeated row made a server a switch (two links); an empty name made a server named ''."""
    f = tmp_path / "t.csv"
    f.write_text("source,target,capacity,tier\n" + rows)
    with pytest.raises(InputError, match=re.escape(needle)):
        load_topology(str(f))
