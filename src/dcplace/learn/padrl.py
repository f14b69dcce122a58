"""PADRL, Prediction-Aware DRL (ZDK+22 in ``../shared/papers/002_0cf75b9bf5d3860a.txt``), top to bottom: a DRL
placement agent whose state includes an LSTM forecast of the upcoming demand.

1. **Forecast.** Before training, :func:`dcplace.learn.forecast.train_forecaster` fits the demand LSTM on the creation
   requests of the training rows (``DQNConfig.train_start_range``, never the evaluation rows): after each request it
   predicts the next ``horizon`` requests' mean CPU and memory, their multi-NUMA share and their share of large VMs.
   The LSTM is then frozen and stored with the agent's weights.
2. **Agent.** CVD-RL's Double DQN (:class:`dcplace.learn.cvd_rl.CvdRlTrainer`: decomposition, look-ahead, top-k
   filter, either TD rule) with the forecast appended to every machine's row (``CvdConfig.forecast_hidden``), so
   V(machine after the placement | forecast) can value keeping room for the large VMs the forecast announces.

The agent runs the LSTM one step per request it is asked to place (:class:`dcplace.learn.forecast.ForecastState`),
in training and at evaluation alike. A checkpoint is a ``dcplace-cvd`` file (policy ``padrl``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.errors import InputError
from dcplace.learn import forecast as FC
from dcplace.learn.cvd_model import CvdAgent, CvdConfig
from dcplace.learn.cvd_rl import CvdRlTrainer, TDRule
from dcplace.learn.dqn import DQNConfig
from dcplace.learn.rewards import Reward
from dcplace.sim.numa import PreparedTrace, Scenario


def creation_rows(trace: PreparedTrace, rows: tuple[int, int]) -> tuple[int, int]:
    """The creation requests (indices in creation order) whose events lie in event-log ``rows`` ``[lo, hi)``."""
    created = np.flatnonzero(~trace.ev_dep)
    return int(np.searchsorted(created, rows[0])), int(np.searchsorted(created, rows[1]))


class PadrlTrainer(CvdRlTrainer):
    """CVD-RL's Double DQN with the frozen demand forecast in every row (module docstring)."""

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
        horizon: int = 64,
        forecast_steps: int = 300,
    ) -> None:
        """``model.forecast_hidden`` (32 when 0): the LSTM's size; ``horizon``: requests the forecast covers;
        ``forecast_steps``: its training steps."""
        self.horizon, self.forecast_steps = horizon, forecast_steps
        self.forecast_score: dict[str, float] = {}
        super().__init__(trace, scenario, seed, out, model, dqn, trace_name, reward, td)
        for net in (self.net, self.target):
            net.forecast.load_state_dict(self._lstm.state_dict())
        self.agent = CvdAgent(self.net)

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
    ) -> PadrlTrainer:
        """Not offered: the forecast's settings are not kept for an exact resume."""
        raise InputError(f"{out}: a PADRL run cannot be resumed; start a new one")

    def prepare_model(self, model: CvdConfig, trace: PreparedTrace, dqn: DQNConfig) -> tuple[CvdConfig, DQNConfig]:
        model = replace(model, forecast_hidden=model.forecast_hidden or 32)
        node = np.asarray(self.cluster.capacity[0, 0, :2], np.float64)  # one NUMA node's cores, GB
        self._lstm, self.forecast_score = FC.train_forecaster(
            trace, node, creation_rows(trace, dqn.train_start_range), model.forecast_hidden, self.horizon,
            steps=self.forecast_steps, seed=self.seed,
        )  # fmt: skip
        return super().prepare_model(model, trace, dqn)

    def meta(self, **extra: Any) -> dict[str, Any]:
        return super().meta(forecast={"horizon": self.horizon, **self.forecast_score}, **extra)
