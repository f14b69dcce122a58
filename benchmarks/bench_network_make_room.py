"""What ``NetworkEngine.make_room`` (``POST /network/make-room``) costs, against a placement, on each topology.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_network_make_room.py [--topologies alpha delta]
        [--time-limit 0.1]

Per topology: one episode of the ``uniform`` set (the paper's length, seed 0) through an engine in memory
(``tetris-bw``), each job released when its holding period ends; every job the network refuses is then asked of
``make_room`` (nothing changes). Prints the jobs running at the end, the refusals asked, the plans found, the
median and largest ``make_room`` time, the median time of the independent check it runs on each plan
(``check_room_plan``, timed again alone), the mean moves of a plan, and the median placement, with date, machine
and load. ``--time-limit``: make_room's ``time_limit_s`` (no plan is carried out, so the episode and the refusals
asked are the same with or without it).
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

from dcplace.cluster.topology import BW_SCALE, preset
from dcplace.engine import NetJob, NetworkEngine, check_room_plan
from dcplace.sim.netalloc_episodes import default_requests, episode_requests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", nargs="+", default=["alpha", "delta"])
    ap.add_argument("--time-limit", type=float, default=None, help="make_room's time_limit_s (none: every rack)")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| topology | time limit, s | jobs running at the end | network refusals asked | plans | moves per plan | "
          "make_room median, ms | largest, ms | of which the plan's check, median ms | a placement, ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|")
    for name in args.topologies:
        top = preset(name)
        req = episode_requests(top, "uniform", default_requests(top), 0, 0)
        engine = NetworkEngine(top, "tetris-bw", hold_max=req.hold_max)
        ends: dict[int, list[str]] = {}
        asked: list[float] = []
        placed: list[float] = []
        plans = 0
        checked: list[float] = []
        moved: list[int] = []
        for i in range(len(req.cpu)):
            for job_id in ends.pop(i, []):
                engine.release(job_id)
            job = NetJob(f"j{i}", int(req.cpu[i]), int(req.mem[i]), max(int(req.bw[i]), 1) / BW_SCALE,
                         int(req.hold[i]))  # fmt: skip
            t = time.perf_counter()
            decision = engine.place(job)
            placed.append(time.perf_counter() - t)
            if decision.accepted:
                ends.setdefault(i + int(req.hold[i]), []).append(job.id)
            elif getattr(decision, "reason", "") == "network":
                t = time.perf_counter()
                plan = engine.make_room(job, time_limit_s=args.time_limit)
                if plan.accepted:
                    moved.append(len(plan.moves))
                asked.append(time.perf_counter() - t)
                plans += plan.accepted
                t = time.perf_counter()  # the independent check alone, as make_room runs it (the listing included)
                check_room_plan(top, [j.as_dict() for j in engine.jobs()], [], vars(job), plan.as_dict())
                checked.append(time.perf_counter() - t)
        med = f"{statistics.median(asked) * 1e3:.1f} | {max(asked) * 1e3:.1f}" if asked else "- | -"
        check = f"{statistics.median(checked) * 1e3:.1f}" if checked else "-"
        per = f"{statistics.mean(moved):.2f}" if moved else "-"
        print(f"| {name} | {args.time_limit or '-'} | {len(engine.jobs()):,} | {len(asked)} | {plans} | {per} | {med} "
              f"| {check} | {statistics.median(placed) * 1e3:.2f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
