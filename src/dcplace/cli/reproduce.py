"""Reproduce a paper's tables (records + Markdown).

Each reproduction takes its settings from flags and ``--config FILE.toml`` and writes, beside its records and tables
in ``--out``, the resolved settings as ``config.toml`` (``--config`` that file to repeat the run).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Literal

import typer

from dcplace.cli.common import console
from dcplace.cli.options import config_command, write_config
from dcplace.config import check, check_types
from dcplace.errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n", 1)[0])


def _finish(md: str, cfg: object, out: Path, written: str, command: str) -> None:
    """Print a reproduction's Markdown, write its resolved settings beside its files, say where they went."""
    write_config(cfg, out, command)
    typer.echo(md)
    console.print(f"{written} written to {out}/")


def _at_least_one(cfg: object, *names: str) -> None:
    for name in names:
        value = getattr(cfg, name)
        check(value >= 1, name, value, "at least 1")


@dataclass(frozen=True)
class CvdHeuristicsRun:
    """The heuristic columns of CVD-RL's Tables 2-4."""

    trace: str = "auto"
    """huawei-east-1 (default when present), synthetic, or a path"""
    episodes: int = 20
    """episodes per cell"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """5 episodes, 0 % and 50 % warm start only"""
    regime: Literal["today", "paper"] = "today"
    """today: releases off, the trace as read; paper: the calibration's closest reading, with the hindsight bound"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes")


@app.command("cvd-heuristics")
@config_command(CvdHeuristicsRun)
def reproduce_cvd(
    cfg: CvdHeuristicsRun,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl and table.md")] = Path("results/cvd-heuristics"),
) -> None:
    """The heuristic columns of CVD-RL's Tables 2-4, ours beside the paper's."""
    from dcplace.bench.cvd_heuristics import run_reproduction

    md = run_reproduction(trace=cfg.trace, episodes=5 if cfg.quick else cfg.episodes, seed=cfg.seed, out=out,
                          quick=cfg.quick, regime=cfg.regime)  # fmt: skip
    _finish(md, cfg, out, "records and table", "dcplace reproduce cvd-heuristics")


@dataclass(frozen=True)
class CvdCalibrationRun:
    """Which reading of CVD-RL's scenario reproduces the heuristic columns of its Table 2."""

    episodes: int = 5
    """episodes per cell (a trace-start reading replays one)"""
    seed: int = 0
    """same seed, same numbers"""
    top: int = 3
    """readings around which each round of stage 2 varies one axis at a time"""
    rounds: int = 2
    """rounds of stage 2"""
    quick: bool = False
    """0 % and 50 % warm start, stage 2 around the closest reading only"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes", "top", "rounds")


@app.command("cvd-calibration")
@config_command(CvdCalibrationRun)
def reproduce_cvd_calibration(
    cfg: CvdCalibrationRun,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl and table.md")] = Path("results/cvd-calibration"),
) -> None:
    """Readings of CVD-RL's scenario (releases, long-lived VMs, threshold, capacity, start and end rules) ranked by
    their distance to the paper's Table 2 heuristic columns, with the hindsight bound."""
    from dcplace.bench.cvd_calibration import run_calibration

    md = run_calibration(episodes=cfg.episodes, seed=cfg.seed, out=out, quick=cfg.quick, top=cfg.top, rounds=cfg.rounds)
    _finish(md, cfg, out, "records and table", "dcplace reproduce cvd-calibration")


@dataclass(frozen=True)
class CvdRlRun:
    """CVD-RL's tables, curves and ablations."""

    trace: str = "auto"
    """huawei-east-1 (default when present), synthetic, or a path"""
    episodes: int = 20
    """episodes per table cell"""
    curve_epochs: int = 40
    """epochs per training run (curves, ablations)"""
    workers: int = 2
    """training runs in parallel (processes)"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """50 % warm start, 3 episodes, 3-epoch runs on small clusters"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes", "curve_epochs", "workers")


@app.command("cvd-rl")
@config_command(CvdRlRun)
def reproduce_cvd_rl(
    cfg: CvdRlRun,
    out: Annotated[Path, typer.Option(help="folder for records, curves, figures and table.md")] = Path(
        "results/cvd-rl"
    ),
) -> None:
    """CVD-RL's Tables 2-4 with CVD-RL and SchedRL (shipped checkpoints) beside the heuristics and the paper,
    learning curves against SchedRL at 2-20 PMs (Figure 6), operator ablations (Figure 10), filter designs and k
    (Figures 11-12) and the two rewards."""
    from dcplace.bench.cvd_reproduction import run_reproduction

    md = run_reproduction(trace=cfg.trace, episodes=3 if cfg.quick else cfg.episodes, seed=cfg.seed, out=out,
                          quick=cfg.quick, curve_epochs=cfg.curve_epochs, workers=cfg.workers)  # fmt: skip
    _finish(md, cfg, out, "records, curves, figures and table", "dcplace reproduce cvd-rl")


@dataclass(frozen=True)
class NaraBaselinesRun:
    """The baseline rows of the Nara paper's Tables 1-4."""

    episodes: int = 5
    """rollouts per cell (the paper: 5)"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """2 rollouts per cell"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes")


@app.command("nara-baselines")
@config_command(NaraBaselinesRun)
def reproduce_nara_baselines(
    cfg: NaraBaselinesRun,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl, table.md and plots")] = Path(
        "results/nara-baselines"
    ),
) -> None:
    """The baseline rows of the Nara paper's Tables 1-4 on alpha..delta, ours beside the paper's."""
    from dcplace.bench.nara_baselines import run_reproduction

    md = run_reproduction(out, episodes=2 if cfg.quick else cfg.episodes, seed=cfg.seed)
    _finish(md, cfg, out, "records, table and plots", "dcplace reproduce nara-baselines")


@dataclass(frozen=True)
class NaraRun:
    """The Nara paper's Tables 1-7 and plots."""

    episodes: int = 5
    """rollouts per cell (the paper: 5)"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """2 rollouts per cell (1 on delta)"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes")


@app.command("nara")
@config_command(NaraRun)
def reproduce_nara(
    cfg: NaraRun,
    out: Annotated[Path, typer.Option(help="folder for records, table.md and plots")] = Path("results/nara"),
) -> None:
    """The Nara paper's Tables 1-7 and section 5.3's plots: the shipped agents against every baseline."""
    from dcplace.bench.nara_reproduction import run_reproduction

    md = run_reproduction(out, episodes=cfg.episodes, seed=cfg.seed, quick=cfg.quick)
    _finish(md, cfg, out, "records, tables and plots", "dcplace reproduce nara")


@dataclass(frozen=True)
class HmipRun:
    """The batch-placement paper's tables."""

    workers: int = 2
    """CP-SAT workers and decomposition processes"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """Table IX at beta 0.7 only"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "workers")


@app.command("hmip")
@config_command(HmipRun)
def reproduce_hmip(
    cfg: HmipRun,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl and table.md")] = Path("results/hmip"),
) -> None:
    """The batch-placement paper's Tables III, V, VI and IX, ours beside the paper's (every answer verified)."""
    from dcplace.bench.hmip import run_reproduction

    md = run_reproduction(out, quick=cfg.quick, workers=cfg.workers, seed=cfg.seed)
    _finish(md, cfg, out, "records and table", "dcplace reproduce hmip")


@dataclass(frozen=True)
class ReoptRun:
    """Periodic re-optimisation on real traces."""

    traces: str = "auto"
    """comma-separated traces: huawei-east-1 and azure-v1 (default when present), synthetic, or paths"""
    hours: float = 0.0
    """replay the first this many hours of each trace (0: all of it)"""
    seed: int = 0
    """seed of the synthetic trace (the real traces are replayed as they are)"""
    quick: bool = False
    """the first 24 hours of each trace; re-optimisation every 6 hours and on the threshold"""
    report_only: bool = False
    """only redraw table.md and the figures from the records already in --out"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.hours >= 0, "hours", self.hours, "at least 0")


@app.command("reopt")
@config_command(ReoptRun)
def reproduce_reopt(
    cfg: ReoptRun,
    out: Annotated[Path, typer.Option(help="folder for records, events, timeline, table.md and machines.png")] = Path(
        "results/reopt"
    ),
) -> None:
    """The batch-placement paper's periodic re-optimisation (section III-D) on real traces: the best online policy
    alone against it plus re-optimisation every 1, 6 and 24 hours at several migration costs and on an efficiency
    threshold (machine-hours,
    peak machines, migrations, GB moved, re-optimisation time, the bound at every event; every plan verified)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from dcplace.bench.reopt import render_folder, run_reproduction
    from dcplace.workload.traces import trace_available

    if cfg.report_only:
        if not (out / "records.jsonl").is_file():
            raise InputError(f"{out} holds no records.jsonl to report on", field="out")
        typer.echo(render_folder(out))  # the run's config.toml stays as it was
        console.print(f"table and figures redrawn in {out}/")
        return

    if cfg.traces == "auto":
        real = [t for t in ("huawei-east-1", "azure-v1") if trace_available(t)]
        traces = tuple(real) or ("synthetic",)
    else:
        traces = tuple(t.strip() for t in cfg.traces.split(",") if t.strip())
    hours = 24.0 if cfg.quick and not cfg.hours else cfg.hours
    with Progress(TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=console,
                  transient=True) as bar:  # fmt: skip
        tasks: dict[str, int] = {}

        def tick(what: str, frac: float) -> None:
            if what not in tasks:
                tasks[what] = int(bar.add_task(what, total=1.0))
            bar.update(tasks[what], completed=frac)  # type: ignore[arg-type]

        md = run_reproduction(traces, hours, out, quick=cfg.quick, seed=cfg.seed, progress=tick)
    _finish(md, cfg, out, "records, events, timeline, table and figure", "dcplace reproduce reopt")
