"""Run placement policies in a simulator.

``dcplace simulate numa`` (online VM scheduling on double-NUMA machines, the papers' episodes), ``dcplace simulate
stream`` (a whole trace through the live engine: a rejection is counted and the stream goes on) and ``dcplace
simulate netalloc`` (network-aware allocation of multi-server requests). Each takes its settings from flags and
``--config FILE.toml``; ``--out DIR`` writes the result (``result.json``) and the resolved settings
(``config.toml``) there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from dcplace.cli.common import JSON_HELP, NetSettingName, console, progress_bar, save_result
from dcplace.cli.options import config_command
from dcplace.cli.outputs import UNITS
from dcplace.config import check, check_types
from dcplace.errors import InputError
from dcplace.sim.numa import Scenario

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n", 1)[0], rich_markup_mode=None)

OUT_HELP = "also write result.json and the resolved settings (config.toml, for --config) to this folder"
EPISODES_OUT_HELP = ("FILE.csv or FILE.parquet: one record per episode; a folder: result.json, episodes.csv and the "
                     "resolved settings (config.toml, for --config)")  # fmt: skip


def _write_out(out: Path | None, summary: dict[str, Any], cfg: object, command: str, results: list[Any]) -> None:
    """``--out``: the per-episode file, or the folder of result, episodes and settings (dcplace.cli.outputs)."""
    if out is None:
        return
    from dcplace.cli.outputs import EPISODE_SUFFIXES, episode_rows, is_file_target, write_episodes

    if is_file_target(out, EPISODE_SUFFIXES):
        write_episodes(out, episode_rows(results))
        return
    save_result(summary, cfg, out, command)
    write_episodes(out / "episodes.csv", episode_rows(results))


@dataclass(frozen=True)
class NumaRun:
    """One ``simulate numa`` experiment: a policy on a trace under a scenario, over seeded episodes."""

    trace: str = "synthetic"
    """huawei-east-1, azure-v1, synthetic, a trace file, or your own as package.module:function (docs/workloads.md)"""
    policy: str = "best-fit"
    """a registered policy (see `dcplace policies`) or your own as package.module:ClassName (docs/policies.md)"""
    checkpoint: str | None = None
    """weights for a learned policy (default: the shipped one)"""
    episodes: int = 10
    """episodes, each from its own seeded start"""
    seed: int = 0
    """same seed, same numbers"""
    double_threshold: float = 32.0
    """VMs with memory above this many GB are double-NUMA (a trace that says each VM's span, its multi column, keeps
    it)"""
    oversize: Literal["error", "skip"] = "error"
    """a VM no machine can host: refuse the trace, or count and skip"""
    check: bool = False
    """check the ledger invariants after every episode"""
    scenario: Scenario = field(default_factory=Scenario)
    """the episode dynamics"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.episodes >= 1, "episodes", self.episodes, "at least 1")


@app.command("numa")
@config_command(NumaRun)
def simulate_numa(
    cfg: NumaRun,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help=EPISODES_OUT_HELP)] = None,
) -> None:
    """Online VM scheduling on double-NUMA machines (the CVD-RL / VMAgent setting)."""
    from rich.table import Table

    from dcplace.bench.numa_runner import summarise
    from dcplace.cluster.numa import NumaCluster
    from dcplace.policies import get_policy
    from dcplace.policies.numa_heuristics import warm_up_jit
    from dcplace.sim.episodes import check_hostable, prepare, run_episodes, warm_up
    from dcplace.workload.traces import load_trace

    sc = cfg.scenario
    pol = get_policy(cfg.policy, cfg.checkpoint, seed=cfg.seed)  # a user's policy may take the run's seed
    table = load_trace(cfg.trace, seed=cfg.seed)
    prepared = prepare(table, cfg.double_threshold)
    cluster = NumaCluster.uniform(sc.machines)
    if cfg.oversize == "error":
        check_hostable(cluster, prepared)
    warm_up_jit()
    warm_up(pol, cluster, prepared, sc, cfg.seed)  # its one-off costs out of the decisions/s figure
    with progress_bar(f"{cfg.policy} on {cfg.trace}", cfg.episodes, "episodes") as advance:
        results, wall, decisions = run_episodes(pol, cluster, prepared, sc, cfg.episodes, cfg.seed, check=cfg.check,
                                                on_episode=advance)  # fmt: skip
    summary = summarise(cfg.policy, cfg.trace, sc, cfg.double_threshold, cfg.seed, results, wall, decisions)
    _write_out(out, summary.as_dict(), cfg, "dcplace simulate numa", list(results))
    if json_out:
        typer.echo(json.dumps(summary.as_dict()))
        _numa_warnings(results, summary, sc, cfg.policy)
        return
    t = Table(title=f"{cfg.policy} on {cfg.trace}: {sc.pms} PMs, {sc.mode}, warm start {sc.warm_start:.0%}, "
              f"releases {'on' if sc.release else 'off'}")  # fmt: skip
    for col in ("episode", "length (requests)", "income (price units)", "cpu alloc", "mem alloc", "PMs in use",
                "final PMs", "status"):  # fmt: skip
        t.add_column(col, justify="right")
    for i, r in enumerate(results):
        t.add_row(str(i), str(r.length), f"{r.income:.1f}", f"{r.cpu_alloc_mean:.1%}", f"{r.mem_alloc_mean:.1%}",
                  f"{r.pms_in_use_mean:.1f}", str(r.final_pms), r.status)  # fmt: skip
    t.add_row("mean", f"{summary.length_mean:.1f} ± {summary.length_std:.1f}", f"{summary.income_mean:.1f}",
              f"{summary.cpu_alloc_mean:.1%}", f"{summary.mem_alloc_mean:.1%}", f"{summary.pms_in_use_mean:.1f}",
              f"{summary.final_pms_mean:.1f}", "", style="bold")  # fmt: skip
    console.print(t)
    console.print(f"{decisions:,} decisions in {wall:.3f} s ({summary.decisions_per_s:,.0f}/s); "
                  f"oversize VMs skipped: {summary.oversize}")  # fmt: skip
    console.print(f"income: {UNITS['income']}")
    _numa_warnings(results, summary, sc, cfg.policy)


def _numa_warnings(results: Any, summary: Any, sc: Any, policy: str) -> None:
    """What the numbers alone hide, on stderr (with --json too: it was said only in the table's mode)."""
    empty = sum(r.length == 0 and r.status == "truncated" for r in results)
    full = sum(r.length == 0 and r.status == "terminated" for r in results)
    if full:  # a length of 0 read like a policy that placed nothing
        typer.echo(f"warning: {full} of {len(results)} episodes ended at their first scored request, which fit "
                   f"nowhere: the cluster was already full at the warm start ({sc.warm_start:.0%} of its CPU in use); "
                   "use more --pms or a lower --warm-start", err=True)  # fmt: skip
    if empty:  # they scored nothing, and a mean of zeros looked like a result
        typer.echo(f"warning: {empty} of {len(results)} episodes ran out of trace before their first scored request "
                   f"(the warm start, {sc.warm_start:.0%} of the CPU in use, was not reached: use a longer trace, "
                   "fewer --pms or a lower --warm-start)", err=True)  # fmt: skip
    if summary.invalid:
        typer.echo(f"warning: {summary.invalid} of {len(results)} episodes ended on an infeasible action of the "
                   f"policy {policy} (status invalid: an episode stops at the first one, docs/policies.md)",
                   err=True)  # fmt: skip


@dataclass(frozen=True)
class NetallocRun:
    """One ``simulate netalloc`` experiment: a policy on a topology and a request set, over seeded episodes."""

    topology: str = "alpha"
    """alpha, beta, gamma, delta, or a .json / .csv topology file"""
    dataset: str = "uniform"
    """uniform, azure, alibaba, or a request CSV (cpu,mem,bw,hold)"""
    policy: str = "tetris"
    """a registered netalloc policy (see `dcplace policies`) or your own as package.module:ClassName
    (docs/policies.md)"""
    requests: int = 0
    """requests per episode (0: the paper's length for the topology, 128 otherwise)"""
    episodes: int = 5
    """episodes, each its own seeded request sequence"""
    seed: int = 0
    """same seed, same numbers"""
    split: Literal["train", "test"] = "test"
    """train or test part of the trace-derived sets"""
    check: bool = False
    """check the ledger invariants after every episode"""
    checkpoint: str | None = None
    """weights for a learned policy (default: the shipped one for the dataset)"""
    bound: bool = False
    """also each episode's clairvoyant acceptance bound: no allocator accepts more (docs/netalloc.md); only where a
    full cluster rejects a request (--setting paper-reject, paper-max or v1)"""
    setting: NetSettingName = "paper"
    """the environment's reading (docs/netalloc.md, Settings): paper, a full cluster makes a request wait (the
    authors' environment); paper-reject, it is rejected; paper-max, v1: earlier readings"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.episodes >= 1, "episodes", self.episodes, "at least 1")
        check(self.requests >= 0, "requests", self.requests, "at least 0")


@app.command("netalloc")
@config_command(NetallocRun)
def simulate_netalloc(
    cfg: NetallocRun,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help=EPISODES_OUT_HELP)] = None,
) -> None:
    """Network-aware allocation of multi-server requests on a datacenter network (the Nara setting)."""
    from rich.table import Table

    from dcplace.bench.netalloc_runner import run_policy
    from dcplace.cluster.topology import load_topology
    from dcplace.sim.netalloc_episodes import default_requests, get_setting
    from dcplace.workload.netreq import request_file

    env = get_setting(cfg.setting)
    if cfg.bound and env.on_full != "reject":  # before any work: nothing half-written
        raise InputError(
            f"must be off under --setting {cfg.setting}, where a full cluster makes a request wait (the bound relaxes "
            "rejection: use --setting paper-reject)",
            field="bound",
        )
    top = load_topology(cfg.topology)
    file = request_file(cfg.dataset, cfg.requests)
    n = len(file) if file is not None else cfg.requests or default_requests(top)
    # The bar counts requests, so that one long episode (delta with a learned agent) shows progress too.
    with progress_bar(f"{cfg.policy} on {top.name}/{cfg.dataset}", cfg.episodes * n, "requests") as advance:

        def decided(k: int) -> None:
            for _ in range(k):
                advance()

        run = run_policy(top, cfg.dataset, cfg.policy, cfg.requests or None, cfg.episodes, cfg.seed,
                         cfg.split, cfg.check, cfg.checkpoint, on_request=decided, setting=cfg.setting)  # fmt: skip
    s: dict[str, Any] = run.summary()
    bounds: list[float] = []
    if cfg.bound:  # on the very episodes the policy played
        from dcplace.sim.netalloc_bound import episode_bounds

        dataset = env.dataset(cfg.dataset)  # the set as the setting draws it
        found = episode_bounds(top, dataset, run.requests, cfg.seed, cfg.episodes, cfg.split)
        bounds = [b.ratio for b in found]
        s["bound_per_episode"] = bounds
        s["bound_mean"] = float(sum(bounds) / len(bounds))
    _write_out(out, s, cfg, "dcplace simulate netalloc", run.results)
    if json_out:
        typer.echo(json.dumps(s))
        _net_warnings(s, cfg.policy)
        return
    per = f"{run.requests} request{'' if run.requests == 1 else 's'} per episode"
    t = Table(title=f"{cfg.policy} on {run.topology}, {run.dataset}: {per}")
    bound_col = ("bound",) if bounds else ()
    waits = env.on_full == "wait"  # ticks waited for room: a column where requests wait
    for col in ("episode", "acceptance", *bound_col, "cpu util", "mem util", *s["bw_util_by_tier"],
                "rejected (net/cap)", *(("waited",) if waits else ())):  # fmt: skip
        t.add_column(col, justify="right")
    for i, r in enumerate(run.results):
        t.add_row(str(i), f"{r.acceptance:.3f}", *((f"{bounds[i]:.3f}",) if bounds else ()), f"{r.cpu_util:.2f}",
                  f"{r.mem_util:.2f}", *(f"{v:.2f}" for v in r.bw_util_by_tier.values()),
                  f"{r.rejected['network']}/{r.rejected['capacity']}",
                  *((str(r.waited),) if waits else ()))  # fmt: skip
    t.add_row("mean", f"{s['acceptance_mean']:.3f} ± {s['acceptance_std']:.3f}",
              *((f"{s['bound_mean']:.3f}",) if bounds else ()), f"{s['cpu_util_mean']:.2f}",
              f"{s['mem_util_mean']:.2f}", *(f"{v:.2f}" for v in s["bw_util_by_tier"].values()), "",
              *((f"{s['waited_mean']:.1f}",) if waits else ()), style="bold")  # fmt: skip
    console.print(t)
    console.print("locality: " + ", ".join(f"{k} {v:.0%}" for k, v in s["locality"].items())
                  + f"; {s['servers_per_allocation_mean']:.1f} servers per allocation")  # fmt: skip
    console.print(f"{s['decisions']:,} decisions in {s['wall_s']:.3f} s ({s['decisions_per_s']:,.0f}/s)")
    _net_warnings(s, cfg.policy)


def _net_warnings(s: dict[str, Any], policy: str) -> None:
    """What the numbers alone hide, on stderr (with --json too)."""
    if s["acceptance_mean"] == 0 and any(v for k, v in s["rejected"].items() if k != "invalid"):
        # a table of zeros read like a result (a policy's own invalid picks have their warning below)
        why = ", ".join(f"{k} {v:,}" for k, v in s["rejected"].items() if v)
        typer.echo(f"warning: no request was allocated in any episode (rejected: {why}): capacity means a request "
                   "larger than the whole cluster's free CPU or memory, network a failed path check; are the "
                   "request sizes in the topology's units (docs/netalloc.md)?", err=True)  # fmt: skip
    if s["rejected"].get("invalid"):
        typer.echo(f"warning: the policy {policy} picked outside its view's mask (-1 included) "
                   f"{s['rejected']['invalid']:,} times; each rejected its request as invalid (docs/policies.md)",
                   err=True)  # fmt: skip


@dataclass(frozen=True)
class StreamRun:
    """One ``simulate stream`` run: a whole trace, from its first request, through the live placement engine."""

    trace: str = "synthetic"
    """huawei-east-1, azure-v1, synthetic, a trace file, or your own as package.module:function (docs/workloads.md)"""
    policy: str = "best-fit"
    """a registered policy (see `dcplace policies`) or your own as package.module:ClassName (docs/policies.md)"""
    pms: int = 50
    """machines in the cluster (fixed: a request that fits nowhere is rejected and counted)"""
    release: bool = True
    """VMs leave at their departure (off: never)"""
    double_threshold: float = 32.0
    """VMs with memory above this many GB are double-NUMA (a trace that says each VM's span, its multi column, keeps
    it)"""
    max_requests: int = 0
    """stop after this many requests (0: the whole trace)"""
    samples: int = 100
    """points of the timeline (machines in use, allocation) recorded over the stream"""
    seed: int = 0
    """seed of the synthetic trace and of the engine's random stream (the random policy's draws)"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.pms >= 1, "pms", self.pms, "at least 1")
        check(self.max_requests >= 0, "max_requests", self.max_requests, "at least 0")
        check(self.samples >= 1, "samples", self.samples, "at least 1")


@app.command("stream")
@config_command(StreamRun)
def simulate_stream(
    cfg: StreamRun,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
) -> None:
    """A whole trace through the live engine: acceptance, rejections by reason, machines in use over time."""
    from dcplace.cli.serve import stream

    rec = stream(cfg.trace, cfg.pms, cfg.policy, cfg.double_threshold, cfg.seed, cfg.release, cfg.max_requests,
                 cfg.samples, json_out)  # fmt: skip
    if out is not None:
        save_result(rec, cfg, out, "dcplace simulate stream")
