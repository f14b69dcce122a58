"""``cvd-rl``, ``cvd-rl-machine``, ``schedrl``, ``padrl`` and ``hindsight``: the learned NUMA schedulers (Double DQN,
:mod:`dcplace.learn.dqn`; PADRL, :mod:`dcplace.learn.padrl`; Hindsight Learning,
:mod:`dcplace.learn.hindsight_learning`). All are ``dcplace-cvd`` checkpoints of CVD-RL's network and act alike.

Greedy at evaluation, as in the paper. Without ``checkpoint`` each loads the checkpoint shipped in the package
(trained on Huawei-East-1, 50 PMs, 50 % warm start, Non-Expansion). CVD-RL's decomposed network acts at any machine
count and in Expansion; SchedRL's whole-cluster network only at the machine count it was trained for (a clear error
otherwise: that is the paper's point). They act on a :class:`~dcplace.sim.numa.NumaView`, so they decide in the
simulator and in the live engine alike. Registered in :mod:`dcplace.policies.learned` by reference, so the
``policies`` layer never imports this one (torch loads only when a learned policy is built).
"""

from __future__ import annotations

from functools import lru_cache
from importlib.resources import files
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.errors import InputError
from dcplace.learn.cvd_model import CvdAgent
from dcplace.policies.base import NumaPolicy
from dcplace.sim.numa import NumaView

SHIPPED = {
    "cvd-rl": "cvd-rl-50pm.pt",
    "cvd-rl-machine": "cvd-rl-machine-50pm.pt",
    "schedrl": "schedrl-50pm.pt",
}
REGIME_SHIPPED = {
    name: f"{name}-50pm-paper.pt" for name in ("cvd-rl", "cvd-rl-machine", "schedrl", "padrl", "hindsight")
}
"""Checkpoints trained in the paper's regime (``dcplace.bench.cvd_regime.PAPER_REGIME``, rows [10000, 15000), 50 PMs,
50 % warm start; docs/cvd-rl.md says how), evaluated by ``dcplace reproduce cvd-rl --regime paper``. Passed as
``checkpoint``: the policies' defaults stay the releases-off ones above."""


def shipped_path(name: str, regime: str = "today") -> Path:
    """The shipped checkpoint of policy ``name``: trained releases off (``today``) or in the paper's regime
    (``paper``)."""
    file = SHIPPED[name] if regime == "today" else REGIME_SHIPPED[name]
    return Path(str(files("dcplace") / "data" / "cvd" / file))


@lru_cache(maxsize=16)
def _load(path: str) -> tuple[Any, dict[str, Any]]:
    from dcplace.learn.dqn import load

    return load(Path(path))


class LearnedNuma(NumaPolicy):
    """A greedy Double-DQN scheduler loaded from a checkpoint (the shipped one for ``label`` by default)."""

    label = "cvd-rl"

    def __init__(self, checkpoint: str | None = None) -> None:
        if checkpoint is None and self.label not in SHIPPED:
            raise InputError(f"no shipped {self.label} checkpoint; pass a checkpoint file (dcplace train {self.label})")
        path = Path(checkpoint) if checkpoint else shipped_path(self.label)
        if checkpoint is None and not path.is_file():
            raise InputError(f"no shipped {self.label} checkpoint ({path}); pass a checkpoint file")
        net, self.meta = _load(str(path))
        want = "schedrl" if self.label == "schedrl" else "cvd"
        if net.cfg.kind != want:
            raise InputError(f"{path}: field 'config.kind' is {net.cfg.kind!r}, policy {self.label} needs {want!r}")
        if self.label == "padrl" and not net.cfg.forecast_hidden:
            raise InputError(f"{path}: field 'config.forecast_hidden' is 0, policy padrl needs a demand forecast")
        if self.label != "padrl" and net.cfg.forecast_hidden:  # it ran PADRL's network under this policy's name
            raise InputError(f"{path}: field 'config.forecast_hidden' is {net.cfg.forecast_hidden}: a PADRL "
                             f"checkpoint, not one for policy {self.label}; use --policy padrl")  # fmt: skip
        self.agent = CvdAgent(net)
        self.numa = int(net.cfg.numa)

    @property
    def name(self) -> str:
        return self.label

    def choose(self, view: NumaView) -> int:
        return self.agent.act(view)

    def rank(self, view: NumaView, n: int) -> list[tuple[int, tuple[float, ...]]]:
        """The filter's candidates ranked by the network's benefit (Q up to a shared constant)."""
        if self.agent.cfg.kind == "schedrl" or not self.agent.cfg.decompose:
            return super().rank(view, n)
        acts = self.agent.candidates(view)
        if len(acts) == 0:
            return []
        q = self.agent.benefits(view, acts)
        order = np.argsort(-q, kind="stable")[:n]
        return [(int(acts[i]), (float(q[i]),)) for i in order]


class CvdRl(LearnedNuma):
    label = "cvd-rl"


class CvdRlMachine(LearnedNuma):
    label = "cvd-rl-machine"


class SchedRl(LearnedNuma):
    label = "schedrl"


class Hindsight(LearnedNuma):
    label = "hindsight"


class Padrl(LearnedNuma):
    label = "padrl"
