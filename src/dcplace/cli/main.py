"""The ``dcplace`` command line: simulate, reproduce, demo, policies.

User errors (bad files, bad flags) end with one sentence on stderr and exit code 2; tracebacks mean a bug.
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from enum import StrEnum
from pathlib import Path
from typing import Annotated

os.environ.setdefault("OMP_NUM_THREADS", "1")

import typer
from rich.console import Console
from rich.table import Table

from dcplace.cli.serve import serve as serve_cmd
from dcplace.errors import InputError

app = typer.Typer(add_completion=False, no_args_is_help=True, help="dcplace: decide where datacenter workloads run.")
simulate_app = typer.Typer(no_args_is_help=True, help="Run placement policies in a simulator.")
reproduce_app = typer.Typer(no_args_is_help=True, help="Reproduce a paper's tables (records + Markdown).")
train_app = typer.Typer(no_args_is_help=True, help="Train a learned policy (curves, checkpoints, --resume).")
app.add_typer(simulate_app, name="simulate")
app.add_typer(train_app, name="train")
app.add_typer(reproduce_app, name="reproduce")
console = Console()


class ModeOpt(StrEnum):
    non_expansion = "non-expansion"
    expansion = "expansion"
    stream = "stream"


class OversizeOpt(StrEnum):
    error = "error"
    skip = "skip"


def _as_flag(exc: InputError) -> InputError:
    """A core error naming a field ("packs must be ...", ``exc.field == "packs"``) in the wording of the flag that
    sets it ("--packs must ..."); other errors as they are."""
    field = exc.field
    if exc.path is None and field and exc.detail.startswith(field + " "):
        return InputError("--" + field.replace("_", "-") + exc.detail[len(field) :])
    return exc


def _fail(exc: InputError) -> None:
    exc = _as_flag(exc)
    if exc.path is None and exc.field is not None:  # a core field error: name the flag it came from
        typer.echo(f"error: --{exc.field.replace('_', '-')}: {exc.detail}", err=True)
        raise typer.Exit(2)
    typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _flag_wording(exc: InputError, flags: dict[str, str]) -> InputError:
    """A core error naming a configuration field (``exc.field``), reworded to name the flag that sets it."""
    if exc.path is None and exc.line is None and exc.field in flags:
        return InputError(f"{flags[exc.field]} {exc.detail}")
    return exc


def _reproduce(run: Callable[[], str], written: str, out: Path, at_least_one: dict[str, int] | None = None) -> None:
    """Check the count flags, run a reproduction, print its Markdown and where its files went; user errors exit 2."""
    try:
        for flag, value in (at_least_one or {}).items():
            if value < 1:
                raise InputError(f"{flag} must be at least 1, got {value}")
        md = run()
    except InputError as exc:
        _fail(exc)
    typer.echo(md)
    console.print(f"{written} written to {out}/")


@simulate_app.command("numa")
def simulate_numa(
    trace: Annotated[str, typer.Option(help="huawei-east-1, azure-v1, synthetic, or a trace file path")] = "synthetic",
    pms: Annotated[int, typer.Option(help="machines at the start (2 NUMA nodes of 40 CPU / 90 GB each)")] = 50,
    warm_start: Annotated[float, typer.Option(help="CPU allocation rate reached before scoring, in [0, 1)")] = 0.0,
    mode: Annotated[
        ModeOpt,
        typer.Option(
            help="end at the first unhostable request, grow the cluster, or stream "
            "the whole trace through the live engine counting rejections"
        ),
    ] = ModeOpt.non_expansion,
    no_release: Annotated[bool, typer.Option("--no-release", help="VMs never leave (VMAgent's fading)")] = False,
    policy: Annotated[str, typer.Option(help="a registered policy (see `dcplace policies`)")] = "best-fit",
    checkpoint: Annotated[
        str | None, typer.Option(help="weights for a learned policy (default: the shipped one)")
    ] = None,
    episodes: Annotated[int, typer.Option(help="episodes, each from its own seeded start")] = 10,
    seed: Annotated[int, typer.Option(help="same seed, same numbers")] = 0,
    max_pms: Annotated[int, typer.Option(help="expansion: the most machines")] = 110,
    expand_step: Annotated[int, typer.Option(help="expansion: machines added per unhostable request")] = 10,
    double_threshold: Annotated[float, typer.Option(help="VMs with memory above this many GB are double-NUMA")] = 32.0,
    max_requests: Annotated[int, typer.Option(help="stop after this many scored placements (0: no limit)")] = 0,
    oversize: Annotated[
        OversizeOpt, typer.Option(help="a VM no machine can host: refuse the trace, or count and skip")
    ] = (OversizeOpt.error),
    check: Annotated[bool, typer.Option(help="check the ledger invariants after every episode")] = False,
    json_out: Annotated[bool, typer.Option("--json", help="print exactly one JSON object")] = False,
) -> None:
    """Online VM scheduling on double-NUMA machines (the CVD-RL / VMAgent setting)."""
    if mode == ModeOpt.stream:
        from dcplace.cli.serve import stream

        return stream(trace, pms, policy, double_threshold, seed, not no_release, max_requests, 100, json_out, None)
    from dcplace.bench.numa_runner import summarise
    from dcplace.cluster.numa import NumaCluster
    from dcplace.policies import get_policy
    from dcplace.policies.numa_heuristics import warm_up_jit
    from dcplace.sim.episodes import check_hostable, prepare, run_episodes
    from dcplace.sim.numa import Scenario
    from dcplace.workload.traces import load_trace

    try:
        pol = get_policy(policy, checkpoint)
        scenario = Scenario(
            pms=pms,
            mode="expansion" if mode == ModeOpt.expansion else "non-expansion",
            max_pms=max_pms,
            expand_step=expand_step,
            release=not no_release,
            warm_start=warm_start,
            max_requests=max_requests,
        )
        table = load_trace(trace, seed=seed)
        prepared = prepare(table, double_threshold)
        cluster = NumaCluster.uniform(scenario.machines)
        if oversize == OversizeOpt.error:
            check_hostable(cluster, prepared)
        warm_up_jit()
        results, wall, decisions = run_episodes(pol, cluster, prepared, scenario, episodes, seed, check=check)
    except InputError as exc:
        _fail(exc)
    summary = summarise(policy, trace, scenario, double_threshold, seed, results, wall, decisions)
    if json_out:
        typer.echo(json.dumps(summary.as_dict()))
        return
    t = Table(title=f"{policy} on {trace}: {pms} PMs, {mode.value}, warm start {warm_start:.0%}, "
              f"releases {'off' if no_release else 'on'}")  # fmt: skip
    for col in ("episode", "length", "income", "cpu alloc", "mem alloc", "PMs in use", "final PMs", "status"):
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


@simulate_app.command("netalloc")
def simulate_netalloc(
    topology: Annotated[str, typer.Option(help="alpha, beta, gamma, delta, or a .json / .csv topology file")] = "alpha",
    dataset: Annotated[str, typer.Option(help="uniform, azure, alibaba, or a request CSV (cpu,mem,bw,hold)")] = (
        "uniform"
    ),
    policy: Annotated[str, typer.Option(help="a registered netalloc policy (see `dcplace policies`)")] = "tetris",
    requests: Annotated[
        int, typer.Option(help="requests per episode (0: the paper's length for the topology, 128 otherwise)")
    ] = 0,
    episodes: Annotated[int, typer.Option(help="episodes, each its own seeded request sequence")] = 5,
    seed: Annotated[int, typer.Option(help="same seed, same numbers")] = 0,
    split: Annotated[str, typer.Option(help="train or test part of the trace-derived sets")] = "test",
    check: Annotated[bool, typer.Option(help="check the ledger invariants after every episode")] = False,
    checkpoint: Annotated[
        str | None, typer.Option(help="weights for a learned policy (default: the shipped one for the dataset)")
    ] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print exactly one JSON object")] = False,
) -> None:
    """Network-aware allocation of multi-server requests on a datacenter network (the Nara setting)."""
    from dcplace.bench.netalloc_runner import run_policy

    try:
        if split not in ("train", "test"):
            raise InputError(f"--split must be train or test, got {split!r}")
        run = run_policy(topology, dataset, policy, requests or None, episodes, seed, split, check, checkpoint)
    except InputError as exc:
        _fail(exc)
    s = run.summary()
    if json_out:
        typer.echo(json.dumps(s))
        return
    t = Table(title=f"{policy} on {run.topology}, {run.dataset}: {run.requests} requests per episode")
    for col in ("episode", "acceptance", "cpu util", "mem util", *s["bw_util_by_tier"], "rejected (net/cap)"):
        t.add_column(col, justify="right")
    for i, r in enumerate(run.results):
        t.add_row(str(i), f"{r.acceptance:.3f}", f"{r.cpu_util:.2f}", f"{r.mem_util:.2f}",
                  *(f"{v:.2f}" for v in r.bw_util_by_tier.values()),
                  f"{r.rejected['network']}/{r.rejected['capacity']}")  # fmt: skip
    t.add_row("mean", f"{s['acceptance_mean']:.3f} ± {s['acceptance_std']:.3f}", f"{s['cpu_util_mean']:.2f}",
              f"{s['mem_util_mean']:.2f}", *(f"{v:.2f}" for v in s["bw_util_by_tier"].values()), "",
              style="bold")  # fmt: skip
    console.print(t)
    console.print("locality: " + ", ".join(f"{k} {v:.0%}" for k, v in s["locality"].items())
                  + f"; {s['servers_per_allocation_mean']:.1f} servers per allocation")  # fmt: skip
    console.print(f"{s['decisions']:,} decisions in {s['wall_s']:.3f} s ({s['decisions_per_s']:,.0f}/s)")


@reproduce_app.command("cvd-heuristics")
def reproduce_cvd(
    trace: Annotated[str, typer.Option(help="huawei-east-1 (default when present), synthetic, or a path")] = "auto",
    episodes: Annotated[int, typer.Option(help="episodes per cell")] = 20,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl and table.md")] = Path("results/cvd-heuristics"),
    quick: Annotated[bool, typer.Option(help="5 episodes, 0 % and 50 % warm start only")] = False,
) -> None:
    """The heuristic columns of CVD-RL's Tables 2-4, ours beside the paper's."""
    from dcplace.bench.cvd_heuristics import run_reproduction

    _reproduce(
        lambda: run_reproduction(trace=trace, episodes=5 if quick else episodes, seed=seed, out=out, quick=quick),
        "records and table",
        out,
    )


@reproduce_app.command("cvd-rl")
def reproduce_cvd_rl(
    trace: Annotated[str, typer.Option(help="huawei-east-1 (default when present), synthetic, or a path")] = "auto",
    episodes: Annotated[int, typer.Option(help="episodes per table cell")] = 20,
    curve_epochs: Annotated[int, typer.Option(help="epochs per training run (curves, ablations)")] = 40,
    workers: Annotated[int, typer.Option(help="training runs in parallel (processes)")] = 2,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path, typer.Option(help="folder for records, curves, figures and table.md")] = Path(
        "results/cvd-rl"
    ),
    quick: Annotated[bool, typer.Option(help="50 % warm start, 3 episodes, 3-epoch runs on small clusters")] = False,
) -> None:
    """CVD-RL's Tables 2-4 with CVD-RL and SchedRL (shipped checkpoints) beside the heuristics and the paper,
    learning curves against SchedRL at 2-20 PMs (Figure 6), operator ablations (Figure 10), filter designs and k
    (Figures 11-12) and the two rewards."""
    from dcplace.bench.cvd_reproduction import run_reproduction

    _reproduce(
        lambda: run_reproduction(
            trace=trace,
            episodes=3 if quick else episodes,
            seed=seed,
            out=out,
            quick=quick,
            curve_epochs=curve_epochs,
            workers=workers,
        ),
        "records, curves, figures and table",
        out,
        {"--episodes": episodes, "--curve-epochs": curve_epochs, "--workers": workers},
    )


@reproduce_app.command("nara-baselines")
def reproduce_nara_baselines(
    episodes: Annotated[int, typer.Option(help="rollouts per cell (the paper: 5)")] = 5,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path, typer.Option(help="folder for records.jsonl, table.md and plots")] = Path(
        "results/nara-baselines"
    ),
    quick: Annotated[bool, typer.Option(help="2 rollouts per cell")] = False,
) -> None:
    """The baseline rows of the Nara paper's Tables 1-4 on alpha..delta, ours beside the paper's."""
    from dcplace.bench.nara_baselines import run_reproduction

    _reproduce(
        lambda: run_reproduction(out, episodes=2 if quick else episodes, seed=seed),
        "records, table and plots",
        out,
        {"--episodes": episodes},
    )


@reproduce_app.command("nara")
def reproduce_nara(
    episodes: Annotated[int, typer.Option(help="rollouts per cell (the paper: 5)")] = 5,
    seed: Annotated[int, typer.Option()] = 0,
    out: Annotated[Path, typer.Option(help="folder for records, table.md and plots")] = Path("results/nara"),
    quick: Annotated[bool, typer.Option(help="2 rollouts per cell (1 on delta)")] = False,
) -> None:
    """The Nara paper's Tables 1-7 and section 5.3's plots: the shipped agents against every baseline."""
    from dcplace.bench.nara_reproduction import run_reproduction

    _reproduce(
        lambda: run_reproduction(out, episodes=episodes, seed=seed, quick=quick),
        "records, tables and plots",
        out,
        {"--episodes": episodes},
    )


@reproduce_app.command("hmip")
def reproduce_hmip(
    out: Annotated[Path, typer.Option(help="folder for records.jsonl and table.md")] = Path("results/hmip"),
    workers: Annotated[int, typer.Option(help="CP-SAT workers and decomposition processes")] = 2,
    seed: Annotated[int, typer.Option()] = 0,
    quick: Annotated[bool, typer.Option(help="Table IX at beta 0.7 only")] = False,
) -> None:
    """The batch-placement paper's Tables III, V, VI and IX, ours beside the paper's (every answer verified)."""
    from dcplace.bench.hmip import run_reproduction

    _reproduce(
        lambda: run_reproduction(out, quick=quick, workers=workers, seed=seed),
        "records and table",
        out,
        {"--workers": workers},
    )


@train_app.command("nara")
def train_nara(
    topology: Annotated[
        str, typer.Option(help="alpha, beta, gamma, delta or a topology file; several, comma-separated, take turns")
    ] = "alpha",
    dataset: Annotated[str, typer.Option(help="uniform, azure or alibaba")] = "uniform",
    iterations: Annotated[int, typer.Option(help="PPO iterations in total (the paper: 150)")] = 150,
    seed: Annotated[int, typer.Option(help="same seed, same weights")] = 0,
    out: Annotated[Path | None, typer.Option(help="folder for checkpoints and curves")] = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out from its checkpoint.pt")] = False,
    steps: Annotated[int, typer.Option(help="picks per iteration (the paper: 2,048)")] = 2048,
    eval_every: Annotated[int, typer.Option(help="validate (greedy, 5 x 128 requests) every this many iterations")] = 5,
    p2_hidden: Annotated[
        int,
        typer.Option(help="hidden units in P2 (0: one linear layer, the paper's; see docs/nara.md)"),
    ] = 0,
    init: Annotated[
        Path | None, typer.Option(help="start from this checkpoint's weights (a curriculum; its sizes win)")
    ] = None,
) -> None:
    """Nara: PPO on a GNN policy (section 3.3). Writes policy.pt (best validation), checkpoint.pt (latest, for
    --resume), curves.csv / curves.png and train.json to --out."""
    import time

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from dcplace.cluster.topology import load_topology
    from dcplace.learn.nara_model import NaraConfig
    from dcplace.learn.ppo import PPOConfig, PPOTrainer
    from dcplace.workload.netreq import DATASETS

    try:
        if dataset not in DATASETS:
            raise InputError(f"--dataset must be one of {', '.join(DATASETS)}, got {dataset!r}")
        for flag, value in (("--iterations", iterations), ("--steps", steps), ("--eval-every", eval_every)):
            if value < 1:
                raise InputError(f"{flag} must be at least 1, got {value}")
        tops = [load_topology(t) for t in topology.split(",")]
        where = "+".join(t.name for t in tops)
        folder = out or Path(f"results/train/nara-{where}-{dataset}")
        if resume:
            trainer = PPOTrainer.resume(tops, dataset, seed, folder)
        else:
            if (folder / "checkpoint.pt").exists():
                raise InputError(f"{folder} already holds a run; pass --resume to continue it or choose another --out")
            if p2_hidden < 0:
                raise InputError(f"--p2-hidden must be at least 0, got {p2_hidden}")
            ppo = PPOConfig(steps_per_iteration=steps, eval_every=eval_every)
            trainer = PPOTrainer(tops, dataset, seed, folder, ppo, NaraConfig(p2_hidden=p2_hidden), init)
    except InputError as exc:
        _fail(_flag_wording(exc, {"steps_per_iteration": "--steps", "eval_every": "--eval-every"}))
    t0 = time.perf_counter()
    with Progress(
        TextColumn("[bold]nara {task.fields[where]}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} it"),
        TextColumn("acc {task.fields[acc]} val {task.fields[val]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as bar:
        best = f"{trainer.best_validation:.3f}" if trainer.best_validation >= 0 else "-"
        task = bar.add_task("train", total=iterations, completed=trainer.iteration, where=f"{where}/{dataset}",
                            acc="-", val=best)  # fmt: skip

        def show(row: dict[str, float]) -> None:
            bar.update(task, completed=int(row["iteration"]), acc=f"{row['train_acceptance']:.3f}",
                       val=f"{trainer.best_validation:.3f}")  # fmt: skip

        trainer.train(iterations, show)
    trainer.write_summary(" ".join(["dcplace", "train", "nara", *sys.argv[3:]]), time.perf_counter() - t0)
    console.print(f"best validation acceptance {trainer.best_validation:.3f}; {trainer.wall_s:.0f} s of training; "
                  f"policy in {folder}/policy.pt")  # fmt: skip


def _parse_filter(text: str) -> tuple[tuple[str, int], ...]:
    """``best-fit:2,industrial:3`` -> (("best-fit", 2), ("industrial", 3)); ``none`` -> () (no filter)."""
    if text.strip().lower() in ("none", ""):
        return ()
    pairs = []
    for part in text.split(","):
        name, _, k = part.strip().partition(":")
        if not k.isdigit():
            raise InputError(f"--filter entry {part!r} must look like best-fit:2 (heuristic:k), or be 'none'")
        pairs.append((name, int(k)))
    return tuple(pairs)


def _train_dqn(kind: str, trace: str, pms: int, warm_start: float, mode: ModeOpt, epochs: int, seed: int,
               out: Path | None, resume: bool, reward: str, updates: int, batch: int, eval_every: int,
               filter_spec: str, decompose: bool, lookahead: bool, hidden: int,
               loss: str = "cluster") -> None:  # fmt: skip
    """The shared body of ``train cvd-rl`` and ``train schedrl``."""
    import time

    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    from dcplace.cluster.numa import NumaCluster
    from dcplace.learn.cvd_model import CvdConfig
    from dcplace.learn.cvd_rl import CvdRlTrainer
    from dcplace.learn.dqn import DQNConfig
    from dcplace.learn.schedrl import SchedRlTrainer
    from dcplace.sim.episodes import check_hostable, prepare
    from dcplace.sim.numa import Scenario
    from dcplace.workload.traces import load_trace, trace_available

    label = "cvd-rl" if kind == "cvd" else "schedrl"
    trainer_class = CvdRlTrainer if kind == "cvd" else SchedRlTrainer
    try:
        if mode != ModeOpt.non_expansion:
            raise InputError("--mode: training runs in non-expansion (evaluate expansion with `dcplace simulate`)")
        for flag, value in (("--epochs", epochs), ("--updates-per-epoch", updates), ("--batch", batch),
                            ("--eval-every", eval_every), ("--hidden", hidden)):  # fmt: skip
            if value < 1:
                raise InputError(f"{flag} must be at least 1, got {value}")
        if trace == "auto":
            trace = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
        scenario = Scenario(pms=pms, release=False, warm_start=warm_start)
        prepared = prepare(load_trace(trace, seed=0, synthetic_n=60_000), 32.0)
        check_hostable(NumaCluster.uniform(pms), prepared)
        folder = out or Path(f"results/train/{label}-{pms}pm")
        if resume:
            trainer = trainer_class.resume(prepared, scenario, seed, folder, trace)
        else:
            if (folder / "checkpoint.pt").exists():
                raise InputError(f"{folder} already holds a run; pass --resume to continue it or choose another --out")
            whole = kind == "schedrl" or not decompose
            model = CvdConfig(kind=kind, hidden=hidden, decompose=decompose, lookahead=lookahead,
                              filter_k=_parse_filter(filter_spec) if kind == "cvd" else (),
                              machines=pms if whole else 0)  # fmt: skip
            dqn = DQNConfig(reward=reward, updates_per_epoch=updates, batch=batch, eval_every=eval_every, loss=loss)
            trainer = trainer_class(prepared, scenario, seed, folder, model, dqn, trace)
        ref = {h: trainer.validate_heuristic(h) for h in ("best-fit", "industrial")}
    except InputError as exc:
        flags = {"reward": "--reward", "loss": "--loss", "batch": "--batch", "eval_every": "--eval-every",
                 "updates_per_epoch": "--updates-per-epoch", "mode": "--mode"}  # fmt: skip
        _fail(_flag_wording(exc, flags))
    t0 = time.perf_counter()
    with Progress(
        TextColumn(f"[bold]{label} {pms} PMs"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} epochs"),
        TextColumn("len {task.fields[len]} val {task.fields[val]}"),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=console,
    ) as bar:
        task = bar.add_task("train", total=epochs, completed=trainer.epoch, len="-", val="-")

        def show(row: dict[str, float]) -> None:
            bar.update(task, completed=int(row["epoch"]), len=f"{row['train_length']:.0f}",
                       val=f"{trainer.best_validation:.1f}")  # fmt: skip

        trainer.train(epochs, show)
    trainer.write_summary(
        " ".join(["dcplace", "train", label, *sys.argv[3:]]),
        time.perf_counter() - t0,
        validation_best_fit=ref["best-fit"],
        validation_industrial=ref["industrial"],
    )
    console.print(f"best validation length {trainer.best_validation:.1f} (best-fit {ref['best-fit']:.1f}, "
                  f"industrial {ref['industrial']:.1f}); {trainer.wall_s:.0f} s of training; "
                  f"policy in {folder}/policy.pt")  # fmt: skip


_TRACE_HELP = "huawei-east-1, synthetic, or auto (the real trace when ../shared/data has it)"


@train_app.command("cvd-rl")
def train_cvd(
    trace: Annotated[str, typer.Option(help=_TRACE_HELP)] = "auto",
    pms: Annotated[int, typer.Option(help="machines (2 NUMA nodes of 40 CPU / 90 GB)")] = 50,
    warm_start: Annotated[float, typer.Option(help="CPU allocation rate reached before scoring")] = 0.5,
    mode: Annotated[ModeOpt, typer.Option(help="training runs in non-expansion")] = ModeOpt.non_expansion,
    epochs: Annotated[int, typer.Option(help="epochs of 5 episodes (the paper: 3,000)")] = 3000,
    seed: Annotated[int, typer.Option(help="same seed, same weights")] = 0,
    out: Annotated[Path | None, typer.Option(help="folder for checkpoints and curves")] = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out (checkpoint.pt + replay.npz)")] = False,
    reward: Annotated[str, typer.Option(help="delta (capacity-aware) or vmagent (+1 per placed VM)")] = "delta",
    updates_per_epoch: Annotated[int, typer.Option(help="gradient steps per epoch")] = 32,
    batch: Annotated[int, typer.Option(help="transitions per gradient step (the paper: 2,048)")] = 256,
    eval_every: Annotated[int, typer.Option(help="validate (10 greedy episodes) every this many epochs")] = 10,
    filter_spec: Annotated[
        str, typer.Option("--filter", help="top-k filter: heuristic:k pairs, or none (ablation)")
    ] = "best-fit:2,industrial:3",
    decompose: Annotated[bool, typer.Option(help="per-machine values summed (off: one whole-cluster net)")] = True,
    lookahead: Annotated[bool, typer.Option(help="value the machine after placement (off: state+VM+action)")] = True,
    hidden: Annotated[int, typer.Option(help="units per hidden layer of the 6-layer MLP")] = 64,
    loss: Annotated[
        str, typer.Option(help="cluster (the paper's eq. 12) or machine (ours: a TD target per machine)")
    ] = "cluster",
) -> None:
    """CVD-RL: Double DQN with decomposition, look-ahead and the top-k filter (section 4). Writes policy.pt (best
    validation), checkpoint.pt + replay.npz (for --resume), curves.csv / curves.png and train.json to --out."""
    _train_dqn("cvd", trace, pms, warm_start, mode, epochs, seed, out, resume, reward, updates_per_epoch, batch,
               eval_every, filter_spec, decompose, lookahead, hidden, loss)  # fmt: skip


@train_app.command("schedrl")
def train_schedrl(
    trace: Annotated[str, typer.Option(help=_TRACE_HELP)] = "auto",
    pms: Annotated[int, typer.Option(help="machines (the network is tied to this count)")] = 50,
    warm_start: Annotated[float, typer.Option(help="CPU allocation rate reached before scoring")] = 0.5,
    mode: Annotated[ModeOpt, typer.Option(help="training runs in non-expansion")] = ModeOpt.non_expansion,
    epochs: Annotated[int, typer.Option(help="epochs of 5 episodes")] = 3000,
    seed: Annotated[int, typer.Option(help="same seed, same weights")] = 0,
    out: Annotated[Path | None, typer.Option(help="folder for checkpoints and curves")] = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out")] = False,
    reward: Annotated[str, typer.Option(help="delta or vmagent")] = "delta",
    updates_per_epoch: Annotated[int, typer.Option(help="gradient steps per epoch")] = 32,
    batch: Annotated[int, typer.Option(help="transitions per gradient step")] = 256,
    eval_every: Annotated[int, typer.Option(help="validate every this many epochs")] = 10,
    hidden: Annotated[int, typer.Option(help="units per hidden layer of the 6-layer MLP")] = 64,
) -> None:
    """SchedRL: Double DQN over the whole cluster state with 2N action outputs (the paper's scalability contrast)."""
    _train_dqn("schedrl", trace, pms, warm_start, mode, epochs, seed, out, resume, reward, updates_per_epoch, batch,
               eval_every, "none", True, True, hidden)  # fmt: skip


@app.command("solve")
def solve_cmd(
    instance: Annotated[
        str,
        typer.Option(
            help="exp1, exp2, mix1, mix2, mix2x100, a JSON instance file, or a topology-aware batch: huawei-c1..c4 "
            "(../shared/data) or a VM_data_C<n>.csv beside PM_res.csv and topology.csv"
        ),
    ] = "exp1",
    method: Annotated[
        str,
        typer.Option(help="auto, flat (the paper's model), compact (exact, on counts), pattern (column gen.), greedy"),
    ] = "auto",
    time_limit: Annotated[
        float | None,
        typer.Option(help="seconds; the best solution and bound so far are returned (default 60; 300 for huawei-cN)"),
    ] = None,
    workers: Annotated[int, typer.Option(help="CP-SAT search workers")] = 2,
    seed: Annotated[int, typer.Option(help="same seed, same answer (greedy; CP-SAT with one worker)")] = 0,
    packs: Annotated[int, typer.Option(help="hierarchical: VM packs (random, equal size)")] = 25,
    swads: Annotated[int, typer.Option(help="hierarchical: PM swads (random, equal size)")] = 25,
    beta: Annotated[float, typer.Option(help="hierarchical: safety margin on disk counts, in (0, 1]")] = 0.7,
    first_level: Annotated[
        str, typer.Option(help="hierarchical: swads (the paper's: fewest swads), cost, or pattern (column generation)")
    ] = "swads",
    split: Annotated[
        str, typer.Option(help="hierarchical: random (the paper's packs and swads) or topology (pods -> racks)")
    ] = "random",
    rack_size: Annotated[
        int, typer.Option(help="hierarchical topology: shuffle the PMs into racks of this size (0: the instance's)")
    ] = 0,
    racks_per_pod: Annotated[int, typer.Option(help="hierarchical topology: racks per pod")] = 5,
    json_out: Annotated[bool, typer.Option("--json", help="print exactly one JSON object")] = False,
) -> None:
    """Batch placement of VMs with disks onto PMs with disks (paper 004): minimise the cost of the PMs used.
    Every answer is re-checked by an independent checker (`verified`)."""
    from dcplace.placement import Deadline, HierarchicalParams, load_problem, params_for, solve
    from dcplace.placement.numa_batch import is_numa_batch, load_numa_batch, summary_of

    if is_numa_batch(instance):
        try:
            if method != "auto":
                raise InputError(f"--method: topology-aware batches are solved by method auto only, got {method!r}")
            limit = Deadline(300.0 if time_limit is None else time_limit)
            summary = summary_of(solve(load_numa_batch(instance), "auto", limit, seed))
        except InputError as exc:
            _fail(exc)
        if json_out:
            typer.echo(json.dumps(summary))
            return
        console.print(f"{summary['instance']}: {summary['status']}, {summary['pms_used']} servers for "
                      f"{summary['vms']} VMs, bound {summary['bound']}, gap {summary['gap']:.2%}, "
                      f"{summary['wall_s']:.1f} s, verified {summary['verified']}")  # fmt: skip
        return
    try:
        problem = load_problem(instance)
        hier = HierarchicalParams(workers=workers, packs=packs, swads=swads, beta=beta, first_level=first_level,
                                  split=split, rack_size=rack_size, racks_per_pod=racks_per_pod)  # fmt: skip
        flags = {} if method == "greedy" else {"workers": workers}
        params = hier if method == "hierarchical" else params_for(method, flags)
        res = solve(problem, method, Deadline(60.0 if time_limit is None else time_limit), seed, params)
    except InputError as exc:
        _fail(exc)
    s = res.summary()
    if json_out:
        typer.echo(json.dumps(s))
        return
    gap = f"{s['gap']:.2%}" if s["gap"] is not None else "-"
    console.print(f"{s['instance']} / {s['method']}: {s['status']}, cost {s['cost']}, bound {s['bound']}, gap {gap}, "
                  f"{s['pms_used']} PMs for {s['vms']} VMs, {s['wall_s']:.2f} s, verified {s['verified']}")  # fmt: skip
    for v in res.violations:
        console.print(f"  violation: {v}")


app.command("serve")(serve_cmd)


@app.command("policies")
def list_policies() -> None:
    """List the registered policies and the rule each implements."""
    from dcplace.policies.registry import policy_doc, policy_names

    for setting in ("numa", "netalloc"):
        typer.echo(f"{setting}:")
        for name in policy_names(setting):
            typer.echo(f"  {name:18s} {policy_doc(name, setting)}")


@app.command("demo")
def demo(
    episodes: Annotated[int, typer.Option(help="episodes per cell")] = 5,
) -> None:
    """The main job: the CVD-RL heuristics on Huawei-East-1 (synthetic when the data is absent) and the shipped
    CVD-RL / SchedRL schedulers beside them (`reproduce cvd-rl --quick`), Nara's shipped agents against the
    baselines on alpha..delta (`reproduce nara --quick`) and the batch-placement tables (`reproduce hmip --quick`),
    each beside the papers' numbers."""
    from dcplace.bench import cvd_reproduction, nara_reproduction
    from dcplace.bench.cvd_heuristics import run_reproduction
    from dcplace.bench.hmip import run_reproduction as run_hmip

    try:
        md = run_reproduction(trace="auto", episodes=episodes, seed=0, out=Path("results/demo"), quick=True)
        typer.echo(md)
        md = cvd_reproduction.run_reproduction("auto", 3, 0, Path("results/demo/cvd-rl"), quick=True)
        typer.echo(md)
        md = nara_reproduction.run_reproduction(Path("results/demo/nara"), seed=0, quick=True)
        typer.echo(md)
        md = run_hmip(Path("results/demo/hmip"), quick=True)
    except InputError as exc:
        _fail(exc)
    typer.echo(md)


def main() -> None:
    try:
        app()
    except InputError as exc:  # pragma: no cover - commands catch their own
        typer.echo(f"error: {exc}", err=True)
        sys.exit(2)


if __name__ == "__main__":
    main()
