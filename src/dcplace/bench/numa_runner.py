"""Summarise NUMA episodes into tidy records (one row per policy x scenario). The episodes themselves are run by
:func:`dcplace.sim.episodes.run_episodes`."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from dcplace.sim.numa import EpisodeResult, Scenario


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
    invalid: int
    """Episodes that ended on an infeasible action of the policy (status ``invalid``)."""
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
        invalid=sum(r.status == "invalid" for r in results),
        wall_s=wall,
        decisions_per_s=decisions / wall if wall > 0 else float("inf"),
    )
