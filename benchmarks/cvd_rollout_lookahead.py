"""A clairvoyant rollout scheduler in CVD-RL's paper regime (issue 15): a length any scheduler that knows the future
can reach, so a *lower* end for the hindsight optimum L* beside the proven upper bounds (``aggregate_bound``,
``packing_bound``).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/cvd_rollout_lookahead.py --episodes 10

At every decision the candidates are the union of Best-Fit's and industrial's top ``--k`` actions; each is tried on
a copy of the simulator, which then finishes the episode with Best-Fit knowing the real future (the trace), and the
candidate whose rollout is longest is taken (ties: Best-Fit's choice first). Not an online policy (it reads the
future through the simulator); its length is achievable with hindsight, so L* is at least it. Held-out starts of
``benchmarks/eval_cvd_regime.py`` (VMAgent's rows, seed 0), paired against Best-Fit and industrial.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.policies import Heuristic, get_policy
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import finish, run_episodes
from dcplace.sim.hindsight import episode_bounds
from dcplace.sim.numa import NumaSim


class RolloutLookahead:
    """Clairvoyant one-step look-ahead over heuristic candidates, Best-Fit rollouts (module docstring)."""

    name = "rollout look-ahead (clairvoyant)"

    def __init__(self, k: int) -> None:
        self.k = k
        self.bf = Heuristic("best-fit")
        self.ind = Heuristic("industrial")

    def rollout(self, sim: NumaSim, action: int) -> int:
        s = sim.copy()
        s.step(action)
        finish(s, self.bf)
        return s.result().length

    def run(self, sim: NumaSim) -> int:
        status = sim.status
        while status == K.DECIDE:
            view = sim.view()
            cands: list[int] = []
            for h in (self.bf, self.ind):
                cands += [a for a, _ in h.rank(view, self.k) if a not in cands]
            if not cands:
                return int(sim.step(-1))
            best = max(cands, key=lambda a: (self.rollout(sim, a), -cands.index(a)))
            status = sim.step(best)
        return int(status)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=10)
    ap.add_argument("--k", type=int, default=3)
    args = ap.parse_args()
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    sc = PAPER_REGIME.scenario(0.5)
    cluster = PAPER_REGIME.cluster(sc.pms)
    t0 = time.perf_counter()
    x = {h: np.array([r.length for r in run_episodes(get_policy(h), cluster, p, sc, args.episodes, 0)[0]], float)
         for h in ("best-fit", "industrial")}  # fmt: skip
    x["rollout"] = np.array([r.length for r in run_episodes(RolloutLookahead(args.k), cluster, p, sc, args.episodes,
                                                                0)[0]], float)  # fmt: skip
    wall = time.perf_counter() - t0
    x["packing bound"] = np.array(episode_bounds(cluster, p, sc, args.episodes, 0, kind="packing"), float)
    print(f"# {args.episodes} held-out episodes, k = {args.k}, rollouts {wall:.0f} s")
    for label, v in x.items():
        cells = []
        for ref in ("best-fit", "industrial"):
            d = v / x[ref] - 1
            cells.append(f"{d.mean():+.2%} ± {d.std(ddof=1) / np.sqrt(len(d)):.2%}")
        print(f"| {label} | {v.mean():.1f} | {cells[0]} | {cells[1]} |")
    print("lengths:", {k: v.astype(int).tolist() for k, v in x.items()})


if __name__ == "__main__":
    main()
