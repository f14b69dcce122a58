"""Can an online rule keep room for the large VM that ends an episode? Best-Fit with a reservation (issue 15).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/cvd_reservation.py

The no-migration plans that pass the heuristics' failures (``cvd_no_migration.py``, ``cvd_plan_study.py``) differ
from Best-Fit at its failure in one thing: a machine (or two) still has room for the large type that arrives
(32U64G double-NUMA on episode 3; 16U32G nodes on episode 19). An online rule can keep such room without seeing the
future: Best-Fit, except that an action which would leave fewer than ``r`` usable machines able to host the
reserved type ``T`` is taken only when every feasible action does so. Key = (takes the reserve, Best-Fit's key, the
action), lexicographic; ``r = 0`` is Best-Fit.

The grid (types x r) is scored on training-split episodes (rows ``--rows``, the learners' training rows, never the
held-out ones), the best cell by mean paired gain over Best-Fit chosen there, and only that cell, beside Best-Fit
and industrial, played on the 20 held-out episodes of ``eval_cvd_regime.py`` (VMAgent's rows, seed 0). Paired
gains: mean over episodes of ``L / L_ref - 1`` ± standard error, and the ratio of summed lengths (the tables'
measure).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import replace

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.policies import get_policy
from dcplace.policies.numa_heuristics import best_fit_key
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import run_episodes, start_seed
from dcplace.sim.numa import NumaSim, NumaView

#: reserved types: (name, CPU cores, memory GB, multi-NUMA); the largest types of the regime's trace.
TYPES = {
    "32U64G-double": (32.0, 64.0, True),
    "64U128G-double": (64.0, 128.0, True),
    "16U32G": (16.0, 32.0, False),
    "8U16G": (8.0, 16.0, False),
}


def hosts(free: np.ndarray, cpu: float, mem: float, multi: bool) -> np.ndarray:
    """``(machines,)`` whether each machine (free ``(machines, numa, 2)``) can host the type now."""
    numa = free.shape[1]
    if multi:
        need = np.array([cpu / numa, mem / numa])
        return np.all(free >= need - K.FIT_TOL, axis=(1, 2))
    return np.any(np.all(free >= np.array([cpu, mem]) - K.FIT_TOL, axis=2), axis=1)


def choose(v: NumaView, reserve: list[tuple[float, float, bool, int]]) -> int:
    """Best-Fit's choice among the actions that keep every reserve, or among all when none does."""
    feas = np.flatnonzero(v.feasible())
    if not len(feas):
        return -1
    m = feas // v.numa
    # the library's Best-Fit key (machine CPU left, node CPU left, machine memory left), ties to the lowest action
    key = np.array([best_fit_key(v.free, v.capacity, v.demand, v.multi, int(a // v.numa), int(a % v.numa))
                    for a in feas])  # fmt: skip
    takes = np.zeros(len(feas), bool)
    after = v.free[m].copy()  # (len(feas), numa, 2): each action's machine after the placement
    if v.multi:
        after -= v.demand / v.numa
    else:
        after[np.arange(len(feas)), feas % v.numa] -= v.demand
    for cpu, mem, multi, r in reserve:
        can = hosts(v.free, cpu, mem, multi) & v.usable
        if int(can.sum()) > r:  # one machine may still lose it
            continue
        takes |= can[m] & ~hosts(after, cpu, mem, multi)
    return int(feas[np.lexsort((feas, key[:, 2], key[:, 1], key[:, 0], takes))[0]])


def episode(sim: NumaSim, seed: int, reserve: list[tuple[float, float, bool, int]]) -> int:
    sim.reset(seed=seed)
    while sim.status == K.DECIDE:
        sim.step(choose(sim.view(), reserve))
    return int(sim.result().length)


def paired(x: np.ndarray, ref: np.ndarray) -> str:
    g = x / ref - 1
    return f"{g.mean():+.2%} ± {g.std(ddof=1) / np.sqrt(len(g)):.2%} (summed {x.sum() / ref.sum() - 1:+.2%})"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20, help="held-out episodes (eval_cvd_regime.py's)")
    ap.add_argument("--train-episodes", type=int, default=30, help="training-split episodes for the grid")
    ap.add_argument("--rows", type=int, nargs=2, default=(10000, 15000), help="training rows (the learners')")
    ap.add_argument("--train-seed", type=int, default=11, help="seed of the training-split starts")
    ap.add_argument("--r", type=int, nargs="*", default=[1, 2, 3], help="machines kept for each type")
    args = ap.parse_args()
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    sc = PAPER_REGIME.scenario(0.5)
    cluster = PAPER_REGIME.cluster(sc.pms)
    grid: list[tuple[str, list[tuple[float, float, bool, int]]]] = [("best-fit (r = 0)", [])]
    for name, (cpu, mem, multi) in TYPES.items():
        grid += [(f"{name} r={r}", [(cpu, mem, multi, r)]) for r in args.r]
    grid += [(f"32U64G-double + 16U32G r={r}", [(32.0, 64.0, True, r), (16.0, 32.0, False, r)]) for r in args.r]

    def lengths(scn, seed: int, n: int, reserve) -> np.ndarray:
        sim = NumaSim(cluster, p, scn)
        return np.array([episode(sim, start_seed(seed, i), reserve) for i in range(n)], float)

    train_sc = replace(sc, start_range=tuple(args.rows))
    t0 = time.perf_counter()
    ref = lengths(train_sc, args.train_seed, args.train_episodes, [])
    print(f"# training split: rows {args.rows}, seed {args.train_seed}, {args.train_episodes} episodes; "
          f"Best-Fit mean {ref.mean():.1f}", flush=True)  # fmt: skip
    scores = []
    for name, reserve in grid[1:]:
        x = lengths(train_sc, args.train_seed, args.train_episodes, reserve)
        scores.append((float((x / ref - 1).mean()), name, reserve))
        print(f"  {name}: {paired(x, ref)} over Best-Fit", flush=True)
    best = max(scores, key=lambda s: s[0])
    print(f"# chosen on the training split: {best[1]} ({best[0]:+.2%}); {time.perf_counter() - t0:.0f} s")
    held = {h: np.array([r.length for r in run_episodes(get_policy(h), cluster, p, sc, args.episodes, 0)[0]], float)
            for h in ("best-fit", "industrial")}  # fmt: skip
    x = lengths(sc, 0, args.episodes, best[2])
    bf = lengths(sc, 0, args.episodes, [])
    print(f"# held out ({args.episodes} episodes of eval_cvd_regime.py): Best-Fit {held['best-fit'].mean():.1f} "
          f"(this script's own Best-Fit {bf.mean():.1f}), industrial {held['industrial'].mean():.1f}, "
          f"{best[1]} {x.mean():.1f}")  # fmt: skip
    print(f"  over Best-Fit: {paired(x, held['best-fit'])}; over industrial: {paired(x, held['industrial'])}")
    better = np.maximum(held["best-fit"], held["industrial"])
    print(f"  over the better heuristic per episode: {paired(x, better)}")
    print(
        "  per episode (H, rule): "
        + ", ".join(f"{i}: {int(h)} {int(v)}" for i, (h, v) in enumerate(zip(better, x, strict=True)))
    )


if __name__ == "__main__":
    main()
