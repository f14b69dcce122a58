"""Is +5 % over the best heuristic reachable in hindsight? The no-migration check per held-out episode (issue 15).

The 20 held-out episodes of ``eval_cvd_regime.py`` (``PAPER_REGIME``, 50 PMs, warm start 0.5, starts
``start_seed(0, i)``): ``H`` = the longer of Best-Fit's and industrial's lengths, and
:func:`dcplace.sim.hindsight.no_migration_check` at ``k = ceil(1.05 H)`` (``--margin``) with the better heuristic's
choices as the hint: ``infeasible`` (``L* < k``: no policy, online or not, reaches +5 % there; by the packing bound or
CP-SAT), ``feasible`` (a clairvoyant plan without migration places ``k``: re-checked by the check's replay and here
again by stepping the simulator through it) or ``unknown``.

    OMP_NUM_THREADS=1 python benchmarks/cvd_no_migration.py --time-limit 60 --ladder 2 6 --json out.json

``--ladder EP ...``: on those episodes, also climb from ``H`` in steps of 1 % of ``H``, each rung's plan the next
rung's hint, up to the first rung left undecided (the largest ``k`` proven feasible: a lower end for ``L*``).
``--only EP ...`` runs those episodes only; ``--repack`` adds :func:`~dcplace.sim.hindsight.repack_bound` (up to
half a minute per episode with its defaults; ``--repack-time-limit``, ``--repack-solves``, ``--repack-search
bisect``, and ``--repack-start EP=J`` to search above a length a plan already reached); ``--window W`` then
tries :func:`~dcplace.sim.hindsight.window_bound` between the lower and upper ends (the last ``W`` arrivals before
``k`` packed together, no VM moving between them); ``--save-plans DIR`` keeps each ladder's best plan and
``--from-plan EP=FILE`` starts episode ``EP``'s ladder from such a plan (replayed through the simulator first), so a
later run climbs on where an earlier one stopped. Prints a table per episode and a summary.
"""

from __future__ import annotations

import argparse
import json
import math
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.bench.cvd_regime import PAPER_REGIME
from dcplace.policies import get_policy
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import run_episodes, start_seed
from dcplace.sim.hindsight import (
    HindsightInstance,
    NoMigrationResult,
    instance_at,
    instance_from_sim,
    no_migration_check,
    packing_bound,
    repack_bound,
    simulator_replay,
    window_bound,
)
from dcplace.sim.numa import NumaSim


def heuristic_actions(sim: NumaSim, policy: str) -> list[int]:
    """The choices of ``policy`` over the rest of ``sim``'s episode (on a copy)."""
    s = sim.copy()
    pol = get_policy(policy)
    acts = []
    while s.status == K.DECIDE:
        a = pol.choose(s.view())
        acts.append(int(a))
        s.step(a)
    return acts


def repair(sim: NumaSim, hint: list[int], h: int, window: int, extra: int, time_limit: float,
           seed: int) -> tuple[np.ndarray, str]:  # fmt: skip
    """A window ending where the plan ``hint`` (``h`` requests placed) fails: its first ``h - window`` choices fixed
    (stepped on a copy of ``sim``), then :func:`~dcplace.learn.hindsight_learning.plan_window` over the next
    ``window + extra`` arrivals, preferring the plan's own choices. Returns the whole plan (the fixed prefix and the
    window's placed prefix) and what CP-SAT said."""
    from dcplace.learn.hindsight_learning import plan_window  # ortools, only when asked

    s = sim.copy()
    start = max(0, h - window)
    for a in hint[:start]:
        if s.step(int(a)) != K.DECIDE:
            return np.asarray(hint[:start], np.int64), "the heuristic ended inside the fixed prefix"
    inst = instance_at(s, window + extra)
    prefer = np.full(inst.requests, -1, np.int64)
    rest = np.asarray(hint[start : start + inst.requests], np.int64)
    prefer[: len(rest)] = rest
    wp = plan_window(inst, prefer, time_limit, seed)
    plan = np.concatenate([np.asarray(hint[:start], np.int64), wp.actions[: wp.value]])
    return plan, f"window {start}..{start + inst.requests}: {wp.value} placed (bound {wp.bound}), {wp.wall_s:.1f} s"


def save_plan(folder: Path | None, episode: int, plan: Any) -> None:
    """``--save-plans``: the plan as ``episode<i>_k<length>.npy`` (actions; what ``--from-plan`` and
    ``cvd_lstar.py --add-plans`` read)."""
    if folder is not None:
        folder.mkdir(parents=True, exist_ok=True)
        acts = np.asarray(plan, np.int64)
        np.save(folder / f"episode{episode}_k{len(acts)}.npy", acts)


def ladder(
    inst: HindsightInstance,
    h: int,
    top: int,
    hint: np.ndarray,
    step: int,
    time_limit: float,
    seed: int,
    float_safe: bool,
    closest: bool = False,
) -> tuple[int, np.ndarray, int, list[dict[str, Any]]]:
    """Climb ``k = h + step, h + 2 step, ...`` (the last rung ``top``) while the check says feasible, each plan the
    next rung's hint (``closest``: every rung hinted with ``hint`` itself, the plan closest to it wanted); returns
    (largest k proven feasible, its plan, smallest k proven infeasible or 0, the rungs)."""
    best, plan, worst, rungs = h, hint, 0, []
    while best < top:
        k = min(best + step, top)
        res = no_migration_check(inst, k, time_limit, seed=seed, hint=hint if closest else plan,
                                 float_safe=float_safe, closest=closest)  # fmt: skip
        rungs.append({"k": k, "status": res.status, "by": res.by, "s": round(res.wall_s, 1)})
        print(f"    ladder k={k}: {res.status} ({res.by or '-'}) {res.wall_s:.1f} s", flush=True)
        if res.status != "feasible":
            worst = k if res.status == "infeasible" else 0
            break
        assert res.actions is not None
        best, plan = k, res.actions
    return best, plan, worst, rungs


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--warm", type=float, default=0.5)
    ap.add_argument("--margin", type=float, default=0.05, help="k = ceil((1 + margin) * H)")
    ap.add_argument("--time-limit", type=float, default=60.0, help="seconds per check")
    ap.add_argument("--seed", type=int, default=0, help="CP-SAT's seed")
    ap.add_argument("--only", type=int, nargs="*", help="these episodes only, in this order")
    ap.add_argument("--ladder", type=int, nargs="*", default=[], help="episodes to climb from H (see above)")
    ap.add_argument("--ladder-step", type=float, default=0.01, help="rung size, a fraction of H")
    ap.add_argument("--repack", action="store_true", help="also the repack bound (up to ~30 s per episode)")
    ap.add_argument("--repack-time-limit", type=float, default=4.0, help="seconds per repack solve")
    ap.add_argument("--repack-solves", type=int, default=8, help="repack solves per episode at most")
    ap.add_argument(
        "--repack-search",
        choices=("scan", "bisect"),
        default="scan",
        help="test the instants in order (scan) or halve the range above the start (bisect)",
    )
    ap.add_argument(
        "--window",
        type=int,
        default=0,
        help="also window_bound with windows of this many requests (0: no), after the check and ladder",
    )
    ap.add_argument("--window-time-limit", type=float, default=60.0, help="seconds per window check")
    ap.add_argument("--window-solves", type=int, default=4, help="window checks per episode at most")
    ap.add_argument("--repack-start", nargs="*", default=[], metavar="EP=J",
                    help="start the repack search at request J on episode EP (e.g. a length a plan reached earlier: "
                         "every instant below it packs; any J gives a valid bound)")  # fmt: skip
    ap.add_argument("--float-safe", action="store_true", help="margins on shares (simulators without FIT_TOL)")
    ap.add_argument("--json", type=Path)
    ap.add_argument("--closest", action="store_true", help="plans agreeing most with the better heuristic's choices")
    ap.add_argument("--save-plans", type=Path, help="folder: each ladder's best plan as episode<i>_k<k>.npy (actions)")
    ap.add_argument(
        "--repair",
        type=int,
        nargs="*",
        default=[],
        metavar="W",
        help="windows of W decisions ending at the better heuristic's failure, its choices before them "
        "fixed (Hindsight Learning's window model), tried after the check and before the ladder",
    )
    ap.add_argument("--repair-extra", type=int, default=100, help="arrivals past the failure in each window")
    ap.add_argument("--repair-time-limit", type=float, default=120.0, help="seconds per window")
    ap.add_argument("--from-plan", nargs="*", default=[], metavar="EP=FILE",
                    help="a plan saved by --save-plans: replayed through the simulator, then the hint and the "
                         "ladder's first rung on episode EP (a run goes on where an earlier one stopped)")  # fmt: skip
    args = ap.parse_args()
    try:
        repack_start = {int(e): int(j) for e, j in (x.split("=") for x in args.repack_start)}
    except ValueError:
        ap.error(f"--repack-start takes EP=J pairs of integers, got {' '.join(args.repack_start)}")
    from_plan: dict[int, np.ndarray] = {}
    for x in args.from_plan:
        ep, _, name = x.partition("=")
        try:
            from_plan[int(ep)] = np.load(name).astype(np.int64)
        except (ValueError, OSError) as e:
            ap.error(f"--from-plan takes EP=FILE with FILE a plan saved by --save-plans, got {x} ({e})")
    p = PAPER_REGIME.prepare("huawei-east-1", 0)
    sc = PAPER_REGIME.scenario(args.warm)
    cluster = PAPER_REGIME.cluster(sc.pms)
    lengths = {}
    for h in ("best-fit", "industrial"):
        res, _, _ = run_episodes(get_policy(h), cluster, p, sc, args.episodes, 0)
        lengths[h] = [r.length for r in res]
    sim = NumaSim(cluster, p, sc)
    limit = sc.max_requests or len(p.table)
    rows = []
    print(f"# {PAPER_REGIME.label}, {sc.pms} PMs, warm {args.warm:.0%}, k = ceil({1 + args.margin:g} H), "
          f"{args.time_limit:g} s per check", flush=True)  # fmt: skip
    for i in args.only if args.only else range(args.episodes):
        if sim.reset(seed=start_seed(0, i)) != K.DECIDE:
            continue
        inst = instance_from_sim(sim, limit)
        bf, ind = lengths["best-fit"][i], lengths["industrial"][i]
        best = "industrial" if ind > bf else "best-fit"
        h = max(bf, ind)
        if i in from_plan:
            said = simulator_replay(sim, from_plan[i])
            if said != "ok":
                ap.error(f"--from-plan {i}=...: the simulator does not place that plan on episode {i} ({said})")
            hint = from_plan[i].tolist()
        else:
            hint = heuristic_actions(sim, best)
        k = math.ceil((1 + args.margin) * h)
        t0 = time.perf_counter()
        pack = packing_bound(inst)
        pack_s = time.perf_counter() - t0
        row: dict[str, Any] = {"episode": i, "best_fit": bf, "industrial": ind, "H": h, "k": k, "packing": pack,
                               "packing_s": round(pack_s, 1)}  # fmt: skip
        if args.repack:
            t0 = time.perf_counter()
            row["repack"] = repack_bound(
                inst, args.repack_time_limit, args.repack_solves, repack_start.get(i, 0), args.repack_search
            )
            row["repack_s"] = round(time.perf_counter() - t0, 1)
        upper = min(pack, row.get("repack", pack))  # L* <= upper
        if upper < k:  # the relaxation already proves it
            res = NoMigrationResult("infeasible", k, None, 0.0, True, "repack-bound" if pack >= k else "packing-bound")
        else:
            res = no_migration_check(inst, k, args.time_limit, args.seed, np.asarray(hint), float_safe=args.float_safe,
                                     closest=args.closest)  # fmt: skip
        row.update(status=res.status, by=res.by, s=round(res.wall_s, 1))
        lower = h  # L* >= lower (the heuristic's own episode, or the plan given)
        if i in from_plan:
            lower = max(h, len(from_plan[i]))
        if res.status == "feasible":
            assert res.actions is not None
            row["simulator_ok"] = simulator_replay(sim, res.actions)
            lower = max(lower, k)
            if len(res.actions) > len(hint):  # the longest plan so far: what a repair extends
                hint = [int(a) for a in res.actions]
            if res.by != "hint":  # a hint's own prefix is no news
                save_plan(args.save_plans, i, res.actions)
        else:
            upper = min(upper, k - 1) if res.status == "infeasible" else upper
        for w in args.repair:  # each window ends where the best plan so far fails (the heuristic's, or a repair's)
            rp, said = repair(sim, hint, lower, w, args.repair_extra, args.repair_time_limit, args.seed)
            ok = simulator_replay(sim, rp) if len(rp) > lower else "-"
            print(f"    repair W={w}: {said}; plan of {len(rp)} (simulator replay: {ok})", flush=True)
            row.setdefault("repair", []).append({"W": w, "said": said, "length": len(rp), "simulator_ok": ok})
            if ok == "ok" and len(rp) > lower:
                lower, hint = len(rp), rp.tolist()
                save_plan(args.save_plans, i, rp)
        print(f"  episode {i}: H {h} k {k} packing {pack} ({pack_s:.1f} s) -> {res.status} ({res.by or '-'}) "
              f"{res.wall_s:.1f} s", flush=True)  # fmt: skip
        if i in args.ladder and res.status != "infeasible":
            step = max(1, math.ceil(args.ladder_step * h))
            if res.status == "unknown":  # the first rung below k: k itself just stayed undecided with this hint
                step = min(step, max(1, (k - lower) // 2))
            top = upper if lower >= k else k
            start = lower
            plan = res.actions if res.status == "feasible" and len(res.actions) >= len(hint) else hint
            assert plan is not None
            found, found_plan, worst, rungs = ladder(inst, start, top, np.asarray(hint if args.closest else plan),
                                                     step, args.time_limit, args.seed, args.float_safe,
                                                     args.closest)  # fmt: skip
            row["ladder"] = rungs
            if found > lower:
                row["ladder_simulator_ok"] = simulator_replay(sim, found_plan)
                lower = found
                save_plan(args.save_plans, i, found_plan)
            if found >= k and res.status != "feasible":  # the climb reached k: feasible after all
                row.update(status="feasible", by="cp-sat, ladder", simulator_ok=row["ladder_simulator_ok"])
            if worst:
                upper = min(upper, worst - 1)
        if args.window and lower < upper:
            upper, row["window"] = window_bound(
                inst, lower, upper, args.window, args.window_time_limit, args.window_solves
            )
            print(f"    window bound: {upper} ({row['window']})", flush=True)
        row["L_star"] = [lower, upper]
        rows.append(row)
    print(f"\n| episode | Best-Fit / industrial | H | k = ceil({1 + args.margin:g} H) | packing bound |"
          + (" repack bound |" if args.repack else "")
          + " check at k (by) | s | simulator replay | L* proven in |")  # fmt: skip
    print("|---" * (9 + args.repack) + "|")
    for r in rows:
        rep = f" {r['repack']} |" if args.repack else ""
        sim_ok = r.get("simulator_ok", "-")
        print(
            f"| {r['episode']} | {r['best_fit']} / {r['industrial']} | {r['H']} | {r['k']} | {r['packing']} |{rep}"
            f" {r['status']} ({r['by'] or '-'}) | {r['s']} | {sim_ok} | [{r['L_star'][0]}, {r['L_star'][1]}] |"
        )
    count = {s: [r["episode"] for r in rows if r["status"] == s] for s in ("infeasible", "feasible", "unknown")}
    print(f"\ninfeasible (+{args.margin:.0%} impossible): {len(count['infeasible'])} {count['infeasible']}")
    print(f"feasible (a clairvoyant no-migration plan reaches +{args.margin:.0%}): {len(count['feasible'])} "
          f"{count['feasible']}")  # fmt: skip
    print(f"unknown: {len(count['unknown'])} {count['unknown']}")
    lo = sum(r["L_star"][0] for r in rows) / sum(r["H"] for r in rows) - 1
    hi = sum(r["L_star"][1] for r in rows) / sum(r["H"] for r in rows) - 1
    print(f"summed over these episodes, L* is between {lo:+.2%} and {hi:+.2%} of H")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")


if __name__ == "__main__":
    main()
