"""The compiled Nara forward (:mod:`dcplace.learn.nara_fast`) against the torch network it replaces at inference:
logits within float32 rounding on random weights (both policy heads) and random or simulated observations, the
deduplicating plan bit-identical to computing every node, and the same greedy decisions as torch for the shipped
agents on whole episodes."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcplace.bench.netalloc_runner import Routings
from dcplace.cluster.topology import fabric, preset
from dcplace.envs.net_alloc import NetObserver
from dcplace.learn import checkpoint
from dcplace.learn.nara_fast import FastPolicy
from dcplace.learn.nara_model import MASKED_LOGIT, GraphIndex, NaraConfig, NaraNet, obs_tensors
from dcplace.learn.nara_policy import NaraAgent, checkpoint_for
from dcplace.sim.netalloc import NetAllocSim
from dcplace.sim.netalloc_episodes import episode_requests, get_setting
from dcplace.workload.netreq import generate

torch.set_num_threads(1)
TINY = fabric(4, 4, 2, 1, name="tiny")
ALPHA = preset("alpha")


def _torch_logits(net: NaraNet, g: GraphIndex, obs: dict) -> np.ndarray:
    with torch.inference_mode():
        return net.policy(*obs_tensors(obs), g)[0].numpy()


def _check(net: NaraNet, fast: FastPolicy, g: GraphIndex, obs: dict) -> None:
    got = fast.logits(obs)
    plain = fast.logits(obs, dedupe=False)
    np.testing.assert_array_equal(got, plain)  # the row plan and deduplication change no bit
    want = _torch_logits(net, g, obs)
    mask = obs["action_mask"].astype(bool)
    assert (got[~mask] == MASKED_LOGIT).all()
    np.testing.assert_allclose(got[mask], want[mask], rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize(("p2_hidden", "per_message"), [(0, False), (16, False), (0, True)])
@pytest.mark.parametrize("top", [ALPHA, preset("gamma"), TINY], ids=lambda t: t.name)
def test_logits_match_torch_along_an_episode(top, p2_hidden, per_message):
    torch.manual_seed(3 + p2_hidden)
    net = NaraNet(NaraConfig(p2_hidden=p2_hidden, relu_per_message=per_message))
    fast, g, observe = FastPolicy(net.policy, top), GraphIndex(top), NetObserver(top)
    sim = NetAllocSim(top, generate("uniform", 24, 1, int(top.server_cpu.sum()), int(top.server_mem.sum())))
    while not sim.done:
        obs = observe(sim)
        _check(net, fast, g, obs)
        sim.pick(int(np.argmax(_torch_logits(net, g, obs))))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    levels=st.integers(1, 4),
    p2_hidden=st.sampled_from([0, 8]),
    per_message=st.booleans(),
)
def test_random_observations_with_repeated_servers(seed, levels, p2_hidden, per_message):
    """Features drawn from a few levels, so many servers repeat (the deduplication's case), some exactly equal
    across racks (ties), selected bits and masks at random."""
    rng = np.random.default_rng(seed)
    torch.manual_seed(seed)
    net = NaraNet(NaraConfig(p2_hidden=p2_hidden, relu_per_message=per_message))
    top = ALPHA
    v, s, e = top.n_nodes, top.n_servers, top.edge_index.shape[1]
    grid = np.linspace(0.0, 1.0, levels + 1, dtype=np.float32)
    nodes = np.zeros((v, 4), dtype=np.float32)
    nodes[:s, :3] = rng.choice(grid, (s, 3))
    nodes[s:, 2] = rng.choice(grid, v - s)
    nodes[:s, 3] = rng.random(s) < 0.1
    obs = {
        "nodes": nodes,
        "edges": rng.choice(grid, (e, 1)).astype(np.float32),
        "state": rng.random(3).astype(np.float32),
        "action_mask": ((rng.random(s) < 0.7) & (nodes[:s, 3] == 0)).astype(np.int8),
    }
    fast = FastPolicy(net.policy, top)
    _check(net, fast, GraphIndex(top), obs)
    if obs["action_mask"].any():
        # Identical servers get identical logits: the greedy choice is the first of the tied, as torch's argmax.
        assert fast.choose(obs) == int(np.argmax(_torch_logits(net, GraphIndex(top), obs)))


SHIPPED = [p for p in checkpoint.shipped() if p.name.startswith("alpha-")]


@pytest.mark.skipif(len(SHIPPED) < 3, reason="the shipped alpha checkpoints are not in this checkout")
@pytest.mark.parametrize(("topology", "dataset"), [("alpha", "uniform"), ("alpha", "alibaba"), ("gamma", "azure")])
def test_shipped_agent_same_decisions_compiled_and_torch(topology, dataset):
    """The policy ``nara`` runs compiled; the torch network is the reference. Along torch's own choices (the paper
    setting's routing, seed 7), the compiled choice is torch's, or a server whose torch logit ties torch's best to
    float32 rounding (two servers equal in exact arithmetic that the two summation orders round apart by an ulp);
    such ties are rare."""
    top = preset(topology)
    env = get_setting("paper")
    agent = NaraAgent(checkpoint_for(dataset, None), compiled=False)
    g, observe, fast = GraphIndex(top), NetObserver(top), FastPolicy(agent.net.policy, top)
    req = episode_requests(top, env.dataset(dataset), 160, 7, 0, "test")
    sim = NetAllocSim(top, req, routing=Routings(top, env).for_policy(agent))
    steps = ties = 0
    while not sim.done:
        obs = observe(sim)
        want = _torch_logits(agent.net, g, obs)
        best, got = int(np.argmax(want)), fast.choose(obs)
        if got != best:
            ties += 1
            assert want[got] == pytest.approx(want[best], rel=1e-6, abs=1e-5)
        steps += 1
        sim.pick(best)
    assert steps > 300
    assert ties <= steps // 100


@pytest.mark.parametrize("dataset", ["uniform", "alibaba"])
def test_compiled_observer_fills_the_numpy_values(dataset):
    """NetObserver's compiled pass (:func:`dcplace.envs.net_alloc._fill`) against its numpy reference, bit for bit,
    along an episode on gamma."""
    top = preset("gamma")
    observe = NetObserver(top)
    sim = NetAllocSim(top, generate(dataset, 40, 2, int(top.server_cpu.sum()), int(top.server_mem.sum())))
    rng = np.random.default_rng(0)
    steps = 0
    while not sim.done:
        obs = observe(sim)
        nodes, edges = np.zeros_like(obs["nodes"]), np.zeros_like(obs["edges"])
        observe._fill_numpy(sim, nodes, edges, sim.request[2])
        np.testing.assert_array_equal(obs["nodes"], nodes)
        np.testing.assert_array_equal(obs["edges"], edges)
        sim.pick(int(rng.choice(np.flatnonzero(sim.action_mask()))))
        steps += 1
    assert steps > 40
