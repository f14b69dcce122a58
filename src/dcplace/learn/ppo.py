"""Training Nara with PPO (Schulman et al. 2017), written to be read top to bottom.

One iteration:

1. **Collect** complete episodes of ``episode_requests`` requests (32, as the paper trains) with the current policy,
   sampling servers from its masked softmax, until at least ``steps_per_iteration`` (2,048) picks are gathered
   (RLlib's ``batch_mode = complete_episodes``). Episode ``j`` of the whole run draws its requests from the training
   split with seed ``episode_seed(1000 + seed, j)``, so every episode is new and a rerun draws the same ones.
2. **Estimate advantages** with GAE(gamma, lambda) from the value network (rewards scaled by ``reward_scale`` for the
   value regression only; advantages are standardised per batch, so the policy sees the paper's 10 / -10 / 0).
3. **Update** policy and value networks for ``epochs`` passes over shuffled minibatches of 256 with the clipped
   surrogate objective, a squared-error value loss and an entropy bonus; Adam at 5e-3 (the paper's rate), gradient
   norm clipped.
A run may start from another run's weights (``init``): a curriculum. Azure requests (mostly ten servers' worth)
almost never succeed under a random policy, so PPO from scratch sees too few successes to learn from; starting from
the uniform agent fixes that (docs/nara.md shows both curves).

4. Every ``eval_every`` iterations, **validate**: greedy rollouts on fixed 128-request episodes of the training split
   (seed 999, never used for training, never the test seed); the best-validating weights are the run's policy.

The paper used RLlib's defaults for everything it does not name; where we differ it is said in ``PPOConfig``.
Randomness comes from generators seeded by (seed, episode) for the picks of each training episode and (seed,
iteration) for the update's minibatches, so a run is reproducible bit for bit, a resumed run continues exactly as
if it had not stopped, and episodes played by several workers (``rollouts``: a process pool or Ray,
:mod:`dcplace.learn.rollouts`) give the same batch as one. The loop, validation schedule, curves, checkpoints and
resume are the shared skeleton's (:mod:`dcplace.learn.trainer`); this file is steps 1-4.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from dcplace.cluster.topology import Topology
from dcplace.envs.net_alloc import NetObserver
from dcplace.errors import InputError
from dcplace.learn import checkpoint
from dcplace.learn.config import PPOConfig as PPOConfig  # re-exported: torch-free, in dcplace.learn.config
from dcplace.learn.nara_model import GraphIndex, NaraConfig, NaraNet, obs_tensors
from dcplace.learn.trainer import Row, TrainingRun, plot_curves
from dcplace.sim.netalloc import NetAllocSim, Rewards
from dcplace.sim.netalloc_episodes import episode_requests, episode_seed

TRAIN_SEED_BASE = 1000
VALIDATION_SEED = 999
ROLLOUT_SEED_BASE = 2000  # episode j samples its picks from a generator seeded by (2000 + seed, j)
VALIDATION_REQUESTS = 128


@dataclass
class Batch:
    """Picks of complete episodes, in order. ``done`` marks each episode's last pick."""

    nodes: list[np.ndarray] = field(default_factory=list)
    edges: list[np.ndarray] = field(default_factory=list)
    state: list[np.ndarray] = field(default_factory=list)
    mask: list[np.ndarray] = field(default_factory=list)
    action: list[int] = field(default_factory=list)
    logp: list[float] = field(default_factory=list)
    reward: list[float] = field(default_factory=list)
    done: list[bool] = field(default_factory=list)
    acceptance: list[float] = field(default_factory=list)  # per episode

    def extend(self, other: Batch) -> None:
        """Append ``other``'s picks and episodes after these."""
        for f in fields(self):
            getattr(self, f.name).extend(getattr(other, f.name))

    def tensors(self) -> dict[str, Tensor]:
        return {
            "nodes": torch.from_numpy(np.stack(self.nodes)),
            "edges": torch.from_numpy(np.stack(self.edges)),
            "state": torch.from_numpy(np.stack(self.state)),
            "mask": torch.from_numpy(np.stack(self.mask).astype(np.bool_)),
            "action": torch.tensor(self.action, dtype=torch.long),
            "logp": torch.tensor(self.logp, dtype=torch.float32),
        }


def gae(rewards: np.ndarray, values: np.ndarray, done: np.ndarray, gamma: float, lam: float) -> np.ndarray:
    """Generalised advantage estimates; an episode's last pick bootstraps from 0 (episodes are complete)."""
    adv = np.zeros_like(values)
    running = 0.0
    for t in range(len(rewards) - 1, -1, -1):
        next_value = 0.0 if done[t] else values[t + 1]
        delta = rewards[t] + gamma * next_value - values[t]
        running = delta + gamma * lam * (0.0 if done[t] else running)
        adv[t] = running
    return adv


def greedy_acceptance(
    net: NaraNet,
    topology: Topology,
    dataset: str,
    n_requests: int,
    seed: int,
    episodes: int,
    split: str,
    on_full: str = "reject",
) -> float:
    """Mean acceptance of the greedy policy over seeded episodes (``on_full``: :class:`NetAllocSim`'s)."""
    g, observe = GraphIndex(topology), NetObserver(topology)
    acc = []
    with torch.inference_mode():
        for e in range(episodes):
            sim = NetAllocSim(
                topology, episode_requests(topology, dataset, n_requests, seed, e, split), on_full=on_full
            )
            while not sim.done:
                nodes, edges, state, mask = obs_tensors(observe(sim))
                sim.pick(int(net.policy(nodes, edges, state, mask, g).argmax()))
            acc.append(sim.result().acceptance)
    return float(np.mean(acc))


class PPOTrainer(TrainingRun[NaraNet]):
    """PPO for Nara on one topology (or several in turn) and request set; ``out`` receives the files."""

    fmt = checkpoint.FORMAT
    what = "Nara"
    unit = "iteration"
    score = "acceptance"
    save_every = 1

    def __init__(
        self,
        topology: Topology | Sequence[Topology],
        dataset: str,
        seed: int,
        out: Path,
        ppo: PPOConfig | None = None,
        model: NaraConfig | None = None,
        init: Path | None = None,
    ) -> None:
        """``topology``: one, or several used in turn (iteration ``i`` trains on ``topology[i % n]``; validation
        averages over all). ``init``: start from another run's weights (its layer sizes win)."""
        self.ppo = ppo or PPOConfig()
        super().__init__(out, seed, self.ppo.eval_every)
        self.topologies = [topology] if isinstance(topology, Topology) else list(topology)
        self.name = "+".join(t.name for t in self.topologies)
        self.dataset = dataset
        torch.manual_seed(seed)
        self.init: dict[str, Any] = {}
        if init is not None:
            start, start_meta = checkpoint.load(init)
            for key in () if model is None else (f.name for f in fields(NaraConfig)):
                value = getattr(model, key)  # an option asked of the network (not its default) that init's lacks
                if value != getattr(NaraConfig(), key) and value != getattr(start.cfg, key):
                    raise InputError(f"{init}'s network has {key} = {getattr(start.cfg, key)!r}, not the {value!r} "
                                     "asked: a run from a checkpoint keeps its network (leave the option out, or "
                                     "start afresh)", field=key)  # fmt: skip
            model = start.cfg
            keys = ("topology", "dataset", "iterations", "wall_s")
            self.init = {"path": init.name, **{k: start_meta.get(k) for k in keys}}
        self.net = NaraNet(model)
        if init is not None:
            self.net.load_state_dict(start.state_dict())
        self.opt = torch.optim.Adam(self.net.parameters(), lr=self.ppo.lr)
        self._graphs = [(GraphIndex(t), NetObserver(t)) for t in self.topologies]
        self._use(0)
        self.episodes = 0  # training episodes drawn so far

    @property
    def iteration(self) -> int:
        """Iterations done."""
        return self.done

    def _use(self, i: int) -> None:
        """Train on ``topologies[i]`` from now on."""
        self.topology_index = i
        self.topology = self.topologies[i]
        self.g, self.observe = self._graphs[i]

    # --- 1. collect ------------------------------------------------------------------------------------------------

    def collect(self) -> Batch:
        """Whole episodes until ``steps_per_iteration`` picks; episode ``j`` is played by :meth:`play` from its own
        seed. They are played in waves of ``rollouts.workers`` and kept in order; episodes of the last wave beyond
        the batch are dropped and drawn again next iteration, so the batch does not depend on the worker count."""
        batch = Batch()
        p = self.ppo
        while len(batch.action) < p.steps_per_iteration:
            wave = range(self.episodes, self.episodes + self.rollouts.workers)
            for ep in self.rollouts.play("play", [(j, self.topology_index) for j in wave]):
                if len(batch.action) >= p.steps_per_iteration:
                    break
                batch.extend(ep)
                self.episodes += 1
        return batch

    def play(self, j: int, topology_index: int) -> Batch:
        """Training episode ``j`` on ``topologies[topology_index]``, servers sampled from the policy's masked
        softmax with a generator seeded by (run seed, ``j``)."""
        top = self.topologies[topology_index]
        g, observe = self._graphs[topology_index]
        gen = torch.Generator().manual_seed(episode_seed(ROLLOUT_SEED_BASE + self.seed, j))
        req = episode_requests(top, self.dataset, self.ppo.episode_requests, TRAIN_SEED_BASE + self.seed, j, "train")
        ep = Batch()
        self.net.eval()
        with torch.inference_mode():
            sim = NetAllocSim(top, req, rewards=Rewards(capacity=self.ppo.capacity_reward), on_full=self.ppo.on_full)
            while not sim.done:
                obs = observe(sim)
                nodes, edges, state, mask = obs_tensors(obs)
                logits = self.net.policy(nodes, edges, state, mask, g)[0]
                probs = torch.softmax(logits, 0)
                a = int(torch.multinomial(probs, 1, generator=gen))
                _, reward, _ = sim.pick(a)
                ep.nodes.append(obs["nodes"])
                ep.edges.append(obs["edges"])
                ep.state.append(obs["state"])
                ep.mask.append(obs["action_mask"])
                ep.action.append(a)
                ep.logp.append(float(torch.log(probs[a])))
                ep.reward.append(reward)
                ep.done.append(False)
        if ep.action:
            ep.done[-1] = True
            ep.acceptance.append(sim.result().acceptance)
        return ep

    # --- 2 and 3. advantages and the update --------------------------------------------------------------------

    def prepare(self, batch: Batch) -> dict[str, Tensor]:
        """The batch as tensors with its advantages (standardised) and value targets."""
        p = self.ppo
        t = batch.tensors()
        self.net.eval()
        with torch.inference_mode():
            values = self.net.value(t["nodes"], t["edges"], t["state"], self.g).numpy()
        rewards = np.asarray(batch.reward, dtype=np.float32) * p.reward_scale
        adv = gae(rewards, values, np.asarray(batch.done), p.gamma, p.gae_lambda)
        t["returns"] = torch.from_numpy(adv + values)
        t["advantages"] = torch.from_numpy((adv - adv.mean()) / (adv.std() + 1e-8))
        return t

    def losses(self, t: dict[str, Tensor], idx: Tensor) -> dict[str, Tensor]:
        """PPO's loss terms on the picks ``idx`` of a prepared batch."""
        p, g = self.ppo, self.g
        mask = t["mask"][idx]
        logits = self.net.policy(t["nodes"][idx], t["edges"][idx], t["state"][idx], mask, g)
        logp_all = torch.log_softmax(logits, -1)
        logp = logp_all.gather(1, t["action"][idx].unsqueeze(1)).squeeze(1)
        ratio = torch.exp(logp - t["logp"][idx])
        a = t["advantages"][idx]
        policy_loss = -torch.min(ratio * a, ratio.clamp(1 - p.clip, 1 + p.clip) * a).mean()
        entropy = -(logp_all.exp() * logp_all.masked_fill(~mask, 0.0)).sum(-1).mean()
        value = self.net.value(t["nodes"][idx], t["edges"][idx], t["state"][idx], g)
        value_loss = ((value - t["returns"][idx]) ** 2).mean()
        return {
            "loss": policy_loss + p.vf_coef * value_loss - p.ent_coef * entropy,
            "policy_loss": policy_loss,
            "value_loss": value_loss,
            "entropy": entropy,
            "approx_kl": (t["logp"][idx] - logp).mean(),
        }

    def update(self, batch: Batch, gen: torch.Generator) -> dict[str, float]:
        p = self.ppo
        t = self.prepare(batch)
        self.net.train()
        n = len(batch.action)
        stats: dict[str, list[float]] = {"policy_loss": [], "value_loss": [], "entropy": [], "approx_kl": []}
        for _ in range(p.epochs):
            order = torch.randperm(n, generator=gen)
            for lo in range(0, n, p.minibatch):
                terms = self.losses(t, order[lo : lo + p.minibatch])
                self.opt.zero_grad()
                terms["loss"].backward()  # type: ignore[no-untyped-call]
                torch.nn.utils.clip_grad_norm_(self.net.parameters(), p.max_grad_norm)
                self.opt.step()
                for k in stats:
                    stats[k].append(float(terms[k].detach()))
        return {k: float(np.mean(v)) for k, v in stats.items()}

    def advance(self) -> Row:
        """One PPO iteration: collect, update."""
        it = self.done
        self._use(it % len(self.topologies))
        gen = torch.Generator().manual_seed(episode_seed(self.seed, it))
        batch = self.collect()
        stats = self.update(batch, gen)
        self.done += 1
        return {
            "iteration": self.done,
            "steps": len(batch.action),
            "episodes": len(batch.acceptance),
            "train_acceptance": float(np.mean(batch.acceptance)),
            "mean_reward_per_episode": float(np.sum(batch.reward) / max(len(batch.acceptance), 1)),
            **stats,
        }

    # --- 4. validate -----------------------------------------------------------------------------------------------

    def validate(self) -> float:
        """Mean greedy acceptance on fixed 128-request episodes of the training split, over the topologies."""
        self.net.eval()
        p = self.ppo
        return float(
            np.mean(
                [
                    greedy_acceptance(
                        self.net,
                        top,
                        self.dataset,
                        VALIDATION_REQUESTS,
                        VALIDATION_SEED,
                        p.eval_episodes,
                        "train",
                        p.on_full,
                    )
                    for top in self.topologies
                ]
            )
        )

    # --- files -----------------------------------------------------------------------------------------------------

    def meta(self, **extra: Any) -> dict[str, Any]:
        return {
            "topology": self.name,
            "dataset": self.dataset,
            "seed": self.seed,
            "iterations": self.done,
            "episodes": self.episodes,
            "wall_s": self.wall_s,
            "validation_acceptance": self.best_validation,
            "ppo": self.ppo.to_dict(),
            "init": self.init,
            **extra,
        }

    def plot(self, path: Path) -> None:
        plot_curves(
            self.curves,
            path,
            f"Nara PPO on {self.name} / {self.dataset}",
            "iteration",
            ("train_acceptance", "training episodes (sampled)"),
            ("validation_acceptance", "validation (greedy, 128 requests)"),
            [("value_loss", "value loss", False), ("entropy", "policy entropy", False)],
        )

    @classmethod
    def resume(cls, topology: Topology | Sequence[Topology], dataset: str, seed: int, out: Path) -> PPOTrainer:
        """Continue the run in ``out`` (its ``checkpoint.pt``); topology, dataset and seed must be the run's."""
        names = topology.name if isinstance(topology, Topology) else "+".join(t.name for t in topology)
        blob = cls.read_run(out, {"topology": names, "dataset": dataset, "seed": seed})
        net, meta = checkpoint.load(out / "checkpoint.pt")
        tr = cls(topology, dataset, seed, out, PPOConfig.from_dict(meta["ppo"]), net.cfg)
        tr.restore(blob, counters=("episodes",))
        tr.init = dict(meta.get("init", {}))
        return tr
