"""Double DQN for the learned NUMA schedulers (``../shared/papers/002_0cf75b9bf5d3860a.txt``, section 3, Algorithm
1, Table 1): what CVD-RL (:mod:`dcplace.learn.cvd_rl`) and SchedRL (:mod:`dcplace.learn.schedrl`) share.

One epoch (a step of :class:`dcplace.learn.trainer.TrainingRun`):

1. **Collect** ``episodes_per_epoch`` (5, the paper's parallel episodes) complete episodes on the training scenario
   with epsilon-greedy (epsilon 0.1; the algorithm's ``run_episode``, whose transitions are recorded and added to the
   replay buffer in episode order). Episode ``j`` of the run starts at a row drawn by ``default_rng([1000 + seed,
   j])`` from ``train_start_range``, which is disjoint from the rows evaluation uses (VMAgent's [1000, 10000)): the
   reported numbers are on held-out start offsets; it explores with ``default_rng([7, seed, j])``, so the epoch's
   episodes may be played by several workers (``rollouts``: a process pool or Ray) with the same transitions.
2. **Update** ``updates_per_epoch`` times: a batch from the replay buffer (100,000 transitions), the algorithm's TD
   loss (the Double DQN target ``r + gamma Q'(s', argmax_a' Q(s', a'))``, eq. 12, or a variant), Adam at 5e-4, then
   the soft target update ``theta' <- tau theta + (1 - tau) theta'`` (tau 0.01).
3. Every ``eval_every`` epochs, **validate**: greedy episodes at fixed starts of the training range (never the
   evaluation rows); the best-validating weights are the run's policy (``policy.pt``).

The reward is an injected :class:`dcplace.learn.rewards.Reward` (``delta`` by default, ``vmagent``, or any object
with a ``name``). Where we differ from Table 1, :class:`DQNConfig` says so and why (chiefly: the paper updates
after every step with batches of 2,048, about 15 million updates of 102,400 machine rows each; two CPU cores allow
about a thousandth of that, so we take fewer, smaller updates per epoch and report the curves).
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any, ClassVar, TypeVar, cast

import numpy as np
import torch

from dcplace.cluster.numa import NumaCluster
from dcplace.errors import InputError
from dcplace.learn import checkpoint
from dcplace.learn.config import TRAIN_START_RANGE as TRAIN_START_RANGE  # re-exported: the config lives beside PPO's
from dcplace.learn.config import DQNConfig as DQNConfig
from dcplace.learn.cvd_model import CvdAgent, CvdConfig, CvdNet
from dcplace.learn.replay import Layout, Replay
from dcplace.learn.rewards import Probes, Reward, numa_reward
from dcplace.learn.rollouts import Recorder
from dcplace.learn.trainer import Row, TrainingRun, plot_curves
from dcplace.policies.numa_heuristics import Heuristic
from dcplace.policies.numa_search import request_types
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import start_seed
from dcplace.sim.numa import NumaSim, PreparedTrace, Scenario

FORMAT = "dcplace-cvd"
TRAIN_SEED_BASE = 1000
ROLLOUT_TAG = 7  # episode j explores with default_rng([7, seed, j]) (7: apart from the update's [seed, epoch])
VALIDATION_SEED = 999


def probe_types(trace: PreparedTrace) -> Probes:
    """The trace's request types (CPU, memory), their multi-NUMA flags and frequencies (for the delta reward)."""
    return request_types(trace)


T = TypeVar("T", bound="DoubleDQN")


class DoubleDQN(TrainingRun[CvdNet]):
    """Double DQN on one scenario; an algorithm supplies its replay ``layout``, ``run_episode`` and ``td_loss``."""

    fmt = FORMAT
    what = "CVD-RL"
    unit = "epoch"
    score = "length"
    save_every = 25
    kind: ClassVar[str]
    """The :class:`~dcplace.learn.cvd_model.CvdConfig` ``kind`` this trainer trains."""
    actor_drops = (*TrainingRun.actor_drops, "target", "buffer", "sim")
    keep_replay: bool = False
    """Write ``replay.npz`` beside ``checkpoint.pt`` (100,000 transitions: up to a few hundred MB), which an exact
    :meth:`resume` needs. Off by default; ``--keep-replay`` on the command line, and a resumed run keeps it."""

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
    ) -> None:
        """``reward``: called at every decision; by default the one ``dqn.reward`` names (an injected reward's
        ``name`` replaces ``dqn.reward``, so checkpoints record it)."""
        dqn = dqn or DQNConfig()
        super().__init__(out, seed, dqn.eval_every)
        if scenario.mode != "non-expansion":
            raise InputError("training runs in non-expansion (the decomposed network then acts anywhere)", field="mode")
        if model.kind != self.kind:
            raise InputError(f"must be {self.kind!r} for this trainer, got {model.kind!r}", field="kind")
        self.trace, self.scenario, self.trace_name = trace, scenario, trace_name
        self.cluster = NumaCluster.uniform(scenario.pms)
        self.sim = NumaSim(self.cluster, trace, scenario)
        self.train_sim = NumaSim(self.cluster, trace, replace(scenario, start_range=dqn.train_start_range))
        model, dqn = self.prepare_model(model, trace, dqn)
        self.reward: Reward = reward or numa_reward(
            dqn.reward, model.probe_arrays() if model.probes else probe_types(trace)
        )
        self.dqn = replace(dqn, reward=self.reward.name)
        torch.manual_seed(seed)
        self.net = CvdNet(model)
        if self.dqn.zero_init:
            last = self.net.net[-1]
            assert isinstance(last, torch.nn.Linear)
            with torch.no_grad():
                last.weight.zero_()
                last.bias.zero_()
        self.target = CvdNet(model)
        self.target.load_state_dict(self.net.state_dict())
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.dqn.lr)
        self.agent = CvdAgent(self.net)
        self.buffer = Replay(self.dqn.buffer, self.layout(model, scenario.pms))
        self.episodes = 0
        self.updates = 0

    @property
    def cfg(self) -> CvdConfig:
        return self.net.cfg

    @property
    def epoch(self) -> int:
        """Epochs done."""
        return self.done

    # --- what each algorithm supplies ------------------------------------------------------------------------------

    def prepare_model(self, model: CvdConfig, trace: PreparedTrace, dqn: DQNConfig) -> tuple[CvdConfig, DQNConfig]:
        """The network's configuration as this algorithm trains it (fields it sets from the trace or the loss), and
        the settings (with the name of the TD rule it uses)."""
        return model, dqn

    @abstractmethod
    def layout(self, model: CvdConfig, machines: int) -> Layout:
        """The replay buffer's fields for one transition."""

    @abstractmethod
    def run_episode(self, rng: np.random.Generator, start_seed: int) -> int:
        """One epsilon-greedy training episode; transitions go to the buffer. Returns its scheduled length."""

    @abstractmethod
    def td_loss(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """The TD loss of a sampled batch (``self.net`` against targets from ``self.target``)."""

    # --- 1. collect and 2. update (one epoch) ----------------------------------------------------------------------

    def advance(self) -> Row:
        """The epoch's episodes (played through ``rollouts``, each from its own seed, their transitions added to the
        buffer in episode order), then the updates."""
        first = self.episodes
        played = self.rollouts.play("play", [(j,) for j in range(first, first + self.dqn.episodes_per_epoch)])
        for recorded, _ in played:
            recorded.into(self.buffer)
        self.episodes += len(played)
        rng = np.random.default_rng([self.seed, self.done])
        loss = self.update(rng) if self.buffer.size >= self.dqn.learning_starts else float("nan")
        self.done += 1
        return {
            "epoch": self.done,
            "episodes": self.episodes,
            "updates": self.updates,
            "train_length": float(np.mean([length for _, length in played])),
            "td_loss": loss,
        }

    def play(self, j: int) -> tuple[Recorder, int]:
        """Training episode ``j``: its start from (seed, ``j``), its exploration from a generator seeded by
        (seed, ``j``); the transitions are recorded rather than added (the learner adds them, in episode order).
        Returns them and the episode's scheduled length."""
        rng = np.random.default_rng([ROLLOUT_TAG, self.seed, j])
        recorder = Recorder()
        buffer = self.__dict__.get("buffer")
        self.buffer = cast(Replay, recorder)  # run_episode's adds go to the recorder
        try:
            length = self.run_episode(rng, start_seed(TRAIN_SEED_BASE + self.seed, j))
        finally:
            if buffer is None:
                del self.buffer
            else:
                self.buffer = buffer
        return recorder, length

    def load_actor_weights(self, weights: dict[str, torch.Tensor]) -> None:
        self.net.load_state_dict(weights)
        self.net.eval()
        self.agent.sync(self.net)

    def update(self, rng: np.random.Generator) -> float:
        """``updates_per_epoch`` gradient steps on batches drawn by ``rng``, each followed by the soft target update;
        returns the mean loss."""
        losses = []
        self.net.train()
        for _ in range(self.dqn.updates_per_epoch):
            idx = rng.integers(0, self.buffer.size, self.dqn.batch)
            loss = self.td_loss(self.buffer.sample(idx))
            self.opt.zero_grad()
            loss.backward()  # type: ignore[no-untyped-call]
            self.opt.step()
            with torch.no_grad():
                tau = self.dqn.tau
                for p, pt in zip(self.net.parameters(), self.target.parameters(), strict=True):
                    pt.mul_(1 - tau).add_(p, alpha=tau)
            losses.append(float(loss.detach()))
            self.updates += 1
        self.net.eval()
        self.agent.sync(self.net)
        return float(np.mean(losses)) if losses else float("nan")

    # --- 3. validate -----------------------------------------------------------------------------------------------

    def validate(self) -> float:
        """Mean greedy scheduled length on fixed starts of the training range."""
        lengths = []
        sim = self.train_sim
        for i in range(self.dqn.eval_episodes):
            status = sim.reset(seed=start_seed(VALIDATION_SEED, i))
            while status == K.DECIDE:
                status = sim.step(self.agent.act(sim))
            lengths.append(sim.result().length)
        return float(np.mean(lengths))

    def validate_heuristic(self, name: str) -> float:
        """The same validation for heuristic ``name`` (a reference for the curves)."""
        lengths = []
        sim = self.train_sim
        for i in range(self.dqn.eval_episodes):
            status = sim.reset(seed=start_seed(VALIDATION_SEED, i))
            if status == K.DECIDE:
                Heuristic(name).run(sim)
            lengths.append(sim.result().length)
        return float(np.mean(lengths))

    # --- files -----------------------------------------------------------------------------------------------------

    def meta(self, **extra: Any) -> dict[str, Any]:
        sc = self.scenario
        return {
            "trace": self.trace_name,
            "pms": sc.pms,
            "warm_start": sc.warm_start,
            "release": sc.release,
            "seed": self.seed,
            "epochs": self.done,
            "episodes": self.episodes,
            "updates": self.updates,
            "wall_s": self.wall_s,
            "validation_length": self.best_validation,
            "dqn": self.dqn.to_dict(),
            **extra,
        }

    def training_state(self) -> dict[str, Any]:
        return {"target": self.target.state_dict(), "optimizer": self.opt.state_dict()}

    def save_side_files(self, folder: Path) -> None:
        """``replay.npz``: the buffer (an exact resume needs it), when :attr:`keep_replay` asks for it."""
        if self.keep_replay:
            self.buffer.save(folder / "replay.npz")

    def plot(self, path: Path) -> None:
        plot_curves(
            self.curves,
            path,
            f"{self.cfg.kind} Double DQN, {self.scenario.pms} PMs",
            "epoch",
            ("train_length", "training (epsilon-greedy)"),
            ("validation_length", "validation (greedy)"),
            [("td_loss", "TD loss", True)],
        )

    @classmethod
    def resume(
        cls: type[T],
        trace: PreparedTrace,
        scenario: Scenario,
        seed: int,
        out: Path,
        trace_name: str,
        reward: Reward | None = None,
    ) -> T:
        """Continue the run in ``out`` (``checkpoint.pt`` + ``replay.npz``, so the run must have been trained with
        :attr:`keep_replay`); scenario and seed must be the run's, and an injected reward must be passed again."""
        return cls.resume_with(
            out,
            scenario,
            seed,
            lambda cfg, dqn: cls(trace, scenario, seed, out, cfg, dqn, trace_name, reward),
            trace_name,
        )

    @classmethod
    def resume_with(
        cls, out: Path, scenario: Scenario, seed: int, build: Callable[[CvdConfig, DQNConfig], T],
        trace_name: str | None = None,
    ) -> T:  # fmt: skip
        """Resume with ``build(model config, settings)`` making the trainer (for trainers with more to inject); the
        run's scenario, seed and (when given) trace must be these (another trace switched the run's data silently)."""
        expect: dict[str, object] = {"pms": scenario.pms, "warm_start": scenario.warm_start, "seed": seed}
        if trace_name is not None:
            expect["trace"] = trace_name
        blob = cls.read_run(out, expect)
        net, meta = load(out / "checkpoint.pt")
        if net.cfg.kind != cls.kind:  # another trainer's run: name the file (it said only "field 'kind'")
            raise InputError(f"{out / 'checkpoint.pt'}: field 'config.kind' is {net.cfg.kind!r}, a run of another "
                             f"trainer; this one continues {cls.kind!r} runs")  # fmt: skip
        tr = build(net.cfg, DQNConfig.from_dict(meta["dqn"]))
        for key in ("reward", "loss"):
            if getattr(tr.dqn, key) != meta["dqn"][key]:
                raise InputError(f"{out / 'checkpoint.pt'}: field 'meta.dqn.{key}' is {meta['dqn'][key]!r}, "
                                 f"but this run's is {getattr(tr.dqn, key)!r}")  # fmt: skip
        tr.restore(blob, counters=("episodes", "updates"))
        tr.target.load_state_dict(blob["target"])
        tr.agent.sync(tr.net)
        tr.buffer.restore(out / "replay.npz")
        tr.keep_replay = True
        return tr


def load(path: Path) -> tuple[CvdNet, dict[str, Any]]:
    """A CVD-RL / SchedRL network (eval mode) and its metadata, or one clear sentence about what is wrong."""
    blob = checkpoint.read(path, FORMAT, "CVD-RL")
    try:
        cfg = CvdConfig.from_dict(blob["config"])
    except (TypeError, KeyError, ValueError) as exc:
        raise InputError(f"{path}: field 'config' does not describe a CVD-RL model ({exc})") from None
    net = CvdNet(cfg)
    checkpoint.load_weights(path, net, blob["model"], "CVD-RL")
    return net, blob["meta"]
