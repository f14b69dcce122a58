"""Seeded network-aware allocation episodes: the requests of each episode and the loop that runs a policy.

Episode ``e`` of a run with seed ``s`` draws its requests with seed ``s * 1_000_003 + e`` and seeds the policy with
the same number, so every policy sees the same request sequences and a rerun gives the same numbers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal, Protocol

from dcplace.cluster.topology import PRESETS, Topology
from dcplace.errors import InputError
from dcplace.sim.netalloc import NetAllocSim, NetResult, NetView
from dcplace.sim.policy_calls import as_action, decide
from dcplace.sim.routing import PathRule, Routing, WeightedRouting, routing_for
from dcplace.workload.netreq import NetRequests, generate, is_named_set, read_requests


@dataclass(frozen=True)
class NetSetting:
    """What the paper's environment means, as one named choice (docs/netalloc.md, "Settings").

    ``paths``: the simulator's candidate paths (:mod:`dcplace.sim.routing`); ``datasets``: what each request-set name
    draws (e.g. ``uniform`` -> ``uniform-v1``); ``policies``: what a policy name builds (e.g. ``tetris`` ->
    ``tetris-cosine``), results keep the name asked for; ``own_routing``: whether a policy that declares its own
    routing (NALB, NULB) gets it, or the simulator's; ``on_full``: what happens to a request the cluster's free totals
    cannot hold (``reject``, or ``wait`` until enough has left: :class:`~dcplace.sim.netalloc.NetAllocSim`)."""

    name: str
    paths: PathRule
    datasets: tuple[tuple[str, str], ...] = ()
    policies: tuple[tuple[str, str], ...] = ()
    own_routing: bool = True
    on_full: str = "reject"

    def dataset(self, name: str) -> str:
        return dict(self.datasets).get(name, name)

    def policy(self, name: str) -> str:
        return dict(self.policies).get(name, name)


SETTINGS: dict[str, NetSetting] = {
    "paper": NetSetting("paper", "ksp", on_full="wait"),
    "paper-reject": NetSetting("paper-reject", "ksp"),
    "v1": NetSetting(
        "v1",
        "ecmp",
        (("uniform", "uniform-v1"), ("azure", "azure-v1"), ("alibaba", "alibaba-v1")),
        (("tetris", "tetris-cosine"), ("nulb", "nulb-v1")),
        own_routing=False,
    ),
    "paper-max": NetSetting(
        "paper-max", "ksp", (("uniform", "uniform-max"), ("azure", "azure-max"), ("alibaba", "alibaba-max"))
    ),
}
"""``paper`` (default): k = 3 shortest simple paths, request sets calibrated with the average load read as the mean
of the CPU and memory shares, NALB / NULB with their own routing, and a request the cluster's free totals cannot hold
waits for room (time passes until enough has left) instead of being rejected, as the authors' public environment does
(docs/netalloc.md, "When the cluster is full"); its Azure and Alibaba sizes were chosen on the train split in it,
its agents trained under rejection.
``paper-reject``: ``paper`` where such a request is rejected for capacity (section 3.2's "dropped" read for every
request; the ``paper`` setting until 2026-11-27, and the only one with a clairvoyant bound).
``v1``: dcplace's first reading: equal-cost paths only, the -v1 request sets, Tetris by cosine, NULB stopping only on
servers of the mask, one routing for every policy, rejection. ``paper-max``: ``paper-reject`` with appendix H's
average load read as the larger of the CPU and memory shares (the ``-max`` request sets,
:data:`dcplace.workload.netreq.LOAD_READING`), the ``paper`` setting before that reading."""


SettingName = Literal["paper", "paper-reject", "paper-max", "v1"]
"""The names of :data:`SETTINGS`, as a type (config fields are checked against it; a test keeps the two equal)."""


def get_setting(name: str) -> NetSetting:
    if name not in SETTINGS:
        raise InputError(f"must be one of {', '.join(SETTINGS)}, got {name!r}", field="setting")
    return SETTINGS[name]


class Routings:
    """The routings of one topology and setting, built once and shared by every episode (their caches too)."""

    def __init__(self, topology: Topology, setting: NetSetting, k: int = 3) -> None:
        self.topology, self.setting, self.k = topology, setting, k
        self._built: dict[str, Routing] = {}

    def for_policy(self, policy: object) -> Routing:
        """The routing ``policy`` asks for (its ``routing`` attribute: ``simulator`` or ``weighted``)."""
        kind = getattr(policy, "routing", "simulator")
        if kind not in ("simulator", "weighted"):  # a typo was the simulator's routing without a word
            name = getattr(policy, "name", type(policy).__name__)
            raise InputError(f"{name!r} asks for routing {kind!r}; a policy's routing is 'simulator' or 'weighted'",
                             field="policy")  # fmt: skip
        if kind != "weighted" or not self.setting.own_routing:
            kind = "simulator"
        hit = self._built.get(kind)
        if hit is None:
            if kind == "weighted":
                hit = WeightedRouting(self.topology, self.k)
            else:
                hit = routing_for(self.topology, self.k, paths=self.setting.paths)
            self._built[kind] = hit
        return hit


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
    if is_named_set(dataset):
        return generate(
            dataset,
            n_requests,
            episode_seed(seed, episode),
            int(topology.server_cpu.sum()),
            int(topology.server_mem.sum()),
            split,
        )
    return read_requests(Path(dataset))


def new_sim(topology: Topology, requests: NetRequests, routings: Routings, policy: object) -> NetAllocSim:
    """The simulator for one episode of ``policy``: the routing it asks for (:meth:`Routings.for_policy`) and the
    action space it picks from (its ``any_server``: any server not yet picked, the paper's, or the mask)."""
    return NetAllocSim(
        topology,
        requests,
        routing=routings.for_policy(policy),
        any_server=bool(getattr(policy, "any_server", False)),
        on_full=routings.setting.on_full,
    )


class ServerPicker(Protocol):
    """The one call the episode loop needs from a policy (any :class:`dcplace.policies.NetPolicy` answers it)."""

    def choose(self, view: NetView) -> int: ...


def run_episode(sim: NetAllocSim, policy: ServerPicker, on_request: Callable[[int], None] | None = None) -> NetResult:
    """Finish ``sim``'s episode with ``policy`` picking every server; the loop is the library's. ``on_request(n)`` is
    called with the number of requests decided since its last call (a progress bar), after every pick that decides
    one or more (rejections for capacity are decided without a pick). A policy that picks outside the mask
    (``any_server``, e.g. ``nulb``) needs a simulator built for it (:func:`new_sim`): on another, its picks would be
    rejected as invalid, so that is an error here rather than wrong numbers."""
    if getattr(policy, "any_server", False) and not sim.any_server:
        name = getattr(policy, "name", type(policy).__name__)
        raise InputError(
            f"policy {name!r} picks any server not yet picked; build the simulator with any_server=True (new_sim)"
        )
    if on_request is None:
        while not sim.done:
            sim.pick(as_action(policy, decide(policy, sim.view())))
        return sim.result()
    seen = sim.t
    while not sim.done:
        sim.pick(as_action(policy, decide(policy, sim.view())))
        if sim.t != seen:
            on_request(sim.t - seen)
            seen = sim.t
    if len(sim.requests) != seen:
        on_request(len(sim.requests) - seen)
    return sim.result()
