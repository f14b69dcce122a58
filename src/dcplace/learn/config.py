"""The trainers' settings: :class:`DQNConfig` (CVD-RL, SchedRL, PADRL), :class:`HindsightConfig` (Hindsight
Learning's labels) and :class:`PPOConfig` (Nara), torch-free so the
CLI can build its options and read ``--config`` files from them without importing the trainers.

They are configs in the sense of :mod:`dcplace.config`: frozen dataclasses with a docstring under every field,
validated at construction (each error an :class:`~dcplace.errors.InputError` naming the field and the value), read
from a mapping (a TOML table, a checkpoint's ``meta``) by :func:`from_mapping` and written back by
:func:`to_mapping`. ``dcplace.learn.dqn.DQNConfig`` and ``dcplace.learn.ppo.PPOConfig`` are these classes.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal, Self, TypeVar

from dcplace import config
from dcplace.config import check, check_types
from dcplace.errors import InputError

C = TypeVar("C")

TRAIN_START_RANGE = (10_000, 220_000)
"""Event-log rows training episodes start from; evaluation uses VMAgent's [1000, 10000), so tests are held out."""


def from_mapping(cls: type[C], data: Mapping[str, Any]) -> C:
    """The config ``cls`` from a mapping (:func:`dcplace.config.from_dict`): unknown keys and values of the wrong type
    are errors naming the key; missing keys take the field's default."""
    return config.from_dict(cls, data)


def to_mapping(cfg: object) -> dict[str, Any]:
    """The configuration as plain values, tuples as lists (:func:`dcplace.config.to_dict`)."""
    return config.to_dict(cfg)


class _Mapped:
    """``to_dict`` / ``from_dict`` for a config class."""

    def to_dict(self) -> dict[str, Any]:
        return to_mapping(self)

    @classmethod
    def from_dict(cls, d: Mapping[str, Any]) -> Self:
        """From a mapping (a TOML table, a checkpoint's ``meta``); missing keys take the defaults."""
        return from_mapping(cls, d)


def _check_all(cfg: object, names: tuple[str, ...], ok: Any, must: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        check(ok(value), name, value, must)


@dataclass(frozen=True)
class DQNConfig(_Mapped):
    """Double DQN settings of a CVD-RL or SchedRL run (stored in every checkpoint's meta as ``dqn``)."""

    lr: float = 5e-4
    """Adam's learning rate (the paper's)."""
    gamma: float = 0.75
    """Discount of the cluster TD target (the paper's)."""
    epsilon: float = 0.1
    """Exploration rate inside the filtered action space (the paper's)."""
    batch: int = 256
    """Transitions per gradient step. The paper: 2,048; 8x smaller batches make updates cost 1/8."""
    buffer: int = 100_000
    """Replay buffer capacity in transitions (the paper's)."""
    tau: float = 0.01
    """Soft target-update rate (the paper's)."""
    episodes_per_epoch: int = 5
    """Episodes collected per epoch (the paper: five parallel episodes)."""
    updates_per_epoch: int = 32
    """Gradient steps per epoch. The paper takes one per step (~5,000 per epoch at 50 PMs); see the module docstring."""
    learning_starts: int = 2_000
    """Transitions in the buffer before the first update."""
    reward: str = "delta"
    """The reward's name: ``delta`` or ``vmagent`` (:mod:`dcplace.learn.rewards`), or an injected reward's name."""
    loss: str = "cluster"
    """The TD rule's name. ``cluster``: the paper's eq. 12 (TD on the summed Q of the whole cluster); ``machine`` (ours,
    CVD-RL only): a TD target per machine, ``V(machine now) <- r + machine_gamma * V(machine after)``, the last state
    of every machine -> 0 when the episode ends (:mod:`dcplace.learn.cvd_rl`, docs/cvd-rl.md); or an injected rule's
    name."""
    eval_every: int = 10
    """Validate every this many epochs (and after the first)."""
    eval_episodes: int = 10
    """Greedy episodes per validation."""
    train_start_range: tuple[int, int] = TRAIN_START_RANGE
    """Event-log rows [lo, hi) training and validation episodes start from."""
    zero_init: bool = False
    """Start with the value network's last layer at zero, so V is 0 everywhere. With the per-machine loss the agent
    then starts as the one-step greedy on the reward (``r + gamma V(after) - V(now) = r``) and learns a correction
    to it; off: PyTorch's default initialisation (whose random V differences can outweigh the reward's)."""

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("reward", "loss"):
            if not getattr(self, name):
                raise InputError("must not be empty, got ''", field=name)
        counts = ("batch", "buffer", "episodes_per_epoch", "updates_per_epoch", "eval_every", "eval_episodes")
        _check_all(self, counts, lambda v: v >= 1, "at least 1")
        if self.buffer < self.batch:
            raise InputError(f"must hold at least one batch ({self.batch}), got {self.buffer}", field="buffer")
        lo, hi = self.train_start_range
        check(0 <= lo < hi, "train_start_range", self.train_start_range, "[lo, hi) with 0 <= lo < hi")
        _check_all(self, ("lr", "tau"), lambda v: v > 0, "positive")
        _check_all(self, ("gamma", "epsilon"), lambda v: 0 <= v <= 1, "in [0, 1]")


@dataclass(frozen=True)
class PPOConfig(_Mapped):
    """PPO settings of a Nara run (stored in every checkpoint's meta as ``ppo``)."""

    lr: float = 5e-3
    """Adam's learning rate (the paper's, grid-searched)."""
    steps_per_iteration: int = 2048
    """Picks collected per iteration, in complete episodes (the paper's ``train_batch_size``)."""
    minibatch: int = 256
    """Picks per gradient step (the paper's ``sgd_minibatch_size``)."""
    episode_requests: int = 32
    """Requests per training episode (the paper's training episode length)."""
    epochs: int = 10
    """Passes over each iteration's batch (``--ppo-epochs``). RLlib's default ``num_sgd_iter``, which the paper kept
    ("Default parameters were used otherwise"), is 30; 10 reaches the same curves at a third of the cost for the
    uniform and azure sets, and 30 trains the better alibaba agents (docs/nara.md, "Training (PPO)")."""
    gamma: float = 0.99
    """Discount (RLlib's default)."""
    gae_lambda: float = 0.95
    """GAE lambda. RLlib's default is 1.0 (Monte Carlo); 0.95 lowers the variance of 180-pick episodes."""
    clip: float = 0.2
    """Surrogate clip range. RLlib's default is 0.3; 0.2 is the PPO paper's value."""
    vf_coef: float = 0.5
    """Weight of the value loss."""
    ent_coef: float = 0.01
    """Weight of the entropy bonus. RLlib's default is 0; a small bonus keeps 40-way choices from collapsing early."""
    max_grad_norm: float = 0.5
    """Gradient norm clip."""
    capacity_reward: float = 0.0
    """Reward per request the simulator rejects for capacity without asking the policy
    (:class:`dcplace.sim.netalloc.Rewards`'s ``capacity``; 0, section 3.2's reward, has no term for them; -10, the
    failure reward, makes the return count every request not accepted: docs/nara.md)."""
    on_full: Literal["reject", "wait"] = "reject"
    """What the training and validation episodes do with a request the cluster's free totals cannot hold: ``reject``
    it (the ``paper-reject`` setting; how the shipped agents were trained) or ``wait`` for room (the ``paper``
    setting, the authors' public environment; :class:`dcplace.sim.netalloc.NetAllocSim`). Training under waiting
    measured no better on the paper setting's episodes (docs/netalloc.md, "When the cluster is full")."""
    reward_scale: float = 0.1
    """Factor on rewards for the value targets (units of one request; rewards are 10 / -10 / 0)."""
    eval_every: int = 5
    """Validate every this many iterations (and after the first)."""
    eval_episodes: int = 5
    """Greedy 128-request episodes per validation (per topology)."""

    def __post_init__(self) -> None:
        check_types(self)
        counts = ("steps_per_iteration", "minibatch", "episode_requests", "epochs", "eval_every", "eval_episodes")
        _check_all(self, counts, lambda v: v >= 1, "at least 1")
        _check_all(self, ("lr", "clip", "max_grad_norm", "reward_scale"), lambda v: v > 0, "positive")
        _check_all(self, ("gamma", "gae_lambda"), lambda v: 0 <= v <= 1, "in [0, 1]")
        _check_all(self, ("vf_coef", "ent_coef"), lambda v: v >= 0, "at least 0")


@dataclass(frozen=True)
class HindsightConfig(_Mapped):
    """How the hindsight labels are made (stored in every checkpoint's meta as ``hindsight``)."""

    reference: str = "policy"
    """What is rolled out between windows (its choices are the plan's tie-break): ``policy``, the network being
    trained (greedy; with ``zero_init`` it starts as the one-step greedy on the delta reward), or a heuristic's
    name."""
    window: int = 200
    """Decisions before a failure the plan may change (each among the candidates the policy's filter gave it in the
    reference's rollout, plus the reference's own choice)."""
    extra: int = 20
    """Requests after the failing one in the window (the plan must place them too to score them)."""
    repairs: int = 5
    """Windows planned per training episode at most."""
    solve_s: float = 10.0
    """CP-SAT's time limit per window, seconds (the issue's budget: 10)."""
    sharpness: float = 10.0
    """Inverse temperature of the imitation loss: logits are ``sharpness * (r + gamma V(after) - V(now))``. The delta
    reward's differences between candidates are tenths of a request; without it the network can only sharpen the
    softmax towards a label by inflating V's differences, which then outweigh the reward (measured: validation fell
    from the greedy rule's 1,939 to Best-Fit's 1,604 in 6 epochs at 1)."""

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("window", "extra", "repairs"):
            check(getattr(self, name) >= 1, name, getattr(self, name), "at least 1")
        check(self.solve_s > 0, "solve_s", self.solve_s, "positive")
        check(self.sharpness > 0, "sharpness", self.sharpness, "positive")


HINDSIGHT_DQN = DQNConfig(
    batch=128, learning_starts=64, updates_per_epoch=32, episodes_per_epoch=2, lr=1e-3, zero_init=True, eval_every=3
)
"""The epoch's settings for imitation: two labelled episodes per epoch (0-1,000 examples each: about 200 per window
whose plan repairs the failure), updates from the first 64 examples on, validation every 3 epochs."""
