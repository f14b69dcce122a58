"""Run policies on NUMA scheduling scenarios and summarise episodes into tidy records.

Episode ``i`` of a run with seed ``s`` draws its start from ``numpy.random.default_rng([s, i])``, so every policy
sees the same starts (common random numbers) and the same seed gives the same numbers.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dcplace.cluster.numa import NumaCluster
from dcplace.errors import InputError
from dcplace.policies import get_policy
from dcplace.sim.episodes import start_seed
from dcplace.sim.numa import EpisodeResult, HeuristicWeights, NumaSim, PreparedTrace, Scenario, oversize_mask
from dcplace.sim.numa_kernel import DECIDE
from dcplace.workload.table import RequestTable


def check_hostable(cluster: NumaCluster, trace: PreparedTrace) -> None:
    """Raise InputError naming the first request that no machine could ever host."""
    bad = np.flatnonzero(oversize_mask(cluster, trace))
    if len(bad):
        t = trace.table
        r = int(bad[0])
        node = cluster.capacity.max(axis=(0, 1))
        field = "cpu" if t.cpu[r] > node[0] * (cluster.numa if t.multi_numa[r] else 1) else "mem"
        raise InputError(
            f"VM {t.vmid[r]} ({t.cpu[r]:g} cores, {t.mem[r]:g} GB, "
            f"{'multi' if t.multi_numa[r] else 'single'}-NUMA) is larger than any machine can host "
            f"(NUMA nodes of {node[0]:g} cores, {node[1]:g} GB); {len(bad)} such VMs; "
            "use --oversize skip to count and skip them",
            path=t.source,
            line=int(t.line[r]) or None,
            field=field,
        )


def warm_up_jit(cluster: NumaCluster, trace: PreparedTrace) -> None:
    """Trigger numba compilation (or the cache load) outside any timed region."""
    sc = Scenario(pms=min(2, cluster.machines), start_range=(0, 1), max_requests=2)
    sim = NumaSim(cluster, trace, sc)
    for code in range(5):
        sim.reset(0)
        sim.run(code)


def run_episodes(
    policy_name: str,
    cluster: NumaCluster,
    trace: PreparedTrace,
    scenario: Scenario,
    episodes: int,
    seed: int,
    weights: HeuristicWeights | None = None,
    check: bool = False,
    checkpoint: str | None = None,
) -> tuple[list[EpisodeResult], float, int]:
    """Run ``episodes`` episodes; return results, wall seconds, and decisions made (scored + warm-up)."""
    if episodes < 1:
        raise InputError(f"--episodes must be at least 1, got {episodes}")
    policy = get_policy(policy_name, checkpoint)
    sim = NumaSim(cluster, trace, scenario, weights)
    results: list[EpisodeResult] = []
    decisions = 0
    wall = 0.0
    for i in range(episodes):
        t0 = time.perf_counter()
        status = sim.reset(seed=start_seed(seed, i))
        if status == DECIDE:
            policy.run(sim)
        wall += time.perf_counter() - t0
        if check:
            sim.check_invariants()
        res = sim.result()
        decisions += res.length + res.warm_placed
        results.append(res)
    return results, wall, decisions


@dataclass(frozen=True)
class RunSummary:
    """One row per (policy, scenario): means over episodes, plus wall time."""

    policy: str
    trace: str
    pms: int
    warm_start: float
    mode: str
    release: bool
    double_threshold: float
    episodes: int
    seed: int
    length_mean: float
    length_std: float
    income_mean: float
    income_std: float
    cpu_alloc_mean: float
    mem_alloc_mean: float
    pms_in_use_mean: float
    final_pms_mean: float
    oversize: int
    terminated: int
    truncated: int
    wall_s: float
    decisions_per_s: float

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def summarise(
    policy: str,
    trace_name: str,
    scenario: Scenario,
    double_threshold: float,
    seed: int,
    results: list[EpisodeResult],
    wall: float,
    decisions: int,
) -> RunSummary:
    length = np.array([r.length for r in results], float)
    income = np.array([r.income for r in results], float)
    return RunSummary(
        policy=policy,
        trace=trace_name,
        pms=scenario.pms,
        warm_start=scenario.warm_start,
        mode=scenario.mode,
        release=scenario.release,
        double_threshold=double_threshold,
        episodes=len(results),
        seed=seed,
        length_mean=float(length.mean()),
        length_std=float(length.std()),
        income_mean=float(income.mean()),
        income_std=float(income.std()),
        cpu_alloc_mean=float(np.mean([r.cpu_alloc_mean for r in results])),
        mem_alloc_mean=float(np.mean([r.mem_alloc_mean for r in results])),
        pms_in_use_mean=float(np.mean([r.pms_in_use_mean for r in results])),
        final_pms_mean=float(np.mean([r.final_pms for r in results])),
        oversize=int(sum(r.oversize for r in results)),
        terminated=sum(r.status == "terminated" for r in results),
        truncated=sum(r.status == "truncated" for r in results),
        wall_s=wall,
        decisions_per_s=decisions / wall if wall > 0 else float("inf"),
    )


def prepare(table: RequestTable, double_threshold: float) -> PreparedTrace:
    return PreparedTrace.build(table.with_double_numa_threshold(double_threshold))
