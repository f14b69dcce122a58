"""Batch placement of VMs with disks onto PMs with disks (paper 004): minimise the cost of the PMs used. Every answer
is re-checked by an independent checker (`verified`)."""

from __future__ import annotations

import dataclasses
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from dcplace.cli.common import JSON_HELP, console, err_console, outcome_failed, save_result
from dcplace.cli.options import Flag, config_command
from dcplace.config import check, check_types
from dcplace.errors import InputError
from dcplace.placement import (
    AutoParams,
    CompactParams,
    FlatParams,
    GreedyParams,
    HierarchicalParams,
    NumaBatchParams,
    Params,
    PatternParams,
)

if TYPE_CHECKING:
    from dcplace.placement import Result

app = typer.Typer(add_completion=False, rich_markup_mode=None)


@dataclass(frozen=True)
class SolveRun:
    """One ``solve`` run: an instance, a method, its stop and seed, and each method's parameters (a table per
    method; only the hierarchical method's have flags, the others are set in a ``--config`` file)."""

    instance: str = "exp1"
    """exp1, exp2, mix1, mix2, mix2x100, a JSON instance file, or a topology-aware batch: huawei-c1..c4
    (../shared/data) or a VM_data_C<n>.csv beside PM_res.csv and topology.csv"""
    method: str = "auto"
    """auto, flat (the paper's model), compact (exact, on counts), pattern (column gen.), greedy, hierarchical;
    topology-aware batches: auto, pattern, relaxation-guided, consolidate; or package.module:name, a method that
    module registers (docs/placement.md)"""
    time_limit: float | None = None
    """seconds; the best solution and bound so far are returned (default 60; 300 for huawei-cN)"""
    workers: int = 2
    """CP-SAT search workers (the hierarchical method's processes); every method table's workers is this (exp and
    mix instances; a topology-aware batch searches with one)"""
    seed: int = 0
    """same seed, same answer (greedy; CP-SAT with one worker)"""
    hierarchical: HierarchicalParams = field(default_factory=HierarchicalParams)
    """the hierarchical method's parameters"""
    auto: AutoParams = field(default_factory=AutoParams)
    """method auto's parameters"""
    flat: FlatParams = field(default_factory=FlatParams)
    """method flat's parameters"""
    compact: CompactParams = field(default_factory=CompactParams)
    """method compact's parameters"""
    pattern: PatternParams = field(default_factory=PatternParams)
    """method pattern's parameters"""
    greedy: GreedyParams = field(default_factory=GreedyParams)
    """method greedy's parameters"""
    numa_batch: NumaBatchParams = field(default_factory=NumaBatchParams)
    """the topology-aware batches' method (auto on huawei-cN)"""

    def __post_init__(self) -> None:
        check_types(self)
        if self.time_limit is not None:
            check(self.time_limit > 0, "time_limit", self.time_limit, "positive")
        for table in (*METHOD_TABLES, "numa_batch"):  # one workers setting for the run, also in config.toml
            params = getattr(self, table)
            if getattr(params, "workers", self.workers) != self.workers:
                object.__setattr__(self, table, dataclasses.replace(params, workers=self.workers))


METHOD_TABLES = ("hierarchical", "auto", "flat", "compact", "pattern", "greedy")
"""The built-in methods of batch problems, each with its table of parameters in :class:`SolveRun`."""
FLAGS = {
    **{table: Flag(skip=True) for table in (*METHOD_TABLES[1:], "numa_batch")},  # set in a --config file
    "hierarchical.workers": Flag(skip=True),  # the run's --workers
}
"""Only the hierarchical method's parameters have flags (the others would share names such as --workers)."""


OUT_HELP = ("FILE.json or FILE.csv: write the assignment (VM -> machine -> disks or NUMA node) there; a folder: "
            "result.json, assignment.csv and the resolved settings (config.toml)")  # fmt: skip


def _write_out(out: Path | None, summary: dict[str, Any], res: Result, cfg: SolveRun, third: str = "disks") -> None:
    """``--out``: the assignment file, or the folder of result, assignment and settings (dcplace.cli.outputs)."""
    if out is None:
        return
    from dcplace.cli.outputs import ASSIGNMENT_SUFFIXES, assignment_rows, is_file_target, write_assignment

    rows = assignment_rows(res.vm_pm, res.vm_disks, res.vm_node)
    if is_file_target(out, ASSIGNMENT_SUFFIXES):
        write_assignment(out, summary, rows, third)
        return
    save_result(summary, cfg, out, "dcplace solve")
    write_assignment(out / "assignment.csv", summary, rows, third)


@app.command("solve")
@config_command(SolveRun, FLAGS)
def solve_cmd(
    cfg: SolveRun,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
) -> None:
    """Batch placement of VMs with disks onto PMs with disks (paper 004): minimise the cost of the PMs used.
    Every answer is re-checked by an independent checker (`verified`)."""
    from dcplace.placement import Deadline, load_problem, solve
    from dcplace.placement.numa_batch import summary_of
    from dcplace.placement.numa_instances import is_numa_batch, load_numa_batch

    if is_numa_batch(cfg.instance):
        if cfg.workers != 2:  # silently ignored: the topology-aware methods search with one CP-SAT worker
            raise InputError("applies to exp/mix instances only (topology-aware batches search with one CP-SAT "
                             "worker)", field="workers")  # fmt: skip
        limit = Deadline(300.0 if cfg.time_limit is None else cfg.time_limit)
        from dcplace.placement import get_method
        from dcplace.placement.numa_batch import NumaBatch

        # the [numa_batch] table for every method that takes its class (auto, relaxation-guided); others: defaults
        own = cfg.numa_batch if get_method(cfg.method, NumaBatch).params is type(cfg.numa_batch) else None
        with err_console.status(f"solving {cfg.instance} with {cfg.method} (up to {limit.seconds:g} s)..."):
            res = solve(load_numa_batch(cfg.instance), cfg.method, limit, cfg.seed, own)
        summary = summary_of(res)
        if not _rejected(res) and not _no_answer(res):  # an answer the checker passed
            _write_out(out, summary, res, cfg, "numa_node")
        if json_out:
            typer.echo(json.dumps(summary))
        else:
            console.print(f"{summary['instance']}: {summary['status']}, {summary['pms_used']} servers for "
                          f"{summary['vms']} VMs, bound {summary['bound']}, gap {summary['gap']:.2%}, "
                          f"{summary['wall_s']:.1f} s, verified {summary['verified']}")  # fmt: skip
            _notes(res)
        _refuse(res, cfg.method, out)
        return
    problem = load_problem(cfg.instance)
    params: Params | None = getattr(cfg, cfg.method) if cfg.method in METHOD_TABLES else None  # else: defaults
    limit = Deadline(60.0 if cfg.time_limit is None else cfg.time_limit)
    with err_console.status(f"solving {cfg.instance} with {cfg.method} (up to {limit.seconds:g} s)..."):
        res = solve(problem, cfg.method, limit, cfg.seed, params)
    s = res.summary()
    if not _rejected(res) and not _no_answer(res):  # an answer the checker passed
        _write_out(out, s, res, cfg)
    if json_out:
        typer.echo(json.dumps(s))
        _refuse(res, cfg.method, out)
        return
    gap = f"{s['gap']:.2%}" if s["gap"] is not None else "-"
    console.print(f"{s['instance']} / {s['method']}: {s['status']}, cost {s['cost']}, bound {s['bound']}, gap {gap}, "
                  f"{s['pms_used']} PMs for {s['vms']} VMs, {s['wall_s']:.2f} s, verified {s['verified']}")  # fmt: skip
    if s.get("migrations") is not None:  # a problem that starts from a current placement
        console.print(f"  machine cost {s['machine_cost']}, migration cost {s['migration_cost']}, "
                      f"{s['migrations']} migrations")  # fmt: skip
    if s["status"] in ("infeasible", "unknown") and s.get("reason"):
        console.print(f"  why: {s['reason']}")
    _notes(res)
    _refuse(res, cfg.method, out)


def _no_answer(res: Result) -> bool:
    """Whether the method found no placement: proven infeasible, or none within its limits."""
    return res.status in ("infeasible", "unknown")


def _refuse(res: Result, method: str, out: Path | None) -> None:
    """After the summary: a rejected answer ends the command with exit 2 (:func:`_refuse_rejected`), no answer
    with exit 3 (it exited 0 and --out held a header alone)."""
    _refuse_rejected(res, method, out)
    if _no_answer(res):
        reason = res.stats.get("reason")
        why = f" ({reason})" if reason else ""
        outcome_failed(f"no placement: the method's status is {res.status}{why}"
                       f"{'; nothing was written to --out' if out is not None else ''}")  # fmt: skip


def _rejected(res: Result) -> bool:
    """Whether the independent checker (or the claims check) rejected the answer."""
    return res.verified is False and bool(res.violations)


def _notes(res: Result) -> None:
    for v in res.violations:
        console.print(f"  violation: {v}")
    if "over_time_s" in res.stats:
        console.print(f"  note: the method returned {res.stats['over_time_s']:g} s after its time limit")


def _refuse_rejected(res: Result, method: str, out: Path | None) -> None:
    """A rejected answer ends the command with exit 2, after its summary: it used to exit 0 and --out wrote it."""
    if _rejected(res):
        n = len(res.violations)
        raise InputError(
            f"the answer of method {method} fails the independent check ({n} violation{'s' * (n != 1)}; the first: "
            f"{res.violations[0]}){'; nothing was written to --out' if out is not None else ''}"
        )
