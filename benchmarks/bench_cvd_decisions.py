"""CVD-RL decision cost against the cluster size: decisions per second at 50, 500 and 5,000 PMs for CVD-RL (shipped
checkpoint), its top-k filter alone, and Best-Fit / industrial through the same step API, measured in one run.

The decomposed network scores at most k candidates (plus their machines' current rows) whatever the cluster
size, so CVD-RL's cost above the filter's compiled scan should stay flat; the filter scan itself is linear in the
machines, like Best-Fit's. Releases off, warm start 30 % (at 5,000 PMs a 50 % warm-up would use most of the trace).

    OMP_NUM_THREADS=1 python benchmarks/bench_cvd_decisions.py [--decisions 3000] [--sizes 50 500 5000]
        [--checkpoint PATH] [--clock wall|process] [--no-index]

Each path runs at most ``--decisions`` decisions: an episode ends earlier when the cluster is full (releases are off),
so the "decisions" column gives how many each path ran (CVD-RL / filter / best-fit / industrial).

From 512 machines the filter, Best-Fit and industrial are answered by the index over free capacity
(``dcplace.policies.numa_index``; same decisions as the scan). CVD-RL runs twice in the same run: with the compiled
forward (``CvdAgent.compiled``, the default; near-ties settled by numpy's forward, the "settled by numpy" share) and
with numpy's forward only (before); "same decisions" compares the two action sequences. ``--no-index`` switches the
index off (``INDEX_MIN_MACHINES`` set above any size) to time the scan at every size.
"""

from __future__ import annotations

import argparse
import os
import platform
import time
from pathlib import Path

import torch

from dcplace.cluster.numa import NumaCluster
from dcplace.learn.cvd_model import CvdAgent
from dcplace.learn.dqn import load
from dcplace.learn.numa_policies import shipped_path
from dcplace.policies import numa_index as NI
from dcplace.policies.numa_heuristics import Heuristic, warm_up_jit
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import prepare
from dcplace.sim.numa import NumaSim, Scenario
from dcplace.workload.traces import load_trace, trace_available

CLOCK = time.perf_counter
"""``--clock process``: the process's CPU time instead (less sensitive to other work on a shared machine)."""


def rate(sim: NumaSim, decide, decisions: int, record: list[int] | None = None) -> tuple[float, int]:  # type: ignore[no-untyped-def]
    """Decisions per second from a fresh episode (the warm start outside the clock), and how many ran (fewer than
    ``decisions`` when the cluster fills); ``record`` gets the actions."""
    status = sim.reset(seed=0)
    n = 0
    t0 = CLOCK()
    while status == K.DECIDE and n < decisions:
        a = decide(sim.view())
        status = sim.step(a)
        if record is not None:
            record.append(a)
        n += 1
    return n / (CLOCK() - t0), n


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--decisions", type=int, default=3000)
    ap.add_argument("--sizes", type=int, nargs="+", default=[50, 500, 5000])
    ap.add_argument("--warm-start", type=float, default=0.3, help="(the trace fills 20,000 machines to about 0.2)")
    ap.add_argument("--checkpoint", default=str(shipped_path("cvd-rl")))
    ap.add_argument("--clock", choices=["wall", "process"], default="wall", help="process: CPU time of this process")
    ap.add_argument("--no-index", action="store_true", help="the scan at every size (no capacity index)")
    args = ap.parse_args()
    if args.no_index:
        NI.INDEX_MIN_MACHINES = 10**9
    global CLOCK
    CLOCK = time.process_time if args.clock == "process" else time.perf_counter
    torch.set_num_threads(1)
    trace = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
    prepared = prepare(load_trace(trace, synthetic_n=60_000), 32.0)
    net, _ = load(Path(args.checkpoint))
    agent = CvdAgent(net)
    print(f"# {platform.processor() or platform.machine()}, torch threads 1, trace {trace}, "
          f"at most {args.decisions} decisions after a {args.warm_start:.0%} warm start, releases off, "
          f"{'scan (no index)' if args.no_index else 'index from 512 machines'}; "
          f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f}")  # fmt: skip
    print(
        "| PMs | decisions | CVD-RL /s | CVD-RL numpy forward only /s | same decisions | settled by numpy "
        "| filter only /s | best-fit /s | industrial /s | CVD-RL cost over filter (us) |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|")
    for pms in args.sizes:
        cluster = NumaCluster.uniform(pms)
        warm_up_jit()
        sim = NumaSim(cluster, prepared, Scenario(pms=pms, warm_start=args.warm_start, release=False))
        rate(sim, agent.act, 20)  # compile (or load) every path outside the clock
        agent.compiled = False
        rate(sim, agent.act, 20)
        slow: list[int] = []
        cvd_np, _ = rate(sim, agent.act, args.decisions, slow)
        agent.compiled = True
        agent.certain = agent.uncertain = 0
        fast: list[int] = []
        cvd, n_cvd = rate(sim, agent.act, args.decisions, fast)
        numpy_share = agent.uncertain / max(agent.certain + agent.uncertain, 1)
        filt, n_filt = rate(sim, lambda s: int(agent.candidates(s)[0]), args.decisions)
        bf, n_bf = rate(sim, Heuristic("best-fit").choose, args.decisions)
        ind, n_ind = rate(sim, Heuristic("industrial").choose, args.decisions)
        over = (1 / cvd - 1 / filt) * 1e6
        same = "yes" if fast == slow else f"NO ({sum(a != b for a, b in zip(fast, slow, strict=False))} differ)"
        print(
            f"| {pms:,} | {n_cvd:,} / {n_filt:,} / {n_bf:,} / {n_ind:,} | {cvd:,.0f} | {cvd_np:,.0f} | {same} "
            f"| {numpy_share:.1%} | {filt:,.0f} | {bf:,.0f} | {ind:,.0f} | {over:.0f} |",
            flush=True,
        )
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
