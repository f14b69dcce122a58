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

The metric is by default the papers' headline one: the scheduled length (requests placed until the first that fits
nowhere) for NUMA scheduling, the acceptance for network-aware allocation; ``metric`` picks another of
:data:`NUMA_METRICS` / :data:`NET_METRICS` (in Expansion mode every policy places every request, so the length ties:
compare machines in use there). The verdict tests the paired *difference* (``ahead`` / ``behind`` where its interval
leaves zero, in the metric's better direction); the margin beside it is descriptive (an interval of ratios, which can
leave zero where the difference's does not). A difference with no spread over the episodes (every episode the same
gap, as discrete metrics give over few episodes) has an interval of zero width, which says nothing: its verdict is
``no spread`` unless a sign test decides it (all of at least 6 episodes the same way, p < 0.05).

Several policies against one baseline are a family of tests, and the verdicts hold for the family: each row's
p-value (the paired t-test whose interval is shown; the sign test's for a row with no spread) is adjusted by Holm's
step-down over the rows that are policies (:func:`dcplace.bench.stats.holm`; not the baseline, not a bound row), and a
row is ``ahead`` or ``behind`` only where its interval leaves zero *and* its adjusted p-value is below 0.05. So the
chance that any ``ahead`` or ``behind`` of one table is a fluke of the episodes drawn stays at 5 %, however many
policies it compares. A lone comparison is judged by its interval alone, as before; with more, a row whose
interval just leaves zero can read ``level``, and its ``p`` and ``p_holm`` (in ``--json``) say why. A row shown but
not tested (a bound) is judged by its interval alone.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import math
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from dcplace.bench.stats import Interval, holm, interval, no_spread, paired_p, sign_test_p
from dcplace.config import check_seed
from dcplace.engine.explain import REASONS
from dcplace.errors import InputError
from dcplace.sim.numa import Scenario

NUMA_METRICS = {"length": 1, "income": 1, "cpu_alloc": 1, "mem_alloc": 1, "pms_in_use": -1, "final_pms": -1}
"""``compare numa``'s metrics and their better direction (1: higher is better)."""
NET_METRICS = {"acceptance": 1, "cpu_util": 1, "mem_util": 1, "servers_per_allocation": -1}
"""``compare netalloc``'s metrics (shares in [0, 1] but the servers per allocation) and their better direction."""
BOUND_ROW = "bound (clairvoyant)"
"""``compare netalloc --bound``'s last row (the name no policy can take: it holds a space and parentheses)."""
SIGN_TEST_EPISODES = 6
"""The fewest episodes all won (or lost) that a two-sided sign test calls at 5 % (2 x 0.5**6 = 0.031)."""
ALPHA = 0.05
"""The family-wise error rate of one table's verdicts."""


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
    """Every metric's mean over the episodes (and ``invalid``: episodes ended on an infeasible action)."""
    better: int = 1
    """The metric's better direction (1: higher)."""
    p: float = math.nan
    """The two-sided p-value of the paired difference (the t-test; the sign test where the difference has no
    spread); nan for the baseline, one episode or a descriptive row."""
    p_holm: float = math.nan
    """``p`` adjusted by Holm over the table's policy rows (module docstring); nan where ``p`` is."""
    family: int = 1
    """How many rows the table tests (Holm's m): with one, the verdict is the interval's alone, as before Holm."""

    @property
    def no_spread(self) -> bool:
        """The same gap on every episode (but for rounding, :func:`dcplace.bench.stats.no_spread`): the t-interval
        has (nearly) zero width and nothing to say."""
        d = self.difference
        return d is not None and d.mean != 0 and no_spread(d.hi - d.lo, d.mean)

    @property
    def verdict(self) -> str:
        """``ahead`` / ``behind`` (in the metric's better direction) where the paired difference's interval leaves
        zero and the Holm-adjusted p-value is below :data:`ALPHA`, ``level`` otherwise, ``no spread`` where the
        interval has zero width and no sign test decides (module docstring), ``baseline`` for the baseline, ``n/a``
        with one episode (no interval). A descriptive row (no p-value: a bound) is judged by its interval alone."""
        d = self.difference
        if d is None:
            return "baseline"
        if math.isnan(d.lo):
            return "n/a"
        # one comparison, or a row not tested (a bound): the interval alone, as before Holm (the t table's 3
        # decimals and the exact p-value disagree by up to 5e-5 at the edge)
        family_ok = self.family <= 1 or math.isnan(self.p) or self.p_holm < ALPHA
        if self.no_spread:
            n = self.wins + self.ties + self.losses
            if n >= SIGN_TEST_EPISODES and (self.wins == n or self.losses == n) and family_ok:
                return "ahead" if self.wins == n else "behind"
            return "no spread"
        if d.lo > 0 and family_ok:
            return "ahead" if self.better > 0 else "behind"
        if d.hi < 0 and family_ok:
            return "behind" if self.better > 0 else "ahead"
        return "level"


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
    episode_metrics: dict[str, list[dict[str, float]]] = field(default_factory=dict)
    """Policy -> every metric of each episode (``--out``'s episodes.csv)."""

    @property
    def saturated(self) -> bool:
        """Every policy tied the baseline on every episode: the metric cannot tell them apart here (Expansion mode's
        length, every episode cut at ``max_requests``)."""
        return len(self.rows) > 1 and all(r.ties == self.episodes for r in self.rows if r.difference is not None)

    @property
    def _better(self) -> int:
        return self.rows[0].better if self.rows else 1

    def as_dict(self) -> dict[str, Any]:
        """The JSON of ``dcplace compare ... --json`` (docs/cli.md)."""

        def iv(x: Interval | None) -> dict[str, float | None] | None:
            if x is None:
                return None
            return {k: None if math.isnan(v) else v for k, v in (("mean", x.mean), ("lo", x.lo), ("hi", x.hi))}

        return {"simulator": self.simulator, "metric": self.metric, "better": "higher" if self._better > 0 else
                "lower", "baseline": self.baseline, "episodes": self.episodes, **self.context,
                "rows": [{"policy": r.policy, "mean": iv(r.mean), "margin": iv(r.margin),
                          "difference": iv(r.difference), "verdict": r.verdict, "p": _num(r.p),
                          "p_holm": _num(r.p_holm), "wins": r.wins, "ties": r.ties, "losses": r.losses,
                          "values": r.values, **r.extra} for r in self.rows]}  # fmt: skip


def _num(x: float) -> float | None:
    return None if math.isnan(x) else x


def compare(
    values: Mapping[str, Sequence[float]],
    baseline: str | None = None,
    *,
    simulator: str = "",
    metric: str = "",
    extras: Mapping[str, Mapping[str, float]] | None = None,
    context: Mapping[str, Any] | None = None,
    better: int = 1,
    within: tuple[float, float] | None = None,
    descriptive: Sequence[str] = (),
) -> Comparison:
    """The comparison of per-episode ``values`` (policy -> the metric on each of the same episodes) with
    ``baseline`` (default: the first policy). ``better``: 1 where higher is better, -1 where lower is;
    ``within``: the range the metric cannot leave (a share's ``(0, 1)``), to which intervals are cut;
    ``descriptive``: rows shown beside the policies but not tested (a bound): no p-value, not in Holm's family."""
    if not values:
        raise InputError("needs at least one policy", field="policies")
    base = next(iter(values)) if baseline is None else baseline
    if base not in values:
        raise InputError(f"must be one of the policies compared ({', '.join(values)}), got {base!r}", field="baseline")
    b = [float(v) for v in values[base]]
    span = None if within is None else (within[0] - within[1], within[1] - within[0])  # of a difference
    rows = []
    for name, vals in values.items():
        a = [float(v) for v in vals]
        if len(a) != len(b):
            raise ValueError(f"{name}: {len(a)} episodes against the baseline's {len(b)}")
        mine = name == base
        ahead = [(x - y) * better > 0 for x, y in zip(a, b, strict=True)]
        behind = [(x - y) * better < 0 for x, y in zip(a, b, strict=True)]
        ratios = None if mine or min(b, default=0.0) <= 0 else [x / y - 1 for x, y in zip(a, b, strict=True)]
        rows.append(PolicyRow(
            policy=name, values=a, mean=interval(a, within),
            margin=None if ratios is None else interval(ratios, (-1.0, math.inf)),
            difference=None if mine else interval([x - y for x, y in zip(a, b, strict=True)], span),
            wins=sum(ahead), ties=len(a) - sum(ahead) - sum(behind), losses=sum(behind),
            extra=dict((extras or {}).get(name, {})), better=better,
        ))  # fmt: skip
    tested = [r.policy != base and r.policy not in descriptive for r in rows]
    ps = [_row_p(r, b) if t else math.nan for r, t in zip(rows, tested, strict=True)]
    rows = [replace(r, p=p, p_holm=q, family=sum(tested)) for r, p, q in zip(rows, ps, holm(ps), strict=True)]
    return Comparison(simulator, metric, base, len(b), rows, dict(context or {}))


def _row_p(row: PolicyRow, base: Sequence[float]) -> float:
    """The row's p-value against the baseline's values ``base``: the sign test's where the difference has no spread
    (the t-test's is 0 there and says nothing), the paired t-test's otherwise (nan with one episode)."""
    if row.no_spread:
        return sign_test_p(row.wins, row.losses)
    return paired_p([x - y for x, y in zip(row.values, base, strict=True)])


def _checked(policies: Sequence[str], baseline: str | None, metric: str, metrics: Mapping[str, int]) -> None:
    if len(policies) < 2:
        raise InputError(f"needs at least two policies to compare, got {len(policies)} (repeat --policies for each)",
                         field="policies")  # fmt: skip
    twice = sorted({p for p in policies if list(policies).count(p) > 1})
    if twice:
        raise InputError(f"names {twice[0]!r} twice", field="policies")
    if baseline is not None and baseline not in policies:
        raise InputError(f"must be one of --policies ({', '.join(policies)}), got {baseline!r}", field="baseline")
    if metric not in metrics:
        raise InputError(f"must be one of {', '.join(metrics)}, got {metric!r}", field="metric")


def split_checkpoint(spec: str) -> tuple[str, str | None]:
    """``name=path`` (a learned policy with its own weights, e.g. ``cvd-rl=runs/a/policy.pt``) -> (name, path);
    a plain name -> (name, None)."""
    name, sep, path = spec.partition("=")
    if sep and not (name and path):
        raise InputError(f"must be a policy or policy=checkpoint, got {spec!r}", field="policies")
    return name, (path or None)


def _built(build: Callable[..., Any], spec: str, seed: int) -> Any:
    """The policy ``spec`` names, its refusal naming ``policies`` (the field the name came in)."""
    name, checkpoint = split_checkpoint(spec)
    with _named(spec):
        return build(name, checkpoint=checkpoint, seed=seed)


@contextlib.contextmanager
def _named(spec: str, field: str | None = None) -> Iterator[None]:
    """A refusal inside the block as one naming the policy ``spec`` (and ``field``, default ``policies``)."""
    try:
        yield
    except InputError as e:
        raise InputError(_said_of(spec, e.detail), field=field or "policies") from None


def _said_of(spec: str, detail: str) -> str:
    """``detail`` naming the policy ``spec``, once (a refusal that names it already is left as it is)."""
    return detail if detail.startswith((f"policy {spec!r}", f"{spec}:")) else f"{spec}: {detail}"


def _tabled(
    per_episode: dict[str, list[dict[str, float]]], metric: str, metrics: Mapping[str, int], baseline: str | None,
    simulator: str, context: dict[str, Any], within: tuple[float, float],
) -> Comparison:  # fmt: skip
    """The comparison on ``metric`` of each policy's episode table (every metric of each episode), the tables kept,
    every metric's mean beside."""
    values = {p: [e[metric] for e in rows] for p, rows in per_episode.items()}
    # every metric's mean (a bound row has its own metric only)
    extras = {p: {k: sum(e[k] for e in rows) / len(rows) for k in metrics if k in rows[0]}
              for p, rows in per_episode.items()}  # fmt: skip
    for p, rows in per_episode.items():
        for total in ("invalid", "oversize"):  # counted over the episodes, not averaged
            if total in rows[0]:
                extras[p][total] = sum(e[total] for e in rows)
    out = compare(values, baseline, simulator=simulator, metric=metric, extras=extras, context=context,
                  better=metrics[metric], within=within, descriptive=[BOUND_ROW])  # fmt: skip
    return replace(out, episode_metrics=per_episode)


NUMA_FIELDS = {"length": "length", "income": "income", "cpu_alloc": "cpu_alloc_mean", "mem_alloc": "mem_alloc_mean",
               "pms_in_use": "pms_in_use_mean", "final_pms": "final_pms"}  # fmt: skip


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
    metric: str = "length",
) -> Comparison:
    """``policies`` (names, ``package.module:Class`` or ``name=checkpoint``) on the same seeded episodes of
    ``trace`` under ``scenario`` (CVD-RL's setting), compared on ``metric`` (:data:`NUMA_METRICS`). Every policy
    first plays 64 requests of one episode on a copy (a name, a checkpoint or a model size that cannot run here is
    refused before any policy's episodes). ``on_policy(name)`` is called as each policy starts (progress)."""
    from dcplace.cluster.numa import NumaCluster
    from dcplace.policies import get_policy
    from dcplace.policies.numa_heuristics import warm_up_jit
    from dcplace.sim.episodes import check_hostable, prepare, run_episodes, warm_up
    from dcplace.sim.numa import oversize_mask
    from dcplace.workload.traces import load_trace

    _checked(policies, baseline, metric, NUMA_METRICS)
    sc = scenario or Scenario()
    built = {p: _built(get_policy, p, seed) for p in policies}
    prepared = prepare(load_trace(trace, seed=seed), double_threshold)
    cluster = NumaCluster.uniform(sc.machines)
    if oversize == "error":
        check_hostable(cluster, prepared)
    warm_up_jit()
    for spec, pol in built.items():  # what fails at its first decision (a model size) fails before any run
        with _named(spec):
            warm_up(pol, cluster, prepared, sc, seed)
    per_episode: dict[str, list[dict[str, float]]] = {}
    for name, pol in built.items():
        if on_policy is not None:
            on_policy(name)
        results, _, _ = run_episodes(pol, cluster, prepared, sc, episodes, seed)
        per_episode[name] = [{k: float(getattr(r, f)) for k, f in NUMA_FIELDS.items()}
                             | {"invalid": float(r.status == "invalid"), "truncated": float(r.status == "truncated"),
                                "oversize": float(r.oversize)}
                             for r in results]  # fmt: skip
    context = {"trace": trace, "pms": sc.pms, "mode": sc.mode, "warm_start": sc.warm_start, "release": sc.release,
               "double_threshold": double_threshold, "seed": seed,
               "oversize": int(np.count_nonzero(oversize_mask(cluster, prepared)))}  # fmt: skip
    shares = (0.0, 1.0) if metric in ("cpu_alloc", "mem_alloc") else (0.0, math.inf)
    return _tabled(per_episode, metric, NUMA_METRICS, baseline, "numa", context, shares)


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
    metric: str = "acceptance",
    bound: bool = False,
) -> Comparison:
    """``policies`` (names, ``package.module:Class`` or ``name=checkpoint``) on the same seeded request sequences
    of ``dataset`` on ``topology`` (Nara's setting), compared on ``metric`` (:data:`NET_METRICS`). Every policy
    first plays one episode of 8 requests (a name, a checkpoint, a topology or a request set that cannot run is
    refused before any policy's episodes). ``bound``: a last row, :data:`BOUND_ROW`, the clairvoyant acceptance
    bound of each episode (:func:`dcplace.sim.netalloc_bound.episode_bounds`: no policy, online or not, accepts
    more of that episode), measured against the baseline like a policy: how much any policy could still gain. Only
    for acceptance, and only where the cluster rejects what does not fit (a setting whose requests wait for room
    has no such bound). A request file is one sequence, replayed as it is: it is compared once (``episodes`` is
    then 1), since its copies would differ only by the policies' random draws and were counted as independent
    episodes (a 2-request gap on one file was "ahead, p = 0.008" over 8 copies); with one episode there is no
    interval and no verdict, each policy's number on the file is exact."""
    from dcplace.bench.netalloc_runner import run_policy
    from dcplace.sim.netalloc_episodes import get_setting
    from dcplace.workload.netreq import request_file

    _checked(policies, baseline, metric, NET_METRICS)
    if bound and metric != "acceptance":
        raise InputError(f"bounds the acceptance only, not {metric}", field="bound")
    env = get_setting(setting) if bound else None  # a bad setting without --bound is refused by the policies' run
    if env is not None and env.on_full != "reject":
        raise InputError(f"needs a setting that rejects what does not fit (paper-reject, paper-max, v1); in "
                         f"{setting!r} requests wait for room, and the bound relaxes the rejecting cluster",
                         field="bound")  # fmt: skip
    one_sequence = request_file(dataset, requests) is not None
    if one_sequence:  # its copies are no evidence (the docstring)
        episodes = 1
    for spec in policies:
        name, checkpoint = split_checkpoint(spec)
        try:
            run_policy(topology, dataset, name, 8, 1, seed, split, checkpoint=checkpoint, setting=setting)
        except InputError as e:  # a topology or request set names its own field
            if e.path is not None:  # a topology or request file: its own file, line and field, not the policy's
                raise
            if e.field not in (None, "policy", "policies", "checkpoint"):  # the topology's or the set's own flag
                raise
            raise InputError(_said_of(spec, e.detail), field="policies") from None
    per_episode: dict[str, list[dict[str, float]]] = {}
    n = 0
    for spec in policies:
        if on_policy is not None:
            on_policy(spec)
        name, checkpoint = split_checkpoint(spec)
        run = run_policy(topology, dataset, name, requests, episodes, seed, split, checkpoint=checkpoint,
                         setting=setting)  # fmt: skip
        n = run.requests
        per_episode[spec] = [{"acceptance": r.acceptance, "cpu_util": r.cpu_util, "mem_util": r.mem_util,
                              "servers_per_allocation": (sum(r.servers_per_allocation) / len(r.servers_per_allocation)
                                                         if r.servers_per_allocation else 0.0)}
                             for r in run.results]  # fmt: skip
    if env is not None:
        from dcplace.cluster.topology import load_topology
        from dcplace.sim.netalloc_bound import episode_bounds

        if on_policy is not None:
            on_policy(BOUND_ROW)
        found = episode_bounds(load_topology(topology), env.dataset(dataset), n, seed, episodes, split)
        per_episode[BOUND_ROW] = [{"acceptance": b.ratio} for b in found]
    context = {"topology": topology, "dataset": dataset, "requests": n, "split": split, "setting": setting,
               "seed": seed, "one_sequence": one_sequence}  # fmt: skip
    shares = (0.0, math.inf) if metric == "servers_per_allocation" else (0.0, 1.0)
    return _tabled(per_episode, metric, NET_METRICS, baseline, "netalloc", context, shares)


CLUSTER_METRICS = {"accepted": 1, "first_rejection": 1, "machines_in_use": -1, "cpu_alloc": 1, "mem_alloc": 1}
"""``compare cluster``'s metrics and their better direction: requests ``accepted`` of each window, those placed
before the ``first_rejection`` (the papers' length), and at the window's end the ``machines_in_use`` (hosting a
VM) and the allocated share of the cluster's CPU and memory (``cpu_alloc``, ``mem_alloc``)."""


REJECTION_KEYS = tuple(f"rejected_{r}" for r in (*REASONS, "declined", "invalid"))
"""A window's rejected requests by reason (``simulate stream``'s: the class holding most machines, or the policy
declining or answering an infeasible action), every one a column of ``episodes.csv`` and a mean in each row."""


def window_starts(n_requests: int, requests: int, windows: int, seed: int) -> list[int]:
    """``windows`` distinct request indices, sorted, each followed by at least ``requests`` - 1 more of a trace of
    ``n_requests`` (a seeded draw: the same for every policy of a comparison, and for the same seed). The windows do
    not overlap where they fit side by side (``windows * requests <= n_requests``; uniform over such sets), since
    the intervals take them as independent; otherwise they are drawn among all starts and may overlap."""
    room = n_requests - requests + 1
    if room < 1:
        raise InputError(f"the trace has {n_requests} requests, fewer than the {requests} asked for per window",
                         field="requests")  # fmt: skip
    if windows > room:
        raise InputError(f"the trace has room for {room} distinct windows of {requests} requests, not {windows}",
                         field="windows")  # fmt: skip
    rng = np.random.default_rng([seed, 0x3A7])
    if windows * requests <= n_requests:  # disjoint: choose the gaps, then lay the windows out between them
        free = n_requests - windows * requests
        gaps = np.sort(rng.choice(free + windows, size=windows, replace=False)) - np.arange(windows)
        return [int(g) + i * requests for i, g in enumerate(gaps)]
    return sorted(int(i) for i in rng.choice(room, size=windows, replace=False))


def windows_disjoint(starts: Sequence[int], requests: int) -> bool:
    return all(b - a >= requests for a, b in itertools.pairwise(starts))


def _unused_prefix(ids: Iterable[str], prefix: str = "whatif-") -> str:
    """``prefix``, lengthened until no id in ``ids`` starts with it (the trace's VM ids must not be the cluster's)."""
    ids = list(ids)
    while any(i.startswith(prefix) for i in ids):
        prefix = "_" + prefix
    return prefix


def _window_seed(seed: int, window: int) -> int:
    """The engine's seed for window ``window`` of a run seeded ``seed``: distinct for every pair (``seed + w`` gave
    window 1 of seed 0 window 0's draws of seed 1)."""
    return int(np.random.SeedSequence([seed, window]).generate_state(1, np.uint64)[0] >> np.uint64(1))


@dataclass(frozen=True)
class _Windows:
    """What every variant of a comparison from a cluster's state shares: the state restored once, the trace, the
    windows' starts and the VM-id prefix of the trace's VMs."""

    start: Any
    prepared: Any
    starts: list[int]
    prefix: str
    requests: int

    def context(self, trace: str, seed: int, double_threshold: float) -> dict[str, Any]:
        s = self.start.state
        return {"trace": trace, "requests": self.requests, "windows": len(self.starts), "starts": self.starts,
                "disjoint": windows_disjoint(self.starts, self.requests), "seed": seed,
                "double_threshold": double_threshold, "machines": len(s.slot_of_machine),
                "vms": len(s.slot_of_vm)}  # fmt: skip


def _from_state(snapshot: Mapping[str, Any], trace: str, requests: int, windows: int, seed: int,
                double_threshold: float, check: Callable[[], object]) -> _Windows:  # fmt: skip
    """The shared part of :func:`compare_cluster` and :func:`plan_capacity`, every input checked (``check``: the
    variants' own, before the trace is read)."""
    from dcplace.engine import PlacementEngine
    from dcplace.policies.numa_heuristics import warm_up_jit
    from dcplace.sim.episodes import prepare
    from dcplace.workload.traces import load_trace

    check_seed(seed)
    for name, value in (("requests", requests), ("windows", windows)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise InputError(f"must be a whole number of at least 1, got {value!r}", field=name)
    try:
        start = PlacementEngine.restore(dict(snapshot))
    except InputError as exc:  # the rows' own fields mean nothing on the command line
        said = exc.detail if exc.detail.startswith("not a ") else f"not a usable cluster state: {exc.detail}"
        raise InputError(said, field="snapshot") from None
    if not start.state.slot_of_machine:
        raise InputError("the cluster has no machines: nothing to place on", field="snapshot")
    check()
    prepared = prepare(load_trace(trace, seed=seed), double_threshold)
    starts = window_starts(len(prepared.arrival_events), requests, windows, seed)
    warm_up_jit()
    return _Windows(start, prepared, starts, _unused_prefix(v["id"] for v in snapshot["vms"]), requests)


def _play(variants: Mapping[str, Callable[[int], Any]], wins: _Windows, on_variant: Callable[[str], None] | None,
          field: str) -> dict[str, list[dict[str, float]]]:  # fmt: skip
    """Every variant (name -> the engine it starts window ``w`` from) on every window: first 16 requests each (what
    cannot act on the machines fails before any window), then the windows; each engine's invariants checked after
    its window. ``field``: the flag a variant's refusal names."""
    from dcplace.engine.stream import run_stream

    def window(name: str, w: int, n: int) -> tuple[Any, Any]:
        with _named(name, field):
            engine = variants[name](w)
            res = run_stream(engine, wins.prepared, start_event=int(wins.prepared.arrival_events[wins.starts[w]]),
                             max_requests=n, samples=0, prefix=wins.prefix)  # fmt: skip
        engine.check_invariants()
        return engine, res

    for name in variants:
        window(name, 0, min(16, wins.requests))
    per_episode: dict[str, list[dict[str, float]]] = {}
    for name in variants:
        if on_variant is not None:
            on_variant(name)
        rows = per_episode[name] = []
        for w in range(len(wins.starts)):
            engine, res = window(name, w, wins.requests)
            s, cap = engine.state, engine.stats()["capacity"]
            rows.append({"accepted": float(res.accepted), "first_rejection": float(res.first_rejection),
                         "machines_in_use": float(np.count_nonzero(s.vm_count)),
                         "cpu_alloc": float(s.used[0]) / float(cap["cpu"]),
                         "mem_alloc": float(s.used[1]) / float(cap["mem"]),
                         **{f"rejected_{k}": float(v) for k, v in res.rejections.items()}})  # fmt: skip
    keys = sorted({k for rows in per_episode.values() for e in rows for k in e if k.startswith("rejected_")})
    for rows in per_episode.values():  # every window names every reason (0 where it has none): one csv header
        for e in rows:
            e.update({k: e.get(k, 0.0) for k in (*REJECTION_KEYS, *keys)})
    return per_episode


def _cluster_range(metric: str, requests: int) -> tuple[float, float]:
    """The range a window's ``metric`` cannot leave, to which its intervals are cut (an interval of requests
    accepted reached past the window's requests)."""
    if metric in ("cpu_alloc", "mem_alloc"):
        return 0.0, 1.0
    return (0.0, float(requests)) if metric in ("accepted", "first_rejection") else (0.0, math.inf)


def _summed(rows: list[dict[str, float]]) -> list[tuple[str, float]]:
    return [(k, sum(e[k] for e in rows)) for k in rows[0] if k.startswith("rejected_")]


def _with_rejections(table: Comparison) -> Comparison:
    """Each row's mean rejections by reason beside its metrics (``--json``'s rows)."""
    rows = [replace(r, extra=r.extra | {k: v / table.episodes for k, v in _summed(table.episode_metrics[r.policy])})
            for r in table.rows]  # fmt: skip
    return replace(table, rows=rows)


def compare_cluster(
    policies: Sequence[str],
    snapshot: Mapping[str, Any],
    trace: str = "synthetic",
    requests: int = 500,
    windows: int = 10,
    seed: int = 0,
    double_threshold: float = 32.0,
    baseline: str | None = None,
    on_policy: Callable[[str], None] | None = None,
    metric: str = "accepted",
) -> Comparison:
    """Which policy would serve the coming requests best, starting from a live cluster's state: ``policies``
    (names, ``package.module:Class`` or ``name=checkpoint``) each place ``windows`` windows of ``requests`` requests
    of ``trace`` (seeded starts, :func:`window_starts`, the same for every policy), every window from ``snapshot``
    (:meth:`~dcplace.engine.PlacementEngine.snapshot`, or :meth:`~dcplace.engine.PlacementEngine.read_snapshot` of a
    database; restored once, each window from a :meth:`~dcplace.engine.PlacementEngine.copy`) through the live
    engine (:func:`dcplace.engine.stream.run_stream`), with a policy object of its own (a policy that keeps state
    between decisions, PADRL's forecast, starts each window afresh): a request that fits nowhere is rejected and the
    window goes on; the trace's VMs leave at their departures, the cluster's own VMs stay (the database knows no
    departure times); drained and failed machines take nothing. Compared on ``metric`` (:data:`CLUSTER_METRICS`;
    the allocated shares are of every machine's capacity, drained and failed included). Every policy first decides
    16 requests from the state (a policy that cannot act on these machines is refused before any window), and
    every engine's invariants are checked after its window."""
    from dcplace.policies import get_policy

    _checked(policies, baseline, metric, CLUSTER_METRICS)

    def buildable() -> None:  # a name or checkpoint that cannot be built, before any trace is read
        for p in policies:
            _built(get_policy, p, seed)

    wins = _from_state(snapshot, trace, requests, windows, seed, double_threshold, buildable)
    variants = {spec: (lambda w, spec=spec: wins.start.copy(_built(get_policy, spec, seed), seed=_window_seed(seed, w)))
                for spec in policies}  # fmt: skip
    per_episode = _play(variants, wins, on_policy, "policies")
    shares = _cluster_range(metric, requests)
    return _with_rejections(_tabled(per_episode, metric, CLUSTER_METRICS, baseline, "cluster",
                                    wins.context(trace, seed, double_threshold), shares))  # fmt: skip


def plan_capacity(
    added: Sequence[int],
    snapshot: Mapping[str, Any],
    cpu: float | Sequence[float],
    mem: float | Sequence[float],
    policy: str = "best-fit",
    trace: str = "synthetic",
    requests: int = 500,
    windows: int = 10,
    seed: int = 0,
    double_threshold: float = 32.0,
    on_variant: Callable[[str], None] | None = None,
    metric: str = "accepted",
    target: float | None = None,
    max_add: int = 1000,
) -> Comparison:
    """How many machines to add: the cluster's state with each number in ``added`` of new machines of ``cpu``
    cores and ``mem`` GB per NUMA node (a number for every node, or one each), placing the same windows of ``trace``
    with ``policy``, as :func:`compare_cluster` plays policies; rows ``+K machines``, measured against the first of
    ``added`` (usually 0: the cluster as it is). The new machines are active, empty, in rack ``planned``.

    ``target`` (a share in (0, 1]) replaces ``added`` by a search: the fewest new machines, at most ``max_add``, with
    which the mean share of each window's requests accepted reaches ``target``: 1, 2, 4, ... machines until it does,
    then halving the last gap; the rows are the cluster as it is, the fewest found and, below it, the most that fell
    short (``fewest`` in the context; more machines accept at least as many requests on average but not in every
    window, so the answer is one the windows support, not a proof that one fewer never would)."""
    from dcplace.engine import MachineSpec, PlacementEngine
    from dcplace.policies import get_policy

    if metric not in CLUSTER_METRICS:
        raise InputError(f"must be one of {', '.join(CLUSTER_METRICS)}, got {metric!r}", field="metric")
    if target is not None:
        if isinstance(target, bool) or not isinstance(target, int | float) or not 0 < target <= 1:
            raise InputError(f"must be a share above 0 and at most 1, got {target!r}", field="target")
        if isinstance(max_add, bool) or not isinstance(max_add, int) or not 1 <= max_add <= 100_000:
            raise InputError(f"must be a whole number from 1 to 100,000, got {max_add!r}", field="max_add")
    elif not all(type(k) is int and 0 <= k <= 100_000 for k in added):
        raise InputError(f"takes whole numbers from 0 to 100,000, got {list(added)}", field="add")
    elif twice := sorted({k for k in added if list(added).count(k) > 1}):
        raise InputError(f"names {twice[0]} twice", field="add")
    elif len(added) < 2:
        raise InputError(f"needs at least two numbers of machines to compare, got {list(added)} (repeat --add for "
                         "each, 0 for the cluster as it is)", field="add")  # fmt: skip

    def built() -> Any:
        name, checkpoint = split_checkpoint(policy)
        with _named(policy, "policy"):
            return get_policy(name, checkpoint=checkpoint, seed=seed)

    wins = _from_state(snapshot, trace, requests, windows, seed, double_threshold, built)
    taken = set(wins.start.state.slot_of_machine)
    prefix = _unused_prefix(taken, "planned-")
    try:  # the shape checked once, as add_machine checks it
        PlacementEngine(wins.start.numa).add_machine("probe", cpu, mem)
    except InputError as exc:  # a new machine's shape names its own flag
        raise InputError(exc.detail, field=exc.field if exc.field in ("cpu", "mem") else "cpu") from None

    def grown(k: int, w: int) -> Any:
        engine = wins.start.copy(built(), seed=_window_seed(seed, w))
        engine.add_machines([MachineSpec(f"{prefix}{i}", cpu, mem, rack="planned") for i in range(k)])
        return engine

    def name(k: int) -> str:
        return f"+{k} machine{'' if k == 1 else 's'}"

    extra: dict[str, Any] = {}
    if target is None:
        per_episode = _play({name(k): functools.partial(grown, k) for k in added}, wins, on_variant, "policy")
    else:
        tried: dict[int, list[dict[str, float]]] = {}

        def share(k: int) -> float:
            if k not in tried:
                tried[k] = _play({name(k): functools.partial(grown, k)}, wins, on_variant, "policy")[name(k)]
            return sum(e["accepted"] for e in tried[k]) / (requests * len(tried[k]))

        lo, hi = 0, 0
        if share(0) < target:
            hi = 1
            while share(hi) < target:
                if hi >= max_add:
                    raise InputError(f"even {max_add} more machines accept {share(hi):.2%} of the requests on "
                                     f"average, below {target:.2%}: raise --max-add or lower --target",
                                     field="target")  # fmt: skip
                lo, hi = hi, min(2 * hi, max_add)
            while hi - lo > 1:  # share(lo) < target <= share(hi)
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if share(mid) >= target else (mid, hi)
        added = sorted({0, lo, hi})  # lo: the most that fell short (0 where hi is 0)
        per_episode = {name(k): tried[k] for k in added}
        extra = {"target": target, "max_add": max_add, "fewest": hi,
                 "tried": {str(k): share(k) for k in sorted(tried)}}  # fmt: skip
    context = wins.context(trace, seed, double_threshold) | {"policy": policy, "added": list(added),
                                                             "cpu": cpu, "mem": mem} | extra  # fmt: skip
    shares = _cluster_range(metric, requests)
    return _with_rejections(_tabled(per_episode, metric, CLUSTER_METRICS, None, "capacity", context, shares))
