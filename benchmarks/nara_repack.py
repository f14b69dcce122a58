"""Moving running jobs in Nara's setting: does re-placing them (a repack) let a live network engine accept more?

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/nara_repack.py [--topologies alpha beta]
        [--datasets uniform azure alibaba] [--policies tetris-bw nalb-strict tetris] [--episodes 20] [--every 8]
        [--ways every "on demand" "one rack" "one at a time"]

Each episode (the training split's sizes, seed 101, the paper's length for the topology) runs through a
``NetworkEngine`` in memory as a live cluster sees it: a job placed when it arrives, released when its holding
period ends, a full cluster rejecting (the engine has no queue: the ``paper-reject`` setting). Three ways, on the
same episodes:

* **never**: no job moves;
* **every N** (``--every``): before every N-th arrival, every running job is placed again, largest (CPU + memory)
  first, by the same policy on an empty copy of the cluster (a fresh engine), and the cluster takes that layout if
  every job found a place;
* **on demand**: only when a job is rejected for the network (never for capacity: moving cannot add CPU), the
  same repack is tried, and kept only if the job is then placed; otherwise nothing moves;
* **one rack, on demand**: as on demand, but only the jobs that touch one rack move (``NetworkEngine.make_room``):
  for each rack, those jobs are lifted, the new job placed, then they are placed again (largest first), each on a
  copy of the cluster; of the racks where all fit, the one that moves the fewest jobs is taken;
* **one rack, one at a time**: as one rack, of the racks whose moves can be made one job at a time (cold: each
  stopped, then started where it goes), never two stopped at once (``make_room(max_together=1)``).

A layout is applied with the public API only: ``NetworkEngine.reconcile`` with the repacked jobs as its
inventory (the jobs whose servers changed are recorded anew), and put back the same way; a one-rack plan by
``make_room(execute=True)``. ``--ways`` runs some of them (never always). Prints, per cell, each
way's mean acceptance, its difference from never with a 95 % interval paired on the episodes, and the jobs moved
per arrival (a job whose servers changed; for the one-rack way, ``make_room``'s moves: a job whose servers, split
over them or links changed). Moves are counted, not priced: a real cluster pays for each migration.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from typing import Any

import numpy as np

from dcplace.cluster.topology import BW_SCALE, preset
from dcplace.engine import NetJob, NetworkEngine
from dcplace.sim.netalloc_episodes import default_requests, episode_requests


def repacked(engine: NetworkEngine, policy: str) -> list[dict[str, Any]] | None:
    """Every running job placed again, largest first, on an empty copy of the cluster: the new inventory, or None
    where one found no place."""
    jobs = engine.jobs()
    fresh = NetworkEngine(engine.topology, policy, hold_max=engine.hold_max)
    for server in engine.stats()["drained"]:
        fresh.drain_server(server)
    for job in sorted(jobs, key=lambda j: -(sum(j.cpu) + sum(j.mem))):
        if not fresh.place(NetJob(job.id, sum(job.cpu), sum(job.mem), job.bw)).accepted:
            return None
    return [j.as_dict() for j in fresh.jobs()]


def moved(before: list[dict[str, Any]], after: list[dict[str, Any]]) -> int:
    where = {j["id"]: set(j["servers"]) for j in before}
    return sum(set(j["servers"]) != where[j["id"]] for j in after)


def run(top: Any, req: Any, policy: str, way: str, every: int) -> tuple[float, int]:
    engine = NetworkEngine(top, policy, hold_max=req.hold_max)
    ends: dict[int, list[str]] = {}
    accepted = moves = 0
    for i in range(len(req.cpu)):
        for job_id in ends.pop(i, []):
            engine.release(job_id)
        if way == "every" and i and i % every == 0:
            now = [j.as_dict() for j in engine.jobs()]
            layout = repacked(engine, policy)
            if layout is not None:
                moves += moved(now, layout)
                engine.reconcile(layout, force=True)
        job = NetJob(f"j{i}", int(req.cpu[i]), int(req.mem[i]), max(int(req.bw[i]), 1) / BW_SCALE, int(req.hold[i]))
        decision = engine.place(job)
        if (
            not decision.accepted
            and way in ("one rack", "one at a time")
            and getattr(decision, "reason", "") == "network"
        ):
            plan = engine.make_room(job, execute=True, max_together=1 if way == "one at a time" else None)
            if plan.accepted:
                moves += len(plan.moves)
                decision = engine.job(job.id)
        if not decision.accepted and way == "on demand" and getattr(decision, "reason", "") == "network":
            now = [j.as_dict() for j in engine.jobs()]
            layout = repacked(engine, policy)
            if layout is not None:
                engine.reconcile(layout, force=True)
                decision = engine.place(job)
                if decision.accepted:
                    moves += moved(now, layout)
                else:  # nothing gained: the jobs stay where they were
                    engine.reconcile(now, force=True)
        if decision.accepted:
            accepted += 1
            ends.setdefault(i + int(req.hold[i]), []).append(job.id)
    engine.check_invariants()
    return accepted / len(req.cpu), moves


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", nargs="+", default=["alpha", "beta"])
    ap.add_argument("--datasets", nargs="+", default=["uniform", "azure", "alibaba"])
    ap.add_argument("--policies", nargs="+", default=["tetris-bw", "nalb-strict", "tetris"])
    ap.add_argument("--episodes", type=int, default=20)
    ap.add_argument("--every", type=int, default=8)
    ap.add_argument("--ways", nargs="+", default=["every", "on demand", "one rack", "one at a time"],
                    choices=["every", "on demand", "one rack", "one at a time"])  # fmt: skip
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}; {args.episodes} episodes per cell")  # fmt: skip
    ways = ("never", *args.ways)
    named = {"every": f"every {args.every}", "on demand": "on demand", "one rack": "one rack, on demand",
             "one at a time": "one rack, one job at a time"}  # fmt: skip
    print("| topology | set | policy | never | " + " | ".join(f"{named[w]} (diff; moves/arrival)" for w in ways[1:])
          + " |")  # fmt: skip
    print("|---|---|---|---|" + "---|" * len(ways[1:]))
    for name in args.topologies:
        top = preset(name)
        for dataset in args.datasets:
            episodes = [episode_requests(top, dataset, default_requests(top), 101, e, "train")
                        for e in range(args.episodes)]  # fmt: skip
            for policy in args.policies:
                got = {w: [run(top, req, policy, w, args.every) for req in episodes] for w in ways}
                base = np.array([a for a, _ in got["never"]])
                cells = [f"{base.mean():.3f}"]
                for w in ways[1:]:
                    acc = np.array([a for a, _ in got[w]])
                    d = acc - base
                    half = 1.96 * d.std(ddof=1) / np.sqrt(len(d)) if len(d) > 1 else float("nan")
                    per = np.mean([m for _, m in got[w]]) / default_requests(top)
                    cells.append(f"{acc.mean():.3f} ({d.mean():+.3f} ± {half:.3f}; {per:.2f})")
                print(f"| {name} | {dataset} | {policy} | " + " | ".join(cells) + " |", flush=True)


if __name__ == "__main__":
    main()
