"""Batch placement of VMs with disks onto PMs with disks (paper 004): minimise the cost of the PMs used. Every answer
is re-checked by an independent checker (`verified`)."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Literal

import typer

from dcplace.cli.common import JSON_HELP, console, save_result
from dcplace.cli.options import config_command
from dcplace.config import check, check_types
from dcplace.errors import InputError

app = typer.Typer(add_completion=False)


@dataclass(frozen=True)
class HierarchicalParams:
    """The two-level decomposition's settings (``[hierarchical]`` in a config file; used by method hierarchical)."""

    packs: int = 25
    """hierarchical: VM packs (random, equal size)"""
    swads: int = 25
    """hierarchical: PM swads (random, equal size)"""
    beta: float = 0.7
    """hierarchical: safety margin on disk counts, in (0, 1]"""
    first_level: Literal["swads", "cost", "pattern"] = "swads"
    """hierarchical: swads (the paper's: fewest swads), cost, or pattern (column generation)"""
    split: Literal["random", "topology"] = "random"
    """hierarchical: random (the paper's packs and swads) or topology (pods -> racks)"""
    rack_size: int = 0
    """hierarchical topology: shuffle the PMs into racks of this size (0: the instance's)"""
    racks_per_pod: int = 5
    """hierarchical topology: racks per pod"""

    def __post_init__(self) -> None:
        check_types(self)
        check(0 < self.beta <= 1, "beta", self.beta, "in (0, 1]")
        check(self.rack_size >= 0, "rack_size", self.rack_size, "at least 0")
        check(self.racks_per_pod >= 1, "racks_per_pod", self.racks_per_pod, "at least 1")

    def options(self) -> dict[str, object]:
        """The ``hierarchy`` dict of :func:`dcplace.placement.solve.solve`."""
        return {"packs": self.packs, "swads": self.swads, "beta": self.beta, "objective": self.first_level,
                "split": self.split, "racks_per_pod": self.racks_per_pod}  # fmt: skip


@dataclass(frozen=True)
class SolveRun:
    """One ``solve`` run: an instance, a method, its stop and seed, and the method's parameters."""

    instance: str = "exp1"
    """exp1, exp2, mix1, mix2, mix2x100, a JSON instance file, or a topology-aware batch: huawei-c1..c4
    (../shared/data) or a VM_data_C<n>.csv beside PM_res.csv and topology.csv"""
    method: str = "auto"
    """auto, flat (the paper's model), compact (exact, on counts), pattern (column gen.), greedy, hierarchical"""
    time_limit: float | None = None
    """seconds; the best solution and bound so far are returned (default 60; 300 for huawei-cN)"""
    workers: int = 2
    """CP-SAT search workers"""
    seed: int = 0
    """same seed, same answer (greedy; CP-SAT with one worker)"""
    hierarchical: HierarchicalParams = field(default_factory=HierarchicalParams)
    """the hierarchical method's parameters"""

    def __post_init__(self) -> None:
        check_types(self)
        if self.time_limit is not None:
            check(self.time_limit > 0, "time_limit", self.time_limit, "positive")


@app.command("solve")
@config_command(SolveRun)
def solve_cmd(
    cfg: SolveRun,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[
        Path | None, typer.Option(help="also write result.json and the resolved settings (config.toml) here")
    ] = None,
) -> None:
    """Batch placement of VMs with disks onto PMs with disks (paper 004): minimise the cost of the PMs used.
    Every answer is re-checked by an independent checker (`verified`)."""
    from dcplace.placement.numa_batch import is_numa_batch, load_numa_batch, solve_huawei
    from dcplace.placement.problem import load_problem
    from dcplace.placement.solve import solve

    if is_numa_batch(cfg.instance):
        if cfg.method != "auto":
            raise InputError(f"topology-aware batches are solved by method auto only, got {cfg.method!r}",
                             field="method")  # fmt: skip
        summary = solve_huawei(load_numa_batch(cfg.instance), 300.0 if cfg.time_limit is None else cfg.time_limit)
        if out is not None:
            save_result(summary, cfg, out, "dcplace solve")
        if json_out:
            typer.echo(json.dumps(summary))
            return
        console.print(f"{summary['instance']}: {summary['status']}, {summary['pms_used']} servers for "
                      f"{summary['vms']} VMs, bound {summary['bound']}, gap {summary['gap']:.2%}, "
                      f"{summary['wall_s']:.1f} s, verified {summary['verified']}")  # fmt: skip
        return
    problem = load_problem(cfg.instance)
    h = cfg.hierarchical
    if h.rack_size:
        from dcplace.placement.hierarchical import with_racks

        problem = with_racks(problem, h.rack_size, cfg.seed)
    for name, value, most in (("packs", h.packs, problem.n_vms), ("swads", h.swads, problem.n_pms)):
        check(1 <= value <= most, f"hierarchical.{name}", value, f"between 1 and {most}")
    res = solve(problem, cfg.method, 60.0 if cfg.time_limit is None else cfg.time_limit, cfg.seed, cfg.workers,
                h.options())  # fmt: skip
    s = res.summary()
    if out is not None:
        save_result(s, cfg, out, "dcplace solve")
    if json_out:
        typer.echo(json.dumps(s))
        return
    gap = f"{s['gap']:.2%}" if s["gap"] is not None else "-"
    console.print(f"{s['instance']} / {s['method']}: {s['status']}, cost {s['cost']}, bound {s['bound']}, gap {gap}, "
                  f"{s['pms_used']} PMs for {s['vms']} VMs, {s['wall_s']:.2f} s, verified {s['verified']}")  # fmt: skip
    for v in res.violations:
        console.print(f"  violation: {v}")
