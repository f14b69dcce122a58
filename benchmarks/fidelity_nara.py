"""Why our Tetris accepts less than the paper's on alpha: where its path-check failures come from.

For each request set, 5 test episodes of 128 requests on alpha (the reproduction's episodes): Tetris's acceptance,
its network rejections, and how many of its first picks went to a server whose uplink already had less free
bandwidth than the request needs (such a request fails at its second pick whatever follows).

    python benchmarks/fidelity_nara.py [--episodes 5] [--datasets uniform azure alibaba]
"""

from __future__ import annotations

import argparse
import os

os.environ.setdefault("OMP_NUM_THREADS", "1")

import numpy as np

from dcplace.cluster.topology import preset
from dcplace.policies.netalloc_heuristics import Tetris
from dcplace.sim.netalloc import NetAllocSim, NetView
from dcplace.sim.netalloc_episodes import episode_requests, run_episode


class ProbedTetris(Tetris):
    """Tetris that counts first picks onto servers whose uplink cannot carry the request."""

    def __init__(self) -> None:
        super().__init__()
        self.firsts = 0
        self.thin_firsts = 0

    def choose(self, view: NetView) -> int:
        v = super().choose(view)
        if not view.picks and view.topology.fabric_shape is not None:
            self.firsts += 1
            self.thin_firsts += int(view.free_bw[v] < view.request[2])  # link id v = server v's uplink
        return v


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--episodes", type=int, default=5, help="test episodes (128 requests each) per request set")
    ap.add_argument("--datasets", nargs="+", default=["uniform", "azure", "alibaba"], help="request sets")
    args = ap.parse_args()
    top = preset("alpha")
    print("| set | acceptance | network rejections | first picks on a thin uplink | first picks |")
    print("|---|---|---|---|---|")
    for dataset in args.datasets:
        acc, rejected, thin, firsts = [], 0, 0, 0
        for e in range(args.episodes):
            sim = NetAllocSim(top, episode_requests(top, dataset, 128, 0, e))
            pol = ProbedTetris()
            res = run_episode(sim, pol)
            acc.append(res.acceptance)
            rejected += res.rejected["network"]
            thin += pol.thin_firsts
            firsts += pol.firsts
        print(f"| {dataset} | {np.mean(acc):.3f} | {rejected} | {thin} | {firsts} |")


if __name__ == "__main__":
    main()
