"""Train a learned policy (curves, checkpoints, --resume).

``train nara`` (PPO on a GNN), ``train nalb-learned`` (the cross-entropy method on nalb-strict's first pick),
``train cvd-rl``, ``train schedrl`` and ``train padrl`` (Double DQN), ``train hindsight`` (imitation of hindsight
plans). Each takes its settings from
flags and ``--config FILE.toml`` and writes the resolved settings as ``config.toml`` into its ``--out`` folder, beside
policy.pt, checkpoint.pt, curves and train.json.
"""

from __future__ import annotations

import dataclasses
import json
import re
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, ClassVar, Literal

import typer

from dcplace.atomic import write_text
from dcplace.cli.common import console, err_console
from dcplace.cli.options import Flag, Resume, config_command, write_config
from dcplace.config import check, check_types
from dcplace.errors import InputError
from dcplace.learn.config import DQNConfig, HindsightConfig, PPOConfig
from dcplace.learn.nalb_search import SearchConfig
from dcplace.parallel import check_ray_address

if TYPE_CHECKING:
    from dcplace.sim.numa import Scenario

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n", 1)[0], rich_markup_mode=None)

NARA_DATASETS = ("uniform", "azure", "alibaba")  # dcplace.workload.netreq.DATASETS (checked by a test)
OUT_HELP = "folder for checkpoints and curves"


def _fresh_folder(folder: Path, resumable: bool = True) -> None:
    """Refuse a folder that holds a run; ``resumable``: whether the command has ``--resume`` to offer instead."""
    if (folder / "checkpoint.pt").exists():
        offer = "pass --resume to continue it or choose another --out" if resumable else "choose another --out"
        raise InputError(f"{folder} already holds a run; {offer}")


def _say_resumed(folder: Path, done: int, total: int, unit: str) -> None:
    """One line before a resumed run trains: where it stands and where it goes (a resume without the count ran on
    to the default without a word); the run's other settings come from its config.toml (:class:`Resume`)."""
    flag = f"--{unit}s"
    goal = f"on to {unit} {total} ({flag})" if total > done else f"nothing ({flag} {total}: {done} done already)"
    settings = folder / "config.toml"
    source = f"the run's ({settings})" if settings.exists() else "the checkpoint's"
    typer.echo(f"resuming {folder} at {unit} {done}; training {goal}; its other settings are {source}", err=True)


def _record_settings(cfg: Any, folder: Path, command: str, resume: bool) -> None:
    """Write the run's config.toml: when it starts, and on --resume with the new length (it went stale), unless the
    run has none (a reproduction's run, whose settings are its checkpoint's: flags would not describe it)."""
    if not resume or (folder / "config.toml").exists():
        write_config(cfg, folder, command)


def _nara_folder(cfg: NaraTrainRun, out: Path | None) -> Path:
    """``train nara``'s folder: ``--out``, or one named after the topologies and the request set."""
    from dcplace.cluster.topology import load_topology

    where = "+".join(load_topology(t).name for t in cfg.topology.split(","))
    return out or Path(f"results/train/nara-{where}-{cfg.dataset}")


def _train_with_bar(
    title: str,
    unit: str,
    columns: str,
    total: int,
    done: int,
    fields: dict[str, Any],
    train: Callable[[Callable[[dict[str, float]], None]], None],
    update: Callable[[dict[str, float]], dict[str, Any]],
) -> float:
    """Run ``train(on_row)`` under a progress bar of ``total`` ``unit`` (``done`` already); ``update(row)`` gives
    the bar's new fields after each row of the curves. Returns the wall time in seconds."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    t0 = time.perf_counter()
    if not err_console.is_terminal:  # a log file (CI, cron, nohup): one plain line per row, as it comes
        shown, count = dict(fields), [done]

        def line(row: dict[str, float]) -> None:
            shown.update(update(row))
            count[0] += 1
            said = re.sub(r"\{task\.fields\[(\w+)\]\}", lambda m: str(shown[m.group(1)]), columns)
            print(f"{title} {count[0]}/{total} {unit} {said} {time.perf_counter() - t0:.0f} s", file=sys.stderr,
                  flush=True)  # fmt: skip

        train(line)
        return time.perf_counter() - t0
    with Progress(
        TextColumn(f"[bold]{title}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} " + unit),
        TextColumn(columns),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        console=err_console,
    ) as bar:
        task = bar.add_task("train", total=total, completed=done, **fields)
        train(lambda row: bar.update(task, **update(row)))
    return time.perf_counter() - t0


MAX_WIDTH = 4096
"""Units per hidden layer at most: 4,096 already makes the 6-layer MLP 100 M weights; ``--hidden 100000000`` asked
torch for 40 PB and died with its traceback."""


def _check_width(cfg: Any, name: str, least: int = 1) -> None:
    check(least <= getattr(cfg, name) <= MAX_WIDTH, name, getattr(cfg, name), f"from {least} to {MAX_WIDTH}")


def _check_names(cfg: Any, name: str) -> None:
    """A comma-separated list has no empty entry (``alpha,,beta`` read "" as the current folder, a topology file)."""
    value = getattr(cfg, name)
    check(all(part.strip() for part in value.split(",")), name, value, "comma-separated names, none empty")


def _check_workers(cfg: Any) -> None:
    check(cfg.workers >= 1, "workers", cfg.workers, "at least 1")
    check_ray_address(cfg.ray_address)


def _collecting(cfg: Any, trainer: Any, train: Callable[[], None]) -> None:
    """``train()`` with the trainer's episodes played on ``cfg.workers`` workers (``cfg.ray_address``)."""
    from dcplace.parallel import executor

    with executor(getattr(cfg, "workers", 1), getattr(cfg, "ray_address", "")) as ex:
        trainer.use_executor(ex)
        train()


def _command(label: str) -> str:
    """The command line that ran, for train.json."""
    return " ".join(["dcplace", "train", label, *sys.argv[3:]])


@dataclass(frozen=True)
class NaraTrainRun:
    """One ``train nara`` run (the PPO and network settings not listed keep the paper's values)."""

    topology: str = "alpha"
    """alpha, beta, gamma, delta or a topology file; several, comma-separated, take turns"""
    dataset: str = "uniform"
    """uniform, azure or alibaba"""
    iterations: int = 150
    """PPO iterations in total (the paper: 150)"""
    seed: int = 0
    """same seed, same weights"""
    ppo: PPOConfig = field(default_factory=PPOConfig)
    """PPO's settings (the paper's unless a flag below or --config's [ppo] table says otherwise)"""
    p2_hidden: int = 0
    """hidden units in P2 (0: one linear layer, the paper's; see docs/nara.md)"""
    relu_per_message: bool = False
    """the ReLU inside each message's network, the mean of ReLU(W x) (the other reading of appendix E.1; ours: after
    the mean)"""
    init: Path | None = None
    """start from this checkpoint's weights (a curriculum; its sizes win)"""
    workers: int = 1
    """episodes played at once (1: in this process; more: a process pool, or Ray's with ray_address); same results"""
    ray_address: str = ""
    """play the episodes on Ray: 'local' (a new instance here), 'auto' or HOST:PORT (a cluster); needs the ray extra"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.dataset in NARA_DATASETS, "dataset", self.dataset, "one of " + ", ".join(NARA_DATASETS))
        check(self.iterations >= 1, "iterations", self.iterations, "at least 1")
        _check_names(self, "topology")
        _check_width(self, "p2_hidden", least=0)
        _check_workers(self)


@app.command("nara")
@config_command(
    NaraTrainRun,
    {
        "ppo": Flag(skip=True),
        "ppo.steps_per_iteration": Flag(name="--steps", help="picks per iteration (the paper: 2,048)"),
        "ppo.eval_every": Flag(help="validate (greedy, --eval-episodes x 128 requests) every this many iterations"),
        "ppo.eval_episodes": Flag(help="greedy 128-request episodes per validation (per topology)"),
        "ppo.episode_requests": Flag(help="requests per training episode (the paper: 32)"),
        "ppo.capacity_reward": Flag(
            help="reward per request rejected for capacity without a pick (0: the paper's; -10 counts every loss)"
        ),
        "ppo.on_full": Flag(
            help="a request the free totals cannot hold: reject it (paper-reject, how the shipped agents trained) "
            "or wait for room (the paper setting)"
        ),
        "ppo.epochs": Flag(
            name="--ppo-epochs", help="passes over each iteration's batch (RLlib's default, the paper's: 30)"
        ),
    },
    Resume(
        "dcplace train nara",
        _nara_folder,
        ("iterations", "workers", "ray_address"),
        ("topology", "dataset", "seed"),
    ),
)
def train_nara(
    cfg: NaraTrainRun,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out from its checkpoint.pt")] = False,
) -> None:
    """Nara: PPO on a GNN policy (section 3.3). Writes policy.pt (best validation), checkpoint.pt (latest, for
    --resume), curves.csv / curves.png and train.json to --out."""
    from dcplace.cluster.topology import load_topology
    from dcplace.learn.nara_model import NaraConfig
    from dcplace.learn.ppo import PPOTrainer

    tops = [load_topology(t) for t in cfg.topology.split(",")]
    where = "+".join(t.name for t in tops)
    folder = _nara_folder(cfg, out)
    if resume:
        trainer = PPOTrainer.resume(tops, cfg.dataset, cfg.seed, folder)
        _say_resumed(folder, trainer.done, cfg.iterations, "iteration")
    else:
        _fresh_folder(folder)
        model = NaraConfig(p2_hidden=cfg.p2_hidden, relu_per_message=cfg.relu_per_message)
        trainer = PPOTrainer(tops, cfg.dataset, cfg.seed, folder, cfg.ppo, model, cfg.init)
    _record_settings(cfg, folder, "dcplace train nara", resume)
    best = f"{trainer.best_validation:.3f}" if trainer.best_validation >= 0 else "-"

    def shown(row: dict[str, float]) -> dict[str, Any]:
        acc, val = row["train_acceptance"], trainer.best_validation
        return {"completed": int(row["iteration"]), "acc": f"{acc:.3f}", "val": f"{val:.3f}"}

    wall = _train_with_bar(
        f"nara {where}/{cfg.dataset}",
        "it",
        "acc {task.fields[acc]} val {task.fields[val]}",
        cfg.iterations,
        trainer.iteration,
        {"acc": "-", "val": best},
        lambda on_row: _collecting(cfg, trainer, lambda: trainer.train(cfg.iterations, on_row)),
        shown,
    )
    trainer.write_summary(_command("nara"), wall)
    console.print(f"best validation acceptance {trainer.best_validation:.3f}; {trainer.wall_s:.0f} s of training; "
                  f"policy in {folder}/policy.pt")  # fmt: skip


@dataclass(frozen=True)
class DqnTrainRun:
    """One ``train schedrl`` run; ``train cvd-rl`` adds its operators (:class:`CvdTrainRun`)."""

    trace: str = "auto"
    """huawei-east-1, synthetic, or auto (the real trace when ../shared/data has it)"""
    pms: int = 50
    """machines (2 NUMA nodes of 40 CPU / 90 GB)"""
    warm_start: float = 0.5
    """CPU allocation rate reached before scoring"""
    mode: Literal["non-expansion", "expansion"] = "non-expansion"  # dcplace.sim.numa.Mode, without its imports
    """training runs in non-expansion"""
    epochs: int = 3000
    """epochs of 5 episodes (the paper: 3,000)"""
    seed: int = 0
    """same seed, same weights"""
    hidden: int = 64
    """units per hidden layer of the 6-layer MLP"""
    dqn: DQNConfig = field(default_factory=DQNConfig)
    """Double DQN's settings: the paper's where it names them, except the batch (256, not 2,048) and the updates per
    epoch (docs/cvd-rl.md, "Where we differ"); ``learning_starts`` is ours"""
    workers: int = 1
    """episodes played at once (1: in this process; more: a process pool, or Ray's with ray_address); same results"""
    ray_address: str = ""
    """play the episodes on Ray: 'local' (a new instance here), 'auto' or HOST:PORT (a cluster); needs the ray extra"""

    REWARDS: ClassVar[tuple[str, ...]] = ("delta", "vmagent")
    """The rewards a run from the command line can use (:mod:`dcplace.learn.rewards`)."""
    LOSSES: ClassVar[tuple[str, ...]] = ("cluster",)
    """The TD rules the algorithm takes."""

    def __post_init__(self) -> None:
        check_types(self)
        if self.mode != "non-expansion":
            raise InputError(
                "training runs in non-expansion (evaluate expansion with `dcplace simulate`)", field="mode"
            )
        check(self.epochs >= 1, "epochs", self.epochs, "at least 1")
        _check_width(self, "hidden")
        _check_workers(self)
        check(self.dqn.reward in self.REWARDS, "dqn.reward", self.dqn.reward, "one of " + ", ".join(self.REWARDS))
        check(self.dqn.loss in self.LOSSES, "dqn.loss", self.dqn.loss, "one of " + ", ".join(self.LOSSES))

    def scenario(self) -> Scenario:
        """The training episodes' dynamics: no releases, the warm start."""
        from dcplace.sim.numa import Scenario

        return Scenario(pms=self.pms, release=False, warm_start=self.warm_start)


@dataclass(frozen=True)
class CvdTrainRun(DqnTrainRun):
    """One ``train cvd-rl`` run."""

    filter_k: tuple[tuple[str, int], ...] = (("best-fit", 2), ("industrial", 3))
    """top-k filter: heuristic:k pairs, or none (ablation)"""
    decompose: bool = True
    """per-machine values summed (off: one whole-cluster net)"""
    lookahead: bool = True
    """value the machine after placement (off: state+VM+action)"""

    LOSSES: ClassVar[tuple[str, ...]] = ("cluster", "machine")


KEEP_REPLAY_HELP = "also write replay.npz (the replay buffer, up to a few hundred MB), which --resume needs"

DQN_FLAGS = {
    "dqn": Flag(skip=True),  # set in a --config file
    "dqn.reward": Flag(help="delta (capacity-aware) or vmagent (+1 per placed VM)"),
    "dqn.updates_per_epoch": Flag(help="gradient steps per epoch"),
    "dqn.batch": Flag(help="transitions per gradient step (the paper: 2,048)"),
    "dqn.eval_every": Flag(help="validate (10 greedy episodes) every this many epochs"),
    "dqn.loss": Flag(help="cluster (the paper's eq. 12) or machine (ours: a TD target per machine)"),
}
"""The flags of DQNConfig's fields; its other fields are set in a --config file ([dqn])."""


def parse_filter(text: str) -> tuple[tuple[str, int], ...]:
    """``best-fit:2,industrial:3`` -> (("best-fit", 2), ("industrial", 3)); ``none`` -> () (no filter)."""
    if text.strip().lower() in ("none", ""):
        return ()
    pairs = []
    for part in text.split(","):
        name, _, k = part.strip().partition(":")
        if not k.isdigit() or not 1 <= int(k) <= 1000:
            raise InputError(f"must be heuristic:k pairs like best-fit:2,industrial:3 (k from 1 to 1000), or none; "
                             f"got entry {part!r}")  # fmt: skip
        pairs.append((name, int(k)))
    return tuple(pairs)


def format_filter(pairs: tuple[tuple[str, int], ...]) -> str:
    """The inverse of :func:`parse_filter`."""
    return ",".join(f"{name}:{k}" for name, k in pairs) or "none"


def _dqn_folder(label: str) -> Callable[[DqnTrainRun, Path | None], Path]:
    """``train cvd-rl`` / ``train schedrl``'s folder: ``--out``, or one named after the command and the machines."""
    return lambda cfg, out: out or Path(f"results/train/{label}-{cfg.pms}pm")


def _dqn_resume(label: str) -> Resume:
    """How ``train cvd-rl`` / ``train schedrl --resume`` read the run's settings (:class:`Resume`)."""
    free, checked = ("epochs", "workers", "ray_address"), ("trace", "pms", "warm_start", "seed")
    return Resume(f"dcplace train {label}", _dqn_folder(label), free, checked)


def _train_dqn(
    kind: Literal["cvd", "schedrl"], cfg: DqnTrainRun, out: Path | None, resume: bool, keep_replay: bool = False
) -> None:
    """The shared body of ``train cvd-rl`` and ``train schedrl``."""
    from dcplace.cluster.numa import NumaCluster
    from dcplace.learn.cvd_model import CvdConfig
    from dcplace.learn.cvd_rl import CvdRlTrainer
    from dcplace.learn.schedrl import SchedRlTrainer
    from dcplace.sim.episodes import check_hostable, prepare
    from dcplace.workload.traces import load_trace, trace_available

    label = "cvd-rl" if kind == "cvd" else "schedrl"
    trainer_class = CvdRlTrainer if kind == "cvd" else SchedRlTrainer
    if cfg.trace == "auto":
        cfg = dataclasses.replace(cfg, trace="huawei-east-1" if trace_available("huawei-east-1") else "synthetic")
    scenario = cfg.scenario()
    prepared = prepare(load_trace(cfg.trace, seed=0, synthetic_n=60_000), 32.0)
    check_hostable(NumaCluster.uniform(cfg.pms), prepared)
    folder = _dqn_folder(label)(cfg, out)
    if resume:
        trainer = trainer_class.resume(prepared, scenario, cfg.seed, folder, cfg.trace)
        _say_resumed(folder, trainer.done, cfg.epochs, "epoch")
    else:
        _fresh_folder(folder)
        ops = cfg if isinstance(cfg, CvdTrainRun) else CvdTrainRun(filter_k=())
        whole = kind == "schedrl" or not ops.decompose
        model = CvdConfig(kind=kind, hidden=cfg.hidden, decompose=ops.decompose, lookahead=ops.lookahead,
                          filter_k=ops.filter_k, machines=cfg.pms if whole else 0)  # fmt: skip
        trainer = trainer_class(prepared, scenario, cfg.seed, folder, model, cfg.dqn, cfg.trace)
        trainer.keep_replay = keep_replay
    _record_settings(cfg, folder, f"dcplace train {label}", resume)
    ref = {h: trainer.validate_heuristic(h) for h in ("best-fit", "industrial")}

    def shown(row: dict[str, float]) -> dict[str, Any]:
        length, val = row["train_length"], trainer.best_validation
        return {"completed": int(row["epoch"]), "len": f"{length:.0f}", "val": f"{val:.1f}"}

    wall = _train_with_bar(
        f"{label} {cfg.pms} PMs",
        "epochs",
        "len {task.fields[len]} val {task.fields[val]}",
        cfg.epochs,
        trainer.epoch,
        {"len": "-", "val": "-"},
        lambda on_row: _collecting(cfg, trainer, lambda: trainer.train(cfg.epochs, on_row)),
        shown,
    )
    trainer.write_summary(_command(label), wall, validation_best_fit=ref["best-fit"],
                          validation_industrial=ref["industrial"])  # fmt: skip
    console.print(f"best validation length {trainer.best_validation:.1f} (best-fit {ref['best-fit']:.1f}, "
                  f"industrial {ref['industrial']:.1f}); {trainer.wall_s:.0f} s of training; "
                  f"policy in {folder}/policy.pt")  # fmt: skip


@app.command("cvd-rl")
@config_command(
    CvdTrainRun,
    {**DQN_FLAGS, "filter_k": Flag(name="--filter", parse=parse_filter, show=format_filter)},
    _dqn_resume("cvd-rl"),
)
def train_cvd(
    cfg: CvdTrainRun,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out (checkpoint.pt + replay.npz)")] = False,
    keep_replay: Annotated[bool, typer.Option(help=KEEP_REPLAY_HELP)] = False,
) -> None:
    """CVD-RL: Double DQN with decomposition, look-ahead and the top-k filter (section 4). Writes policy.pt (best
    validation), checkpoint.pt (+ replay.npz with --keep-replay, for --resume), curves.csv / curves.png and train.json
    to --out."""
    _train_dqn("cvd", cfg, out, resume, keep_replay)


@app.command("schedrl")
@config_command(
    DqnTrainRun,
    {**DQN_FLAGS, "dqn.loss": Flag(skip=True), "pms": Flag(help="machines (the network is tied to this count)")},
    _dqn_resume("schedrl"),
)
def train_schedrl(
    cfg: DqnTrainRun,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
    resume: Annotated[bool, typer.Option(help="continue the run in --out")] = False,
    keep_replay: Annotated[bool, typer.Option(help=KEEP_REPLAY_HELP)] = False,
) -> None:
    """SchedRL: Double DQN over the whole cluster state with 2N action outputs (the paper's scalability contrast)."""
    _train_dqn("schedrl", cfg, out, resume, keep_replay)


REGIME_NAMES = ("today", "paper")  # dcplace.bench.cvd_regime.REGIMES (checked by a test)


@dataclass(frozen=True)
class RegimeTrainRun:
    """A run in one of the CVD-RL scenario readings (``train hindsight``, ``train padrl``)."""

    regime: str = "paper"
    """today (releases off) or paper (the calibrated reading, docs/cvd-rl.md)"""
    trace: str = "huawei-east-1"
    """huawei-east-1 (the paper regime restores its never-deleted VMs)"""
    pms: int = 50
    """machines (2 NUMA nodes of 40 CPU / 90 GB)"""
    warm_start: float = 0.5
    """CPU allocation rate reached before scoring"""
    epochs: int = 15
    """epochs (each: a few training episodes, then gradient steps)"""
    seed: int = 0
    """same seed, same weights"""
    hidden: int = 64
    """units per hidden layer of the 6-layer MLP"""

    def __post_init__(self) -> None:
        check_types(self)
        check(self.regime in REGIME_NAMES, "regime", self.regime, "one of " + ", ".join(REGIME_NAMES))
        for name in ("epochs", "pms"):
            check(getattr(self, name) >= 1, name, getattr(self, name), "at least 1")
        _check_width(self, "hidden")
        check(0 <= self.warm_start < 1, "warm_start", self.warm_start, "in [0, 1)")


def _hindsight_dqn() -> DQNConfig:
    from dcplace.learn.config import HINDSIGHT_DQN

    return HINDSIGHT_DQN


@dataclass(frozen=True)
class HindsightTrainRun(RegimeTrainRun):
    """One ``train hindsight`` run."""

    hindsight: HindsightConfig = field(default_factory=HindsightConfig)
    """how the hindsight labels are made"""
    dqn: DQNConfig = field(default_factory=_hindsight_dqn)
    """the epoch's settings (episodes and gradient steps per epoch, batch, validation)"""


def _padrl_dqn() -> DQNConfig:
    return DQNConfig(loss="machine", batch=1024, zero_init=True, eval_every=5)


@dataclass(frozen=True)
class PadrlTrainRun(RegimeTrainRun):
    """One ``train padrl`` run."""

    epochs: int = 20
    """epochs of 5 episodes"""
    forecast_hidden: int = 32
    """hidden units of the demand-forecast LSTM"""
    horizon: int = 64
    """requests the forecast covers"""
    dqn: DQNConfig = field(default_factory=_padrl_dqn)
    """Double DQN's settings (the per-machine loss, batches of 1,024, zero_init, validation every 5 epochs)"""
    workers: int = 1
    """episodes played at once (1: in this process; more: a process pool, or Ray's with ray_address); same results"""
    ray_address: str = ""
    """play the episodes on Ray: 'local' (a new instance here), 'auto' or HOST:PORT (a cluster); needs the ray extra"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.horizon >= 1, "horizon", self.horizon, "at least 1")
        _check_width(self, "forecast_hidden")
        _check_workers(self)
        check(self.dqn.loss in ("cluster", "machine"), "dqn.loss", self.dqn.loss, "cluster or machine")
        check(self.dqn.reward in REWARD_NAMES, "dqn.reward", self.dqn.reward, "one of " + ", ".join(REWARD_NAMES))


REWARD_NAMES = ("delta", "delta-cpu", "vmagent")  # dcplace.learn.rewards.REWARDS (checked by a test)


def _train_regime(label: str, cfg: RegimeTrainRun, out: Path | None, build: Callable[..., Any]) -> None:
    """The shared body of ``train hindsight`` and ``train padrl``: ``build(prepared, scenario, folder)`` makes the
    trainer (a :class:`dcplace.learn.dqn.DoubleDQN`)."""
    from dcplace.bench.cvd_regime import regime_named
    from dcplace.sim.episodes import check_hostable

    regime = regime_named(cfg.regime)
    prepared = regime.prepare(cfg.trace, 0)
    check_hostable(regime.cluster(cfg.pms), prepared)
    scenario = regime.scenario(cfg.warm_start, cfg.pms)
    folder = out or Path(f"results/train/{label}-{cfg.pms}pm")
    _fresh_folder(folder, resumable=False)  # padrl and hindsight have no --resume
    trainer = build(prepared, scenario, folder)
    write_config(cfg, folder, f"dcplace train {label}")
    ref = {h: trainer.validate_heuristic(h) for h in ("best-fit", "industrial")}

    def shown(row: dict[str, float]) -> dict[str, Any]:
        length, val = row["train_length"], trainer.best_validation
        return {"completed": int(row["epoch"]), "len": f"{length:.0f}", "val": f"{val:.1f}"}

    wall = _train_with_bar(
        f"{label} {cfg.pms} PMs",
        "epochs",
        "len {task.fields[len]} val {task.fields[val]}",
        cfg.epochs,
        trainer.epoch,
        {"len": "-", "val": "-"},
        lambda on_row: _collecting(cfg, trainer, lambda: trainer.train(cfg.epochs, on_row)),
        shown,
    )
    trainer.write_summary(_command(label), wall, validation_best_fit=ref["best-fit"],
                          validation_industrial=ref["industrial"])  # fmt: skip
    console.print(f"best validation length {trainer.best_validation:.1f} (best-fit {ref['best-fit']:.1f}, "
                  f"industrial {ref['industrial']:.1f}); {trainer.wall_s:.0f} s of training; "
                  f"policy in {folder}/policy.pt")  # fmt: skip


HINDSIGHT_FLAGS = {
    "dqn": Flag(skip=True),
    "hindsight": Flag(skip=True),
    "hindsight.window": Flag(help="decisions before a failure the plan may change"),
    "hindsight.solve_s": Flag(help="CP-SAT's time limit per window, seconds"),
}
"""The flags of ``train hindsight``; the other settings come from a --config file ([hindsight], [dqn])."""


@app.command("hindsight")
@config_command(HindsightTrainRun, HINDSIGHT_FLAGS)
def train_hindsight(cfg: HindsightTrainRun, out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None) -> None:
    """Hindsight Learning: imitate CP-SAT's hindsight-optimal plans of the windows before each failure (the realised
    future known), on CVD-RL's network. Writes policy.pt (best validation), checkpoint.pt, curves and train.json."""
    from dcplace.learn.cvd_model import CvdConfig
    from dcplace.learn.hindsight_learning import HindsightTrainer

    _train_regime("hindsight", cfg, out, lambda p, sc, folder: HindsightTrainer(
        p, sc, cfg.seed, folder, CvdConfig(kind="cvd", hidden=cfg.hidden), cfg.dqn, f"{cfg.trace} {cfg.regime}",
        cfg.hindsight))  # fmt: skip


@app.command("padrl")
@config_command(PadrlTrainRun, {**DQN_FLAGS, "dqn.reward": Flag(help="delta, delta-cpu or vmagent")})
def train_padrl(cfg: PadrlTrainRun, out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None) -> None:
    """PADRL: CVD-RL's Double DQN with an LSTM forecast of the upcoming demand in every machine's row. Writes
    policy.pt (best validation), checkpoint.pt, curves and train.json."""
    from dcplace.learn.cvd_model import CvdConfig
    from dcplace.learn.padrl import PadrlTrainer

    _train_regime("padrl", cfg, out, lambda p, sc, folder: PadrlTrainer(
        p, sc, cfg.seed, folder, CvdConfig(kind="cvd", hidden=cfg.hidden, forecast_hidden=cfg.forecast_hidden),
        cfg.dqn, f"{cfg.trace} {cfg.regime}", horizon=cfg.horizon))  # fmt: skip


@app.command("nalb-learned")
@config_command(SearchConfig)
def train_nalb_learned(cfg: SearchConfig, out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None) -> None:
    """nalb-learned: the cross-entropy method over the weights of nalb-strict's first-server score, on training
    requests of every topology x request set given (docs/nara.md). Writes nalb-learned.json (the rule file, for
    --checkpoint) and train.json (the curve per generation, the validation of every candidate) to --out."""
    from dcplace.cluster.topology import load_topology
    from dcplace.learn.nalb_search import search
    from dcplace.policies.netalloc_scored import FEATURES, rule_json
    from dcplace.workload.netreq import DATASETS

    _check_names(cfg, "topologies")
    _check_names(cfg, "datasets")
    for t in cfg.topologies.split(","):
        try:
            load_topology(t)
        except InputError as e:
            raise InputError(str(e), field="topologies") from None
    for d in cfg.datasets.split(","):
        check(d in DATASETS, "datasets", d, "comma-separated names among " + ", ".join(DATASETS))
    folder = out or Path("results/train/nalb-learned")
    if (folder / "nalb-learned.json").exists():
        raise InputError(f"{folder} already holds a rule file; choose another --out")
    folder.mkdir(parents=True, exist_ok=True)
    write_config(cfg, folder, "dcplace train nalb-learned")
    holder: dict[str, Any] = {}

    def shown(row: dict[str, float]) -> dict[str, Any]:
        best, mean = row["best"], row["mean_weights"]
        return {"completed": int(row["generation"]), "best": f"{best:.4f}", "mean": f"{mean:.4f}"}

    wall = _train_with_bar(
        "nalb-learned", "generations", "best {task.fields[best]} mean {task.fields[mean]} (x nalb-strict)",
        cfg.generations, 0, {"best": "-", "mean": "-"},
        lambda on_row: holder.update(result=search(cfg, on_row)), shown,
    )  # fmt: skip
    res = holder["result"]
    summary = res.summary(cfg, _command("nalb-learned"))
    write_text(folder / "nalb-learned.json", rule_json(res.weights, summary))
    write_text(folder / "train.json", json.dumps(summary, indent=1))
    val = res.validation[res.picked]
    console.print(f"picked {res.picked} (validation {val:.4f} x nalb-strict) after {wall:.0f} s: "
                  + ", ".join(f"{n}={w:+.3f}" for n, w in zip(FEATURES, res.weights, strict=True))
                  + f"; rule file {folder}/nalb-learned.json")  # fmt: skip
