"""Several placement policies on the same seeded episodes, compared pairwise with a baseline: what a researcher runs to
ask whether a method beats another on a trace (``dcplace compare numa|netalloc``).

Every policy plays the same episodes (episode ``i`` is seeded alike for all: common random numbers), so a policy's
margin over the baseline is the t-interval of the paired ``a_i / b_i - 1`` (:func:`dcplace.bench.stats.paired_margin`)
and its difference that of ``a_i - b_i``: the spread the episodes share cancels, and an interval that leaves zero says
the policy is ahead (or behind) on these episodes, not by chance of which ones were drawn. Wins, ties and losses
count the episodes. A policy is anything ``--policy`` takes: a registered name or ``package.module:Class``.

    from dcplace.bench.compare import compare_numa
    table = compare_numa(["first-fit", "best-fit", "mypkg.policies:MyPolicy"], trace="synthetic", episodes=20)
    print(table.as_dict()["rows"][2]["margin"])

The metric is the papers' headline one: the scheduled length (requests placed until the first that fits nowhere) for
NUMA scheduling, the acceptance for network-aware allocation; the others' means ride along (income, allocation,
utilisation).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from dcplace.bench.stats import Interval, interval, paired_margin
from dcplace.errors import InputError
from dcplace.sim.numa import Scenario


@dataclass(frozen=True)
class PolicyRow:
    """One policy's episodes and how they compare with the baseline's."""

    policy: str
    values: list[float]
    """The metric, per episode (the same episodes for every row)."""
    mean: Interval
    margin: Interval | None
    """Paired ``a_i / b_i - 1`` over the baseline (None: the baseline itself, or a baseline episode at 0)."""
    difference: Interval | None
    """Paired ``a_i - b_i`` (None: the baseline itself)."""
    wins: int
    ties: int
    losses: int
    extra: dict[str, float] = field(default_factory=dict)
    """Other metrics' means over the episodes."""

    @property
    def verdict(self) -> str:
        """``ahead`` / ``behind`` where the paired difference's interval leaves zero, ``level`` where it holds it,
        ``baseline`` for the baseline, ``n/a`` with one episode (no interval)."""
        d = self.difference
        if d is None:
            return "baseline"
        if math.isnan(d.lo):
            return "n/a"
        return "ahead" if d.lo > 0 else "behind" if d.hi < 0 else "level"


@dataclass(frozen=True)
class Comparison:
    simulator: str
    """``numa`` or ``netalloc``."""
    metric: str
    baseline: str
    episodes: int
    rows: list[PolicyRow]
    context: dict[str, Any] = field(default_factory=dict)
    """What was run (trace, scenario, topology, ...), as given."""

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``dcplace compare ... --json`` (docs/cli.md)."""

        def iv(x: Interval | None) -> dict[str, float | None] | None:
            if x is None:
                return None
            return {k: None if math.isnan(v) else v for k, v in (("mean", x.mean), ("lo", x.lo), ("hi", x.hi))}

        return {"simulator": self.simulator, "metric": self.metric, "baseline": self.baseline,
                "episodes": self.episodes, **self.context,
                "rows": [{"policy": r.policy, "mean": iv(r.mean), "margin": iv(r.margin),
                          "difference": iv(r.difference), "verdict": r.verdict, "wins": r.wins, "ties": r.ties,
                          "losses": r.losses, "values": r.values, **r.extra} for r in self.rows]}  # fmt: skip


def compare(
    values: Mapping[str, Sequence[float]],
    baseline: str | None = None,
    *,
    simulator: str = "",
    metric: str = "",
    extras: Mapping[str, Mapping[str, float]] | None = None,
    context: Mapping[str, Any] | None = None,
) -> Comparison:
    """The comparison of per-episode ``values`` (policy -> the metric on each of the same episodes) with
    ``baseline`` (default: the first policy)."""
    if not values:
        raise InputError("needs at least one policy", field="policies")
    base = next(iter(values)) if baseline is None else baseline
    if base not in values:
        raise InputError(f"must be one of the policies compared ({', '.join(values)}), got {base!r}", field="baseline")
    b = [float(v) for v in values[base]]
    rows = []
    for name, vals in values.items():
        a = [float(v) for v in vals]
        if len(a) != len(b):
            raise ValueError(f"{name}: {len(a)} episodes against the baseline's {len(b)}")
        mine = name == base
        rows.append(PolicyRow(
            policy=name, values=a, mean=interval(a),
            margin=None if mine or min(b, default=0.0) <= 0 else paired_margin(a, b),
            difference=None if mine else interval([x - y for x, y in zip(a, b, strict=True)]),
            wins=sum(x > y for x, y in zip(a, b, strict=True)), ties=sum(x == y for x, y in zip(a, b, strict=True)),
            losses=sum(x < y for x, y in zip(a, b, strict=True)), extra=dict((extras or {}).get(name, {})),
        ))  # fmt: skip
    return Comparison(simulator, metric, base, len(b), rows, dict(context or {}))


def _checked(policies: Sequence[str], baseline: str | None) -> None:
    if len(policies) < 2:
        raise InputError(f"needs at least two policies to compare, got {len(policies)}", field="policies")
    twice = sorted({p for p in policies if list(policies).count(p) > 1})
    if twice:
        raise InputError(f"names {twice[0]!r} twice", field="policies")
    if baseline is not None and baseline not in policies:
        raise InputError(f"must be one of --policies ({', '.join(policies)}), got {baseline!r}", field="baseline")


def _built(build: Callable[..., Any], policy: str, seed: int) -> Any:
    """``build(policy)``, its refusal naming ``policies`` (the field the name came in)."""
    try:
        return build(policy, seed=seed)
    except InputError as e:
        raise InputError(e.detail, field="policies") from None


def compare_numa(
    policies: Sequence[str],
    trace: str = "synthetic",
    scenario: Scenario | None = None,
    episodes: int = 10,
    seed: int = 0,
    double_threshold: float = 32.0,
    oversize: str = "error",
    baseline: str | None = None,
    on_policy: Callable[[str], None] | None = None,
) -> Comparison:
    """``policies`` on the same seeded episodes of ``trace`` under ``scenario`` (CVD-RL's setting); the metric is
    the scheduled length. ``on_policy(name)`` is called as each policy starts (progress)."""
    from dcplace.cluster.numa import NumaCluster
    from dcplace.policies import get_policy
    from dcplace.policies.numa_heuristics import warm_up_jit
    from dcplace.sim.episodes import check_hostable, prepare, run_episodes
    from dcplace.workload.traces import load_trace

    _checked(policies, baseline)
    sc = scenario or Scenario()
    built = {p: _built(get_policy, p, seed) for p in policies}  # every name checked before any episode runs
    prepared = prepare(load_trace(trace, seed=seed), double_threshold)
    cluster = NumaCluster.uniform(sc.machines)
    if oversize == "error":
        check_hostable(cluster, prepared)
    warm_up_jit()
    values: dict[str, list[float]] = {}
    extras: dict[str, dict[str, float]] = {}
    for name, pol in built.items():
        if on_policy is not None:
            on_policy(name)
        results, _, _ = run_episodes(pol, cluster, prepared, sc, episodes, seed)
        values[name] = [float(r.length) for r in results]
        extras[name] = {k: sum(getattr(r, k) for r in results) / len(results)
                        for k in ("income", "cpu_alloc_mean", "mem_alloc_mean", "pms_in_use_mean")}  # fmt: skip
        extras[name]["invalid"] = float(sum(r.status == "invalid" for r in results))
    context = {"trace": trace, "pms": sc.pms, "mode": sc.mode, "warm_start": sc.warm_start, "release": sc.release,
               "double_threshold": double_threshold, "seed": seed}  # fmt: skip
    return compare(values, baseline, simulator="numa", metric="length", extras=extras, context=context)


def compare_netalloc(
    policies: Sequence[str],
    topology: str = "alpha",
    dataset: str = "uniform",
    episodes: int = 10,
    seed: int = 0,
    requests: int | None = None,
    split: str = "test",
    setting: str = "paper",
    baseline: str | None = None,
    on_policy: Callable[[str], None] | None = None,
) -> Comparison:
    """``policies`` on the same seeded request sequences of ``dataset`` on ``topology`` (Nara's setting); the metric
    is the acceptance."""
    from dcplace.bench.netalloc_runner import run_policy
    from dcplace.policies import get_net_policy

    _checked(policies, baseline)
    for p in policies:  # every name checked before any episode runs
        _built(get_net_policy, p, seed)
    values: dict[str, list[float]] = {}
    extras: dict[str, dict[str, float]] = {}
    for name in policies:
        if on_policy is not None:
            on_policy(name)
        run = run_policy(topology, dataset, name, requests, episodes, seed, split, setting=setting)
        s = run.summary()
        values[name] = list(s["acceptance_per_episode"])
        extras[name] = {"cpu_util_mean": s["cpu_util_mean"], "mem_util_mean": s["mem_util_mean"],
                        "servers_per_allocation_mean": s["servers_per_allocation_mean"]}  # fmt: skip
    context = {"topology": topology, "dataset": dataset, "requests": run.requests, "split": split, "setting": setting,
               "seed": seed}  # fmt: skip
    return compare(values, baseline, simulator="netalloc", metric="acceptance", extras=extras, context=context)
