"""CPU-time decision rates of the compiled episode and the step API (best of 5), for comparing commits.

Wall-clock rates on a shared 2-core machine swing by 2-3x with other load; process CPU time is far steadier, so this
script is what compares two versions: run it alternately against both checkouts, e.g.

    git worktree add /tmp/old 077df60
    for i in 1 2 3; do
      PYTHONPATH=/tmp/old/src .venv/bin/python benchmarks/bench_numa_cpu.py
      PYTHONPATH=src .venv/bin/python benchmarks/bench_numa_cpu.py
    done

It runs the policy API of issue 12 and, for that comparison, the API before it (077df60 and earlier). Synthetic
trace (seed 0), releases on; the compiled episode at each size, then the step API at 100 machines.

    python benchmarks/bench_numa_cpu.py [--sizes 100 1000 5000] [--repeats 5] [--steps 20000]
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable

from dcplace.cluster import NumaCluster
from dcplace.sim import NumaSim, Scenario
from dcplace.workload.traces import load_trace

try:
    from dcplace.policies.numa_heuristics import Heuristic, warm_up_jit
    from dcplace.sim.episodes import prepare

    NEW = True
except ImportError:  # the API before issue 12
    from dcplace.bench.numa_runner import prepare, warm_up_jit  # type: ignore[attr-defined,no-redef]
    from dcplace.sim import numa_kernel as K

    NEW = False


def episode(sim: NumaSim, policy: str) -> None:
    if NEW:
        Heuristic(policy).run(sim)
    else:
        sim.run(K.HEURISTIC_CODES[policy])  # type: ignore[attr-defined]


def stepper(sim: NumaSim, policy: str) -> Callable[[], int]:
    if NEW:
        h = Heuristic(policy)
        return lambda: sim.step(h.choose(sim.view()))
    code = K.HEURISTIC_CODES[policy]  # type: ignore[attr-defined]
    return lambda: sim.step(sim.choose(code))  # type: ignore[attr-defined]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", type=int, nargs="+", default=[100, 1000, 5000], help="machines, compiled episodes")
    ap.add_argument("--repeats", type=int, default=5, help="runs of each measurement; the best is printed")
    ap.add_argument("--steps", type=int, default=20_000, help="step-API decisions per run (at 100 machines)")
    args = ap.parse_args()
    trace = prepare(load_trace("synthetic", seed=0), 32.0)
    if NEW:
        warm_up_jit()
    else:
        warm_up_jit(NumaCluster.uniform(2), trace)  # type: ignore[call-arg]
    for n in args.sizes:
        for policy in ("first-fit", "best-fit"):
            sim = NumaSim(NumaCluster.uniform(n), trace, Scenario(pms=n, start_range=(0, 1), release=True))
            best = 0.0
            for _ in range(args.repeats):
                sim.reset(0)
                t0 = time.process_time()
                episode(sim, policy)
                best = max(best, sim.result().length / (time.process_time() - t0))
            print(f"kernel {n} {policy}\t{best:.0f}")
    for policy in ("first-fit", "best-fit"):
        sim = NumaSim(NumaCluster.uniform(100), trace, Scenario(pms=100, start_range=(0, 1), release=True))
        best = 0.0
        for _ in range(args.repeats):
            sim.reset(0)
            step = stepper(sim, policy)
            t0 = time.process_time()
            for _ in range(args.steps):
                step()
            best = max(best, args.steps / (time.process_time() - t0))
        print(f"step 100 {policy}\t{best:.0f}")


if __name__ == "__main__":
    main()
