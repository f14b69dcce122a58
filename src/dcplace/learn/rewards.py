"""Rewards of the NUMA trainers, as objects injected into them (CVD-RL and SchedRL train on either).

A reward is called at a decision, *before* the placement is applied: ``reward(sim, action) -> float`` with ``sim``
waiting on the request (``sim.request``) and ``action`` the simulator action about to be taken. It carries a
``name``, which the trainer's configuration and every checkpoint record, so a file says what it was trained on.

* ``delta`` (:class:`DeltaReward`, the default; section 2.2 of the CVD-RL paper adopts SchedRL's delta reward,
  which our copy does not define): 1 for the placed request minus the capacity, in expected future requests, that
  the placement consumed beyond what the request would consume on an empty machine
  (:func:`dcplace.learn.cvd_features.delta_reward`). A placement that fragments a machine earns less than 1, one
  that fills a gap nothing else could use earns more.
* ``delta-cpu`` (:class:`DeltaReward` with the probe types weighted by frequency x cores, then normalised): the
  same measure counted in expected *cores* the machine can still host, so the room for a large VM weighs by its size
  (the paper's regime ends episodes at large VMs; docs/cvd-rl.md).
* ``vmagent`` (:class:`PlacedReward`): +1 per placed request (VMAgent's reward).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.learn import cvd_features as F
from dcplace.sim.numa import NumaSim

Probes = tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.float64]]
"""Probe request types of the capacity measure: (CPU, memory) ``(T, 2)``, multi-NUMA ``(T,)``, frequency ``(T,)``."""


class Reward(Protocol):
    """What the trainer calls at every decision."""

    @property
    def name(self) -> str:
        """Recorded in the configuration and the checkpoints."""
        ...

    def __call__(self, sim: NumaSim, action: int) -> float:
        """The reward of taking ``action`` for the waiting request (called before the placement)."""
        ...


@dataclass(frozen=True, eq=False)
class DeltaReward:
    """1 minus the future capacity the placement consumes beyond an empty machine's (see the module docstring)."""

    probes: Probes
    name: str = "delta"

    def __call__(self, sim: NumaSim, action: int) -> float:
        r = sim.request
        types, multi, weight = self.probes
        return float(
            F.delta_reward(
                sim.free, sim.cap, sim.trace.demand[r], bool(sim.trace.multi[r]), action, types, multi, weight
            )
        )


@dataclass(frozen=True)
class PlacedReward:
    """+1 per placed request."""

    name: str = "vmagent"

    def __call__(self, sim: NumaSim, action: int) -> float:
        return 1.0


REWARDS = ("delta", "delta-cpu", "vmagent")
"""The rewards a configuration can name (a trainer also takes any :class:`Reward` object)."""


def numa_reward(name: str, probes: Probes) -> Reward:
    """The reward called ``name`` (one of :data:`REWARDS`); ``probes`` for the delta reward's capacity measure."""
    if name == "delta":
        return DeltaReward(probes)
    if name == "delta-cpu":
        types, multi, weight = probes
        w = weight * types[:, 0]
        return DeltaReward((types, multi, w / w.sum()), name="delta-cpu")
    if name == "vmagent":
        return PlacedReward()
    raise InputError(f"must be one of {', '.join(REWARDS)}, got {name!r}", field="reward")
