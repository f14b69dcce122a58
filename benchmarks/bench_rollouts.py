"""Rollout collection inside one training run, 1 and 2 workers (issue 20, item 3): the time to collect one PPO
iteration of Nara (2,048 picks of whole episodes on ``--topology``) and one Double DQN epoch of CVD-RL (5 episodes at
``--pms`` machines), in this process, on a local process pool and on a local Ray instance. Each engine first plays
one warm-up round (workers unpickle the trainer and compile), then ``--repeats`` timed rounds of the SAME episodes
(the episode counter is reset), so every engine collects identical transitions; the script checks they are equal.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_rollouts.py --repeats 3

One Markdown row per (what, engine, workers): median seconds per round, the ratio to one worker in this process,
load average before / after.
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.cluster.topology import load_topology
from dcplace.learn.cvd_model import CvdConfig
from dcplace.learn.cvd_rl import CvdRlTrainer
from dcplace.learn.dqn import DQNConfig
from dcplace.learn.ppo import PPOConfig, PPOTrainer
from dcplace.parallel import executor
from dcplace.sim.episodes import prepare
from dcplace.sim.numa import Scenario
from dcplace.workload.traces import load_trace, trace_available

SMALL_BUFFER = DQNConfig(batch=256, buffer=2_048)  # collection only: the buffer is not filled here


def _load() -> str:
    return f"{os.getloadavg()[0]:.1f}"


def ppo_round(tr: PPOTrainer) -> Any:
    tr.episodes = 0
    b = tr.collect()
    return (len(b.action), int(np.sum(b.action)), float(np.sum(b.reward)))


def dqn_round(tr: CvdRlTrainer) -> Any:
    played = tr.rollouts.play("play", [(j,) for j in range(tr.dqn.episodes_per_epoch)])
    return [(length, len(rec.rows)) for rec, length in played]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--topology", default="alpha")
    ap.add_argument("--pms", type=int, default=50)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--engines", nargs="+", default=["inline", "processes", "ray"])
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {os.cpu_count()} cores")
    trace_name = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
    prepared = prepare(load_trace(trace_name, seed=0, synthetic_n=60_000), 32.0)
    top = load_topology(args.topology)
    builds = {
        f"PPO iteration, {args.topology} (2,048 picks)": (
            lambda out: PPOTrainer(top, "uniform", 0, out, PPOConfig()),
            ppo_round,
        ),
        f"DQN epoch, CVD-RL {args.pms} PMs (5 episodes, {trace_name})": (
            lambda out: CvdRlTrainer(
                prepared, Scenario(pms=args.pms, release=False, warm_start=0.5), 0, out, CvdConfig(), SMALL_BUFFER
            ),
            dqn_round,
        ),
    }
    print("| what | engine | workers | median s per round | rounds | vs 1 worker here | same transitions | load |")
    print("|---|---|---|---|---|---|---|---|")
    for what, (build, round_) in builds.items():
        base, ref = None, None
        for engine in args.engines:
            workers, address = (1, "") if engine == "inline" else (2, "local" if engine == "ray" else "")
            before = _load()
            with tempfile.TemporaryDirectory() as d, executor(workers, address) as ex:
                tr = build(Path(d))
                tr.use_executor(ex)
                got = round_(tr)  # warm-up: actors unpickled, numba compiled
                times = []
                for _ in range(args.repeats):
                    t0 = time.perf_counter()
                    again = round_(tr)
                    times.append(time.perf_counter() - t0)
                    assert again == got
            ref = got if ref is None else ref
            med = statistics.median(times)
            base = med if base is None else base
            print(f"| {what} | {engine} | {workers} | {med:.2f} | {args.repeats} | {base / med:.2f}x | "
                  f"{got == ref} | {before} / {_load()} |", flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
