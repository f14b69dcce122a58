"""``nara``: the learned network-aware allocator (a GNN + policy network trained with PPO, :mod:`dcplace.learn`).

Greedy at rollout, as in the paper: the server with the highest logit among those that may be picked. Without
``checkpoint`` the policy loads the checkpoint shipped for the request set it is run on (trained on topology alpha;
``uniform`` for request files). Registered in :mod:`dcplace.policies.learned` by reference, so torch is imported only
when the policy is built and the rest of dcplace starts fast.
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


@lru_cache(maxsize=16)
def _load(path: str) -> tuple[Any, dict[str, Any]]:
    from dcplace.learn import checkpoint

    return checkpoint.load(Path(path))


def checkpoint_for(dataset: str | None, checkpoint: str | None) -> Path:
    """The checkpoint file a ``nara`` policy uses: ``checkpoint`` if given, else the one shipped for ``dataset``."""
    if checkpoint is not None:
        return Path(checkpoint)
    from dcplace.learn.checkpoint import shipped_path

    base = dataset.removesuffix("-v1").removesuffix("-max") if dataset else dataset
    name = base if base in SHIPPED_DATASETS else "uniform"
    path = shipped_path(SHIPPED_TOPOLOGY, name)
    if not path.is_file():
        raise InputError(f"no shipped Nara checkpoint for {name!r} ({path}); pass --checkpoint PATH")
    return path


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
