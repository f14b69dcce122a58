"""Hindsight Learning for NUMA placement (Sinclair et al., ICML 2023, "Hindsight Learning for MDPs with Exogenous
Inputs"; SFC+23 in ``../shared/papers/002_0cf75b9bf5d3860a.txt``), top to bottom.

The arrivals and departures of VMs are exogenous: they do not depend on the scheduler. On a training episode they
are known once it is over, so the best decisions *in hindsight* can be computed and a policy trained to imitate them
(supervised), instead of learning values from rewards.

One training episode (:meth:`HindsightTrainer.run_episode`, a training start of ``DQNConfig.train_start_range``):

1. Roll out the reference (``HindsightConfig.reference``: by default the policy being trained, greedy, so the
   examples come from its own states as in Sinclair et al.; or a heuristic) until the episode ends at request ``L``
   (the first request that fits nowhere), noting the filter's candidates at each decision.
2. **Hindsight plan.** Rewind to decision ``s = L - window``; the window is requests ``s .. L + extra`` with their
   realised arrivals and departures, every VM live at ``s`` fixed where it is
   (:func:`dcplace.sim.hindsight.instance_at`), each decision before the failure restricted to the candidates it had
   (plus the reference's choice; the failing request and the ones after it may go anywhere). CP-SAT finds the
   longest placeable prefix of the window, and among those plans the one keeping most of the reference's choices
   (:func:`plan_window`, ``solve_s`` seconds at most, one worker): the plan departs from the
   reference only where the future needs it.
3. If the plan places more than the ``window`` requests before the failure, follow it, and record each decision of
   the window as a labelled example (the state's candidate rows and the plan's action); then continue with the
   reference until the next failure and plan again (at most ``repairs`` windows per episode). If it cannot (the
   failure is already unavoidable ``window`` requests back), the episode ends.

The policy is CVD-RL's decomposed network (:mod:`dcplace.learn.cvd_model`): a candidate's logit is its benefit
``r + machine_gamma * V(machine after) - V(machine now)`` with ``r`` the delta reward (``cvd-rl-machine``'s rule;
``zero_init`` makes it the one-step greedy on the reward at the start), the candidates are the top-k filter's plus the
plan's action when the filter missed it. The loss is the cross-entropy of the plan's action among the candidates,
``-log softmax(sharpness * benefits)[label]``. At evaluation the policy is greedy over the filter's candidates, as
``cvd-rl-machine`` acts, so a checkpoint is a ``dcplace-cvd`` file (policy ``hindsight``).

The epoch, validation and checkpoints are :class:`dcplace.learn.dqn.DoubleDQN`'s (collect ``episodes_per_epoch``
episodes, ``updates_per_epoch`` gradient steps on batches of the stored examples, greedy validation), with the
replay buffer holding labelled examples instead of transitions (``gamma``, ``epsilon`` and the reward are unused).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from dcplace.errors import InputError
from dcplace.learn.config import HINDSIGHT_DQN, DQNConfig, HindsightConfig
from dcplace.learn.cvd_model import CvdConfig
from dcplace.learn.dqn import DoubleDQN
from dcplace.learn.replay import Layout
from dcplace.learn.rewards import Reward
from dcplace.parallel import Executor
from dcplace.placement.cpsat import run_cp
from dcplace.placement.stop import Deadline
from dcplace.policies import get_policy
from dcplace.policies.base import NumaPolicy
from dcplace.sim import numa_kernel as K
from dcplace.sim.hindsight import HindsightInstance, WindowPlan, instance_at, window_model
from dcplace.sim.numa import NumaSim, NumaView, PreparedTrace, Scenario


def plan_window(
    inst: HindsightInstance,
    prefer: npt.NDArray[np.int64] | None = None,
    time_limit_s: float = 10.0,
    seed: int = 0,
    allowed: list[npt.NDArray[np.int64] | None] | None = None,
) -> WindowPlan:
    """The hindsight plan of :func:`dcplace.sim.hindsight.window_model`, solved by
    :func:`dcplace.placement.cpsat.run_cp` within ``time_limit_s`` (one worker, ``seed``; CP-SAT's SIGINT handler
    off, an interrupt stops the search and is raised again). ``value`` / ``bound`` count placed requests."""
    wm = window_model(inst, prefer, allowed)
    t0 = time.perf_counter()
    ans = run_cp(wm.model, Deadline(time_limit_s), workers=1, seed=seed)
    return wm.decode(ans.solver, ans.status, time.perf_counter() - t0)


def rollout(
    policy: NumaPolicy,
    sim: NumaSim,
    actions: list[int],
    candidates: Callable[[NumaView], npt.NDArray[np.int64]] | None = None,
    seen: list[npt.NDArray[np.int64] | None] | None = None,
) -> int:
    """Let ``policy`` decide until the episode ends, appending its actions (and, with ``candidates``, each
    decision's candidate set to ``seen``); returns the final status."""
    status = sim.status
    while status == K.DECIDE:
        v = sim.view()
        a = policy.choose(v)
        actions.append(a)
        if candidates is not None and seen is not None:
            seen.append(candidates(v))
        status = sim.step(a)
    return status


class AgentPolicy(NumaPolicy):
    """The network being trained, greedy, as a policy (the reference ``policy``: rollouts on the learner's own
    states, as Sinclair et al. roll out their current policy)."""

    def __init__(self, trainer: DoubleDQN) -> None:
        self.trainer = trainer

    @property
    def name(self) -> str:
        return "policy"

    def choose(self, view: NumaView) -> int:
        return self.trainer.agent.act(view)


class HindsightTrainer(DoubleDQN):
    """Imitation of hindsight-optimal window plans (module docstring) on CVD-RL's network."""

    kind = "cvd"
    what = "Hindsight Learning"

    def __init__(
        self,
        trace: PreparedTrace,
        scenario: Scenario,
        seed: int,
        out: Path,
        model: CvdConfig,
        dqn: DQNConfig | None = None,
        trace_name: str = "trace",
        hindsight: HindsightConfig | None = None,
    ) -> None:
        self.hs = hindsight or HindsightConfig()
        self.reference: NumaPolicy = (
            AgentPolicy(self) if self.hs.reference == "policy" else get_policy(self.hs.reference)
        )
        self.labels = 0
        """Examples recorded."""
        self.changed = 0
        """Examples whose label differs from the reference's choice at the same state."""
        self.plan_s = 0.0
        """Seconds spent in CP-SAT."""
        self.windows = 0
        """Windows planned."""
        self.repaired = 0
        """Windows whose plan placed the request the reference failed on."""
        super().__init__(trace, scenario, seed, out, model, dqn or HINDSIGHT_DQN, trace_name)

    def use_executor(self, executor: Executor) -> None:
        """Not offered: the episodes count their labels and plans on the trainer, which an actor elsewhere cannot."""
        if executor.engine != "inline":
            raise InputError("Hindsight Learning plays its episodes in one process; use 1 worker", field="workers")
        super().use_executor(executor)

    @classmethod
    def resume(
        cls,
        trace: PreparedTrace,
        scenario: Scenario,
        seed: int,
        out: Path,
        trace_name: str,
        reward: Reward | None = None,
    ) -> HindsightTrainer:
        """Not offered: the labels and the label-making settings are not kept for an exact resume."""
        raise InputError(f"{out}: a Hindsight Learning run cannot be resumed; start a new one")

    def prepare_model(self, model: CvdConfig, trace: PreparedTrace, dqn: DQNConfig) -> tuple[CvdConfig, DQNConfig]:
        from dcplace.learn.dqn import probe_types

        if not model.probes:
            types, multi, weight = probe_types(trace)
            probes = tuple(
                (float(c), float(m), bool(mu), float(w)) for (c, m), mu, w in zip(types, multi, weight, strict=True)
            )
            model = replace(model, probes=probes)
        return replace(model, machine_td=True), replace(dqn, loss="imitation")

    def layout(self, model: CvdConfig, machines: int) -> Layout:
        c, w = model.candidate_cap + 1, model.row_width
        f32 = np.float32
        return {
            "now": ((c, w), f32), "cand": ((c, w), f32), "gain": ((c,), f32), "n": ((), np.int64),
            "label": ((), np.int64),
        }  # fmt: skip

    def record(self, sim: NumaSim, action: int) -> None:
        """Store the decision ``sim`` waits at with the plan's ``action`` as its label."""
        v = sim.view()
        acts = self.agent.candidates(v)
        k = v.numa
        same = acts // k == action // k if v.multi else acts == action  # a multi-NUMA VM: any node names the machine
        hit = np.flatnonzero(same)
        if len(hit) == 0:
            acts = np.r_[acts, action].astype(np.int64)
            label = len(acts) - 1
        else:
            label = int(hit[0])
        ref = self.reference.choose(v)
        self.changed += int(ref // k != action // k if v.multi else ref != action)
        now, cand = self.agent.pair_rows(v, acts)
        self.buffer.add(now=now, cand=cand, gain=self.agent.rewards(v, acts), n=len(acts), label=label, done=0.0)
        self.labels += 1

    def run_episode(self, rng: np.random.Generator, start_seed: int) -> int:
        sim = self.train_sim
        hs = self.hs
        sim.reset(seed=start_seed)
        actions: list[int] = []
        seen: list[npt.NDArray[np.int64] | None] = []
        status = rollout(self.reference, sim, actions, self.agent.candidates, seen)
        for _ in range(hs.repairs):
            if status != K.TERMINATED:
                break
            fail = len(actions)
            s = max(0, fail - hs.window)
            sim.reset(seed=start_seed)
            for a in actions[:s]:
                sim.step(a)
            inst = instance_at(sim, fail - s + 1 + hs.extra)
            prefer = np.full(inst.requests, -1, np.int64)
            prefer[: fail - s] = actions[s:fail]
            allowed = seen[s:fail] + [None] * (inst.requests - (fail - s))
            plan = plan_window(inst, prefer, hs.solve_s, seed=self.seed, allowed=allowed)
            self.plan_s += plan.wall_s
            self.windows += 1
            if plan.value <= fail - s:
                break  # the failure was already unavoidable at s: nothing to learn from this window
            self.repaired += 1
            del actions[s:], seen[s:]
            for a in plan.actions[: plan.value]:
                self.record(sim, int(a))
                actions.append(int(a))
                seen.append(None)  # unrestricted: a later window that overlaps may plan them again (labels kept)
                status = sim.step(int(a))
                if status != K.DECIDE:
                    break
            status = rollout(self.reference, sim, actions, self.agent.candidates, seen)
        return len(actions)

    def td_loss(self, b: dict[str, torch.Tensor]) -> torch.Tensor:
        """Cross-entropy of the plan's action among the candidates (logits: the acting rule's
        ``r + machine_gamma * V(after) - V(now)``)."""
        c = b["cand"].shape[1]
        benefit = b["gain"] + self.cfg.machine_gamma * self.net(b["cand"]) - self.net(b["now"])  # (B, C)
        logits = self.hs.sharpness * benefit
        valid = torch.arange(c)[None, :] < b["n"][:, None]
        return torch.nn.functional.cross_entropy(logits.masked_fill(~valid, -1e9), b["label"])

    def advance(self) -> dict[str, float]:
        row = super().advance()
        row["labels"] = float(self.labels)
        row["changed"] = float(self.changed)
        row["plan_s"] = self.plan_s
        row["windows"] = float(self.windows)
        row["repaired"] = float(self.repaired)
        return row

    def meta(self, **extra: Any) -> dict[str, Any]:
        return super().meta(hindsight=self.hs.to_dict(), labels=self.labels, changed=self.changed,
                            plan_s=self.plan_s, windows=self.windows, repaired=self.repaired, **extra)  # fmt: skip
