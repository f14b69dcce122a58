"""Run netalloc policies over seeded episodes and summarise them (used by the CLI, the reproduction and benchmarks).
The per-episode seeds and requests are :mod:`dcplace.sim.netalloc_episodes`'s."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.cluster.topology import Topology, load_topology
from dcplace.config import check_seed
from dcplace.errors import InputError
from dcplace.policies import NumaPolicy, get_net_policy
from dcplace.sim.netalloc import LOCALITY_NAMES, NetResult
from dcplace.sim.netalloc_episodes import (
    Routings,
    ServerPicker,
    default_requests,
    episode_requests,
    episode_seed,
    get_setting,
    new_sim,
    run_episode,
)
from dcplace.workload.netreq import DATASETS, VARIANTS, is_named_set


@dataclass
class NetRun:
    policy: str
    topology: str
    dataset: str
    requests: int
    results: list[NetResult] = field(default_factory=list)
    wall_s: float = 0.0

    def summary(self) -> dict[str, Any]:
        rs = self.results
        acc = np.array([r.acceptance for r in rs])
        decisions = sum(r.decisions for r in rs)
        tiers = rs[0].bw_util_by_tier.keys() if rs else []
        loc = np.bincount(np.concatenate([np.array(r.locality, dtype=np.int64) for r in rs]), minlength=4)
        spa = np.concatenate([np.array(r.servers_per_allocation, dtype=np.int64) for r in rs])
        rejected: dict[str, int] = {}
        for r in rs:
            for k, v in r.rejected.items():
                rejected[k] = rejected.get(k, 0) + v
        return {
            "policy": self.policy,
            "topology": self.topology,
            "dataset": self.dataset,
            "requests": self.requests,
            "episodes": len(rs),
            "acceptance_mean": float(acc.mean()),
            "acceptance_std": float(acc.std()),
            "acceptance_per_episode": [float(a) for a in acc],
            "cpu_util_mean": float(np.mean([r.cpu_util for r in rs])),
            "mem_util_mean": float(np.mean([r.mem_util for r in rs])),
            "bw_util_by_tier": {t: float(np.mean([r.bw_util_by_tier[t] for r in rs])) for t in tiers},
            "locality": {name: float(loc[i] / max(loc.sum(), 1)) for i, name in enumerate(LOCALITY_NAMES)},
            "servers_per_allocation_mean": float(spa.mean()) if len(spa) else 0.0,
            "servers_per_allocation_hist": np.bincount(spa).tolist() if len(spa) else [],
            "rejected": rejected,
            "waited_mean": float(np.mean([r.waited for r in rs])) if rs else 0.0,
            "wall_s": self.wall_s,
            "decisions": decisions,
            "decisions_per_s": decisions / self.wall_s if self.wall_s > 0 else 0.0,
        }


def run_policy(
    topology: Topology | str,
    dataset: str,
    policy: str | ServerPicker,
    n_requests: int | None = None,
    episodes: int = 5,
    seed: int = 0,
    split: str = "test",
    check: bool = False,
    checkpoint: str | None = None,
    label: str | None = None,
    on_episode: Callable[[int], None] | None = None,
    setting: str = "paper",
    on_request: Callable[[int], None] | None = None,
) -> NetRun:
    """``episodes`` seeded episodes of one policy: a name (``module:Class`` and entry points too), built afresh and
    seeded for every episode, or a policy object, used as it is for every episode. ``check`` verifies the ledger
    after every episode; ``checkpoint`` is the weights file of a learned policy (default: the one shipped for
    ``dataset`` as the setting draws it, e.g. ``uniform-v1`` under ``v1``); ``label`` names the run;
    ``on_episode(e)`` is called after episode ``e`` and ``on_request(n)`` as requests are decided (progress bars;
    :func:`dcplace.sim.netalloc_episodes.run_episode`); ``setting`` names the environment's reading
    (:data:`dcplace.sim.netalloc_episodes.SETTINGS`: routing and what the request-set names draw)."""
    top = topology if isinstance(topology, Topology) else load_topology(topology)
    if episodes < 1:
        raise InputError(f"must be at least 1, got {episodes}", field="episodes")
    check_seed(seed)
    if split not in ("train", "test"):  # "dev" failed inside numpy, or ran silently on a uniform set
        raise InputError(f"must be train or test, got {split!r}", field="split")
    if isinstance(policy, NumaPolicy) or not (isinstance(policy, str) or callable(getattr(policy, "choose", None))):
        what = type(policy).__name__  # a NUMA policy failed with "'NetView' object has no attribute 'changes'"
        raise InputError(f"must be a network-allocation policy (a name or a NetPolicy), got a {what}; NUMA "
                         "policies run in dcplace.sim.episodes.run_episodes", field="policy")  # fmt: skip
    n = n_requests if n_requests is not None else default_requests(top)
    if n < 1:
        raise InputError(f"must be at least 1, got {n}", field="requests")
    env = get_setting(setting)
    if not is_named_set(dataset) and not Path(dataset).is_file():
        raise InputError(
            f"must be one of {', '.join(DATASETS + VARIANTS)} or an existing request CSV, got {dataset!r}",
            field="dataset",
        )
    drawn = env.dataset(dataset)  # the set as drawn: a learned policy's default agent is the one for it
    if isinstance(policy, str):
        get_net_policy(policy, 0, drawn, checkpoint)  # fail on a bad name or checkpoint before any work
    name = policy if isinstance(policy, str) else str(getattr(policy, "name", type(policy).__name__))
    data_label = dataset if is_named_set(dataset) else Path(dataset).name
    run = NetRun(label or name, top.name, data_label, n)
    routings = Routings(top, env)
    for e in range(episodes):
        req = episode_requests(top, drawn, n, seed, e, split)
        run.requests = len(req)
        pol = (
            get_net_policy(env.policy(policy), episode_seed(seed, e), drawn, checkpoint)
            if isinstance(policy, str)
            else policy
        )
        sim = new_sim(top, req, routings, pol)
        t0 = time.perf_counter()
        res = run_episode(sim, pol, on_request)
        run.wall_s += time.perf_counter() - t0
        if check:
            sim.check_invariants()
            sim.drain()
            sim.check_invariants()
        run.results.append(res)
        if on_episode is not None:
            on_episode(e)
    return run


def plot_runs(runs: list[NetRun], path: Path, title: str) -> None:
    """A Figure-2-style panel: utilisation per resource and tier, locality of accepted requests, and servers per
    allocation, one bar group per policy."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    sums = [r.summary() for r in runs]
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    width = 0.8 / max(len(sums), 1)
    util_keys = ["cpu", "mem", *sums[0]["bw_util_by_tier"].keys()]
    for i, s in enumerate(sums):
        vals = [s["cpu_util_mean"], s["mem_util_mean"], *s["bw_util_by_tier"].values()]
        axes[0].bar(np.arange(len(vals)) + i * width, vals, width, label=s["policy"])
        axes[1].bar(np.arange(4) + i * width, list(s["locality"].values()), width, label=s["policy"])
        hist = np.array(s["servers_per_allocation_hist"], dtype=float)
        if hist.sum():
            hist = hist / hist.sum()
        axes[2].bar(np.arange(len(hist)) + i * width, hist, width, label=s["policy"])
    axes[0].set_xticks(np.arange(len(util_keys)) + 0.4 - width / 2, util_keys, rotation=20)
    axes[0].set_ylabel("utilisation (mean over steps)")
    axes[1].set_xticks(np.arange(4) + 0.4 - width / 2, ["1 server", "1 rack", "neighb. racks", "other racks"])
    axes[1].set_ylabel("share of accepted requests")
    axes[2].set_xlabel("servers per allocation")
    axes[2].set_ylabel("share of accepted requests")
    axes[0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=90)
    plt.close(fig)
