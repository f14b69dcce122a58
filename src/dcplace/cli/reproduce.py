"""Reproduce a paper's tables (records + Markdown).

Each reproduction takes its settings from flags and ``--config FILE.toml`` and writes, beside its records and tables
in ``--out``, the resolved settings as ``config.toml`` (``--config`` that file to repeat the run).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Annotated, Any, Literal, cast

import typer

from dcplace.atomic import atomic_dir
from dcplace.cli.common import NetSettingName, console, err_console, print_claims, progress_lines
from dcplace.cli.options import check_out, config_command, made_by, write_config
from dcplace.config import check, check_types
from dcplace.errors import InputError
from dcplace.parallel import check_ray_address

Regime = Literal["auto", "today", "paper"]
"""A reproduction's ``regime`` setting (``auto``: resolved before the run, :func:`resolve_regime`)."""

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n", 1)[0], rich_markup_mode=None)


@contextlib.contextmanager
def _output(out: Path, cfg: object, command: str) -> Iterator[Path]:
    """The folder a reproduction writes into: a temporary twin of ``out`` that replaces it, with the resolved
    settings (``config.toml``), only when the whole run succeeded (:func:`dcplace.atomic.atomic_dir`; files of an
    earlier run of the same command that this one does not write are kept, e.g. the other tables of ``reproduce
    cvd-rl --table``). An interrupted run leaves ``out`` as it was: never plots without their records, never one
    seed's plots beside another's records. A folder holding anything else is refused before any work
    (:func:`check_reproduce_out`)."""
    check_reproduce_out(out, command)
    with atomic_dir(out, carry=True) as folder:
        yield folder
        write_config(cfg, folder, command, final=out)


def check_reproduce_out(out: Path, command: str, layout: frozenset[str] | None = None) -> None:
    """Refuse an ``--out`` that is a file (:func:`dcplace.cli.options.check_out`), or a folder holding what
    ``command`` did not write: replacing it would lose it or mix two runs in one folder. Ours: a missing folder, one
    with nothing but hidden entries, or (``layout`` None) one whose ``config.toml`` is headed by ``command``, or (a
    ``layout`` of names, ``reproduce all`` / ``demo``, whose folders are not replaced as one) one holding only those
    names, whatever an interrupted run left."""
    check_out(out)
    if not out.is_dir():
        return
    names = {p.name for p in out.iterdir() if not p.name.startswith(".")}
    if not names:
        return
    if layout is not None:
        if names <= layout:
            return
        held = f"{', '.join(sorted(names - layout)[:3])}, which `{command}` did not write"
    else:
        owner = made_by(out)
        if owner == command:
            return
        held = f"the output of `{owner}`" if owner else f"files that `{command}` did not write (no config.toml of it)"
    raise InputError(f"--out {out} already holds {held}; choose another folder or remove that one")


def _finish(md: str, out: Path, written: str) -> None:
    """Print a reproduction's Markdown and say where its files went."""
    typer.echo(md)
    console.print(f"{written} written to {out}/")


def _quick_sets(cfg: Any, *names: str) -> None:
    """Refuse, with ``quick`` on, a setting of ``names`` other than its default: the quick form sets its own (the
    command's --help says which), so an explicit ``--episodes 10 --quick`` ran 5 and recorded 10 in config.toml."""
    if not cfg.quick:
        return
    defaults = {f.name: f.default for f in fields(cfg)}
    for name in names:
        value = getattr(cfg, name)
        if value != defaults[name]:
            must = f"must be left at {defaults[name]!r} with --quick (the quick form sets its own), got {value!r}"
            raise InputError(must, field=name)


def _check_also(also: tuple[str, ...], built_in: tuple[str, ...], build: Any) -> None:
    """Build each ``--also`` policy once before any work, so a name that is wrong, or a user's class that fails, is
    one sentence naming --also; one already in the table, or given twice, is refused."""
    for i, spec in enumerate(also):
        if spec in built_in or spec in also[:i]:
            raise InputError(f"names {spec!r}, which the table already has", field="also")
        try:
            build(spec)
        except InputError as exc:
            raise InputError(exc.detail, field="also") from None


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
    regime: Regime = "auto"
    """paper: the calibration's closest reading (docs/cvd-rl.md), with the hindsight bound; today: releases off, the
    trace as read; auto: paper where Huawei-East-1 is here, else today"""
    workers: int = 1
    """cells in parallel (1: one after the other in this process; more: a process pool, or Ray's with ray_address)"""
    ray_address: str = ""
    """run the cells on Ray: 'local' (a new instance here), 'auto' or HOST:PORT (a cluster); needs the ray extra"""
    also: tuple[str, ...] = ()
    """your own NUMA policy beside the paper's in every cell, on the same episodes: a registered name or
    package.module:Class (repeat the flag for several)"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes", "workers")
        _quick_sets(self, "episodes")
        check_ray_address(self.ray_address)


@app.command("cvd-heuristics")
@config_command(CvdHeuristicsRun)
def reproduce_cvd(
    cfg: CvdHeuristicsRun,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl and table.md")] = Path("results/cvd-heuristics"),
) -> None:
    """The heuristic columns of CVD-RL's Tables 2-4, ours beside the paper's (in the paper's regime where
    Huawei-East-1 is here: --regime)."""
    from dcplace.bench.cvd_heuristics import POLICIES, run_reproduction
    from dcplace.bench.cvd_regime import resolve_regime, resolve_trace
    from dcplace.policies import get_policy

    _check_also(cfg.also, POLICIES, lambda p: get_policy(p, seed=cfg.seed))
    regime = resolve_regime(cfg.regime, cfg.trace)
    cfg = replace(cfg, regime=cast(Regime, regime), trace=resolve_trace(cfg.trace, regime))  # config.toml: what ran
    with progress_lines("cvd-heuristics") as say, _output(out, cfg, "dcplace reproduce cvd-heuristics") as folder:
        say(f"regime: {regime}")
        md = run_reproduction(trace=cfg.trace, episodes=5 if cfg.quick else cfg.episodes, seed=cfg.seed, out=folder,
                              quick=cfg.quick, regime=regime, progress=say, workers=cfg.workers,
                              ray_address=cfg.ray_address, also=cfg.also)  # fmt: skip
    _finish(md, out, "records and table")


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
    """0 % and 50 % warm start, stage 2 around the closest reading only (one round: top 1, rounds 1)"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes", "top", "rounds")
        _quick_sets(self, "top", "rounds")


@app.command("cvd-calibration")
@config_command(CvdCalibrationRun)
def reproduce_cvd_calibration(
    cfg: CvdCalibrationRun,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl and table.md")] = Path("results/cvd-calibration"),
) -> None:
    """Readings of CVD-RL's scenario (releases, long-lived VMs, threshold, capacity, start and end rules) ranked by
    their distance to the paper's Table 2 heuristic columns, with the hindsight bound."""
    from dcplace.bench.cvd_calibration import run_calibration

    with _output(out, cfg, "dcplace reproduce cvd-calibration") as folder:
        md = run_calibration(episodes=cfg.episodes, seed=cfg.seed, out=folder, quick=cfg.quick, top=cfg.top,
                             rounds=cfg.rounds)  # fmt: skip
    _finish(md, out, "records and table")


@dataclass(frozen=True)
class CvdRlRun:
    """CVD-RL's tables, curves and ablations."""

    trace: str = "auto"
    """huawei-east-1 (default when present), synthetic, or a path"""
    episodes: int = 0
    """episodes per table cell (per seed in the paper regime); 0: 20 today, 5 in the paper regime"""
    curve_epochs: int = 40
    """epochs per training run (curves, ablations; today's reading)"""
    workers: int = 2
    """training runs in parallel (processes; today's reading)"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """50 % warm start, 3 episodes, 3-epoch runs on small clusters (paper regime: Table 2 at 50 %, 3 episodes)"""
    regime: Regime = "auto"
    """paper: the calibration's reading (docs/cvd-rl.md), Tables 2-4 with the checkpoints trained there, PADRL,
    Hindsight Learning and the hindsight bound; today: releases off, tables + curves + ablations (Figures 6, 10-12);
    auto: paper where Huawei-East-1 is here, else today"""
    seeds: int = 5
    """paper regime: evaluation seeds (each redraws the regime's trace and the held-out starts)"""
    table: Literal["all", "table2", "table3", "table4"] = "all"
    """paper regime: one table only (each a separate process: the tables' runs are independent)"""
    ray_address: str = ""
    """train on Ray (today's reading): 'local' (a new instance here), 'auto' or HOST:PORT (a cluster); needs the ray
    extra"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "curve_epochs", "workers", "seeds")
        _quick_sets(self, "episodes", "curve_epochs")
        check(self.episodes >= 0, "episodes", self.episodes, "0 (the regime's default) or more")
        check(not self.quick or self.table in ("all", "table2"), "table", self.table, "all or table2 with quick")
        check_ray_address(self.ray_address)


def _at_default(cfg: CvdRlRun, names: tuple[str, ...], where: str) -> None:
    """Refuse a setting of ``names`` given away from its default: the other regime's, which ``where`` ignores (it was
    silently ignored)."""
    for f in fields(cfg):
        if f.name in names:
            check(getattr(cfg, f.name) == f.default, f.name, getattr(cfg, f.name), f"left at {f.default} {where}")


@app.command("cvd-rl")
@config_command(CvdRlRun)
def reproduce_cvd_rl(
    cfg: CvdRlRun,
    out: Annotated[Path, typer.Option(help="folder for records, curves, figures and table.md")] = Path(
        "results/cvd-rl"
    ),
    keep_replay: Annotated[
        bool, typer.Option(help="keep each training run's replay.npz (hundreds of MB; for resuming the runs)")
    ] = False,
) -> None:
    """CVD-RL's Tables 2-4 with CVD-RL and SchedRL (shipped checkpoints) beside the heuristics and the paper,
    learning curves against SchedRL at 2-20 PMs (Figure 6), operator ablations (Figure 10), filter designs and k
    (Figures 11-12) and the two rewards (--regime today). In the paper's regime (the default where Huawei-East-1 is
    here): Tables 2-4, every learned method (PADRL and Hindsight Learning too) beside the heuristics and the
    hindsight bound, over --seeds seeds."""
    from dcplace.bench.cvd_heuristics import TABLES
    from dcplace.bench.cvd_regime import resolve_regime, resolve_trace
    from dcplace.bench.cvd_reproduction import REGIME_EPISODES, run_regime_tables, run_reproduction

    regime = resolve_regime(cfg.regime, cfg.trace)
    cfg = replace(cfg, regime=cast(Regime, regime), trace=resolve_trace(cfg.trace, regime))  # config.toml: what ran
    if regime != "today":
        # the paper regime evaluates shipped checkpoints here: it trains nothing, so these would be silently ignored
        check(
            not cfg.ray_address,
            "ray_address",
            cfg.ray_address,
            "empty in the paper regime (it trains nothing; use --regime today)",
        )
        if keep_replay:
            raise InputError("--keep-replay applies to --regime today only (the paper regime trains nothing)")
        _at_default(cfg, ("workers", "curve_epochs"), "in the paper regime (it trains nothing; use --regime today)")
        episodes = 3 if cfg.quick else cfg.episodes or REGIME_EPISODES
        with progress_lines("cvd-rl") as say, _output(out, cfg, "dcplace reproduce cvd-rl") as folder:
            say(f"regime: {regime}")
            md = run_regime_tables(trace=cfg.trace, episodes=episodes, seeds=cfg.seeds,
                                   seed=cfg.seed, out=folder, quick=cfg.quick, regime=regime, progress=say,
                                   tables=tuple(TABLES) if cfg.table == "all" else (cfg.table,))  # fmt: skip
        _finish(md, out, "records and table")
        return
    _at_default(cfg, ("seeds", "table"), "in today's regime (it applies to --regime paper)")
    with progress_lines("cvd-rl") as say, _output(out, cfg, "dcplace reproduce cvd-rl") as folder:
        say("regime: today")
        md = run_reproduction(trace=cfg.trace, episodes=3 if cfg.quick else cfg.episodes or 20, seed=cfg.seed,
                              out=folder, quick=cfg.quick, curve_epochs=cfg.curve_epochs, workers=cfg.workers,
                              keep_replay=keep_replay, progress=say, ray_address=cfg.ray_address)  # fmt: skip
    _finish(md, out, "records, curves, figures and table")


@dataclass(frozen=True)
class NaraBaselinesRun:
    """The baseline rows of the Nara paper's Tables 1-4."""

    episodes: int = 20
    """rollouts per cell on gamma and delta: the paper's 5 state a 95 % interval within 5 % of each value, and ours
    need about 20 for that (the report prints the widest)"""
    alpha_beta_episodes: int = 100
    """rollouts per cell on alpha and beta: the paper's 5 state a 95 % interval within 5 % of each value, and ours
    need about 100 for that (the report prints the widest and Table 1 on the first 5)"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """2 rollouts per cell"""
    setting: NetSettingName = "paper"
    """paper: k = 3 shortest paths, NALB/NULB's own routing, sizes calibrated under the mean load, a full cluster
    makes a request wait (the authors' public environment; no clairvoyant bound); paper-reject: the same where a
    full cluster rejects it (with the bound); paper-max: paper-reject before the load was read as a mean; v1:
    dcplace's first reading"""
    also: tuple[str, ...] = ()
    """your own network-aware policy beside the baselines in every cell, on the same episodes: a registered name or
    package.module:Class (repeat the flag for several)"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes", "alpha_beta_episodes")
        _quick_sets(self, "episodes", "alpha_beta_episodes")


@app.command("nara-baselines")
@config_command(NaraBaselinesRun)
def reproduce_nara_baselines(
    cfg: NaraBaselinesRun,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl, table.md and plots")] = Path(
        "results/nara-baselines"
    ),
) -> None:
    """The baseline rows of the Nara paper's Tables 1-4 on alpha..delta, ours beside the paper's, and (in a setting
    that rejects a request the cluster cannot hold: paper-reject, paper-max, v1) each cell's clairvoyant bound (no
    allocator accepts more)."""
    from dcplace.bench.nara_baselines import EXTRA_POLICIES, POLICIES, run_reproduction
    from dcplace.policies import get_net_policy

    _check_also(cfg.also, POLICIES + EXTRA_POLICIES, lambda p: get_net_policy(p, seed=cfg.seed))
    with _output(out, cfg, "dcplace reproduce nara-baselines") as folder:
        md = run_reproduction(folder, episodes=2 if cfg.quick else cfg.episodes, seed=cfg.seed, setting=cfg.setting,
                              alpha_beta_episodes=2 if cfg.quick else cfg.alpha_beta_episodes,
                              policies=POLICIES + EXTRA_POLICIES + cfg.also)  # fmt: skip
    _finish(md, out, "records, table and plots")


@dataclass(frozen=True)
class NaraRun:
    """The Nara paper's Tables 1-7 and plots."""

    episodes: int = 20
    """rollouts per cell on gamma and delta: the paper's 5 state a 95 % interval within 5 % of each value, and ours
    need about 20 for that (the report prints the widest)"""
    alpha_beta_episodes: int = 100
    """rollouts per cell on alpha and beta (Tables 6 and 7 too): the paper's 5 state a 95 % interval within 5 % of
    each value, and ours need about 100 for that (the report prints the widest and Table 1 on the first 5)"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """2 rollouts per cell (1 on delta)"""
    setting: NetSettingName = "paper"
    """paper: k = 3 shortest paths, NALB/NULB's own routing, request sets calibrated under the mean load, a full
    cluster makes a request wait (the authors' public environment; no clairvoyant bound); paper-reject: the same
    where a full cluster rejects it (the same agents; with the bound); paper-max: paper-reject before the load was
    read as a mean (its own agents); v1: dcplace's first reading"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes", "alpha_beta_episodes")
        _quick_sets(self, "episodes", "alpha_beta_episodes")


@app.command("nara")
@config_command(NaraRun)
def reproduce_nara(
    cfg: NaraRun,
    out: Annotated[Path, typer.Option(help="folder for records, table.md and plots")] = Path("results/nara"),
) -> None:
    """The Nara paper's Tables 1-7 and section 5.3's plots: the shipped agents against every baseline."""
    from dcplace.bench.nara_reproduction import run_reproduction

    with _output(out, cfg, "dcplace reproduce nara") as folder:
        md = run_reproduction(folder, episodes=cfg.episodes, seed=cfg.seed, quick=cfg.quick, setting=cfg.setting,
                              alpha_beta_episodes=cfg.alpha_beta_episodes)  # fmt: skip
    _finish(md, out, "records, tables and plots")


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

    with progress_lines("hmip") as say, _output(out, cfg, "dcplace reproduce hmip") as folder:
        md = run_reproduction(folder, quick=cfg.quick, workers=cfg.workers, seed=cfg.seed, progress=say)
    _finish(md, out, "records and table")


@dataclass(frozen=True)
class ReoptRun:
    """Periodic re-optimisation on real traces (the synthetic one where they are absent)."""

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
    threshold (machine-hours, peak machines, migrations, GB moved, re-optimisation time, the bound at every event;
    every plan verified)."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    from dcplace.bench.reopt import auto_traces, render_folder, run_reproduction

    if cfg.report_only:
        if not (out / "records.jsonl").is_file():
            raise InputError(f"--out {out} holds no records.jsonl to report on")
        typer.echo(render_folder(out))  # the run's config.toml stays as it was
        console.print(f"table and figures redrawn in {out}/")
        return

    if cfg.traces == "auto":
        traces = auto_traces()
        cfg = replace(cfg, traces=",".join(traces))  # config.toml: what ran, not "auto"
    else:
        traces = tuple(t.strip() for t in cfg.traces.split(",") if t.strip())
    hours = 24.0 if cfg.quick and not cfg.hours else cfg.hours
    with Progress(
        TextColumn("{task.description}"), BarColumn(), TimeElapsedColumn(), console=err_console, transient=True
    ) as bar:  # fmt: skip  (stderr: stdout keeps the tables)
        tasks: dict[str, int] = {}

        def tick(what: str, frac: float) -> None:
            if what not in tasks:
                tasks[what] = int(bar.add_task(what, total=1.0))
            bar.update(tasks[what], completed=frac)  # type: ignore[arg-type]

        try:
            with _output(out, cfg, "dcplace reproduce reopt") as folder:
                md = run_reproduction(traces, hours, folder, quick=cfg.quick, seed=cfg.seed, progress=tick)
        except InputError as exc:  # a trace's own check names its field "trace"; the flag is --traces
            if exc.field == "trace":
                exc.field = "traces"
            raise
    _finish(md, out, "records, events, timeline, table and figures")


@dataclass(frozen=True)
class AllRun:
    """Every reproduction, then one report."""

    trace: str = "auto"
    """huawei-east-1 (default when present), synthetic, or a path (the CVD-RL reproductions)"""
    episodes: int = 20
    """episodes per cell of the CVD-RL tables (quick: 5 for the heuristics, 3 for the learned schedulers)"""
    curve_epochs: int = 40
    """epochs per CVD-RL training run (quick: 3)"""
    nara_episodes: int = 20
    """rollouts per Nara cell on gamma and delta (quick: 2, delta left out); the paper's 5 leave intervals wider
    than the paper states (see reproduce nara --help)"""
    nara_alpha_beta_episodes: int = 100
    """rollouts per Nara cell on alpha and beta, Tables 6 and 7 included (quick: 20); the paper's 5 leave intervals
    wider than the paper states (see reproduce nara --help)"""
    workers: int = 2
    """training runs, CP-SAT workers and decomposition processes in parallel"""
    seed: int = 0
    """same seed, same numbers"""
    quick: bool = False
    """each reproduction's quick form (what `dcplace demo` runs; the report says what it used)"""

    def __post_init__(self) -> None:
        check_types(self)
        _at_least_one(self, "episodes", "curve_epochs", "nara_episodes", "nara_alpha_beta_episodes", "workers")
        _quick_sets(self, "episodes", "curve_epochs", "nara_episodes", "nara_alpha_beta_episodes")


@app.command("all")
@config_command(AllRun)
def reproduce_all(
    cfg: AllRun,
    out: Annotated[Path, typer.Option(help="folder for every reproduction's records and the report")] = Path(
        "results/all"
    ),
    report_only: Annotated[
        bool, typer.Option(help="run nothing: render report.html / report.md from the records already in --out")
    ] = False,
) -> None:
    """Every reproduction (CVD-RL heuristics and learned schedulers, Nara, batch placement), records first, then one
    self-contained report.html (and report.md): the papers' tables ours beside theirs with 95 % intervals, a figure
    per headline claim, and a claims table (held / beaten / inconclusive / missed) computed from the records."""
    from dcplace.bench.cvd_regime import resolve_regime, resolve_trace
    from dcplace.bench.reproduce_all import AllSettings

    cfg = replace(cfg, trace=resolve_trace(cfg.trace, resolve_regime("auto", cfg.trace)))  # config.toml: what ran
    if cfg.quick:
        settings = AllSettings.quick_form(cfg.seed, cfg.trace, 5, cfg.workers)
    else:
        settings = AllSettings(trace=cfg.trace, cvd_episodes=cfg.episodes, curve_epochs=cfg.curve_epochs,
                               nara_episodes=cfg.nara_episodes, nara_alpha_beta_episodes=cfg.nara_alpha_beta_episodes,
                               workers=cfg.workers, seed=cfg.seed)  # fmt: skip
    run_all_command(settings, out, report_only, "dcplace reproduce all")
    if not report_only:
        write_config(cfg, out, "dcplace reproduce all")


def run_all_command(settings: Any, out: Path, report_only: bool, command: str) -> None:
    """``reproduce all`` and ``demo``: run every reproduction with ``settings`` (an
    :class:`~dcplace.bench.reproduce_all.AllSettings`) or only render the report, print the claims, say where the
    report is."""
    import shlex
    import sys

    from dcplace.bench.report import write_report
    from dcplace.bench.reproduce_all import run_all
    from dcplace.errors import InputError

    if report_only:
        if not out.is_dir():
            raise InputError(f"{out}: no such results folder (run `dcplace reproduce all` first)")
        path, claims = write_report(out)
    else:
        from dcplace.bench.reproduce_all import LAYOUT

        check_reproduce_out(out, command, LAYOUT)
        invoked = shlex.join(["dcplace", *sys.argv[1:]]) if Path(sys.argv[0]).name == "dcplace" else command
        with progress_lines("reproductions") as say:
            path, claims = run_all(out, settings, invoked, say)
    print_claims(claims)
    console.print(f"report: {path} (and {path.with_suffix('.md').name} beside it)")
