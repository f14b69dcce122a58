"""What ``NetworkEngine.make_room`` (``POST /network/make-room``) costs, against a placement, on each topology.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_network_make_room.py [--topologies alpha delta]
        [--time-limit 0.1] [--contention [--ops 400] [--gap-ms 5]] [--listing]

Per topology: one episode of the ``uniform`` set (the paper's length, seed 0) through an engine in memory
(``tetris-bw``), each job released when its holding period ends; every job the network refuses is then asked of
``make_room`` (nothing changes). Prints the jobs running at the end, the refusals asked, the plans found, the
median and largest ``make_room`` time, the median time of the independent check it runs on each plan
(``check_room_plan``, timed again alone), the mean moves of a plan, and the median placement, with date, machine
and load. ``--time-limit``: make_room's ``time_limit_s`` (no plan is carried out, so the episode and the refusals
asked are the same with or without it).

``--contention``: what a long ``make_room`` costs the calls beside it. The episode is run up to its fifth refusal for
the network; then a second thread asks ``make_room`` of the refused jobs the network still refuses, in turn,
``--gap-ms`` apart, while this one places and releases a small job (2 CPU, 2 memory, bandwidth 0.1) ``--ops``
times, ``--gap-ms`` apart too; it prints the placement
and release latency (median, 99th percentile, largest) alone, then beside make_room holding the lock for its whole
search (``make_room_yields = False``, as before 2026-11-29), then beside make_room letting waiting calls go first
between racks (the default), and make_room's own median time in each.

``--listing``: what listing the running jobs costs (``GET /jobs``, and what make_room lists for its plan and its
check), at the end of each topology's episode: ``NetworkEngine.jobs()`` and the rows as JSON would carry them, each
timed 20 times, built afresh (the engine's listing cache emptied before each, as every listing was built before
2026-11-29 16:00 UTC) and reused from the last listing (the default since); medians.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import threading
import time

from dcplace.cluster.topology import BW_SCALE, preset
from dcplace.engine import NetJob, NetworkEngine, check_room_plan
from dcplace.sim.netalloc_episodes import default_requests, episode_requests

SMALL = NetJob("small", 2, 2, 0.1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", nargs="+", default=["alpha", "delta"])
    ap.add_argument("--time-limit", type=float, default=None, help="make_room's time_limit_s (none: every rack)")
    ap.add_argument("--contention", action="store_true", help="placements beside make_room, instead (see above)")
    ap.add_argument("--ops", type=int, default=400, help="with --contention: placements (and releases) timed")
    ap.add_argument("--gap-ms", type=float, default=5.0, help="with --contention: the pause between two of them")
    ap.add_argument("--listing", action="store_true", help="the cost of listing the running jobs, instead")
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    if args.contention:
        contention(args)
        return
    if args.listing:
        listing(args)
        return
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


def episode_end(name: str, refusals: int = 5) -> tuple[NetworkEngine, list[NetJob]]:
    """An engine where the topology's episode (as :func:`main` runs it) has had ``refusals`` refusals for the
    network, and those of the jobs it refused that it still refuses for the network."""
    top = preset(name)
    req = episode_requests(top, "uniform", default_requests(top), 0, 0)
    engine = NetworkEngine(top, "tetris-bw", hold_max=req.hold_max)
    ends: dict[int, list[str]] = {}
    refused: list[NetJob] = []
    for i in range(len(req.cpu)):
        for job_id in ends.pop(i, []):
            engine.release(job_id)
        job = NetJob(f"j{i}", int(req.cpu[i]), int(req.mem[i]), max(int(req.bw[i]), 1) / BW_SCALE, int(req.hold[i]))
        decision = engine.place(job)
        if decision.accepted:
            ends.setdefault(i + int(req.hold[i]), []).append(job.id)
        elif getattr(decision, "reason", "") == "network":
            refused.append(job)
            if len(refused) == refusals:
                break
    return engine, [job for job in refused if engine.explain(job).reason == "network"]


def contention(args: argparse.Namespace) -> None:
    print("| topology | make_room beside | placement ms: median / p99 / largest | release ms: median / p99 / largest "
          "| make_room asks | make_room median, ms |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in args.topologies:
        engine, refused = episode_end(name)
        for how in ("none", "holding the lock", "stepping aside"):
            engine.make_room_yields = how == "stepping aside"
            stop = threading.Event()
            asked: list[float] = []

            asker = threading.Thread(target=ask, args=(engine, refused, stop, asked, args.gap_ms), daemon=True)
            if how != "none" and refused:
                asker.start()
                time.sleep(0.05)  # under way
            placed, released = [], []
            for _ in range(args.ops):
                t = time.perf_counter()
                decision = engine.place(SMALL)
                placed.append(time.perf_counter() - t)
                if decision.accepted:
                    t = time.perf_counter()
                    engine.release(SMALL.id)
                    released.append(time.perf_counter() - t)
                time.sleep(args.gap_ms / 1e3)
            stop.set()
            if asker.is_alive():
                asker.join()
            room = f"{len(asked)} | {statistics.median(asked) * 1e3:.0f}" if asked else "0 | -"
            print(f"| {name} | {how} | {spread(placed)} | {spread(released)} | {room} |", flush=True)


def ask(engine: NetworkEngine, refused: list[NetJob], stop: threading.Event, asked: list[float], gap_ms: float) -> None:
    """make_room of each refused job in turn (nothing changes), ``gap_ms`` apart, its times in ``asked``, until
    ``stop``."""
    while not stop.is_set():
        for job in refused:
            t = time.perf_counter()
            engine.make_room(job)
            asked.append(time.perf_counter() - t)
            if stop.wait(gap_ms / 1e3):
                return


def listing(args: argparse.Namespace) -> None:
    print("| topology | jobs running | listed afresh, ms | reused, ms | afresh, as rows, ms | reused, as rows, ms |")
    print("|---|---|---|---|---|---|")
    for name in args.topologies:
        engine, _ = episode_end(name, refusals=10**9)  # the whole episode
        cells = []
        for rows in (False, True):
            for fresh in (True, False):
                took = []
                engine.jobs()
                for _ in range(20):
                    if fresh:
                        engine._shown.clear()
                    t = time.perf_counter()
                    listed = engine.jobs()
                    if rows:
                        [j.as_dict() for j in listed]
                    took.append(time.perf_counter() - t)
                cells.append(f"{statistics.median(took) * 1e3:.2f}")
        print(f"| {name} | {len(engine.jobs()):,} | {' | '.join(cells)} |", flush=True)


def spread(seconds: list[float]) -> str:
    """Median / 99th percentile / largest, in ms."""
    if not seconds:
        return "- / - / -"
    ms = sorted(x * 1e3 for x in seconds)
    return f"{statistics.median(ms):.2f} / {ms[min(len(ms) - 1, int(0.99 * len(ms)))]:.1f} / {ms[-1]:.1f}"


if __name__ == "__main__":
    main()
