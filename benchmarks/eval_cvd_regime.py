"""Held-out evaluation of learned NUMA schedulers in the paper's regime (issue 15, items 3-4): 50 PMs / 50 % warm
start (``PAPER_REGIME``), VMAgent's start rows [1000, 10000) (never used for training or validation), the same
episodes for every policy, beside the heuristics, the one-step greedy on the delta reward over CVD-RL's candidates
(what a zero-initialised ``cvd-rl-machine``, ``hindsight`` or ``padrl`` network starts as) and the hindsight bound.

    OMP_NUM_THREADS=1 python benchmarks/eval_cvd_regime.py --episodes 20 \\
        --learned cvd-rl-machine=DIR/policy.pt hindsight=DIR2/policy.pt padrl=DIR3/policy.pt

Prints one row per policy: mean length, its paired difference to Best-Fit and to industrial (mean and standard
error over the episodes), and writes ``--json`` when given.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.learn.cvd_model import CvdAgent, CvdConfig, CvdNet
from dcplace.learn.dqn import probe_types
from dcplace.policies import get_policy
from dcplace.policies.base import NumaPolicy
from dcplace.sim.episodes import run_episodes
from dcplace.sim.hindsight import episode_bounds
from dcplace.sim.numa import NumaView


class GreedyDelta(NumaPolicy):
    """The candidate with the largest delta reward (CVD-RL's filter; a per-machine network with V = 0)."""

    name = "greedy delta"

    def __init__(self, probes: tuple[tuple[float, float, bool, float], ...]) -> None:
        net = CvdNet(CvdConfig(probes=probes, machine_td=True))
        with torch.no_grad():
            for p in net.net[-1].parameters():
                p.zero_()
        self.agent = CvdAgent(net)

    def choose(self, view: NumaView) -> int:
        return self.agent.act(view)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--learned", nargs="*", default=[], help="policy=checkpoint pairs")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--packing-bound", action="store_true", help="also the tighter packing bound (seconds/episode)")
    ap.add_argument("--repack-bound", action="store_true", help="also the CP-SAT repack bound (up to minutes/episode)")
    args = ap.parse_args()
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    sc = PAPER_REGIME.scenario(args.warm)
    cluster = PAPER_REGIME.cluster(sc.pms)
    types, multi, weight = probe_types(p)
    probes = tuple((float(c), float(m), bool(mu), float(w)) for (c, m), mu, w in zip(types, multi, weight, strict=True))
    policies: dict[str, NumaPolicy] = {h: get_policy(h) for h in ("first-fit", "best-fit", "industrial")}
    policies["greedy delta"] = GreedyDelta(probes)
    for pair in args.learned:
        name, _, path = pair.partition("=")
        policies[f"{name} ({path})"] = get_policy(name, checkpoint=path)
    lengths = {"hindsight bound": np.array(episode_bounds(cluster, p, sc, args.episodes, 0), float)}
    if args.packing_bound:
        lengths["packing bound"] = np.array(episode_bounds(cluster, p, sc, args.episodes, 0, kind="packing"), float)
    if args.repack_bound:
        lengths["repack bound"] = np.array(episode_bounds(cluster, p, sc, args.episodes, 0, kind="repack"), float)
    for label, pol in policies.items():
        res, _, _ = run_episodes(pol, cluster, p, sc, args.episodes, 0)
        lengths[label] = np.array([r.length for r in res], float)
    print(f"# {PAPER_REGIME.label}, {sc.pms} PMs, warm {args.warm:.0%}, {args.episodes} held-out episodes")
    print("| policy | length | vs best-fit (paired, ± s.e.) | vs industrial (paired, ± s.e.) |\n|---|---|---|---|")
    out = {}
    for label, x in lengths.items():
        row = {"mean": float(x.mean())}
        cells = []
        for ref in ("best-fit", "industrial"):
            d = x / lengths[ref] - 1
            row[f"vs_{ref}"] = float(d.mean())
            row[f"vs_{ref}_se"] = float(d.std(ddof=1) / np.sqrt(len(d)))
            cells.append(f"{d.mean():+.2%} ± {row[f'vs_{ref}_se']:.2%}")
        out[label] = {**row, "lengths": x.tolist()}
        print(f"| {label} | {x.mean():.1f} | {cells[0]} | {cells[1]} |")
    if args.json:
        args.json.write_text(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
