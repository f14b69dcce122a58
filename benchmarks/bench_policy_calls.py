"""What naming a misbehaving policy costs: the library's decision loop (``NumaPolicy.run``) with each call checked
(``dcplace.sim.policy_calls``: an exception from a user's policy becomes a PolicyError, a non-integer action is
refused) against the same loop calling ``choose`` bare, on the policies that take that loop (the learned ones and
every user policy; the compiled heuristics have their own).

Each repetition plays the same episodes (synthetic trace, releases on, seed 0) once each way, alternating which
goes first, and checks that both made the same decisions; medians and the median of the paired ratios are printed.

    python benchmarks/bench_policy_calls.py [--pms 50] [--episodes 3] [--reps 7]
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dcplace.cluster import NumaCluster
from dcplace.policies import get_policy
from dcplace.policies.base import NumaPolicy
from dcplace.sim import Scenario
from dcplace.sim.episodes import prepare, run_episodes
from dcplace.sim.numa_kernel import DECIDE
from dcplace.workload import synthetic_trace

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "docs" / "examples"))
from worst_fit import WorstFit


def bare_run(self: NumaPolicy, sim) -> int:  # type: ignore[no-untyped-def]
    """The loop as it was: ``choose`` called bare."""
    status = sim.status
    while status == DECIDE:
        status = sim.step(self.choose(sim.view()))
    return status


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--pms", type=int, default=50)
    ap.add_argument("--episodes", type=int, default=3)
    ap.add_argument("--reps", type=int, default=7)
    args = ap.parse_args()
    trace = prepare(synthetic_trace(20_000, seed=0), 32.0)
    cluster, sc = NumaCluster.uniform(args.pms), Scenario(pms=args.pms)
    checked_run = NumaPolicy.run
    print(f"# {platform.node()}, {platform.processor() or platform.machine()}, python {platform.python_version()}, "
          f"{args.pms} PMs, {args.episodes} episodes, {args.reps} paired repetitions")  # fmt: skip
    print("| policy | checked (decisions/s) | bare (decisions/s) | checked / bare (median of pairs) |")
    print("|---|---|---|---|")
    for name, make in (("cvd-rl", lambda: get_policy("cvd-rl")), ("worst-fit (docs/examples)", WorstFit)):
        run_episodes(make(), cluster, trace, sc, 1, 0)  # compile and load outside the timed region
        rates: dict[str, list[float]] = {"checked": [], "bare": []}
        ratios = []
        for rep in range(args.reps):
            got = {}
            for way in ("checked", "bare") if rep % 2 == 0 else ("bare", "checked"):
                NumaPolicy.run = checked_run if way == "checked" else bare_run  # type: ignore[method-assign]
                t0 = time.perf_counter()
                results, _, decisions = run_episodes(make(), cluster, trace, sc, args.episodes, 0)
                rates[way].append(decisions / (time.perf_counter() - t0))
                got[way] = [(r.length, r.income) for r in results]
            NumaPolicy.run = checked_run  # type: ignore[method-assign]
            assert got["checked"] == got["bare"], "the check changed a decision"
            ratios.append(rates["checked"][-1] / rates["bare"][-1])
        print(f"| {name} | {statistics.median(rates['checked']):,.0f} | {statistics.median(rates['bare']):,.0f} "
              f"| {statistics.median(ratios):.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
