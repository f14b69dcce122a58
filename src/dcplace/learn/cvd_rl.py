"""Training CVD-RL with Double DQN (``../shared/papers/002_0cf75b9bf5d3860a.txt``, sections 3-4), top to bottom.

The network (:mod:`dcplace.learn.cvd_model`) values machines: Q(s, a) = sum over machines of V(row after the
placement). The epoch, update and validation are :mod:`dcplace.learn.dqn`'s; this file is the episode and the TD
rule, which comes in two variants (a :class:`TDRule`, chosen by ``DQNConfig.loss`` or injected):

* :class:`ClusterTD` (``loss="cluster"``, the paper's eq. 12): a transition is the whole cluster after the
  placement (every machine's row), the reward, and the next decision's rows and candidates; the target is
  ``r + gamma Q'(s', argmax_a' Q(s', a'))`` with the argmax over the next decision's candidates, 0 after the last.
* :class:`MachineTD` (``loss="machine"``, ours, docs/cvd-rl.md): a transition is one machine, its row before and
  after the placement and the reward; the target is ``V(now) <- r + machine_gamma * V'(after)``, and when the
  episode ends every machine's last row is a terminal transition (target 0). The network then values what a
  machine will still earn, and the agent picks ``r + machine_gamma * V(after) - V(now)`` (``machine_td`` in the
  model's config; it adds the delta reward when acting, so train this variant with the ``delta`` reward).

One training episode: at each decision the agent observes the filtered candidates and their rows, picks one
epsilon-greedily (a uniformly random candidate with probability epsilon, else the best Q), the reward is computed
for that action before it is applied, and the TD rule records the transition.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Protocol

import numpy as np
import torch

from dcplace.errors import InputError
from dcplace.learn.cvd_model import CvdConfig, CvdNet, Decision
from dcplace.learn.dqn import DoubleDQN, DQNConfig, probe_types
from dcplace.learn.replay import Layout, Replay
from dcplace.learn.rewards import Reward
from dcplace.sim import numa_kernel as K
from dcplace.sim.numa import NumaSim, PreparedTrace, Scenario


class TDRule(Protocol):
    """How transitions are stored and turned into a loss (one object per trainer; it keeps the episode's pending
    transition between calls)."""

    @property
    def name(self) -> str:
        """Recorded as ``DQNConfig.loss`` in the configuration and the checkpoints."""
        ...

    def layout(self, cfg: CvdConfig, machines: int) -> Layout:
        """The replay fields of one transition."""
        ...

    def record(self, buffer: Replay, dec: Decision, c: int, reward: float) -> None:
        """Candidate ``c`` of decision ``dec`` was chosen and earned ``reward``."""
        ...

    def finish(self, buffer: Replay, sim: NumaSim) -> None:
        """The episode ended (terminated or out of trace): no bootstrap from here."""
        ...

    def loss(self, net: CvdNet, target: CvdNet, b: dict[str, torch.Tensor], gamma: float) -> torch.Tensor:
        """The TD loss of a batch."""
        ...


def after(dec: Decision, c: int) -> np.ndarray:
    """Every machine's row once candidate ``c`` of ``dec`` is placed ``(N, F)``."""
    rows = dec.base.copy()
    rows[dec.cand_pm[c]] = dec.cand[c]
    return rows


class ClusterTD:
    """The paper's eq. 12: Double DQN on the summed Q of the whole cluster."""

    name = "cluster"

    def __init__(self) -> None:
        self.pending: dict[str, object] | None = None

    def layout(self, cfg: CvdConfig, machines: int) -> Layout:
        w, c = cfg.row_width, (cfg.candidate_cap if cfg.filter_k else cfg.numa * machines)
        f32 = np.float32
        return {
            "cur": ((machines, w), f32), "base2": ((machines, w), f32), "cand2": ((c, w), f32),
            "pm2": ((c,), np.int64), "n2": ((), np.int64),
        }  # fmt: skip

    def record(self, buffer: Replay, dec: Decision, c: int, reward: float) -> None:
        if self.pending is not None:  # this decision is the previous transition's next state
            buffer.add(**self.pending, base2=dec.base, cand2=dec.cand, pm2=dec.cand_pm, n2=len(dec.actions), done=0.0)
        self.pending = {"cur": after(dec, c), "r": reward}

    def finish(self, buffer: Replay, sim: NumaSim) -> None:
        if self.pending is not None:
            buffer.add(**self.pending, done=1.0)
        self.pending = None

    def loss(self, net: CvdNet, target: CvdNet, b: dict[str, torch.Tensor], gamma: float) -> torch.Tensor:
        q = net.cluster_value(b["cur"])
        with torch.no_grad():
            c = b["cand2"].shape[1]
            valid = torch.arange(c)[None, :] < b["n2"][:, None]
            on = net.candidate_values(b["base2"], b["cand2"], b["pm2"]).masked_fill(~valid, -torch.inf)
            j = on.argmax(1, keepdim=True)
            q2 = target.candidate_values(b["base2"], b["cand2"], b["pm2"]).gather(1, j)[:, 0]
            q2 = torch.where(b["done"] > 0, torch.zeros_like(q2), q2)
        return torch.nn.functional.mse_loss(q, b["r"] + gamma * q2)


class MachineTD:
    """Ours: a TD target per machine, ``V(now) <- r + machine_gamma * V'(after)``; every machine's last row -> 0."""

    name = "machine"

    def __init__(self) -> None:
        self.final: tuple[Decision, int] | None = None

    def layout(self, cfg: CvdConfig, machines: int) -> Layout:
        return {"x": ((cfg.row_width,), np.float32), "x2": ((cfg.row_width,), np.float32)}

    def record(self, buffer: Replay, dec: Decision, c: int, reward: float) -> None:
        m = int(dec.cand_pm[c])
        buffer.add(x=dec.base[m], r=reward, x2=dec.cand[c], done=0.0)
        self.final = (dec, c)  # the machines' last states, built once when the episode ends

    def finish(self, buffer: Replay, sim: NumaSim) -> None:
        if self.final is not None:
            for row in after(*self.final)[: sim.n_active]:
                buffer.add(x=row, r=0.0, x2=row, done=1.0)
        self.final = None

    def loss(self, net: CvdNet, target: CvdNet, b: dict[str, torch.Tensor], gamma: float) -> torch.Tensor:
        v = net(b["x"])
        with torch.no_grad():
            nxt = target(b["x2"])
            y = torch.where(b["done"] > 0, torch.zeros_like(nxt), b["r"] + net.cfg.machine_gamma * nxt)
        return torch.nn.functional.mse_loss(v, y)


TD_RULES: dict[str, type[ClusterTD] | type[MachineTD]] = {"cluster": ClusterTD, "machine": MachineTD}
"""The TD rules ``DQNConfig.loss`` names."""


class CvdRlTrainer(DoubleDQN):
    """Double DQN for CVD-RL (decomposition, look-ahead, top-k filter; each can be off for the ablations)."""

    kind = "cvd"

    def __init__(
        self,
        trace: PreparedTrace,
        scenario: Scenario,
        seed: int,
        out: Path,
        model: CvdConfig,
        dqn: DQNConfig | None = None,
        trace_name: str = "trace",
        reward: Reward | None = None,
        td: TDRule | None = None,
    ) -> None:
        """``td``: the TD rule (by default the one ``dqn.loss`` names; an injected rule's ``name`` replaces it)."""
        self.td: TDRule
        self._td = td
        super().__init__(trace, scenario, seed, out, model, dqn, trace_name, reward)

    def prepare_model(self, model: CvdConfig, trace: PreparedTrace, dqn: DQNConfig) -> tuple[CvdConfig, DQNConfig]:
        """Probe types from the training trace (stored with the weights); ``machine_td`` for the per-machine rule."""
        if self._td is not None:
            self.td = self._td
        elif dqn.loss in TD_RULES:
            self.td = TD_RULES[dqn.loss]()
        else:
            raise InputError(f"must be one of {', '.join(TD_RULES)}, got {dqn.loss!r}", field="loss")
        if not model.probes:
            types, multi, weight = probe_types(trace)
            probes = tuple(
                (float(c), float(m), bool(mu), float(w)) for (c, m), mu, w in zip(types, multi, weight, strict=True)
            )
            model = replace(model, probes=probes)
        if isinstance(self.td, MachineTD):
            if not model.decompose:
                raise InputError("the per-machine loss needs the decomposed network (decompose on)", field="loss")
            if dqn.reward != "delta":  # acting adds the delta reward to V's differences: V must have learned on it
                raise InputError(f"the per-machine loss acts on the delta reward (r + gamma V(after) - V(now) with r "
                                 f"the delta reward), so it trains on that reward only, got {dqn.reward!r}",
                                 field="reward")  # fmt: skip
            model = replace(model, machine_td=True)
        return model, replace(dqn, loss=self.td.name)

    @classmethod
    def resume(
        cls,
        trace: PreparedTrace,
        scenario: Scenario,
        seed: int,
        out: Path,
        trace_name: str,
        reward: Reward | None = None,
        td: TDRule | None = None,
    ) -> CvdRlTrainer:
        """Continue the run in ``out``; an injected reward or TD rule must be passed again."""
        return cls.resume_with(
            out,
            scenario,
            seed,
            lambda cfg, dqn: cls(trace, scenario, seed, out, cfg, dqn, trace_name, reward, td),
            trace_name,
        )

    def layout(self, model: CvdConfig, machines: int) -> Layout:
        return self.td.layout(model, machines)

    def run_episode(self, rng: np.random.Generator, start_seed: int) -> int:
        sim = self.train_sim
        status = sim.reset(seed=start_seed)
        eps = self.dqn.epsilon
        while status == K.DECIDE:
            dec = self.agent.observe(sim)
            if rng.random() < eps:
                c = int(rng.integers(len(dec.actions)))
            else:
                c = int(np.argmax(self.agent.q_values(dec, sim)))
            a = int(dec.actions[c])
            self.td.record(self.buffer, dec, c, self.reward(sim, a))
            status = sim.step(a)
        self.td.finish(self.buffer, sim)
        return sim.result().length

    def td_loss(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        return self.td.loss(self.net, self.target, b, self.dqn.gamma)
