"""The network-aware engine live against the simulator's episode, per job.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_network_engine.py [--topologies alpha gamma delta]
        [--policies tetris tetris-bw nalb-strict nara] [--runs 3]

For each topology and policy: one episode of the ``uniform`` set (the paper's length: 128 / 896 / 4,096 requests,
seed 0), decided (a) by the simulator (``run_episode``), (b) by ``NetworkEngine`` in memory, each job placed as it
comes and released when its holding period ends, (c) the same with the jobs kept in SQLite (a commit per placement
and per release), and (d) ``explain`` of every request of the episode on the state (b) ends with (a dry run on a
copy of the state: ``POST /network/explain``). Every run checks that (b) and (c) accept exactly the requests the
episode accepts. Medians of ``--runs`` runs, per request, and the ratios to (a), or for (d) to (b), measured in the
same run.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from dcplace.cluster.topology import BW_SCALE, preset
from dcplace.engine import NetworkEngine
from dcplace.engine.network import NetJob, replay
from dcplace.policies.registry import get_net_policy
from dcplace.sim.netalloc import NetAllocSim
from dcplace.sim.netalloc_episodes import Routings, default_requests, episode_requests, get_setting, run_episode


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", nargs="+", default=["alpha", "gamma", "delta"])
    ap.add_argument("--policies", nargs="+", default=["tetris", "tetris-bw", "nalb-strict", "nara"])
    ap.add_argument("--runs", type=int, default=3)
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| topology | policy | requests | accepted | simulator ms/request | engine in memory (x) | engine in SQLite "
          "(x) | explain ms/request (x in memory) |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for name in args.topologies:
        top = preset(name)
        req = episode_requests(top, "uniform", default_requests(top), 0, 0)
        for pol in args.policies:
            times: dict[str, list[float]] = {"sim": [], "mem": [], "db": [], "explain": []}
            for _ in range(args.runs):
                policy = get_net_policy(pol)
                routing = Routings(top, get_setting("paper"), 3).for_policy(policy)
                sim = NetAllocSim(top, req, routing=routing, any_server=bool(getattr(policy, "any_server", False)))
                t = time.perf_counter()
                want = run_episode(sim, policy).accepted_ids
                times["sim"].append(time.perf_counter() - t)
                engine = NetworkEngine(top, get_net_policy(pol), hold_max=req.hold_max)
                t = time.perf_counter()
                got = replay(engine, req)
                times["mem"].append(time.perf_counter() - t)
                assert got == want, f"{name} {pol}: the engine accepted other requests than the episode"
                jobs = [NetJob(f"x{i}", int(req.cpu[i]), int(req.mem[i]), int(req.bw[i]) / BW_SCALE, int(req.hold[i]))
                        for i in range(len(req))]  # fmt: skip
                t = time.perf_counter()
                for job in jobs:
                    engine.explain(job)
                times["explain"].append(time.perf_counter() - t)
                with tempfile.TemporaryDirectory(dir=Path.cwd()) as tmp:
                    engine = NetworkEngine.open(Path(tmp) / "net.db", top, get_net_policy(pol), hold_max=req.hold_max)
                    t = time.perf_counter()
                    got = replay(engine, req)
                    times["db"].append(time.perf_counter() - t)
                    engine.close()
                assert got == want, f"{name} {pol}: the durable engine accepted other requests than the episode"
            med = {k: statistics.median(v) for k, v in times.items()}
            per = 1000 / len(req)
            print(f"| {name} | {pol} | {len(req):,} | {len(want):,} | {med['sim'] * per:.3f} | "
                  f"{med['mem'] * per:.3f} ({med['mem'] / med['sim']:.2f}x) | {med['db'] * per:.3f} "
                  f"({med['db'] / med['sim']:.2f}x) | {med['explain'] * per:.3f} ({med['explain'] / med['mem']:.2f}x) "
                  "|", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
