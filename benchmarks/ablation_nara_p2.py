"""The paper's one-layer policy head P2 against one with a 16-unit hidden layer (docs/nara.md): same PPO, same
seeds, trained on alpha; how soon validation takes off, the best validation, and the test acceptance of the best
weights on alpha (5 x 128 requests) and, without retraining, on gamma (1 x 896) and delta (1 x 4,096).

    OMP_NUM_THREADS=1 python benchmarks/ablation_nara_p2.py [--dataset uniform] [--iterations 100] [--seeds 0 1]
        [--variants paper hidden mixed]

``mixed`` trains the paper's head on alpha and, in turn, a 160-server Fabric with gamma's 40-server racks and link
capacities (4 racks, 5:1 and 2:1): does seeing big racks in training help on gamma and delta?
"""

from __future__ import annotations

import argparse
import math
import tempfile
from fractions import Fraction
from pathlib import Path

import torch

from dcplace.cluster.topology import Topology, fabric_from_oversubscription, preset
from dcplace.learn import checkpoint
from dcplace.learn.nara_model import NaraConfig
from dcplace.learn.ppo import PPOTrainer, greedy_acceptance


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", default="uniform")
    ap.add_argument("--iterations", type=int, default=100)
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1])
    ap.add_argument("--takeoff", type=float, default=0.65, help="validation acceptance that counts as learned")
    ap.add_argument("--variants", nargs="+", default=["paper", "hidden"], choices=["paper", "hidden", "mixed"])
    args = ap.parse_args()
    torch.set_num_threads(1)
    top = preset("alpha")
    print(f"alpha / {args.dataset}, {args.iterations} iterations; take-off = first validation >= {args.takeoff}")
    print("| P2 | seed | take-off iteration | best validation | alpha test | gamma test | delta test | delta / alpha "
          "| training s |")  # fmt: skip
    print("|---|---|---|---|---|---|---|---|---|")
    big_racks = fabric_from_oversubscription(40, 4, Fraction(5), Fraction(2), capacity=(1, 2, 2), name="big-racks")
    variants: dict[str, tuple[int, list[Topology]]] = {
        "paper": (0, [top]),
        "hidden": (16, [top]),
        "mixed": (0, [top, big_racks]),
    }
    for name in args.variants:
        p2, topologies = variants[name]
        for seed in args.seeds:
            with tempfile.TemporaryDirectory() as tmp:
                tr = PPOTrainer(topologies, args.dataset, seed, Path(tmp), model=NaraConfig(p2_hidden=p2))
                tr.train(args.iterations)
                vals = [(r["iteration"], r["validation_acceptance"]) for r in tr.curves]
                vals = [(i, v) for i, v in vals if not math.isnan(v)]
                takeoff = next((int(i) for i, v in vals if v >= args.takeoff), None)
                net, _ = checkpoint.load(Path(tmp) / "policy.pt")
            test = greedy_acceptance(net, top, args.dataset, 128, 0, 5, "test")
            gamma = greedy_acceptance(net, preset("gamma"), args.dataset, 896, 0, 1, "test")
            delta = greedy_acceptance(net, preset("delta"), args.dataset, 4096, 0, 1, "test")
            label = {"paper": "paper (linear)", "hidden": "hidden 16", "mixed": "paper, alpha + big racks"}[name]
            print(f"| {label} | {seed} | {takeoff if takeoff is not None else 'never'} | {tr.best_validation:.3f} | "
                  f"{test:.3f} | {gamma:.3f} | {delta:.3f} | {delta / test - 1:+.0%} | {tr.wall_s:.0f} |",
                  flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
