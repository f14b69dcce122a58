"""How much was there to win on each Nara cell: the clairvoyant bound, two pooled references and the allocators.

For each topology x request set, on the test episodes `dcplace reproduce nara` plays (seed, episodes per cell):

* ``bound``: :func:`dcplace.sim.netalloc_bound.acceptance_bound`, no allocator accepts more (a proof);
* ``pooled``: :func:`~dcplace.sim.netalloc_bound.pooled_greedy`, a perfect packer without a network that accepts
  whatever fits in total (a reference, not a bound);
* ``pooled+admit``: the same, refusing requests above a size threshold, the threshold chosen on *training*
  episodes (the best of 10..100 units), then applied to the test episodes: what size-based admission control,
  which none of the paper's allocators does, adds to perfect packing;
* the allocators' acceptance (``run_policy``), and each one's share of the way from the best paper baseline to the
  bound.

    python benchmarks/nara_headroom.py                       # alpha, 5 episodes per cell (about 1 minute)
    python benchmarks/nara_headroom.py --topologies alpha beta gamma --episodes 2

Prints a Markdown table (docs/netalloc.md, "How much was there to win").
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from dcplace.bench.netalloc_runner import run_policy
from dcplace.cluster.topology import PRESETS, Topology, preset
from dcplace.sim.netalloc_bound import episode_bounds, pooled_greedy
from dcplace.sim.netalloc_episodes import SETTINGS, episode_requests, get_setting

THRESHOLDS = tuple(range(10, 101, 5))
BASELINES = ("tetris", "nalb", "nulb", "random")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--topologies", nargs="+", default=["alpha"], choices=list(PRESETS))
    ap.add_argument("--datasets", nargs="+", default=["uniform", "azure", "alibaba"])
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--setting", default="paper-reject", choices=list(SETTINGS),
                    help="a rejecting setting: the bound relaxes rejection")  # fmt: skip
    ap.add_argument("--policies", nargs="+", default=["nara", "nalb-learned", "nalb-strict"])
    args = ap.parse_args()
    env = get_setting(args.setting)
    if env.on_full != "reject":
        ap.error(f"--setting {args.setting}: requests wait there and the bound relaxes rejection (use paper-reject)")
    print(f"episodes per cell {args.episodes}, seed {args.seed}, setting {args.setting}\n")
    head = ["topology", "set", "bound", "pooled", "pooled+admit (threshold)", "best baseline", *args.policies]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for t in args.topologies:
        top = preset(t)
        n = PRESETS[t].episode_requests
        for d in args.datasets:
            t0 = time.perf_counter()
            drawn = env.dataset(d)
            test = [episode_requests(top, drawn, n, args.seed, e, "test") for e in range(args.episodes)]
            train = [episode_requests(top, drawn, n, args.seed + 1, e, "train") for e in range(args.episodes)]
            bound = float(np.mean([b.ratio for b in episode_bounds(top, drawn, n, args.seed, args.episodes)]))
            pooled = float(np.mean([pooled_greedy(top, r) / len(r) for r in test]))
            best_t = max(THRESHOLDS, key=lambda a: sum(pooled_greedy(top, r, admit=a) for r in train))
            admit = float(np.mean([pooled_greedy(top, r, admit=best_t) / len(r) for r in test]))

            def acc(p: str, top: Topology = top, d: str = d, n: int = n) -> float:
                run = run_policy(top, d, p, n, args.episodes, args.seed, setting=args.setting)
                return float(run.summary()["acceptance_mean"])

            base = {p: acc(p) for p in BASELINES}
            best = max(base, key=base.__getitem__)
            cells = [t, d, f"{bound:.3f}", f"{pooled:.3f}", f"{admit:.3f} ({best_t})", f"{base[best]:.3f} {best}"]
            for p in args.policies:
                a = acc(p)
                share = (a - base[best]) / (bound - base[best]) if bound > base[best] else float("nan")
                cells.append(f"{a:.3f} ({share:+.0%} of the gap)")
            print("| " + " | ".join(cells) + f" |  <!-- {time.perf_counter() - t0:.0f} s -->", flush=True)


if __name__ == "__main__":
    main()
