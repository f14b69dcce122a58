"""``cvd-rl``, ``cvd-rl-machine`` and ``schedrl``: the learned NUMA schedulers (Double DQN; trained by
:mod:`dcplace.learn.cvd_rl` and :mod:`dcplace.learn.schedrl`).

Greedy at evaluation, as in the paper. Without ``checkpoint`` each loads the checkpoint shipped in the package
(trained on Huawei-East-1, 50 PMs, 50 % warm start, Non-Expansion). CVD-RL's decomposed network acts at any machine
count and in Expansion; SchedRL's whole-cluster network only at the machine count it was trained for (a clear error
otherwise: that is the paper's point). torch is imported only when a policy is built.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING, Any

from dcplace.errors import InputError
from dcplace.policies.registry import register

if TYPE_CHECKING:
    from dcplace.sim.numa import NumaSim

SHIPPED = {
    "cvd-rl": "cvd-rl-50pm.pt",
    "cvd-rl-machine": "cvd-rl-machine-50pm.pt",
    "schedrl": "schedrl-50pm.pt",
}


def shipped_path(name: str) -> Path:
    return Path(str(files("dcplace") / "data" / "cvd" / SHIPPED[name]))


@lru_cache(maxsize=16)
def _load(path: str) -> tuple[Any, dict[str, Any]]:
    from dcplace.learn.dqn import load

    return load(Path(path))


class LearnedNuma:
    """A greedy Double-DQN scheduler loaded from a checkpoint."""

    def __init__(self, label: str, checkpoint: str | None = None) -> None:
        path = Path(checkpoint) if checkpoint else shipped_path(label)
        if checkpoint is None and not path.is_file():
            raise InputError(f"no shipped {label} checkpoint ({path}); pass --checkpoint PATH")
        net, self.meta = _load(str(path))
        want = "schedrl" if label == "schedrl" else "cvd"
        if net.cfg.kind != want:
            raise InputError(f"{path}: field 'config.kind' is {net.cfg.kind!r}, policy {label} needs {want!r}")
        from dcplace.learn.cvd_model import CvdAgent

        self.agent = CvdAgent(net)
        self.label = label

    @property
    def name(self) -> str:
        return self.label

    def act(self, sim: NumaSim) -> int:
        return self.agent.act(sim)

    def run(self, sim: NumaSim) -> int:
        from dcplace.sim.numa_kernel import DECIDE

        status = sim.status
        while status == DECIDE:
            status = sim.step(self.agent.act(sim))
        return status


_DOCS = {
    "cvd-rl": "CVD-RL: per-machine look-ahead values, top-2 best-fit + top-3 industrial candidates "
    "(shipped checkpoint)",
    "cvd-rl-machine": "CVD-RL trained with a per-machine TD target (ours): r + gamma V(after) - V(now) among the same "
    "candidates",
    "schedrl": "SchedRL: whole-cluster Double DQN, 2N outputs (shipped checkpoint; its training machine count only)",
}


def _factory(label: str) -> Callable[..., LearnedNuma]:
    return lambda checkpoint=None: LearnedNuma(label, checkpoint)


for _label, _doc in _DOCS.items():
    register(_label, _factory(_label), _doc, learned=True, setting="numa")
