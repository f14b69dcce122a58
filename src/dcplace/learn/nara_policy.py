"""``nara``: the learned network-aware allocator (a GNN + policy network trained with PPO, :mod:`dcplace.learn`).

Greedy at rollout, as in the paper: the server with the highest logit among those that may be picked. Without
``checkpoint`` the policy loads the checkpoint shipped for the request set it is run on (trained on topology alpha,
in the setting that set belongs to: :func:`shipped_agent`). Registered in :mod:`dcplace.policies.learned` by
reference, so torch is imported only when the policy is built and the rest of dcplace starts fast.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dcplace.errors import InputError
from dcplace.policies.base import NetPolicy

if TYPE_CHECKING:
    from dcplace.cluster.topology import Topology
    from dcplace.sim.netalloc import NetView

SHIPPED_TOPOLOGY = "alpha"
SHIPPED_DATASETS = ("uniform", "azure", "alibaba")
PAPER_SUFFIX = "-paper"
"""The shipped agents trained in the ``paper`` setting are ``<topology>-<set>-paper.pt``; those trained in ``v1``
(dcplace's first reading) keep their first names, ``<topology>-<set>.pt``."""
MAX_SUFFIX = "-paper-max"
"""Agents trained in the ``paper-max`` setting (the paper setting before its average load was read as the mean of the
CPU and memory shares): ``<topology>-<set>-paper-max.pt``."""


@lru_cache(maxsize=16)
def _load(path: str) -> tuple[Any, dict[str, Any]]:
    from dcplace.learn import checkpoint

    return checkpoint.load(Path(path))


def shipped_name(dataset: str | None) -> str:
    """The shipped agent's name (``<set>-paper`` or ``<set>``) for a rollout on request set ``dataset``, the set as
    drawn (``uniform-v1`` under ``--setting v1``): an agent trained in the setting the set belongs to. The ``-v1``
    sets get the agents trained in ``v1``; the ``-max`` sets (``--setting paper-max``) the ones trained in the paper
    setting before its load was read as a mean (``<set>-paper-max``); the paper's sets get the ones trained in the
    ``paper`` setting, and so do request files and None (``uniform``'s: files are drawn as they are, in any
    setting)."""
    for suffix, tag in (("-v1", ""), ("-max", MAX_SUFFIX)):
        if dataset is not None and dataset.endswith(suffix) and dataset.removesuffix(suffix) in SHIPPED_DATASETS:
            return dataset.removesuffix(suffix) + tag
    return (dataset if dataset in SHIPPED_DATASETS else "uniform") + PAPER_SUFFIX


def shipped_agent(dataset: str | None, topology: str = SHIPPED_TOPOLOGY) -> Path:
    """The shipped checkpoint of the agent trained on ``topology`` for rollouts on ``dataset`` (:func:`shipped_name`);
    the one rule for the ``nara`` policy's default and for the reproduction's cross tables (Tables 6 and 7)."""
    from dcplace.learn.checkpoint import shipped_path

    name = shipped_name(dataset)
    path = shipped_path(topology, name)
    if not path.is_file():
        raise InputError(f"no shipped Nara checkpoint {path.name} ({path}); pass --checkpoint PATH")
    return path


def checkpoint_for(dataset: str | None, checkpoint: str | None) -> Path:
    """The checkpoint file a ``nara`` policy uses: ``checkpoint`` if given, else the one shipped for ``dataset``."""
    return Path(checkpoint) if checkpoint is not None else shipped_agent(dataset)


class NaraAgent(NetPolicy):
    """Greedy Nara on any topology (the observer and the network's topology arrays are built once per topology).

    ``compiled=True`` (the default) scores servers with :class:`dcplace.learn.nara_fast.FastPolicy`, one numba call
    per choice, the same logits as the torch network to float32 rounding (choices differ only between servers that
    tie to rounding; tests/learn/test_nara_fast.py); ``compiled=False`` runs the torch network, the reference
    (``benchmarks/bench_nara_inference.py --episode`` times both on whole episodes and compares their records)."""

    def __init__(self, path: Path, label: str = "nara", compiled: bool = True) -> None:
        self.path = path
        self.net, self.meta = _load(str(path))
        self.label = label
        self.compiled = compiled
        self._graphs: dict[int, tuple[Topology, Any, Any]] = {}

    @property
    def name(self) -> str:
        return self.label

    def _graph(self, top: Topology) -> tuple[Any, Any]:
        """(scorer, observer) for ``top``: a FastPolicy or a GraphIndex, and a NetObserver."""
        cached = self._graphs.get(id(top))
        if cached is None or cached[0] is not top:
            from dcplace.envs.net_alloc import NetObserver

            if self.compiled:
                from dcplace.learn.nara_fast import FastPolicy

                scorer: Any = FastPolicy(self.net.policy, top)
            else:
                from dcplace.learn.nara_model import GraphIndex

                scorer = GraphIndex(top)
            cached = (top, scorer, NetObserver(top))
            self._graphs[id(top)] = cached
        return cached[1], cached[2]

    def choose(self, view: NetView) -> int:
        scorer, observe = self._graph(view.topology)
        if self.compiled:
            return int(scorer.choose(observe(view)))
        import torch

        from dcplace.learn.nara_model import obs_tensors

        with torch.inference_mode():
            nodes, edges, state, mask = obs_tensors(observe(view))
            return int(self.net.policy(nodes, edges, state, mask, scorer).argmax())


def nara(seed: int = 0, dataset: str | None = None, checkpoint: str | None = None) -> NaraAgent:
    """The ``nara`` policy: ``checkpoint`` if given, else the agent shipped for ``dataset`` (greedy: no seed)."""
    del seed  # greedy: no randomness
    return NaraAgent(checkpoint_for(dataset, checkpoint))
