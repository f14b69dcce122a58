"""Nara inference cost: milliseconds per server choice on alpha, gamma and delta (one torch thread), split into
observation, network and simulator, for a shipped checkpoint; and the sparse (CSR) aggregation against an
``index_add`` scatter of the same mean, measured in the same run.

``--episode TOPOLOGY`` instead times whole episodes (4,096 requests on delta) with the torch network and with the
compiled one (:mod:`dcplace.learn.nara_fast`, what ``nara`` runs) one after the other in the same process, per
request set, and says whether the two runs' records (accepted ids, servers per allocation, locality, decisions) are
identical.

    OMP_NUM_THREADS=1 python benchmarks/bench_nara_inference.py [--checkpoint PATH] [--picks 3000]
    OMP_NUM_THREADS=1 python benchmarks/bench_nara_inference.py --episode delta [--datasets uniform azure alibaba]
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch

from dcplace.bench.netalloc_runner import run_policy
from dcplace.cluster.topology import PRESETS, preset
from dcplace.envs.net_alloc import NetObserver
from dcplace.learn import checkpoint
from dcplace.learn.nara_fast import FastPolicy
from dcplace.learn.nara_model import GraphIndex, obs_tensors
from dcplace.learn.nara_policy import NaraAgent, checkpoint_for
from dcplace.sim.netalloc import NetAllocSim
from dcplace.sim.netalloc_episodes import episode_requests


def per_choice(path: Path, topology: str, picks: int) -> dict[str, float]:
    """ms per choice: observation, the torch network, the compiled one (on the same observation; the episode
    follows torch's choices) and the simulator."""
    net, _ = checkpoint.load(path)
    top = preset(topology)
    g, observe, fast = GraphIndex(top), NetObserver(top), FastPolicy(net.policy, top)
    sim = NetAllocSim(top, episode_requests(top, "uniform", PRESETS[topology].episode_requests, 0, 0, "test"))
    fast.logits(observe(sim))  # compile or load from the cache outside the timing
    t_obs = t_net = t_fast = t_sim = 0.0
    n = 0
    with torch.inference_mode():
        while not sim.done and n < picks:
            t0 = time.perf_counter()
            obs = observe(sim)
            t1 = time.perf_counter()
            a = int(net.policy(*obs_tensors(obs), g).argmax())
            t2 = time.perf_counter()
            fast.logits(obs)
            t3 = time.perf_counter()
            sim.pick(a)
            t4 = time.perf_counter()
            t_obs, t_net, t_fast, t_sim = t_obs + t1 - t0, t_net + t2 - t1, t_fast + t3 - t2, t_sim + t4 - t3
            n += 1
    ms = 1e3 / n
    return {"obs": t_obs * ms, "net": t_net * ms, "fast": t_fast * ms, "sim": t_sim * ms, "picks": n}


def aggregation(topology: str, batch: int, reps: int = 200) -> tuple[float, float]:
    """ms per mean aggregation of 16-unit states: CSR product vs index_add over the directed edges."""
    top = preset(topology)
    g = GraphIndex(top)
    src = torch.as_tensor(top.edge_index[0])
    dst = torch.as_tensor(top.edge_index[1])
    inv = 1.0 / (torch.bincount(dst, minlength=top.n_nodes).float() + 1.0)
    x = torch.randn(batch, top.n_nodes, 16)
    flat = x.transpose(0, 1).reshape(top.n_nodes, -1)
    ref = (x.index_add(1, dst, x[:, src]) * inv[:, None]).transpose(0, 1).reshape(top.n_nodes, -1)
    torch.testing.assert_close(torch.sparse.mm(g.adj, flat), ref)
    t0 = time.perf_counter()
    for _ in range(reps):
        torch.sparse.mm(g.adj, x.transpose(0, 1).reshape(top.n_nodes, -1))
    t1 = time.perf_counter()
    for _ in range(reps):
        x.index_add(1, dst, x[:, src]) * inv[:, None]
    t2 = time.perf_counter()
    return (t1 - t0) / reps * 1e3, (t2 - t1) / reps * 1e3


def episodes(topology: str, datasets: list[str]) -> None:
    """One test episode per request set (seed 0, the paper setting) with the torch and the compiled network: wall
    seconds (``NetRun.wall_s``) and this process's CPU seconds (``time.process_time``, which other jobs on a shared
    machine inflate far less), after a short warm-up episode that compiles the numba functions (or loads them from
    the cache)."""
    print(f"# {platform.processor() or platform.machine()}, torch {torch.__version__}, 1 thread, shipped agents")
    print("| request set | requests | torch s | compiled s | torch CPU s | compiled CPU s | CPU speed-up | acceptance "
          "torch / compiled | decisions | same records | load |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    top = preset(topology)
    # Compile (or load from numba's cache) outside the timing: a fresh checkout compiles once, ~10 s.
    run_policy(preset("alpha"), "uniform", NaraAgent(checkpoint_for("uniform", None)), 8, 1, 0)
    for d in datasets:
        wall, cpu, res = {}, {}, {}
        for compiled in (False, True):
            c0 = time.process_time()
            run = run_policy(top, d, NaraAgent(checkpoint_for(d, None), compiled=compiled), None, 1, 0)
            cpu[compiled] = time.process_time() - c0
            wall[compiled], res[compiled] = run.wall_s, run.results[0]
        a, b = res[False], res[True]
        same = (a.accepted_ids, a.servers_per_allocation, a.locality, a.decisions, a.rejected) == (
            b.accepted_ids,
            b.servers_per_allocation,
            b.locality,
            b.decisions,
            b.rejected,
        )
        load = os.getloadavg()[0]
        print(f"| {topology} {d} | {a.requests:,} | {wall[False]:.1f} | {wall[True]:.1f} | {cpu[False]:.1f} | "
              f"{cpu[True]:.1f} | {cpu[False] / cpu[True]:.1f}x | {a.acceptance:.4f} / {b.acceptance:.4f} | "
              f"{a.decisions:,} / {b.decisions:,} | {same} | {load:.1f} |", flush=True)  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--checkpoint", type=Path, default=checkpoint.shipped_path("alpha", "uniform"))
    ap.add_argument("--picks", type=int, default=3000)
    ap.add_argument("--episode", metavar="TOPOLOGY", help="time whole episodes, torch against compiled")
    ap.add_argument("--datasets", nargs="+", default=["uniform", "azure", "alibaba"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    if args.episode:
        episodes(args.episode, args.datasets)
        return
    machine = platform.processor() or platform.machine()
    print(f"# {machine}, torch {torch.__version__}, 1 thread, {args.checkpoint.name}")
    print("| topology | servers | ms per choice (torch) | observation | network: torch | network: compiled | "
          "simulator | picks |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|")
    for topo in ("alpha", "gamma", "delta"):
        r = per_choice(args.checkpoint, topo, args.picks)
        total = r["obs"] + r["net"] + r["sim"]
        print(f"| {topo} | {preset(topo).n_servers:,} | {total:.2f} | {r['obs']:.2f} | {r['net']:.2f} | "
              f"{r['fast']:.2f} | {r['sim']:.2f} | {r['picks']:,} |")  # fmt: skip
    print()
    print("| aggregation | batch | CSR ms | index_add ms | index_add / CSR |")
    print("|---|---|---|---|---|")
    for topo, batch in (("delta", 1), ("alpha", 256)):
        csr, scatter = aggregation(topo, batch)
        print(f"| {topo} | {batch} | {csr:.3f} | {scatter:.3f} | {scatter / csr:.1f}x |")


if __name__ == "__main__":
    main()
