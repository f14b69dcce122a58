"""Wall time of the clairvoyant acceptance bound (``dcplace.sim.netalloc_bound.acceptance_bound``) per episode.

For each topology and request set: the test episodes the reproduction plays (``episode_requests``, seed 0, the
paper's episode length), the bound of each with the chosen method, its status (``optimal``: CP-SAT's proven optimum
of the relaxation; ``feasible``: a proven bound after the time limit; ``lp``: GLOP's LP optimum, rounded down) and
its wall time (building the constraints included). The defaults are what ``dcplace reproduce nara`` runs
(``auto``: CP-SAT up to 1,000 requests, the LP above; at most 400 binding steps constrained). CP-SAT with every
step on delta, the exact comparison of docs/benchmarks.md:

    python benchmarks/bench_netalloc_bound.py [--topologies alpha beta gamma delta] [--datasets azure alibaba]
        [--episodes 1] [--method auto|cp-sat|lp] [--max-steps 400] [--time-limit 10]
    python benchmarks/bench_netalloc_bound.py --topologies delta --method cp-sat --max-steps 0 --time-limit 120
"""

from __future__ import annotations

import argparse
import os
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dcplace.cluster.topology import preset
from dcplace.sim.netalloc_bound import acceptance_bound, binding_steps
from dcplace.sim.netalloc_episodes import default_requests, episode_requests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", nargs="+", default=["alpha", "beta", "gamma", "delta"], help="presets")
    ap.add_argument("--datasets", nargs="+", default=["azure", "alibaba"], help="request sets, as drawn")
    ap.add_argument("--episodes", type=int, default=1, help="test episodes per topology and set")
    ap.add_argument("--method", choices=["auto", "cp-sat", "lp"], default="auto")
    ap.add_argument("--max-steps", type=int, default=400, help="binding steps constrained (0: every step)")
    ap.add_argument("--time-limit", type=float, default=10.0, help="CP-SAT's limit per episode, seconds")
    args = ap.parse_args()
    steps = args.max_steps or "all"
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average {os.getloadavg()[0]:.2f}; method "
          f"{args.method}, max steps {steps}, CP-SAT limit {args.time_limit:g} s, one worker")  # fmt: skip
    print("| topology | set | episode | requests | binding steps | bound | CP-SAT's best | status | wall s |")
    print("|---|---|---|---|---|---|---|---|---|")
    for name in args.topologies:
        top = preset(name)
        n = default_requests(top)
        for dataset in args.datasets:
            for e in range(args.episodes):
                req = episode_requests(top, dataset, n, 0, e)
                b = acceptance_bound(top, req, args.time_limit, 0, args.max_steps or None, args.method)
                print(f"| {name} | {dataset} | {e} | {b.requests:,} | {len(binding_steps(req)):,} | {b.bound:,} | "
                      f"{b.accepted:,} | {b.status} | {b.wall_s:.2f} |", flush=True)  # fmt: skip
    print(f"load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
