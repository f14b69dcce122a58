"""How ``make_room``'s plans are carried out: how many of their moves can be made one job at a time, cold, and how
many need a joint step (jobs that trade room, all stopped before any starts). docs/engine.md, "Making room".

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/network_move_steps.py [--topologies alpha beta]
        [--policies tetris-bw nalb-strict tetris] [--seeds 3] [--requests 300]

Per topology, policy and seed: an episode of the ``uniform`` set through an engine in memory, two jobs released every
third arrival; every job the network refuses is asked of ``make_room`` (nothing changes). Prints, over the plans
proposed that move jobs: how many, their moves, the plans with a joint step, and the largest joint step.
"""

from __future__ import annotations

import argparse
import os
import platform
import time

from dcplace.cluster.topology import preset
from dcplace.engine import NetJob, NetworkEngine
from dcplace.sim.netalloc_episodes import episode_requests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", nargs="+", default=["alpha", "beta"])
    ap.add_argument("--policies", nargs="+", default=["tetris-bw", "nalb-strict", "tetris"])
    ap.add_argument("--seeds", type=int, default=3)
    ap.add_argument("--requests", type=int, default=300)
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| topology | policy | plans with moves | moves | plans with a joint step | jobs in the largest joint step |")
    print("|---|---|---|---|---|---|")
    for name in args.topologies:
        top = preset(name)
        for policy in args.policies:
            plans = moves = joint = largest = 0
            for seed in range(args.seeds):
                e = NetworkEngine(top, policy)
                req = episode_requests(top, "uniform", args.requests, seed + 1, seed)
                for i in range(len(req.cpu)):
                    job = NetJob(f"j{i}", int(req.cpu[i]), int(req.mem[i]), max(int(req.bw[i]), 1) / 1e6)
                    d = e.place(job)
                    if not d.accepted and d.reason == "network":
                        plan = e.make_room(job)
                        if plan.accepted and plan.moves:
                            plans += 1
                            moves += len(plan.moves)
                            sizes = [sum(m.step == s for m in plan.moves) for s in {m.step for m in plan.moves}]
                            joint += max(sizes) > 1
                            largest = max(largest, max(sizes) if max(sizes) > 1 else 0)
                    if i % 3 == 0 and i:
                        for j in e.jobs()[:2]:
                            e.release(j.id)
            print(f"| {name} | {policy} | {plans} | {moves} | {joint} | {largest or '-'} |")


if __name__ == "__main__":
    main()
