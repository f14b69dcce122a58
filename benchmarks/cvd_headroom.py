"""How much can any scheduler gain at 50 PMs / 50 % warm start (releases off)? Best-Fit, industrial, a one-step
greedy on the delta reward (same candidates as CVD-RL), the shipped CVD-RL (the paper's loss and our per-machine
TD target) and the capacity ceiling on the same episodes: VMAgent's start rows (evaluation) and the validation
starts of the training rows.

    OMP_NUM_THREADS=1 python benchmarks/cvd_headroom.py [--episodes 20]
"""

from __future__ import annotations

import argparse

import numpy as np

from dcplace.bench.cvd_reproduction import ceiling
from dcplace.cluster.numa import NumaCluster
from dcplace.learn import cvd_features as F
from dcplace.learn.dqn import TRAIN_START_RANGE, VALIDATION_SEED, probe_types
from dcplace.learn.numa_policies import LearnedNuma
from dcplace.policies import get_policy
from dcplace.policies.numa_heuristics import Heuristic
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import prepare, start_seed
from dcplace.sim.numa import NumaSim, Scenario
from dcplace.workload.traces import load_trace, trace_available


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--episodes", type=int, default=20)
    args = ap.parse_args()
    trace = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
    p = prepare(load_trace(trace, synthetic_n=60_000), 32.0)
    types, tmulti, weight = probe_types(p)
    cvd = get_policy("cvd-rl")
    machine = get_policy("cvd-rl-machine")
    assert isinstance(cvd, LearnedNuma)
    print(f"# {trace}, 50 PMs, warm start 50 %, releases off, {args.episodes} episodes per row")
    cols = ("starts", "best-fit", "industrial", "greedy delta", "cvd-rl", "cvd-rl-machine", "ceiling",
            "ceiling / best heuristic")  # fmt: skip
    print("| " + " | ".join(cols) + " |")
    print("|---|---|---|---|---|---|---|---|")
    for label, rows, base in (("VMAgent's [1000, 10000) (evaluation)", (1000, 10000), 0),
                              ("training rows, validation seeds", TRAIN_START_RANGE, VALIDATION_SEED)):  # fmt: skip
        sim = NumaSim(NumaCluster.uniform(50), p, Scenario(pms=50, release=False, warm_start=0.5, start_range=rows))
        out: dict[str, list[float]] = {k: [] for k in ("bf", "ind", "greedy", "cvd", "machine", "ceiling")}
        for i in range(args.episodes):
            seed = start_seed(base, i)
            for key, name in (("bf", "best-fit"), ("ind", "industrial")):
                sim.reset(seed=seed)
                Heuristic(name).run(sim)
                out[key].append(sim.result().length)
            sim.reset(seed=seed)
            out["ceiling"].append(ceiling(sim, p))
            status = sim.status
            while status == K.DECIDE:
                r = sim.request
                acts = cvd.agent.candidates(sim)
                gains = [F.delta_reward(sim.free, sim.cap, p.demand[r], bool(p.multi[r]), int(a), types, tmulti,
                                        weight) for a in acts]  # fmt: skip
                status = sim.step(int(acts[int(np.argmax(gains))]))
            out["greedy"].append(sim.result().length)
            for key, pol in (("cvd", cvd), ("machine", machine)):
                sim.reset(seed=seed)
                pol.run(sim)
                out[key].append(sim.result().length)
        m = {k: float(np.mean(v)) for k, v in out.items()}
        best = max(m["bf"], m["ind"])
        print(f"| {label} | {m['bf']:.1f} | {m['ind']:.1f} | {m['greedy']:.1f} | {m['cvd']:.1f} | {m['machine']:.1f} | "
              f"{m['ceiling']:.1f} | {m['ceiling'] / best:.3f} |")  # fmt: skip


if __name__ == "__main__":
    main()
