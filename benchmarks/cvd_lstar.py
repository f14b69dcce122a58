"""L* per held-out episode, re-proven from stored evidence (issue 15): what a scheduler knowing the future reaches.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/cvd_lstar.py

The 20 held-out episodes of ``eval_cvd_regime.py`` (``PAPER_REGIME``, 50 PMs, warm start 0.5, VMAgent's rows, seed
0). ``H`` is the longer of Best-Fit's and industrial's lengths; ``L*`` the most requests any scheduler, knowing the
whole future but never moving a VM, places before the first failure. The evidence is in
``benchmarks/data/cvd_lstar.npz`` (a few tens of KB), and this script proves both ends again from it:

* **lower end**: the longest no-migration plan found for the episode (``plan<i>``, by ``cvd_no_migration.py``'s
  checks and ladders), stepped through the simulator itself (:func:`~dcplace.sim.hindsight.simulator_replay`) and
  re-added in numpy (:func:`~dcplace.sim.hindsight.replay_plan`); ``H`` where no plan is longer or a plan fails;
* **upper end**: the packing bound (recomputed, seconds) or a request ``J`` whose live VMs cannot be packed into the
  nodes even with migration, proven again by CP-SAT (:func:`~dcplace.sim.hindsight.instant_packable` answers
  ``False``; ``--time-limit`` each; an instant left undecided under this run's load falls back to the packing bound
  and is reported as such).

``--add-plans DIR`` merges plans saved by ``cvd_no_migration.py --save-plans DIR`` (kept where longer and both
replays accept them) and ``--add-upper EP=J`` records ``J`` once CP-SAT proves it; both rewrite the file only after
every check passed. Prints the per-episode table and L* over the better heuristic two ways: the mean over episodes of
``L*/H - 1`` (± standard error), and the ratio of summed lengths over the best heuristic *column* (the measure of
``reproduce cvd-rl``'s Tables 2-4: mean length over mean length); then each of ``--methods`` (the regime's five
shipped learned schedulers by default) with its share of L*'s gain, and how many of the episodes' first
observations differ (all of them: then a policy that recognises the episode and plays its plan is online, so on
these episodes no bound below L* holds for every online policy; docs/cvd-rl.md).
"""

from __future__ import annotations

import argparse
import math
import re
import time
from pathlib import Path

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.learn.numa_policies import REGIME_SHIPPED, shipped_path
from dcplace.policies import get_policy
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import run_episodes, start_seed
from dcplace.sim.hindsight import (
    HindsightInstance,
    instance_from_sim,
    instant_packable,
    packing_bound,
    replay_plan,
    simulator_replay,
)
from dcplace.sim.numa import NumaSim

EVIDENCE = Path(__file__).parent / "data" / "cvd_lstar.npz"


def load(path: Path, episodes: int) -> tuple[dict[int, np.ndarray], dict[int, int]]:
    """Plans and recorded upper instants per episode (none when the file does not exist yet)."""
    if not path.exists():
        return {}, {}
    z = np.load(path)
    plans = {i: z[f"plan{i}"].astype(np.int64) for i in range(episodes) if f"plan{i}" in z}
    upper = {int(i): int(j) for i, j in z["upper"] if j >= 0} if "upper" in z else {}
    return plans, upper


def save(path: Path, plans: dict[int, np.ndarray], upper: dict[int, int]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    arrays = {f"plan{i}": p.astype(np.int16) for i, p in sorted(plans.items())}
    arrays["upper"] = np.array(sorted(upper.items()), np.int64).reshape(-1, 2)
    tmp = path.with_name(path.name + ".tmp.npz")
    np.savez_compressed(tmp, **arrays)
    tmp.replace(path)


def accepted(sim: NumaSim, inst: HindsightInstance, plan: np.ndarray) -> str:
    """``ok`` when the simulator and the numpy replay both accept ``plan`` from ``sim``'s first decision."""
    said = simulator_replay(sim, plan)
    return said if said != "ok" or replay_plan(inst, plan) == -1 else "replay_plan refuses it"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--evidence", type=Path, default=EVIDENCE, help="the .npz of plans and upper instants")
    ap.add_argument("--time-limit", type=float, default=30.0, help="seconds per CP-SAT proof of an upper instant")
    ap.add_argument("--add-plans", type=Path, help="a --save-plans folder of cvd_no_migration.py to merge")
    ap.add_argument("--add-upper", nargs="*", default=[], metavar="EP=J", help="upper instants to prove and record")
    ap.add_argument("--methods", nargs="*", default=list(REGIME_SHIPPED), metavar="POLICY",
                    help="policies whose share of L*'s gain to report (the regime's shipped checkpoints for the "
                         "learned ones; default: all five; none: skip)")  # fmt: skip
    args = ap.parse_args()
    try:
        add_upper = {int(e): int(j) for e, j in (x.split("=") for x in args.add_upper)}
    except ValueError:
        ap.error(f"--add-upper takes EP=J pairs of integers, got {' '.join(args.add_upper)}")
    if args.add_plans is not None and not args.add_plans.is_dir():
        ap.error(f"--add-plans: {args.add_plans} is not a folder")
    plans, upper = load(args.evidence, args.episodes)
    candidates: dict[int, list[np.ndarray]] = {}
    if args.add_plans is not None:
        for f in sorted(args.add_plans.glob("episode*_k*.npy")):
            m = re.fullmatch(r"episode(\d+)_k(\d+)\.npy", f.name)
            if m:
                candidates.setdefault(int(m.group(1)), []).append(np.load(f).astype(np.int64))

    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    sc = PAPER_REGIME.scenario(0.5)
    cluster = PAPER_REGIME.cluster(sc.pms)
    length = {h: [r.length for r in run_episodes(get_policy(h), cluster, p, sc, args.episodes, 0)[0]]
              for h in ("best-fit", "industrial")}  # fmt: skip
    sim = NumaSim(cluster, p, sc)
    limit = sc.max_requests or len(p.table)
    rows = []
    first_states: set[bytes] = set()  # what a scheduler sees at the first scored decision, per episode
    changed = False
    t_all = time.perf_counter()
    for i in range(args.episodes):
        if sim.reset(seed=start_seed(0, i)) != K.DECIDE:
            continue
        inst = instance_from_sim(sim, limit)
        v = sim.view()
        first_states.add(v.free.tobytes() + v.demand.tobytes())
        h = max(length["best-fit"][i], length["industrial"][i])

        lower, how = h, "H"
        if i in plans:
            said = accepted(sim, inst, plans[i])
            if said == "ok" and len(plans[i]) > h:
                lower, how = len(plans[i]), "plan"
            elif said != "ok":
                print(f"  episode {i}: the stored plan of {len(plans[i])} is refused ({said})", flush=True)
        for c in sorted(candidates.get(i, []), key=len, reverse=True):
            if len(c) > lower and accepted(sim, inst, c) == "ok":
                plans[i], lower, how, changed = c, len(c), "plan (added)", True
                break
        t0 = time.perf_counter()
        pack = packing_bound(inst)
        up, up_how = pack, "packing bound"
        for j, rec in ((add_upper.get(i), True), (upper.get(i), False)):
            if j is None or j >= up:
                continue
            if instant_packable(inst, j, args.time_limit) is False:
                up, up_how = j, "repack (CP-SAT)"
                if rec:
                    upper[i], changed = j, True
            elif rec:
                print(f"  episode {i}: instant {j} not proven unpackable in {args.time_limit:g} s; not recorded")
            else:
                up_how = f"packing bound (instant {j} undecided in {args.time_limit:g} s this run)"
        rows.append((i, h, lower, how, up, up_how, time.perf_counter() - t0))
        print(f"  episode {i}: H {h}, L* in [{lower}, {up}] ({how}; {up_how})", flush=True)
    if changed:
        save(args.evidence, plans, upper)
        print(f"# evidence updated: {args.evidence}")

    print("\n| episode | H | L* lower end (over H) | by | L* upper end (over H) | by | +5 % = ceil(1.05 H) |")
    print("|---|---|---|---|---|---|---|")
    reach = {"reached": [], "impossible": [], "open": []}
    for i, h, lo, how, up, up_how, _ in rows:
        k = math.ceil(1.05 * h)
        state = "reached" if lo >= k else "impossible" if up < k else "open"
        reach[state].append(i)
        print(f"| {i} | {h} | {lo} ({lo / h - 1:+.1%}) | {how} | {up} ({up / h - 1:+.1%}) | {up_how} | {k}: {state} |")
    n = len(rows)
    h_arr = np.array([r[1] for r in rows], float)
    lo_arr = np.array([r[2] for r in rows], float)
    up_arr = np.array([r[4] for r in rows], float)
    col = max(sum(length["best-fit"][: args.episodes]), sum(length["industrial"][: args.episodes]))
    for name, x in (("lower", lo_arr), ("upper", up_arr)):
        g = x / h_arr - 1
        print(f"L* {name} end: per episode {g.mean():+.2%} ± {g.std(ddof=1) / math.sqrt(n):.2%} over the better "
              f"heuristic (median {np.median(g):+.1%}); summed {x.sum() / col - 1:+.2%} over the best heuristic "
              f"column ({col / n:.1f} per episode)")  # fmt: skip
    print(f"+5 % reached in hindsight: {len(reach['reached'])} {reach['reached']}; impossible: "
          f"{len(reach['impossible'])} {reach['impossible']}; open: {len(reach['open'])} {reach['open']}")  # fmt: skip
    if args.methods:
        print("\n| method | mean length | over H per episode (± s.e.) | share of L*'s gain per episode: lower / upper "
              "end | summed: lower / upper end |\n|---|---|---|---|---|")  # fmt: skip
        for name in args.methods:
            ckpt = str(shipped_path(name, "paper")) if name in REGIME_SHIPPED else None
            res, _, _ = run_episodes(get_policy(name, checkpoint=ckpt), cluster, p, sc, args.episodes, 0)
            x = np.array([r.length for r in res], float)[: len(h_arr)]
            g = x / h_arr - 1
            per = [g.mean() / (e / h_arr - 1).mean() for e in (lo_arr, up_arr)]
            summed = [(x - h_arr).sum() / (e - h_arr).sum() for e in (lo_arr, up_arr)]
            print(f"| {name} | {x.mean():.1f} | {g.mean():+.2%} ± {g.std(ddof=1) / math.sqrt(n):.2%} | "
                  f"{per[0]:.1%} / {per[1]:.1%} | {summed[0]:.1%} / {summed[1]:.1%} |", flush=True)  # fmt: skip
    print(f"first observations (free capacity and the waiting request at the first scored decision): "
          f"{len(first_states)} distinct of {n} episodes")  # fmt: skip
    print(f"# {time.perf_counter() - t_all:.0f} s")


if __name__ == "__main__":
    main()
