"""Can the paper's Nara network learn ``tetris-bw``? DAgger (imitation with the student's own states) on one topology
and request set, in the ``paper`` setting (requests wait for room).

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/nara_imitation.py [--topology alpha] [--dataset alibaba]
        [--episodes 60] [--rounds 12] [--epochs 8] [--lr 1e-3] [--init CHECKPOINT] [--wide] [--embed 16]
        [--p2-hidden 0] [--relu-per-message] [--out DIR]

Round 0 plays ``--episodes`` training-split episodes of 128 requests with the teacher (``tetris-bw``) and records
each state with the teacher's pick; every later round plays as many with the network's greedy picks and records the
teacher's pick in the states the network reached (DAgger, Ross et al. 2011). After each round the network (the
paper's architecture; ``--init``: from a checkpoint's weights, else a fresh one of seed 0) is trained ``--epochs``
passes over everything recorded (cross-entropy on the masked logits, Adam 1e-3, minibatches of 256), then validated
greedily on 20 training-split episodes (seed 999, as ``dcplace train nara`` validates) and saved as ``DIR/roundR.pt``
(a Nara checkpoint: ``compare netalloc --policies nara=DIR/roundR.pt``, ``simulate netalloc --policy nara
--checkpoint DIR/roundR.pt``, ``benchmarks/nara_full_cluster.py --nara --checkpoint``), also for a fresh network of
other sizes (``--embed``, units per message-passing stage, the paper's 16; ``--p2-hidden``, a hidden layer in the
policy head, the paper's none; ``--relu-per-message``, the other reading of where appendix E.1's ReLU sits,
``NaraConfig.relu_per_message``). ``--wide`` adds two node features the paper's observation lacks, each server's free
CPU and memory as a share of a server (the paper's are capped at what the request still needs): a variant, not the
paper's network, whose checkpoints the netalloc commands refuse (they observe as the paper does); ``--unclipped``
divides each server's free CPU and memory by what the request still needs without the paper's cap at 1, whose
checkpoints the netalloc commands load but feed the capped observation (evaluate them with this script's
validation only). Prints per
round: the teacher's agreement on the recorded states, the acceptance of the round's rollouts and the validation.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

import dcplace.learn.nara_model as nara_model
from dcplace.cluster.topology import preset
from dcplace.envs.net_alloc import NetObserver
from dcplace.learn import checkpoint
from dcplace.learn.nara_model import GraphIndex, NaraConfig, NaraNet, obs_tensors
from dcplace.learn.ppo import Batch
from dcplace.policies.registry import get_net_policy
from dcplace.sim.netalloc import NetAllocSim
from dcplace.sim.netalloc_episodes import episode_requests

EPISODE_SEED = 7000
VALIDATION_SEED, VALIDATION_EPISODES = 999, 20


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topology", default="alpha")
    ap.add_argument("--dataset", default="alibaba")
    ap.add_argument("--episodes", type=int, default=60)
    ap.add_argument("--rounds", type=int, default=12)
    ap.add_argument("--epochs", type=int, default=8)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--init", type=Path)
    ap.add_argument("--wide", action="store_true")
    ap.add_argument("--embed", type=int, default=16)
    ap.add_argument("--p2-hidden", type=int, default=0)
    ap.add_argument("--relu-per-message", action="store_true")
    ap.add_argument("--unclipped", action="store_true")
    ap.add_argument("--out", type=Path, default=Path("results/nara-imitation"))
    args = ap.parse_args()
    if args.init is not None and (args.embed != 16 or args.p2_hidden or args.relu_per_message):
        ap.error("--init keeps its checkpoint's network: leave out --embed, --p2-hidden and --relu-per-message")
    torch.set_num_threads(1)
    top = preset(args.topology)
    if args.wide:
        nara_model.NODE_FEATURES = 6  # read when the network is built
    g, paper = GraphIndex(top), NetObserver(top)

    def observe(sim: NetAllocSim) -> dict[str, Any]:
        o = paper(sim)
        if args.unclipped and not sim.done:  # free / still needed, not capped at 1
            o["nodes"][: top.n_servers, 0] = sim.free_cpu / max(sim.need_cpu, 1)
            o["nodes"][: top.n_servers, 1] = sim.free_mem / max(sim.need_mem, 1)
        if not args.wide:
            return o
        nodes = np.zeros((o["nodes"].shape[0], 6), dtype=np.float32)
        nodes[:, :4] = o["nodes"]
        nodes[: top.n_servers, 4] = sim.free_cpu / 10.0
        nodes[: top.n_servers, 5] = sim.free_mem / 10.0
        return {**o, "nodes": nodes}

    def greedy(net: NaraNet, sim: NetAllocSim) -> int:
        nodes, edges, state, mask = obs_tensors(observe(sim))
        return int(net.policy(nodes, edges, state, mask, g).argmax())

    def validate(net: NaraNet) -> float:
        acc = []
        for e in range(VALIDATION_EPISODES):
            sim = NetAllocSim(top, episode_requests(top, args.dataset, 128, VALIDATION_SEED, e, "train"),
                              on_full="wait")  # fmt: skip
            while not sim.done:
                sim.pick(greedy(net, sim))
            acc.append(sim.result().acceptance)
        return float(np.mean(acc))

    teacher = get_net_policy("tetris-bw")
    if args.init is not None:
        net, _ = checkpoint.load(args.init)
    else:
        torch.manual_seed(0)
        net = NaraNet(NaraConfig(embed=args.embed, p2_hidden=args.p2_hidden, relu_per_message=args.relu_per_message))
    opt = torch.optim.Adam(net.parameters(), lr=args.lr)
    data = Batch()
    t0, played = time.time(), 0
    for r in range(args.rounds + 1):
        net.eval()
        accs = []
        with torch.inference_mode():
            for _ in range(args.episodes):
                sim = NetAllocSim(top, episode_requests(top, args.dataset, 128, EPISODE_SEED, played, "train"),
                                  on_full="wait")  # fmt: skip
                played += 1
                while not sim.done:
                    obs = observe(sim)
                    label = teacher.choose(sim.view())
                    for name, value in (("nodes", obs["nodes"]), ("edges", obs["edges"]), ("state", obs["state"]),
                                        ("mask", obs["action_mask"])):  # fmt: skip
                        getattr(data, name).append(value)
                    data.action.append(int(label))
                    data.logp.append(0.0)
                    sim.pick(label if r == 0 else greedy(net, sim))
                accs.append(sim.result().acceptance)
        t, n = data.tensors(), len(data.action)
        net.train()
        gen = torch.Generator().manual_seed(r)
        for _ in range(args.epochs):
            order, agree = torch.randperm(n, generator=gen), 0
            for lo in range(0, n, 256):
                idx = order[lo : lo + 256]
                logits = net.policy(t["nodes"][idx], t["edges"][idx], t["state"][idx], t["mask"][idx], g)
                loss = torch.nn.functional.cross_entropy(logits, t["action"][idx])
                opt.zero_grad()
                loss.backward()  # type: ignore[no-untyped-call]
                opt.step()
                agree += int((logits.argmax(1) == t["action"][idx]).sum())
        net.eval()
        with torch.inference_mode():
            val = validate(net)
        print(f"round {r}: {n:,} states, the teacher's pick in {agree / n:.3f} of them after training; rollouts "
              f"({'teacher' if r == 0 else 'network'}) {np.mean(accs):.3f}; validation {val:.3f}; "
              f"{time.time() - t0:.0f} s", flush=True)  # fmt: skip
        meta = {"topology": args.topology, "dataset": args.dataset, "validation_acceptance": val,
                "imitation": {k: str(v) for k, v in vars(args).items()}, "round": r}  # fmt: skip
        checkpoint.save(args.out / f"round{r}.pt", net, meta)


if __name__ == "__main__":
    main()
