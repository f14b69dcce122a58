"""Training CVD-RL and SchedRL with Double DQN (``../shared/papers/002_0cf75b9bf5d3860a.txt``, section 3, Algorithm
1, Table 1), written to be read top to bottom.

One epoch:

1. **Collect** ``episodes_per_epoch`` (5, the paper's parallel episodes) complete episodes on the training scenario
   with epsilon-greedy inside the candidate set (epsilon 0.1). Episode ``j`` of the run starts at a row drawn by
   ``default_rng([1000 + seed, j])`` from ``train_start_range``, which is disjoint from the rows evaluation uses
   (VMAgent's [1000, 10000)): the reported numbers are on held-out start offsets.
   Each step stores a transition: the rows of the chosen cluster Q(s, a) (for CVD-RL with look-ahead, every
   machine's state after the placement), the reward, and the next state's rows and candidates (for the target).
2. **Update** ``updates_per_epoch`` times: a batch from the replay buffer (100,000 transitions), the Double DQN
   target ``r + gamma Q'(s', argmax_a' Q(s', a'))`` with the argmax over the next state's candidates (eq. 12),
   squared error, Adam at 5e-4, then the soft target update ``theta' <- tau theta + (1 - tau) theta'`` (tau 0.01).
3. Every ``eval_every`` epochs, **validate**: greedy episodes at fixed starts of the training range (never the
   evaluation rows); the best-validating weights are the run's policy (``policy.pt``).

Rewards (section 2.2 adopts SchedRL's delta reward, which our copy of the paper does not define):

* ``delta`` (default): 1 for the placed request minus the capacity, in expected future requests, that the placement
  consumed beyond what the request would consume on an empty machine (:mod:`dcplace.learn.cvd_features`). It
  scores the immediate effect of a decision on the cluster's future capacity: a placement that fragments a machine
  earns less than 1, one that fills a gap nothing else could use earns more.
* ``vmagent``: +1 per placed request (VMAgent's reward).

Where we differ from Table 1, ``DQNConfig`` says so and why (chiefly: the paper updates after every step with
batches of 2,048, about 15 million updates of 102,400 machine rows each; two CPU cores allow about a thousandth
of that, so we take fewer, smaller updates per epoch and report the curves).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from dcplace.cluster.numa import NumaCluster
from dcplace.errors import InputError
from dcplace.learn import checkpoint
from dcplace.learn import cvd_features as F
from dcplace.learn.curves import write_csv
from dcplace.learn.cvd_model import CvdAgent, CvdConfig, CvdNet, Decision
from dcplace.policies.numa_heuristics import Heuristic
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import start_seed
from dcplace.sim.numa import NumaSim, PreparedTrace, Scenario

FORMAT = "dcplace-cvd"
TRAIN_SEED_BASE = 1000
VALIDATION_SEED = 999
TRAIN_START_RANGE = (10_000, 220_000)
"""Event-log rows training episodes start from; evaluation uses VMAgent's [1000, 10000), so tests are held out."""


@dataclass(frozen=True)
class DQNConfig:
    lr: float = 5e-4  # paper
    gamma: float = 0.75  # paper
    epsilon: float = 0.1  # paper, inside the filtered action space
    batch: int = 256  # paper 2,048: 8x smaller batches, so updates cost 1/8 (see the module docstring)
    buffer: int = 100_000  # paper
    tau: float = 0.01  # paper (soft update rate)
    episodes_per_epoch: int = 5  # paper: five parallel episodes per epoch
    updates_per_epoch: int = 32  # paper: one per step (~5,000 per epoch at 50 PMs); see the module docstring
    learning_starts: int = 2_000  # transitions in the buffer before the first update
    reward: str = "delta"
    loss: str = "cluster"
    """``cluster``: the paper's eq. 12 (TD on the summed Q of the whole cluster); ``machine`` (ours): a TD target per
    machine, ``V(machine now) <- r + machine_gamma * V(machine after)``, the last state of every machine -> 0 when
    the episode ends (see docs/cvd-rl.md)."""
    eval_every: int = 10
    eval_episodes: int = 10
    train_start_range: tuple[int, int] = TRAIN_START_RANGE

    def __post_init__(self) -> None:
        if self.reward not in ("delta", "vmagent"):
            raise InputError(f"--reward must be delta or vmagent, got {self.reward!r}")
        if self.loss not in ("cluster", "machine"):
            raise InputError(f"--loss must be cluster or machine, got {self.loss!r}")
        if self.batch < 1 or self.buffer < self.batch or self.episodes_per_epoch < 1:
            raise InputError("batch, buffer and episodes per epoch must be positive, buffer >= batch")

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["train_start_range"] = list(self.train_start_range)
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> DQNConfig:
        d = dict(d)
        d["train_start_range"] = tuple(d["train_start_range"])
        return cls(**d)


def probe_types(trace: PreparedTrace) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The trace's request types (CPU, memory), their multi-NUMA flags and frequencies (for the delta reward)."""
    kinds, counts = np.unique(np.c_[trace.demand, trace.multi.astype(float)], axis=0, return_counts=True)
    return (
        np.ascontiguousarray(kinds[:, :2]),
        np.ascontiguousarray(kinds[:, 2] > 0),
        counts / counts.sum(),
    )


class Replay:
    """A ring buffer of transitions as flat arrays (float32 rows; CVD and SchedRL layouts)."""

    def __init__(self, cap: int, cfg: CvdConfig, machines: int) -> None:
        self.cap, self.size, self.pos = cap, 0, 0
        f32 = np.float32
        self.arrays: dict[str, np.ndarray]
        if cfg.machine_td:
            w = cfg.row_width
            self.arrays = {"x": np.zeros((cap, w), f32), "x2": np.zeros((cap, w), f32)}
        elif cfg.kind == "schedrl":
            d = 2 * cfg.numa * machines + 3
            a = cfg.numa * machines
            self.arrays = {
                "x": np.zeros((cap, d), f32), "a": np.zeros(cap, np.int64), "x2": np.zeros((cap, d), f32),
                "mask2": np.zeros((cap, a), bool),
            }  # fmt: skip
        else:
            w, c = cfg.row_width, (cfg.candidate_cap if cfg.filter_k else cfg.numa * machines)
            self.arrays = {
                "cur": np.zeros((cap, machines, w), f32), "base2": np.zeros((cap, machines, w), f32),
                "cand2": np.zeros((cap, c, w), f32), "pm2": np.zeros((cap, c), np.int64), "n2": np.zeros(cap, np.int64),
            }  # fmt: skip
        self.arrays["r"] = np.zeros(cap, f32)
        self.arrays["done"] = np.zeros(cap, f32)

    def add(self, **fields: Any) -> None:
        i = self.pos
        for k, v in fields.items():
            arr = self.arrays[k]
            if arr.ndim >= 2 and np.ndim(v) >= 1 and np.shape(v)[0] < arr.shape[1]:
                arr[i] = 0
                arr[i, : np.shape(v)[0]] = v
            else:
                arr[i] = v
        self.pos = (i + 1) % self.cap
        self.size = min(self.size + 1, self.cap)

    def sample(self, idx: npt.NDArray[np.int64]) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(v[idx]) for k, v in self.arrays.items()}


class Trainer:
    """Double DQN for CVD-RL (or SchedRL) on one scenario. ``train`` runs epochs; ``out`` receives the files."""

    def __init__(
        self,
        trace: PreparedTrace,
        scenario: Scenario,
        seed: int,
        out: Path,
        model: CvdConfig,
        dqn: DQNConfig | None = None,
        trace_name: str = "trace",
    ) -> None:
        if scenario.mode != "non-expansion":
            raise InputError("training runs in Non-Expansion mode (the decomposed network then acts anywhere)")
        self.trace, self.scenario, self.seed, self.out = trace, scenario, seed, out
        self.trace_name = trace_name
        self.dqn = dqn or DQNConfig()
        self.cluster = NumaCluster.uniform(scenario.pms)
        self.sim = NumaSim(self.cluster, trace, scenario)
        self.train_sim = NumaSim(
            self.cluster, trace, Scenario(**{**asdict(scenario), "start_range": self.dqn.train_start_range})
        )
        self.types, self.tmulti, self.tweight = probe_types(trace)
        if model.kind == "cvd" and not model.probes:
            probes = tuple(
                (float(c), float(m), bool(mu), float(w))
                for (c, m), mu, w in zip(self.types, self.tmulti, self.tweight, strict=True)
            )
            model = replace(model, probes=probes)
        else:
            self.types, self.tmulti, self.tweight = model.probe_arrays() if model.probes else probe_types(trace)
        if self.dqn.loss == "machine":
            if model.kind != "cvd" or not model.decompose:
                raise InputError("--loss machine needs the decomposed CVD-RL network")
            model = replace(model, machine_td=True)
        torch.manual_seed(seed)
        self.net = CvdNet(model)
        self.target = CvdNet(model)
        self.target.load_state_dict(self.net.state_dict())
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.dqn.lr)
        self.agent = CvdAgent(self.net)
        self.buffer = Replay(self.dqn.buffer, model, scenario.pms)
        self.epoch = 0
        self.episodes = 0
        self.updates = 0
        self.wall_s = 0.0
        self.best_validation = -1.0
        self.curves: list[dict[str, float]] = []

    @property
    def cfg(self) -> CvdConfig:
        return self.net.cfg

    # --- 1. collect ------------------------------------------------------------------------------------------------

    def reward(self, sim: NumaSim, a: int) -> float:
        if self.dqn.reward == "vmagent":
            return 1.0
        r = sim.request
        return float(
            F.delta_reward(
                sim.free,
                sim.cap,
                sim.trace.demand[r],
                bool(sim.trace.multi[r]),
                a,
                self.types,
                self.tmulti,
                self.tweight,
            )
        )

    def run_episode(self, rng: np.random.Generator, start_seed: int) -> int:
        """One epsilon-greedy training episode; transitions go to the buffer. Returns its scheduled length."""
        sim = self.train_sim
        status = sim.reset(seed=start_seed)
        pending: dict[str, Any] | None = None
        final: tuple[Decision, int] | None = None
        eps = self.dqn.epsilon
        schedrl = self.cfg.kind == "schedrl"
        while status == K.DECIDE:
            if schedrl:
                x, mask = self.agent.schedrl_obs(sim)
                if pending is not None:
                    self.buffer.add(**pending, x2=x, mask2=mask, done=0.0)
                a = self.agent.act(sim, rng, eps)
                pending = {"x": x, "a": a, "r": self.reward(sim, a)}
            elif self.cfg.machine_td:
                dec = self.agent.observe(sim)
                q = self.agent.q_values(dec, sim)
                c = int(rng.integers(len(dec.actions))) if rng.random() < eps else int(np.argmax(q))
                a = int(dec.actions[c])
                m = int(dec.cand_pm[c])
                self.buffer.add(x=dec.base[m], r=self.reward(sim, a), x2=dec.cand[c], done=0.0)
                final = (dec, c)  # the machines' last states, built once when the episode ends
            else:
                dec = self.agent.observe(sim)
                if pending is not None:
                    self.buffer.add(**pending, base2=dec.base, cand2=dec.cand, pm2=dec.cand_pm, n2=len(dec.actions),
                                    done=0.0)  # fmt: skip
                if rng.random() < eps:
                    c = int(rng.integers(len(dec.actions)))
                else:
                    c = int(np.argmax(self.agent.q_values(dec)))
                a = int(dec.actions[c])
                cur = dec.base.copy()
                cur[dec.cand_pm[c]] = dec.cand[c]
                pending = {"cur": cur, "r": self.reward(sim, a)}
            status = sim.step(a)
        if pending is not None:  # the episode ended: no bootstrap from here (terminated or out of trace)
            self.buffer.add(**pending, done=1.0)
        if final is not None:  # every machine's last state earns nothing more
            dec, c = final
            last = dec.base.copy()
            last[dec.cand_pm[c]] = dec.cand[c]
            for row in last[: sim.n_active]:
                self.buffer.add(x=row, r=0.0, x2=row, done=1.0)
        return sim.result().length

    # --- 2. update -------------------------------------------------------------------------------------------------

    def td_loss(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        g = self.dqn.gamma
        if self.cfg.machine_td:
            v = self.net(b["x"])
            with torch.no_grad():
                nxt = self.target(b["x2"])
                y = torch.where(b["done"] > 0, torch.zeros_like(nxt), b["r"] + self.cfg.machine_gamma * nxt)
            return torch.nn.functional.mse_loss(v, y)
        if self.cfg.kind == "schedrl":
            q = self.net(b["x"]).gather(1, b["a"][:, None])[:, 0]
            with torch.no_grad():
                on = self.net(b["x2"]).masked_fill(~b["mask2"], -torch.inf)
                j = on.argmax(1, keepdim=True)
                q2 = self.target(b["x2"]).gather(1, j)[:, 0]
                q2 = torch.where(b["done"] > 0, torch.zeros_like(q2), q2)
        else:
            q = self.net.cluster_value(b["cur"])
            with torch.no_grad():
                c = b["cand2"].shape[1]
                valid = torch.arange(c)[None, :] < b["n2"][:, None]
                on = self.net.candidate_values(b["base2"], b["cand2"], b["pm2"]).masked_fill(~valid, -torch.inf)
                j = on.argmax(1, keepdim=True)
                q2 = self.target.candidate_values(b["base2"], b["cand2"], b["pm2"]).gather(1, j)[:, 0]
                q2 = torch.where(b["done"] > 0, torch.zeros_like(q2), q2)
        y = b["r"] + g * q2
        return torch.nn.functional.mse_loss(q, y)

    def update(self, rng: np.random.Generator) -> float:
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

    # --- 3. validate, and the loop ---------------------------------------------------------------------------------

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
        lengths = []
        sim = self.train_sim
        for i in range(self.dqn.eval_episodes):
            status = sim.reset(seed=start_seed(VALIDATION_SEED, i))
            if status == K.DECIDE:
                Heuristic(name).run(sim)
            lengths.append(sim.result().length)
        return float(np.mean(lengths))

    def step(self) -> dict[str, float]:
        """One epoch (collect, update, maybe validate); returns its curve row."""
        rng = np.random.default_rng([self.seed, self.epoch])
        lengths = []
        for _ in range(self.dqn.episodes_per_epoch):
            start = start_seed(TRAIN_SEED_BASE + self.seed, self.episodes)
            lengths.append(self.run_episode(rng, start))
            self.episodes += 1
        loss = self.update(rng) if self.buffer.size >= self.dqn.learning_starts else float("nan")
        self.epoch += 1
        row: dict[str, float] = {
            "epoch": self.epoch,
            "episodes": self.episodes,
            "updates": self.updates,
            "train_length": float(np.mean(lengths)),
            "td_loss": loss,
            "validation_length": float("nan"),
        }
        if self.epoch % self.dqn.eval_every == 0 or self.epoch == 1:
            val = self.validate()
            row["validation_length"] = val
            if val > self.best_validation:
                self.best_validation = val
                checkpoint.save(self.out / "policy.pt", self.net, self.meta(best_epoch=self.epoch), fmt=FORMAT)
        self.curves.append(row)
        return row

    def train(
        self, epochs: int, on_epoch: Callable[[dict[str, float]], None] | None = None, save_every: int = 25
    ) -> None:
        """Run until ``epochs`` epochs are done in total (a resumed run counts what it already did)."""
        self.out.mkdir(parents=True, exist_ok=True)
        while self.epoch < epochs:
            t0 = time.perf_counter()
            row = self.step()
            self.wall_s += time.perf_counter() - t0
            row["wall_s"] = self.curves[-1]["wall_s"] = self.wall_s
            last = self.epoch == epochs
            self.write_curves(plot=last or self.epoch % self.dqn.eval_every == 0)
            if last or self.epoch % save_every == 0:
                self.save_training()
            if on_epoch:
                on_epoch(row)

    # --- files -----------------------------------------------------------------------------------------------------

    def meta(self, **extra: Any) -> dict[str, Any]:
        sc = self.scenario
        return {
            "trace": self.trace_name,
            "pms": sc.pms,
            "warm_start": sc.warm_start,
            "release": sc.release,
            "seed": self.seed,
            "epochs": self.epoch,
            "episodes": self.episodes,
            "updates": self.updates,
            "wall_s": self.wall_s,
            "validation_length": self.best_validation,
            "dqn": self.dqn.to_dict(),
            **extra,
        }

    def save_training(self) -> None:
        """``checkpoint.pt`` (networks, optimiser, counters, curves) and ``replay.npz`` (the buffer), for --resume."""
        arrays: dict[str, Any] = {"size": self.buffer.size, "pos": self.buffer.pos, **self.buffer.arrays}
        np.savez(self.out / "replay.tmp.npz", **arrays)
        (self.out / "replay.tmp.npz").replace(self.out / "replay.npz")
        checkpoint.save(
            self.out / "checkpoint.pt",
            self.net,
            self.meta(),
            extra={"target": self.target.state_dict(), "optimizer": self.opt.state_dict(), "curves": self.curves},
            fmt=FORMAT,
        )

    def write_curves(self, plot: bool = True) -> None:
        if not self.curves:
            return
        write_csv(self.curves, self.out / "curves.csv")
        if plot:
            plot_curves(self.curves, self.out / "curves.png", f"{self.cfg.kind} Double DQN, {self.scenario.pms} PMs")

    @classmethod
    def resume(cls, trace: PreparedTrace, scenario: Scenario, seed: int, out: Path, trace_name: str) -> Trainer:
        """Continue the run in ``out``; scenario and seed must be the run's."""
        path = out / "checkpoint.pt"
        blob = checkpoint.read(path, FORMAT, "CVD-RL")
        meta = blob["meta"]
        for key, want in (("pms", scenario.pms), ("warm_start", scenario.warm_start), ("seed", seed)):
            if meta.get(key) != want:
                raise InputError(f"{path}: field 'meta.{key}' is {meta.get(key)!r}, but --{key} is {want!r}")
        net, _ = load(path)
        tr = cls(trace, scenario, seed, out, net.cfg, DQNConfig.from_dict(meta["dqn"]), trace_name)
        tr.net.load_state_dict(net.state_dict())
        tr.target.load_state_dict(blob["target"])
        tr.opt.load_state_dict(blob["optimizer"])
        tr.agent.sync(tr.net)
        tr.epoch, tr.episodes, tr.updates = meta["epochs"], meta["episodes"], meta["updates"]
        tr.wall_s, tr.best_validation = meta["wall_s"], meta["validation_length"]
        tr.curves = list(blob["curves"])
        replay = out / "replay.npz"
        if not replay.is_file():
            raise InputError(f"{replay}: the replay buffer of the run is missing (needed for an exact --resume)")
        with np.load(replay) as z:
            tr.buffer.size, tr.buffer.pos = int(z["size"]), int(z["pos"])
            for k in tr.buffer.arrays:
                tr.buffer.arrays[k][:] = z[k]
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


def plot_curves(curves: list[dict[str, float]], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ep = [r["epoch"] for r in curves]
    fig, axes = plt.subplots(1, 2, figsize=(11, 3.6))
    axes[0].plot(ep, [r["train_length"] for r in curves], alpha=0.5, label="training (epsilon-greedy)")
    val = [(r["epoch"], r["validation_length"]) for r in curves if r["validation_length"] == r["validation_length"]]
    if val:
        axes[0].plot(*zip(*val, strict=True), "o-", label="validation (greedy)")
    axes[0].set_ylabel("scheduled length")
    axes[0].legend()
    axes[1].plot(ep, [r["td_loss"] for r in curves])
    axes[1].set_ylabel("TD loss")
    axes[1].set_yscale("log")
    for ax in axes:
        ax.set_xlabel("epoch")
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
