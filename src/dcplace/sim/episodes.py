"""Seeded NUMA episodes: the loop that runs a policy over a scenario, and the per-episode seeds.

Episode ``i`` of a run with seed ``s`` draws its start from ``numpy.random.default_rng([s, i])``, so every policy
sees the same starts (common random numbers) and the same seed gives the same numbers. The loop is the library's:
a policy only decides (``choose(view)``); a policy object that also has ``run(sim)`` (the compiled heuristics, or
:class:`dcplace.policies.NumaPolicy`'s default loop) finishes an episode itself with the same decisions.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Protocol

import numpy as np

from dcplace.cluster.numa import NumaCluster
from dcplace.config import check_seed
from dcplace.errors import InputError
from dcplace.sim.numa import EpisodeResult, NumaSim, NumaView, PreparedTrace, Scenario, oversize_mask
from dcplace.sim.numa_kernel import DECIDE, TERMINATED
from dcplace.sim.policy_calls import as_action, decide
from dcplace.workload.table import RequestTable


class Decider(Protocol):
    """The one call the episode loop needs from a policy (any :class:`dcplace.policies.NumaPolicy` answers it)."""

    def choose(self, view: NumaView) -> int: ...


def start_seed(seed: int, i: int) -> int:
    """The reset seed of episode ``i`` of a run with ``seed`` (the same starts for every policy)."""
    return int(np.random.default_rng([seed, i]).integers(2**63 - 1))


def prepare(table: RequestTable, double_threshold: float) -> PreparedTrace:
    """The kernel arrays of a trace whose VMs above ``double_threshold`` GB are multi-NUMA."""
    return PreparedTrace.build(table.with_double_numa_threshold(double_threshold))


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


def finish(sim: NumaSim, policy: Decider) -> int:
    """Finish ``sim``'s episode with ``policy`` deciding; return the final status."""
    run = getattr(policy, "run", None)
    if callable(run):
        status = int(run(sim))
        while status == TERMINATED and (status := sim.resume()) == DECIDE:  # the scenario's end rule
            status = int(run(sim))
        return status
    status = sim.status
    while status == DECIDE:
        status = sim.step(as_action(policy, decide(policy, sim.view())))
    return status


def run_episodes(
    policy: Decider,
    cluster: NumaCluster,
    trace: PreparedTrace,
    scenario: Scenario,
    episodes: int,
    seed: int,
    check: bool = False,
    on_episode: Callable[[int], None] | None = None,
) -> tuple[list[EpisodeResult], float, int]:
    """Run ``episodes`` seeded episodes of ``policy`` (an object); return results, wall seconds, and decisions
    made (scored + warm-up). ``on_episode(i)`` is called after episode ``i`` (a progress bar)."""
    if episodes < 1:
        raise InputError(f"must be at least 1, got {episodes}", field="episodes")
    check_seed(seed)
    if not isinstance(trace, PreparedTrace):  # a RequestTable failed inside the simulator
        raise InputError(f"must be a PreparedTrace (prepare(table, double_threshold) makes one), got a "
                         f"{type(trace).__name__}", field="trace")  # fmt: skip
    sim = NumaSim(cluster, trace, scenario)
    results: list[EpisodeResult] = []
    decisions = 0
    wall = 0.0
    for i in range(episodes):
        t0 = time.perf_counter()
        if sim.reset(seed=start_seed(seed, i)) == DECIDE:
            finish(sim, policy)
        wall += time.perf_counter() - t0
        if check:
            sim.check_invariants()
        res = sim.result()
        decisions += res.length + res.warm_placed
        results.append(res)
        if on_episode is not None:
            on_episode(i)
    return results, wall, decisions


def warm_up(policy: Decider, cluster: NumaCluster, trace: PreparedTrace, scenario: Scenario, seed: int,
            requests: int = 64) -> None:  # fmt: skip
    """Let a copy of ``policy`` play the first ``requests`` requests of one episode: a policy's one-off costs
    (compiling its kernels on a fresh install: 15 s for cvd-rl) stay out of a timed run, and what cannot act on this
    cluster (a model size) fails here, before any episode counts. The copy plays, so the policy's own state
    (counters, caches, a generator of its own) is untouched; a policy that cannot be copied (it holds a lock or an
    open file) is left as it is."""
    import copy
    from dataclasses import replace

    try:
        twin = copy.deepcopy(policy)
    except (TypeError, copy.Error):
        return
    run_episodes(twin, cluster, trace, replace(scenario, max_requests=requests), 1, seed)
