"""What does a clairvoyant no-migration plan do differently from Best-Fit? A teacher study (issue 15).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/cvd_no_migration.py --only 3 --ladder 3 \
        --ladder-step 0.02 --time-limit 30 --save-plans plans/
    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/cvd_plan_study.py --episode 3 --plan plans/episode3_k830.npy

The plan (a feasible action per scored request, found by :func:`dcplace.sim.hindsight.no_migration_check`) is
stepped through the simulator of the same held-out episode (paper regime, 50 PMs, 50 % warm, ``start_seed(0, i)``).
It compares the plan's machines with Best-Fit's own episode (what ``--closest`` plans stay near), and at every
decision the plan's action with Best-Fit's on the *plan's* state (identical machines make exact agreement rare once
the states part; the rank by Best-Fit's key says more): agreement, the plan's action's rank among the feasible ones
by Best-Fit's key, whether it opens an empty machine, by request type. Then it
follows both trajectories (the plan's, and Best-Fit's own episode) and reports how many machines could still host
each of the trace's large types, and the free memory, at Best-Fit's failure and at the plan's end: where a rule that
an online scheduler could follow might come from.
"""

from __future__ import annotations

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.policies import get_policy
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import start_seed
from dcplace.sim.numa import NumaSim, NumaView


def bf_key(v: NumaView, feas: np.ndarray) -> np.ndarray:
    """Best-Fit's key of each feasible action: the machine's free CPU after the placement (lower first)."""
    m = feas // v.numa
    return np.asarray(v.free[m, :, 0].sum(axis=1) - v.demand[0], float)


def hosts(sim: NumaSim, d: np.ndarray, multi: bool) -> int:
    """Machines that could host a VM of demand ``d`` now."""
    return int(sum(K.fits(sim.free, d, multi, m, k) for m in range(sim.free.shape[0]) for k in range(sim.free.shape[1])
                   if not multi or k == 0))  # fmt: skip


def snapshot(sim: NumaSim, types: list[tuple[float, float, bool]]) -> str:
    mem_free = sim.free[:, :, 1].sum() / sim.cap[:, :, 1].sum()
    cpu_free = sim.free[:, :, 0].sum() / sim.cap[:, :, 0].sum()
    empty = int((sim.vm_count == 0).sum())
    room = ", ".join(f"{c:g}U{m:g}G{'x2' if mu else ''}: {hosts(sim, np.array([c, m]), mu)}" for c, m, mu in types)
    return f"free CPU {cpu_free:.1%}, memory {mem_free:.1%}, empty machines {empty}; nodes/machines that fit {room}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episode", type=int, required=True)
    ap.add_argument("--plan", type=Path, required=True, help="a .npy of actions (cvd_no_migration.py --save-plans)")
    ap.add_argument("--warm", type=float, default=0.5)
    args = ap.parse_args()
    plan = np.load(args.plan)
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    sc = PAPER_REGIME.scenario(args.warm)
    cluster = PAPER_REGIME.cluster(sc.pms)
    bf = get_policy("best-fit")
    seed = start_seed(0, args.episode)

    own = NumaSim(cluster, p, sc)  # Best-Fit's own episode
    own.reset(seed=seed)
    own_actions = []
    while own.status == K.DECIDE:
        own_actions.append(int(bf.choose(own.view())))
        own.step(own_actions[-1])
    bf_len = own.result().length
    fail = int(own.ctr[K.C_PENDING]) if own.status == K.TERMINATED else -1

    demand = np.asarray(p.demand)
    multi_of = np.asarray(p.multi, bool)
    big = Counter((float(c), float(m), bool(mu)) for (c, m), mu in zip(demand, multi_of, strict=True) if c >= 8)
    types = [t for t, _ in big.most_common(4)]

    sim = NumaSim(cluster, p, sc)
    sim.reset(seed=seed)
    agree: Counter[str] = Counter()
    total: Counter[str] = Counter()
    ranks, opens_plan, opens_bf, first_diff = [], 0, 0, -1
    at_bf_fail = ""
    for j, a in enumerate(plan):
        if sim.status != K.DECIDE:
            break
        v = sim.view()
        if j == bf_len:
            at_bf_fail = snapshot(sim, types)
        feas = np.flatnonzero(v.feasible())
        key = bf_key(v, feas)
        order = feas[np.lexsort((feas, key))]
        b = int(order[0])
        kind = f"{v.demand[0]:g}U{v.demand[1]:g}G{' x2' if v.multi else ''}"
        total[kind] += 1
        same = (int(a) // v.numa == b // v.numa) and (v.multi or int(a) % v.numa == b % v.numa)
        agree[kind] += int(same)
        if not same and first_diff < 0:
            first_diff = j
        ranks.append(int(np.flatnonzero(order == int(a))[0]) if int(a) in order else -1)
        opens_plan += int(v.vm_count[int(a) // v.numa] == 0)
        opens_bf += int(v.vm_count[b // v.numa] == 0)
        sim.step(int(a))
    n = sum(total.values())
    same_m = np.asarray(plan[: len(own_actions)]) // sim.free.shape[1] == np.asarray(own_actions) // sim.free.shape[1]
    print(f"# episode {args.episode}: Best-Fit places {bf_len} (fails on request {fail}), the plan {len(plan)}")
    print(
        f"the plan's machine = Best-Fit's in its own episode (the hint of --closest): {same_m.mean():.1%} of its "
        f"{len(own_actions)} decisions, first departure at {int(np.argmin(same_m)) if not same_m.all() else -1}"
    )
    print(f"decisions where the plan takes Best-Fit's machine (and node): {sum(agree.values())} of {n} "
          f"({sum(agree.values()) / n:.1%}); first difference at decision {first_diff}")  # fmt: skip
    r = np.array(ranks)
    shares = [np.mean(r == 0), np.mean((r >= 1) & (r <= 4)), np.mean((r >= 5) & (r < 20)), np.mean(r >= 20)]
    print("the plan's action by Best-Fit's key: rank 0 {:.1%}, 1-4 {:.1%}, 5-19 {:.1%}, 20+ {:.1%}".format(*shares)
          + f" (median rank {np.median(r):g})")  # fmt: skip
    print(f"opens an empty machine: the plan {opens_plan} times, Best-Fit's choice on the same states {opens_bf}")
    print("\n| request type | decisions | plan = Best-Fit |\n|---|---|---|")
    for kind, cnt in total.most_common(12):
        print(f"| {kind} | {cnt} | {agree[kind] / cnt:.0%} |")
    print(f"\nat decision {bf_len} (where Best-Fit failed), the plan's state: {at_bf_fail}")
    own_state = snapshot(own, types)
    print(f"Best-Fit's state at its failure: {own_state}")


if __name__ == "__main__":
    main()
