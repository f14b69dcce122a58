"""Why CVD-RL retrained in the paper's regime learned nothing (issue 15, item 3): is the delta reward aligned with
the episode length there? One-step greedy rules over CVD-RL's candidates (top-2 Best-Fit + top-3 industrial) on the
same episodes as the heuristics, in ``PAPER_REGIME`` at 50 PMs / 50 % warm start:

* ``greedy delta``: the candidate with the largest delta reward (slots weighted by request frequency, the default);
* ``greedy delta-cpu``: the same with slots weighted by frequency x cores (:class:`dcplace.learn.rewards.DeltaReward`
  named ``delta-cpu``): large VMs, which end this regime's episodes, count by their size;
* ``random candidate``: a uniform candidate (what epsilon-greedy exploration does).

If greedy delta falls below industrial, a learner that maximises the delta reward is pulled away from industrial
(what the training curves showed). Rows: the validation starts of the training rows (what model selection sees) and
VMAgent's start rows (held out).

    OMP_NUM_THREADS=1 python benchmarks/cvd_regime_diagnosis.py [--episodes 10] [--checkpoint DIR/checkpoint.pt ...]

With ``--checkpoint`` (per-machine networks, ``machine_td``), also the scale of what the network adds to the reward:
over the decisions of greedy-delta episodes (validation starts), the spread (standard deviation among a decision's
candidates, averaged over decisions) of the delta reward ``r`` and of the learned part ``gamma V(after) - V(now)``.
Where the learned part's spread is several times the reward's, the network, not the reward, picks the candidate.
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME, START_ROWS
from dcplace.learn.cvd_model import CvdAgent, CvdConfig, CvdNet
from dcplace.learn.dqn import TRAIN_START_RANGE, VALIDATION_SEED, load, probe_types
from dcplace.learn.rewards import Reward, numa_reward
from dcplace.policies.numa_heuristics import Heuristic
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import start_seed
from dcplace.sim.numa import NumaSim, PreparedTrace


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--checkpoint", nargs="*", default=[])
    ap.add_argument("--spreads-only", action="store_true", help="only the second table")
    args = ap.parse_args()
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    rewards = {name: numa_reward(name, probe_types(p)) for name in ("delta", "delta-cpu")}
    agent = CvdAgent(CvdNet(CvdConfig(slots_feature=False)))  # only its candidate filter is used
    rng = np.random.default_rng(0)
    print(f"# huawei-east-1, {PAPER_REGIME.label}, 50 PMs, warm 50 %, {args.episodes} episodes per row")
    cols = ("starts", "best-fit", "industrial", "greedy delta", "greedy delta-cpu", "random candidate")
    print("| " + " | ".join(cols) + " |\n|" + "---|" * len(cols))
    starts = (("training rows, validation seeds", TRAIN_START_RANGE, VALIDATION_SEED),
              ("VMAgent's [1000, 10000) (held out)", START_ROWS, 0))  # fmt: skip
    for label, rows, base in () if args.spreads_only else starts:
        sim = NumaSim(PAPER_REGIME.cluster(50), p, replace(PAPER_REGIME.scenario(0.5), start_range=rows))
        out: dict[str, list[float]] = {c: [] for c in cols[1:]}
        for i in range(args.episodes):
            seed = start_seed(base, i)
            for name in ("best-fit", "industrial"):
                sim.reset(seed=seed)
                Heuristic(name).run(sim)
                out[name].append(sim.result().length)
            for col, reward in (("greedy delta", rewards["delta"]), ("greedy delta-cpu", rewards["delta-cpu"]),
                                ("random candidate", None)):  # fmt: skip
                status = sim.reset(seed=seed)
                while status == K.DECIDE:
                    acts = agent.candidates(sim)
                    if reward is None:
                        a = int(acts[rng.integers(len(acts))])
                    else:
                        a = int(acts[int(np.argmax([reward(sim, int(x)) for x in acts]))])
                    status = sim.step(a)
                out[col].append(sim.result().length)
        print(f"| {label} | " + " | ".join(f"{np.mean(out[c]):.1f}" for c in cols[1:]) + " |", flush=True)
    if args.checkpoint:
        spreads(p, args.checkpoint, rewards["delta"], agent, min(args.episodes, 3))


def spreads(p: PreparedTrace, paths: list[str], reward: Reward, greedy: CvdAgent, episodes: int) -> None:
    """The table of the module docstring's second part."""
    sim = NumaSim(PAPER_REGIME.cluster(50), p, replace(PAPER_REGIME.scenario(0.5), start_range=TRAIN_START_RANGE))
    print("\n| checkpoint | epochs | spread of r | spread of gamma V(after) - V(now) |\n|---|---|---|---|")
    for path in paths:
        net, meta = load(Path(path))
        agent = CvdAgent(net)
        sr, sv = [], []
        for i in range(episodes):
            status = sim.reset(seed=start_seed(VALIDATION_SEED, i))
            while status == K.DECIDE:
                acts = greedy.candidates(sim)
                r = np.array([reward(sim, int(a)) for a in acts])
                learned = agent.benefits(sim, acts) - agent.rewards(sim, acts)
                if len(acts) > 1:
                    sr.append(r.std())
                    sv.append(learned.std())
                status = sim.step(int(acts[int(np.argmax(r))]))
        print(f"| {path} | {meta['epochs']} | {np.mean(sr):.3f} | {np.mean(sv):.3f} |", flush=True)


if __name__ == "__main__":
    main()
