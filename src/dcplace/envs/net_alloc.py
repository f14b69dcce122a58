"""``dcplace/NetAlloc-v0``: network-aware multi-server allocation (the Nara setting) as a Gymnasium environment.

One step = one server pick for the waiting request (:mod:`dcplace.sim.netalloc` has the exact transition).

Observation (``Dict``), for a topology with ``V`` nodes (servers first), ``S`` servers and ``L`` links:

* ``nodes``: (V, 4) float32 in [0, 1], per node ``[cpu, mem, bandwidth, selected]`` scaled to the current request:
  free CPU / CPU still needed and free memory / memory still needed (clipped to 1; 1 when nothing more is needed;
  0 for switches), the most free bandwidth on any of the node's links / the request's bandwidth (clipped to 1), and
  1 if the server is already selected for this request.
* ``edge_index``: (2, 2L) int64, every link in both directions (constant for a topology).
* ``edges``: (2L, 1) float32 in [0, 1], free bandwidth of the link / the request's bandwidth, clipped to 1.
* ``state``: (3,) float32 in [0, 1]: ``<cpu_util, mem_util, hold>`` (mean server utilisation; the request's holding
  period over the episode's largest possible one).
* ``action_mask``: (S,) int8, 1 for servers that may be picked.

Action: ``Discrete(S)``, a server id. A masked action rejects the request (``info["rejected"] == "invalid"``); an
action outside the space (not an integer, e.g. 1.7 or ``"3"``, or out of range) raises ``ValueError``.

Reward: +10 when a pick completes the request, -10 when it fails the path check (or is invalid), 0 otherwise
(the paper's grid-searched values; ``rewards=`` changes them, and ``Rewards(capacity=...)`` adds a reward for each
request the simulator rejects for capacity without a pick, 0 by default).

Termination: after the episode's last request. Never truncated.

Info: ``reset`` returns ``{}``; a step returns ``outcome`` (continue, accepted, rejected) and, when a request is
rejected, ``rejected`` (its reason). The episode's counts are on ``env.unwrapped.sim`` (``accepted``, ``rejected``,
``summary()``).

Options (checked when the environment is made; a bad one is an :class:`~dcplace.errors.InputError` naming it):
``topology`` (preset name, file, or :class:`~dcplace.cluster.topology.Topology`), ``dataset`` (uniform, azure,
alibaba, a named variant, or a request CSV ``cpu,mem,bw,hold``, replayed as it is every episode), ``requests`` per
episode (default 32, the paper's training length; a request file has its own length), ``split`` (train or test; the
trace-derived sets are split 20 % train / 80 % test over the trace's rows, so the two splits draw from similar size
distributions: Azure's few VM sizes make the same seed draw mostly the same requests in both, and held-out
evaluation needs seeds of its own, as the reproductions use), ``k`` paths per server pair (at least 1), ``rewards``
(:class:`~dcplace.sim.netalloc.Rewards`), ``on_full``: a request the cluster's free totals cannot hold is rejected
without a pick (``reject``, the default, how the shipped agents trained: the ``paper-reject`` setting) or waits until
enough has left (``wait``: the ``paper`` setting, the authors' environment). ``reset(seed=...)`` draws a new request
sequence.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Literal

import gymnasium as gym
import numba as nb
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from dcplace.cluster.topology import Topology, load_topology
from dcplace.config import check, check_types
from dcplace.envs.actions import check_render_mode, checked_action
from dcplace.errors import InputError
from dcplace.sim.netalloc import NetAllocSim, Outcome, Rewards
from dcplace.workload.netreq import NetRequests, generate, request_file, size_table

DEFAULT_REQUESTS = 32
"""Requests per episode of a named set when ``requests`` is not given (the paper's training episodes)."""


@nb.njit(cache=True, nogil=True)
def _fill(
    free_cpu: Any,
    free_mem: Any,
    need_cpu: int,
    need_mem: int,
    free_bw: Any,
    bw: int,
    selected: Any,
    links_by_node: Any,
    node_starts: Any,
    links2: Any,
    nodes: Any,
    edges: Any,
) -> None:  # pragma: no cover - compiled
    """NetObserver's node and edge features in one pass, for ``bw > 0``: the same float64 quotients, minima and
    maxima as its numpy expressions, cast to float32 once, so the values are identical."""
    s = free_cpu.shape[0]
    for i in range(s):
        nodes[i, 0] = min(free_cpu[i] / need_cpu, 1.0) if need_cpu else 1.0
        nodes[i, 1] = min(free_mem[i] / need_mem, 1.0) if need_mem else 1.0
        nodes[i, 3] = selected[i]
    n_links = free_bw.shape[0]
    link_bw = np.empty(n_links)
    for k in range(n_links):
        link_bw[k] = min(free_bw[k] / bw, 1.0)
    for k in range(links2.shape[0]):
        edges[k, 0] = link_bw[links2[k]]
    v_all = nodes.shape[0]
    for v in range(v_all):
        best = link_bw[links_by_node[node_starts[v]]]
        for k in range(node_starts[v] + 1, node_starts[v + 1]):
            best = max(best, link_bw[links_by_node[k]])
        nodes[v, 2] = best


class NetObserver:
    """The observation of a waiting request (everything but ``edge_index``), computed from the simulator's arrays.

    One definition serves the environment, the learned policy and its trainer, so what Nara is trained on is what
    it sees at inference."""

    def __init__(self, topology: Topology) -> None:
        self.n_nodes, self.n_servers, self.n_links = topology.n_nodes, topology.n_servers, topology.n_links
        # Link id of each directed edge (column i and links + i are link i); for per-node maxima, the edges' links
        # sorted by source node and where each node's run starts.
        self._links2 = np.tile(np.arange(self.n_links), 2)
        src = np.asarray(topology.edge_index[0])
        order = np.argsort(src, kind="stable")
        self._links_by_node = self._links2[order]
        counts = np.bincount(src, minlength=self.n_nodes)
        self._node_starts = np.concatenate([[0], np.cumsum(counts)])  # (V + 1,) offsets into _links_by_node
        self._all_linked = bool((counts > 0).all())
        self._ends = src

    def __call__(self, sim: NetAllocSim) -> dict[str, npt.NDArray[Any]]:
        v, s = self.n_nodes, self.n_servers
        nodes = np.zeros((v, 4), dtype=np.float32)
        edges = np.zeros((2 * self.n_links, 1), dtype=np.float32)
        state = np.zeros(3, dtype=np.float32)
        mask = np.zeros(s, dtype=np.int8)
        if not sim.done:
            _cpu, _mem, bw, hold = sim.request
            if bw > 0 and self._all_linked:  # _fill_numpy's values in one compiled pass
                _fill(
                    sim.free_cpu,
                    sim.free_mem,
                    sim.need_cpu,
                    sim.need_mem,
                    sim.free_bw,
                    bw,
                    sim.selected,
                    self._links_by_node,
                    self._node_starts,
                    self._links2,
                    nodes,
                    edges,
                )
            else:
                self._fill_numpy(sim, nodes, edges, bw)
            state[0] = sim.cpu_util
            state[1] = sim.mem_util
            state[2] = min(hold / sim.requests.hold_max, 1.0)
            mask[:] = sim.action_mask()
        return {"nodes": nodes, "edges": edges, "state": state, "action_mask": mask}

    def _fill_numpy(
        self, sim: NetAllocSim, nodes: npt.NDArray[np.float32], edges: npt.NDArray[np.float32], bw: int
    ) -> None:
        """Node and edge features, the reference: :func:`_fill` computes the same values where ``bw > 0`` and every
        node has a link (tests compare the two)."""
        s = self.n_servers
        nodes[:s, 0] = np.minimum(sim.free_cpu / sim.need_cpu, 1.0) if sim.need_cpu else 1.0
        nodes[:s, 1] = np.minimum(sim.free_mem / sim.need_mem, 1.0) if sim.need_mem else 1.0
        link_bw = np.minimum(sim.free_bw / bw, 1.0)
        per_node = np.zeros(self.n_nodes)
        np.maximum.at(per_node, self._ends, link_bw[self._links2])
        nodes[:, 2] = per_node
        nodes[:s, 3] = sim.selected
        edges[:, 0] = link_bw[self._links2]


@dataclass(frozen=True)
class NetAllocSettings:
    """The scalar settings of :class:`NetAllocEnv`, checked when the environment is made (one sentence naming the
    setting, :class:`~dcplace.errors.InputError`; they failed deep inside numpy, or at ``reset``, or not at all)."""

    dataset: str = "uniform"
    requests: int | None = None
    split: Literal["train", "test"] = "train"
    k: int = 3
    on_full: Literal["reject", "wait"] = "reject"

    def __post_init__(self) -> None:
        check_types(self)
        check(self.requests is None or self.requests >= 1, "requests", self.requests, "at least 1")
        check(self.k >= 1, "k", self.k, "at least 1 (paths per server pair)")


class NetAllocEnv(gym.Env[dict[str, npt.NDArray[Any]], int]):
    metadata = {"render_modes": []}  # noqa: RUF012

    def render(self) -> None:
        """Nothing to draw (no render modes): None, as Gymnasium's environments return with ``render_mode`` None
        (the base class raised ``NotImplementedError``)."""
        return None

    def __init__(
        self,
        topology: str | Topology = "alpha",
        dataset: str = "uniform",
        requests: int | None = None,
        split: str = "train",
        k: int = 3,
        rewards: Rewards | None = None,
        on_full: str = "reject",
        render_mode: str | None = None,
    ) -> None:
        check_render_mode(render_mode)
        settings = NetAllocSettings(dataset, requests, split, k, on_full)  # type: ignore[arg-type]
        if not isinstance(topology, str | Topology):
            must = "a preset name, a topology file or a Topology"
            raise InputError(f"must be {must}, got {topology!r}", field="topology")
        if not isinstance(rewards, Rewards | None):
            raise InputError(f"must be a dcplace.sim.netalloc.Rewards, got {rewards!r}", field="rewards")
        self.on_full = settings.on_full
        self.topology = topology if isinstance(topology, Topology) else load_topology(topology)
        self.dataset = dataset
        self.split = settings.split
        self.k = settings.k
        self.rewards = rewards or Rewards()
        self._file = request_file(dataset, requests)  # a request file, replayed as it is every episode
        if self._file is None:
            size_table(dataset, self.split)  # an unknown name fails here, not at reset
        self.n_requests = len(self._file) if self._file is not None else requests or DEFAULT_REQUESTS
        top = self.topology
        v, s, n_links = top.n_nodes, top.n_servers, top.n_links
        self._edge_index = top.edge_index
        self._observer = NetObserver(top)
        self.observation_space = spaces.Dict(  # type: ignore[assignment]
            {
                "nodes": spaces.Box(0.0, 1.0, (v, 4), np.float32),
                "edge_index": spaces.Box(0, v - 1, (2, 2 * n_links), np.int64),
                "edges": spaces.Box(0.0, 1.0, (2 * n_links, 1), np.float32),
                "state": spaces.Box(0.0, 1.0, (3,), np.float32),
                "action_mask": spaces.MultiBinary(s),
            }
        )
        self.action_space: spaces.Discrete = spaces.Discrete(s)  # type: ignore[assignment]
        self.sim: NetAllocSim | None = None

    def _requests(self, seed: int) -> NetRequests:
        if self._file is not None:
            return self._file
        top = self.topology
        return generate(
            self.dataset, self.n_requests, seed, int(top.server_cpu.sum()), int(top.server_mem.sum()), self.split
        )

    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
        super().reset(seed=seed)
        if options:
            raise InputError(f"NetAlloc takes no reset options, got {sorted(options)}", field="options")
        for _ in range(100):
            draw = int(self.np_random.integers(2**62))
            self.sim = NetAllocSim(self.topology, self._requests(draw), self.k, self.rewards, on_full=self.on_full)
            if not self.sim.done:
                return self._obs(), {}
        raise InputError(
            f"no request of 100 drawn episodes of {self.dataset!r} fits topology {self.topology.name!r} at all "
            "(every episode would be over before its first decision)",
            field="topology",
        )

    def step(self, action: int) -> tuple[dict[str, npt.NDArray[Any]], float, bool, bool, dict[str, Any]]:
        sim = self.sim
        if sim is None:
            raise RuntimeError("call reset() first")
        outcome, reward, info = sim.pick(checked_action(self.action_space, action))
        info = dict(info, outcome=Outcome(outcome).name.lower())
        return self._obs(), float(reward), sim.done, False, info

    def _obs(self) -> dict[str, npt.NDArray[Any]]:
        assert self.sim is not None
        obs = self._observer(self.sim)
        obs["edge_index"] = self._edge_index.copy()
        return obs

    def action_masks(self) -> npt.NDArray[np.bool_]:
        """The current mask as bools (the convention of maskable-PPO libraries)."""
        assert self.sim is not None
        return self.sim.action_mask()
