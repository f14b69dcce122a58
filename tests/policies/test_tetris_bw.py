"""``tetris-bw`` (dcplace.policies.netalloc_heuristics.TetrisBandwidth): its three rules, checked on the state of
random episodes; and it accepts more than Tetris on the training episodes of every set (a small, seeded run)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcplace.cluster.topology import preset
from dcplace.policies.netalloc_heuristics import _Adjacency
from dcplace.policies.registry import get_net_policy
from dcplace.sim.netalloc import NetAllocSim
from dcplace.sim.netalloc_episodes import episode_requests, run_episode

ALPHA = preset("alpha")
ADJ = _Adjacency.of(ALPHA)


@settings(max_examples=15, deadline=None)
@given(dataset=st.sampled_from(["uniform", "azure", "alibaba"]), seed=st.integers(0, 10_000))
def test_every_pick_follows_the_rules(dataset: str, seed: int) -> None:
    """At every pick of an episode: a request one server can hold goes to the tightest server that holds it; a first
    pick of a larger one is in the rack whose bandwidth-capable servers hold it with the least room left (where
    one does), a later one in the first's rack where a capable server is left there; every pick is a capable server
    where there is one, and the best-scored (need . free) of those the rules leave."""
    req = episode_requests(ALPHA, dataset, 128, seed, 0, "train")
    sim = NetAllocSim(ALPHA, req, on_full="wait")
    policy = get_net_policy("tetris-bw")
    n, rack = ALPHA.n_servers, ALPHA.server_rack[: ALPHA.n_servers]
    while not sim.done:
        view = sim.view()
        v = policy.choose(view)
        mask, fc, fm = view.action_mask(), view.free_cpu, view.free_mem
        nc, nm, bw = view.need_cpu, view.need_mem, view.request[2]
        assert mask[v]
        whole = mask & (fc >= nc) & (fm >= nm)
        capable = mask & ADJ.servers_with_bandwidth(n, view.free_bw, bw)
        if not view.picks and whole.any():
            room = np.where(whole, (fc - nc) + (fm - nm), np.iinfo(np.int64).max)
            assert room[v] == room.min()
        else:
            ok = capable if capable.any() else mask
            assert ok[v]
            if not view.picks:
                fits = [r for r in np.unique(rack[ok]) if fc[ok & (rack == r)].sum() >= nc
                        and fm[ok & (rack == r)].sum() >= nm]  # fmt: skip
                if fits:
                    left = {r: fc[ok & (rack == r)].sum() - nc + fm[ok & (rack == r)].sum() - nm for r in fits}
                    assert left[rack[v]] == min(left.values())
                    ok = ok & (rack == rack[v])
            elif (ok & (rack == rack[view.picks[0]])).any():
                assert rack[v] == rack[view.picks[0]]
                ok = ok & (rack == rack[v])
            score = np.where(ok, fc * nc + fm * nm, -1)
            assert score[v] == score.max()
        sim.pick(v)


@pytest.mark.parametrize("dataset", ["uniform", "azure", "alibaba"])
def test_it_accepts_more_than_tetris_on_training_episodes(dataset: str) -> None:
    """Ten training-split episodes of 128 requests on alpha, where requests wait for room (the ``paper`` setting):
    ahead of Tetris on the mean (measured on 40: +12 to +19 %, docs/netalloc.md)."""
    means = {}
    for name in ("tetris", "tetris-bw"):
        got = []
        for j in range(10):
            sim = NetAllocSim(ALPHA, episode_requests(ALPHA, dataset, 128, 101, j, "train"), on_full="wait")
            got.append(run_episode(sim, get_net_policy(name)).acceptance)
        means[name] = float(np.mean(got))
    assert means["tetris-bw"] > means["tetris"] + 0.03, means


@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 10_000), zero=st.sampled_from(["cpu", "mem", None]))
def test_without_racks_and_for_one_resource_it_stays_in_the_mask(seed: int, zero: str | None) -> None:
    """A general graph (servers without racks, each its own), requests asking for CPU or memory only, bandwidth wider
    than any link: every pick is a server of the mask, and the episode's invariants hold."""
    import networkx as nx

    from dcplace.cluster.topology import from_networkx
    from dcplace.workload.netreq import NetRequests

    g = nx.Graph()
    rng = np.random.default_rng(seed)
    for i in range(8):
        g.add_node(f"h{i}", cpu=int(rng.integers(1, 11)), mem=int(rng.integers(1, 11)))
        g.add_edge(f"h{i}", f"sw{i % 3}", capacity=float(rng.choice([0.3, 1.0])))
    g.add_edge("sw0", "sw1", capacity=2.0)
    g.add_edge("sw1", "sw2", capacity=2.0)
    top = from_networkx(g)
    n = 40
    cpu, mem = rng.integers(0, 25, n), rng.integers(0, 25, n)
    if zero is not None:
        (cpu if zero == "cpu" else mem)[:] = 0
    cpu[(cpu == 0) & (mem == 0)] = 1
    bw = rng.choice([100_000, 2_000_000], n)  # 0.1 link units, or wider than any link
    sim = NetAllocSim(top, NetRequests(cpu, mem, bw, rng.integers(1, 20, n), 20, "test"), on_full="wait")
    policy = get_net_policy("tetris-bw")
    while not sim.done:
        v = policy.choose(sim.view())
        assert sim.view().action_mask()[v]
        sim.pick(v)
    sim.check_invariants()
