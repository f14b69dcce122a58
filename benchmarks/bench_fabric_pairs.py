"""Checking every pair of a pick at once (``widest_all`` of the Fabric and Leaf routings) against pair by pair.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_fabric_pairs.py [--topologies gamma delta
        gamma-file delta-file] [--repeats 3]

A job's servers must be joined pairwise by a path with its bandwidth, so the k-th server of a job checks k - 1
pairs, and a job of n servers n (n - 1) / 2 in all. Per topology (Fabric presets with four planes, where the
Fabric routing's compiled check applies; ``NAME-file``: the preset read as a plain graph, as a network loaded from
a file is, routed by ``LeafRouting``, whose check batches from ``BATCH_FROM`` pairs): how long the network engine
takes to decide (``explain``, nothing changes) a job of a quarter and of all of the cluster's CPU and memory on an
empty cluster, at once and pair by pair; then one ``uniform`` episode (the paper's length, seed 0, ``tetris``)
through the simulator, both ways, as requests decided per second. Each figure is the median of ``--repeats`` runs,
both ways, which goes first alternating; prints date, machine and load.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time

from dcplace.cluster.topology import Topology, from_networkx, preset
from dcplace.engine import NetJob, NetworkEngine
from dcplace.policies import get_net_policy
from dcplace.sim.netalloc_episodes import (
    Routings,
    default_requests,
    episode_requests,
    get_setting,
    new_sim,
    run_episode,
)


def topology(name: str) -> Topology:
    """A preset, or with ``-file`` the preset as a plain graph (no Fabric structure: ``LeafRouting``)."""
    if name.endswith("-file"):
        return from_networkx(preset(name.removesuffix("-file")).to_networkx(), name=name)
    return preset(name)


def decide_job(name: str, share: float, at_once: bool) -> float:
    engine = NetworkEngine(topology(name), "tetris-bw")
    if not at_once:
        engine.sim._widest_all = None
    n = engine.topology.n_servers
    job = NetJob("big", int(10 * n * share), int(10 * n * share), 0.1)
    t = time.perf_counter()
    decision = engine.explain(job)
    took = time.perf_counter() - t
    assert decision.accepted, decision.reason
    return took


def episode(name: str, at_once: bool) -> float:
    top = topology(name)
    req = episode_requests(top, "uniform", default_requests(top), 0, 0)
    policy = get_net_policy("tetris", seed=0)
    sim = new_sim(top, req, Routings(top, get_setting("paper"), 3), policy)
    if not at_once:
        sim._widest_all = None
    t = time.perf_counter()
    run_episode(sim, policy)
    return len(req.cpu) / (time.perf_counter() - t)


def order(i: int) -> tuple[bool, bool]:
    """Which way goes first in repeat ``i``: in turn (the second of two runs was 2-4 % faster here, either way)."""
    return (True, False) if i % 2 else (False, True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", nargs="+", default=["gamma", "delta"])
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| topology | what | at once | pair by pair | speed-up |")
    print("|---|---|---|---|---|")
    for name in args.topologies:
        for share in (0.25, 1.0):
            times: dict[bool, list[float]] = {True: [], False: []}
            for i in range(args.repeats):
                for at_once in order(i):
                    times[at_once].append(decide_job(name, share, at_once))
            fast, slow = statistics.median(times[True]), statistics.median(times[False])
            print(f"| {name} | a job of {share:.0%} of the cluster, decided (s) | {fast:.3f} | {slow:.3f} | "
                  f"{slow / fast:.1f} |", flush=True)  # fmt: skip
        rates: dict[bool, list[float]] = {True: [], False: []}
        for i in range(args.repeats):
            for at_once in order(i):
                rates[at_once].append(episode(name, at_once))
        fast, slow = statistics.median(rates[True]), statistics.median(rates[False])
        print(f"| {name} | a uniform episode, tetris (requests/s) | {fast:,.0f} | {slow:,.0f} | {fast / slow:.2f} |",
              flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
