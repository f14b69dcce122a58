"""Seeded network-aware allocation episodes: the requests of each episode and the loop that runs a policy.

Episode ``e`` of a run with seed ``s`` draws its requests with seed ``s * 1_000_003 + e`` and seeds the policy with
the same number, so every policy sees the same request sequences and a rerun gives the same numbers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Protocol

from dcplace.cluster.topology import PRESETS, Topology
from dcplace.sim.netalloc import NetAllocSim, NetResult, NetView
from dcplace.workload.netreq import DATASETS, NetRequests, generate, read_requests


def episode_seed(seed: int, episode: int) -> int:
    return seed * 1_000_003 + episode


def default_requests(topology: Topology) -> int:
    """The paper's test episode length for a preset (128 / 896 / 4,096); 128 otherwise."""
    spec = PRESETS.get(topology.name)
    return spec.episode_requests if spec else 128


def episode_requests(
    topology: Topology, dataset: str, n_requests: int, seed: int, episode: int, split: str = "test"
) -> NetRequests:
    """The requests of one episode: a named set drawn for this topology, or a request file replayed as is."""
    if dataset in DATASETS:
        return generate(
            dataset,
            n_requests,
            episode_seed(seed, episode),
            int(topology.server_cpu.sum()),
            int(topology.server_mem.sum()),
            split,
        )
    return read_requests(Path(dataset))


class ServerPicker(Protocol):
    """The one call the episode loop needs from a policy (any :class:`dcplace.policies.NetPolicy` answers it)."""

    def choose(self, view: NetView) -> int: ...


def run_episode(sim: NetAllocSim, policy: ServerPicker) -> NetResult:
    """Finish ``sim``'s episode with ``policy`` picking every server; the loop is the library's."""
    while not sim.done:
        sim.pick(policy.choose(sim.view()))
    return sim.result()
