"""Held-out evaluation of learned NUMA schedulers in the paper's regime (issue 15, items 3-4): 50 PMs / 50 % warm
start (``PAPER_REGIME``), VMAgent's start rows [1000, 10000) (never used for training or validation), the same
episodes for every policy, beside the heuristics, the one-step greedy on the delta reward over CVD-RL's candidates
(what a zero-initialised ``cvd-rl-machine``, ``hindsight`` or ``padrl`` network starts as) and the hindsight bound.

    OMP_NUM_THREADS=1 python benchmarks/eval_cvd_regime.py --episodes 20 \\
        --learned cvd-rl-machine=DIR/policy.pt hindsight=DIR2/policy.pt padrl=DIR3/policy.pt

Prints one row per policy: mean length, its paired difference to Best-Fit and to industrial (mean and standard
error over the episodes), and writes ``--json`` when given.

``--seeds-dir DIR`` (the output of ``scripts/train_cvd_regime_seeds.sh``) adds every ``DIR/seed<S>/<method>/policy.pt``
and the shipped ``*-50pm-paper.pt`` files (training seed 0), and prints a second table: per method, the mean over
training seeds of its mean paired difference to the better heuristic, ± the standard deviation over training seeds
(the spread of training runs, which the reproduction's tables, one checkpoint per method, do not show).
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

SEED_METHODS = ("cvd-rl", "cvd-rl-machine", "schedrl", "padrl", "hindsight")


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
    ap.add_argument("--seeds-dir", type=Path, help="training runs per seed (scripts/train_cvd_regime_seeds.sh)")
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
    by_seed: dict[str, dict[int, str]] = {}  # method -> training seed -> label
    if args.seeds_dir is not None:
        shipped = Path(__file__).resolve().parents[1] / "src" / "dcplace" / "data" / "cvd"
        for method in SEED_METHODS:
            runs = {0: shipped / f"{method}-50pm-paper.pt"}
            for d in sorted(args.seeds_dir.glob("seed*")):
                if (d / method / "policy.pt").is_file():
                    runs[int(d.name[4:])] = d / method / "policy.pt"
            for seed, path in sorted(runs.items()):
                label = f"{method} (training seed {seed})"
                policies[label] = get_policy(method, checkpoint=str(path))
                by_seed.setdefault(method, {})[seed] = label
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
    if by_seed:
        best = max(("best-fit", "industrial"), key=lambda h: float(lengths[h].mean()))
        print(f"\n| method | training seeds | over {best} (the better heuristic): per seed | mean ± s.d. over seeds |")
        print("|---|---|---|---|")
        for method, seeds in by_seed.items():
            gains = [float((lengths[label] / lengths[best] - 1).mean()) for label in seeds.values()]
            per = ", ".join(f"{s}: {g:+.2%}" for s, g in zip(seeds, gains, strict=True))
            sd = float(np.std(gains, ddof=1)) if len(gains) > 1 else float("nan")
            print(f"| {method} | {len(gains)} | {per} | {np.mean(gains):+.2%} ± {sd:.2%} |")
            out[f"seeds:{method}"] = {"seeds": list(seeds), "gains": gains}
    if args.json:
        args.json.write_text(json.dumps(out, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
