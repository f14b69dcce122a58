"""The paper's one-layer policy head P2 against ours with a 16-unit hidden layer (docs/nara.md): same PPO, same
seeds, alpha; how soon validation takes off, the best validation and the test acceptance of the best weights.

    OMP_NUM_THREADS=1 python benchmarks/ablation_nara_p2.py [--dataset uniform] [--iterations 60] [--seeds 0 1]
"""

from __future__ import annotations

import argparse
import math
import tempfile
from pathlib import Path

import torch

from dcplace.cluster.topology import preset
from dcplace.learn import checkpoint
from dcplace.learn.nara_model import NaraConfig
from dcplace.learn.ppo import Trainer, greedy_acceptance


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="uniform")
    ap.add_argument("--iterations", type=int, default=60)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--takeoff", type=float, default=0.65, help="validation acceptance that counts as learned")
    args = ap.parse_args()
    torch.set_num_threads(1)
    top = preset("alpha")
    print(f"alpha / {args.dataset}, {args.iterations} iterations; take-off = first validation >= {args.takeoff}")
    print("| P2 | seed | take-off iteration | best validation | test acceptance (5 x 128, seed 0) | wall s |")
    print("|---|---|---|---|---|---|")
    for p2 in (0, 16):
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as tmp:
                tr = Trainer(top, args.dataset, seed, Path(tmp), model=NaraConfig(p2_hidden=p2))
                tr.train(args.iterations)
                vals = [(r["iteration"], r["validation_acceptance"]) for r in tr.curves]
                vals = [(i, v) for i, v in vals if not math.isnan(v)]
                takeoff = next((int(i) for i, v in vals if v >= args.takeoff), None)
                net, _ = checkpoint.load(Path(tmp) / "policy.pt")
                test = greedy_acceptance(net, top, args.dataset, 128, 0, 5, "test")
            label = "paper (linear)" if p2 == 0 else f"hidden {p2}"
            print(f"| {label} | {seed} | {takeoff if takeoff is not None else 'never'} | {tr.best_validation:.3f} | "
                  f"{test:.3f} | {tr.wall_s:.0f} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
