"""Compare placement policies on the same episodes, each against a baseline, with paired 95 % intervals."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any, Literal

import typer

from dcplace.atomic import write_text
from dcplace.bench.compare import SIGN_TEST_EPISODES
from dcplace.cli.common import JSON_HELP, NetSettingName, console, err_console, save_result
from dcplace.cli.options import config_command
from dcplace.config import check, check_types
from dcplace.sim.numa import Scenario

app = typer.Typer(add_completion=False, rich_markup_mode=None)

OUT_HELP = ("a folder: result.json (what --json prints), episodes.csv (policy, episode and every metric of each "
            "episode) and config.toml")  # fmt: skip


@dataclass(frozen=True)
class CompareNuma:
    """``compare numa``: policies on the same seeded episodes of a trace (CVD-RL's setting)."""

    policies: tuple[str, ...] = ("first-fit", "best-fit", "industrial")
    """the policies, registered names or your own as package.module:ClassName, a learned one with its own weights as
    name=checkpoint (repeat the flag for each)"""
    metric: Literal["length", "income", "cpu_alloc", "mem_alloc", "pms_in_use", "final_pms"] = "length"
    """what to compare: length (requests placed until the first that fits nowhere), income, cpu_alloc / mem_alloc
    (higher is better), pms_in_use / final_pms (lower is better: Expansion mode, where every length ties)"""
    baseline: str | None = None
    """the policy the others are measured against (default: the first)"""
    trace: str = "synthetic"
    """huawei-east-1, azure-v1, synthetic, a trace file, or your own as package.module:function (docs/workloads.md)"""
    episodes: int = 10
    """episodes, each from its own seeded start, the same for every policy"""
    seed: int = 0
    """same seed, same numbers"""
    double_threshold: float = 32.0
    """VMs with memory above this many GB are double-NUMA (a trace that says each VM's span, its multi column, keeps
    it)"""
    oversize: Literal["error", "skip"] = "error"
    """a VM no machine can host: refuse the trace, or count and skip"""
    scenario: Scenario = field(default_factory=Scenario)
    """the episode dynamics"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.episodes >= 1, "episodes", self.episodes, "at least 1")


@dataclass(frozen=True)
class CompareNetalloc:
    """``compare netalloc``: policies on the same seeded request sequences (Nara's setting)."""

    policies: tuple[str, ...] = ("random", "tetris", "nalb-strict")
    """the policies, registered names or your own as package.module:ClassName, a learned one with its own weights as
    name=checkpoint (repeat the flag for each)"""
    metric: Literal["acceptance", "cpu_util", "mem_util", "servers_per_allocation"] = "acceptance"
    """what to compare (servers_per_allocation: lower is better)"""
    baseline: str | None = None
    """the policy the others are measured against (default: the first)"""
    topology: str = "alpha"
    """alpha, beta, gamma, delta, or a .json / .csv topology file"""
    dataset: str = "uniform"
    """uniform, azure, alibaba, or a request CSV (cpu,mem,bw,hold)"""
    requests: int = 0
    """requests per episode (0: the paper's length for the topology, 128 otherwise)"""
    episodes: int = 10
    """episodes, each its own seeded request sequence, the same for every policy (a request file is one sequence:
        compared once)"""
    seed: int = 0
    """same seed, same numbers"""
    split: Literal["train", "test"] = "test"
    """train or test part of the trace-derived sets"""
    setting: NetSettingName = "paper"
    """the environment's reading (docs/netalloc.md, Settings)"""
    bound: bool = False
    """add a last row: each episode's clairvoyant acceptance bound (no policy accepts more of it), against the
    baseline like a policy (acceptance only; a setting that rejects what does not fit, e.g. paper-reject)"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.episodes >= 1, "episodes", self.episodes, "at least 1")
        check(self.requests >= 0, "requests", self.requests, "at least 0")


def _report(table: Any, cfg: object, json_out: bool, out: Path | None, command: str) -> None:
    """Print the comparison (a table, or one JSON object) and write ``--out``."""
    from rich.table import Table

    record = table.as_dict()
    if out is not None:
        save_result(record, cfg, out, command)
        buf = io.StringIO()
        columns = list(next(iter(table.episode_metrics.values()), [{}])[0])
        w = csv.writer(buf, lineterminator="\n")
        w.writerow(["policy", "episode", *columns])
        for policy, episodes in table.episode_metrics.items():
            # the bound row has its acceptance only: its other columns stay empty
            w.writerows([policy, i, *(e.get(c, "") for c in columns)] for i, e in enumerate(episodes))
        write_text(out / "episodes.csv", buf.getvalue())
    for r in table.rows:  # what the numbers alone hide, on stderr (with --json too)
        if r.extra.get("invalid"):
            err_console.print(f"warning: {r.policy} ended {r.extra['invalid']:.0f} of {table.episodes} episodes on an "
                              "infeasible action (an episode stops at the first one: docs/policies.md)")  # fmt: skip
    if table.context.get("oversize"):  # --oversize skip: the lengths leave out VMs that no machine can host
        met = ", ".join(f"{r.policy} {r.extra.get('oversize', 0):.0f}" for r in table.rows)
        err_console.print(f"note: {table.context['oversize']} VMs of the trace are larger than any machine; the "
                          f"episodes skipped those they met (--oversize skip): {met}")  # fmt: skip
    if table.saturated:
        windowed = table.simulator in ("cluster", "capacity")
        if windowed and table.metric == "accepted":
            hint = "each accepted as many of every window's requests: try --metric machines_in_use"
        elif table.simulator == "numa" and table.metric == "length" and table.context.get("mode") == "expansion":
            hint = "in Expansion mode every request is placed: try --metric pms_in_use"
        else:
            hint = "try another --metric"
        who = "every number of machines" if table.simulator == "capacity" else "every policy"
        err_console.print(f"warning: {who} tied the baseline on every {'window' if windowed else 'episode'}: "
                          f"{table.metric} cannot tell them apart here ({hint})")  # fmt: skip
    if table.context.get("disjoint") is False:
        err_console.print("warning: the windows overlap (the trace is shorter than --windows x --requests), and the "
                          "intervals take them as independent, so they are too narrow: ask for fewer or shorter "
                          "windows")  # fmt: skip
    if json_out:
        typer.echo(json.dumps(record))
        return
    pct = table.metric in ("acceptance", "cpu_util", "mem_util", "cpu_alloc", "mem_alloc")
    tests = sum(1 for r in table.rows if not math.isnan(r.p))
    family = f"Holm over the {tests} comparisons" if tests > 1 else "one comparison"
    windowed = table.simulator in ("cluster", "capacity")
    unit = "windows from the cluster's state" if windowed else "episodes"
    what = "every number of machines" if table.simulator == "capacity" else "every policy"
    of = f" of {table.context['requests']:,} requests a window" if table.metric == "accepted" and windowed else ""
    t = Table(title=f"{table.metric}{of} ({record['better']} is better) over {table.episodes} {unit}, the same for "
                    f"{what}; baseline {table.baseline}; 95 % intervals paired on the {unit.split()[0]}; the verdict "
                    f"tests the difference, at 5 % for the whole table ({family}; the margin is "
                    "descriptive)")  # fmt: skip
    first = "machines added" if table.simulator == "capacity" else "policy"
    for col in (first, table.metric, "vs baseline", "difference", "p (Holm)", "verdict", "wins / ties / losses"):
        t.add_column(col, justify="left" if col in (first, "verdict") else "right")
    for r in table.rows:
        margin = "" if r.difference is None else "n/a (a baseline episode is 0)" if r.margin is None else None
        t.add_row(r.policy, r.mean.fmt(3 if pct else 1), margin if margin is not None else r.margin.fmt(1, pct=True),
                  "" if r.difference is None else r.difference.fmt(3 if pct else 1), _p(r.p_holm), r.verdict,
                  "" if r.difference is None else f"{r.wins} / {r.ties} / {r.losses}")  # fmt: skip
    console.print(t)
    if table.episodes < 2 and not table.context.get("one_sequence"):
        flag = "--windows" if windowed else "--episodes"
        err_console.print(f"note: one {unit.split()[0][:-1]} gives no interval; run {flag} 2 or more to compare")
    elif any(r.verdict == "no spread" for r in table.rows):
        err_console.print("note: 'no spread': the same gap on every episode gives an interval of zero width, "
                          f"which says nothing; a sign test decides from {SIGN_TEST_EPISODES} episodes all one "
                          "way")  # fmt: skip


def _p(p: float) -> str:
    """A p-value for the table: empty where there is none, ``< 0.001`` below that."""
    if math.isnan(p):
        return ""
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def _progress(episodes: int, what: str = "episode") -> Any:
    return lambda p: err_console.print(f"{p}: {episodes} {what}{'' if episodes == 1 else 's'}")


@app.command("numa")
@config_command(CompareNuma)
def compare_numa_cmd(
    cfg: CompareNuma,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
) -> None:
    """Policies on the same episodes of a trace on double-NUMA machines: each one's scheduled length against the
    baseline's (the paired margin and difference with 95 % intervals; ahead / behind where the difference's
    interval leaves zero and its p-value, adjusted by Holm over the policies compared, is below 0.05)."""
    from dcplace.bench.compare import compare_numa

    table = compare_numa(cfg.policies, cfg.trace, cfg.scenario, cfg.episodes, cfg.seed, cfg.double_threshold,
                         cfg.oversize, cfg.baseline, on_policy=_progress(cfg.episodes), metric=cfg.metric)  # fmt: skip
    _report(table, cfg, json_out, out, "dcplace compare numa")


@app.command("netalloc")
@config_command(CompareNetalloc)
def compare_netalloc_cmd(
    cfg: CompareNetalloc,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
) -> None:
    """Policies on the same request sequences of a datacenter network: each one's acceptance against the
    baseline's (the paired margin and difference with 95 % intervals; ahead / behind where the difference's
    interval leaves zero and its p-value, adjusted by Holm over the policies compared, is below 0.05)."""
    from dcplace.bench.compare import compare_netalloc
    from dcplace.workload.netreq import is_request_file

    one = is_request_file(cfg.dataset)  # compared once
    table = compare_netalloc(cfg.policies, cfg.topology, cfg.dataset, cfg.episodes, cfg.seed, cfg.requests or None,
                             cfg.split, cfg.setting, cfg.baseline, on_policy=_progress(1 if one else cfg.episodes),
                             metric=cfg.metric, bound=cfg.bound)  # fmt: skip
    if table.episodes < cfg.episodes:
        err_console.print(
            f"note: {cfg.dataset} is one request sequence, replayed as it is: compared once (its "
            f"{cfg.episodes} copies would differ only by the policies' random draws, no evidence)"
        )
    _report(table, cfg, json_out, out, "dcplace compare netalloc")


@dataclass(frozen=True)
class FromClusterState:
    """What ``compare cluster`` and ``cluster plan`` share: the cluster's state, the windows of a trace, the metric."""

    db: str | None = None
    """the cluster's SQLite database (from `dcplace serve --db`), read without writing to it, also while the service
    runs"""
    snapshot: str | None = None
    """instead of --db: a JSON file of the cluster's state (what `GET /state/snapshot` answers)"""
    metric: Literal["accepted", "first_rejection", "machines_in_use", "cpu_alloc", "mem_alloc"] = "accepted"
    """what to compare: requests accepted per window, those placed before the first rejection, or at the window's
    end the machines in use (lower is better) or the allocated share of CPU / memory"""
    trace: str = "synthetic"
    """the coming requests: huawei-east-1, azure-v1, synthetic, a trace file, or your own as package.module:function
    (docs/workloads.md)"""
    requests: int = 500
    """requests per window"""
    windows: int = 10
    """windows of the trace, each from its own seeded start, the same for everything compared, each from the
    cluster's state"""
    seed: int = 0
    """same seed, same numbers"""
    double_threshold: float = 32.0
    """the trace's VMs with memory above this many GB are multi-NUMA (split over every node); a trace that says each
    VM's span (its multi column, `cluster trace`) keeps it"""
    empty: bool = False
    """start every window from the cluster's machines (their status kept) without its VMs: to replay the cluster's
    own history (`dcplace cluster trace`), whose running VMs are in the trace already"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.requests >= 1, "requests", self.requests, "at least 1")
        check(self.windows >= 1, "windows", self.windows, "at least 1")

    def state(self) -> dict[str, Any]:
        """The cluster's state from --db or --snapshot, without its VMs under --empty."""
        snap = cluster_snapshot(self.db, self.snapshot)
        return {**snap, "vms": []} if self.empty else snap


@dataclass(frozen=True)
class CompareCluster(FromClusterState):
    """``compare cluster``: policies from a live cluster's state on the same windows of a trace."""

    policies: tuple[str, ...] = ("best-fit", "first-fit", "industrial")
    """the policies, registered names or your own as package.module:ClassName, a learned one with its own weights as
    name=checkpoint (repeat the flag for each)"""
    baseline: str | None = None
    """the policy the others are measured against (default: the first)"""


def cluster_snapshot(db: str | None, snapshot: str | None) -> dict[str, Any]:
    """The state ``--db`` or ``--snapshot`` names (exactly one), or InputError naming the flag."""
    from dcplace.engine import PlacementEngine
    from dcplace.errors import InputError

    if (db is None) == (snapshot is None):
        raise InputError("give exactly one of --db (a cluster database) and --snapshot (a JSON file of its state)",
                         field="db")  # fmt: skip
    if db is not None:
        return PlacementEngine.read_snapshot(Path(db))
    path = Path(str(snapshot))
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except OSError as e:
        raise InputError(f"cannot read {path} ({e.strerror})", field="snapshot") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise InputError(f"{path} is not JSON ({e})", field="snapshot") from None
    except RecursionError:
        raise InputError(f"{path} nests deeper than a cluster's state does", field="snapshot") from None
    if isinstance(data, dict) and set(data) == {"detail"}:  # what the service answered instead (a 401 saved)
        raise InputError(f"{path} holds an error answer of the service, not a cluster's state: {data['detail']}",
                         field="snapshot")  # fmt: skip
    if not isinstance(data, dict) or not {"numa", "machines", "vms"} <= data.keys():
        raise InputError(f"{path} is not a cluster's state (an object with numa, machines and vms, as GET "
                         "/state/snapshot answers)", field="snapshot")  # fmt: skip
    return data


@app.command("cluster")
@config_command(CompareCluster)
def compare_cluster_cmd(
    cfg: CompareCluster,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
) -> None:
    """Which policy would serve the coming requests best on your cluster: each policy places the same windows of a
    trace, every window starting from the cluster's state now (its database, read while the service runs, or a
    snapshot); the cluster's VMs stay, the trace's leave at their departures; requests accepted per window against
    the baseline's (paired 95 % intervals; ahead / behind as in `compare numa`)."""
    from dcplace.bench.compare import compare_cluster

    snap = cfg.state()
    table = compare_cluster(cfg.policies, snap, cfg.trace, cfg.requests, cfg.windows, cfg.seed, cfg.double_threshold,
                            cfg.baseline, on_policy=_progress(cfg.windows, "window"), metric=cfg.metric)  # fmt: skip
    _report(table, cfg, json_out, out, "dcplace compare cluster")
