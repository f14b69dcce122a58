"""Does knowing every VM's lifetime close the hindsight gap? Best-Fit with a lifetime-alignment term, in CVD-RL's paper
regime (issue 15).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/cvd_lifetime_oracle.py

The no-migration check (``cvd_no_migration.py``) finds clairvoyant plans up to +21.5 % above the better heuristic on
the held-out episodes. A plan knows two things an online scheduler does not: which VMs come next and when each VM
leaves. This script gives a greedy rule the second, exactly: the key of an action is Best-Fit's (the machine's free
CPU fraction after the placement) plus ``lam`` times a lifetime term read from the trace's true departure times:

* ``extend``: how far the VM would extend the machine's busy time (its departure past the latest departure of the
  VMs already there), as a share of the VM's own lifetime: co-locate VMs that leave together, so machines empty;
* ``gap``: the distance on a log scale between the VM's remaining lifetime and the machine's (``|log(1 + d_vm) -
  log(1 + d_machine)|``; an empty machine counts 3).

Never-deleted VMs get twice the trace's last departure. ``lam = 0`` is Best-Fit with ties broken by the lower
action (the compiled Best-Fit's rule, so it should equal it up to floating-point ties). Same 20 held-out episodes as
``eval_cvd_regime.py`` (VMAgent's rows, seed 0), paired against Best-Fit (mean ± standard error).
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.policies import get_policy
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import run_episodes, start_seed
from dcplace.sim.numa import NumaSim

EMPTY_GAP = 3.0


def episode(sim: NumaSim, seed: int, departure: np.ndarray, arrival: np.ndarray, lam: float, mode: str) -> int:
    """One episode of the lifetime-aware Best-Fit; returns its length."""
    sim.reset(seed=seed)
    while sim.status == K.DECIDE:
        v = sim.view()
        feas = np.flatnonzero(v.feasible())
        m = feas // v.numa
        key = (v.free[m, :, 0].sum(axis=1) - v.demand[0]) / v.capacity[m, :, 0].sum(axis=1)
        if lam > 0:
            live = np.flatnonzero(sim.pm_of >= 0)
            latest = np.full(v.machines, -np.inf)
            np.maximum.at(latest, sim.pm_of[live], departure[live])
            now, leaves = arrival[v.request], departure[v.request]
            busy = latest[m]
            if mode == "extend":
                own = max(leaves - now, 1.0)
                ext = np.where(np.isfinite(busy), np.maximum(leaves - np.maximum(busy, now), 0.0), leaves - now) / own
                key = key + lam * np.minimum(ext, 1.0)
            else:
                gap = np.abs(np.log1p(max(leaves - now, 0.0)) - np.log1p(np.maximum(busy - now, 0.0)))
                key = key + lam * np.where(np.isfinite(busy), gap, EMPTY_GAP)
        sim.step(int(feas[np.lexsort((feas, key))[0]]))
    return int(sim.result().length)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--lams", type=float, nargs="+", default=[0.05, 0.2, 1.0])
    args = ap.parse_args()
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    sc = PAPER_REGIME.scenario(args.warm)
    cluster = PAPER_REGIME.cluster(sc.pms)
    departure = np.asarray(p.table.departure, float).copy()
    finite = np.isfinite(departure)
    departure[~finite] = 2 * departure[finite].max()
    arrival = np.asarray(p.table.arrival, float)
    res, _, _ = run_episodes(get_policy("best-fit"), cluster, p, sc, args.episodes, 0)
    bf = np.array([r.length for r in res], float)
    sim = NumaSim(cluster, p, sc)
    print(f"# {PAPER_REGIME.label}, {sc.pms} PMs, warm {args.warm:.0%}, {args.episodes} held-out episodes")
    print("| rule | lam | mean length | vs Best-Fit (paired, ± s.e.) |\n|---|---|---|---|")
    for mode, lam in [("best-fit key", 0.0)] + [(m, x) for m in ("extend", "gap") for x in args.lams]:
        t0 = time.perf_counter()
        lengths = np.array(
            [episode(sim, start_seed(0, i), departure, arrival, lam, mode) for i in range(args.episodes)], float
        )
        d = lengths / bf - 1
        se = d.std(ddof=1) / np.sqrt(len(d))
        wall = time.perf_counter() - t0
        print(f"| {mode} | {lam:g} | {lengths.mean():.1f} | {d.mean():+.2%} ± {se:.2%} | ({wall:.0f} s)")


if __name__ == "__main__":
    main()
