"""Training SchedRL with Double DQN (the CVD-RL paper's scalability contrast), top to bottom.

The network (:mod:`dcplace.learn.cvd_model`, ``kind="schedrl"``) reads the whole cluster and the request and has
one output per action (2N): no decomposition, no look-ahead, no filter, tied to its machine count. The epoch, update
and validation are :mod:`dcplace.learn.dqn`'s; this file is the episode and the loss.

A transition is (input ``x``, action ``a``, reward ``r``, next input ``x2``, next feasible mask ``mask2``); the
target is ``r + gamma Q'(x2, argmax over feasible a' of Q(x2, a'))``, 0 after the episode's last decision.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import torch

from dcplace.errors import InputError
from dcplace.learn.cvd_model import CvdConfig
from dcplace.learn.dqn import DoubleDQN, DQNConfig
from dcplace.learn.replay import Layout
from dcplace.sim import numa_kernel as K
from dcplace.sim.numa import PreparedTrace


class SchedRlTrainer(DoubleDQN):
    """Double DQN for SchedRL on one scenario."""

    kind = "schedrl"

    def prepare_model(self, model: CvdConfig, trace: PreparedTrace, dqn: DQNConfig) -> tuple[CvdConfig, DQNConfig]:
        if dqn.loss != "cluster":
            raise InputError(f"SchedRL trains with the cluster loss only, got {dqn.loss!r}", field="loss")
        return model, dqn

    def layout(self, model: CvdConfig, machines: int) -> Layout:
        d = 2 * model.numa * machines + 3
        return {
            "x": ((d,), np.float32), "a": ((), np.int64), "x2": ((d,), np.float32),
            "mask2": ((model.numa * machines,), np.bool_),
        }  # fmt: skip

    def run_episode(self, rng: np.random.Generator, start_seed: int) -> int:
        sim = self.train_sim
        status = sim.reset(seed=start_seed)
        pending: dict[str, Any] | None = None
        while status == K.DECIDE:
            x, mask = self.agent.schedrl_obs(sim)
            if pending is not None:  # this decision is the previous transition's next state
                self.buffer.add(**pending, x2=x, mask2=mask, done=0.0)
            a = self.agent.act(sim, rng, self.dqn.epsilon)
            pending = {"x": x, "a": a, "r": self.reward(sim, a)}
            status = sim.step(a)
        if pending is not None:  # the episode ended: no bootstrap from here
            self.buffer.add(**pending, done=1.0)
        return sim.result().length

    def td_loss(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        q = self.net(b["x"]).gather(1, b["a"][:, None])[:, 0]
        with torch.no_grad():
            on = self.net(b["x2"]).masked_fill(~b["mask2"], -torch.inf)
            j = on.argmax(1, keepdim=True)
            q2 = self.target(b["x2"]).gather(1, j)[:, 0]
            q2 = torch.where(b["done"] > 0, torch.zeros_like(q2), q2)
        return torch.nn.functional.mse_loss(q, b["r"] + self.dqn.gamma * q2)
