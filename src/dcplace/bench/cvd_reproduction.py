"""Reproduction of CVD-RL (``../shared/papers/002_0cf75b9bf5d3860a.txt``): Tables 2-4 with the learned schedulers,
the learning curves against SchedRL (Figure 6), the operator ablations (Figure 10), the filter designs and k
(Figures 11-12), and the two rewards.

Tables: the shipped checkpoints (trained on 50 PMs, 50 % warm start, Non-Expansion, starts from rows
[10,000, 220,000) of the event log) are evaluated greedily on VMAgent's start rows [1,000, 10,000), the same
episodes as the heuristics (common random numbers), so every learned number is on held-out start offsets. Each
Non-Expansion cell also gets a *ceiling*: the most requests any policy could place before the scored phase's free
CPU or memory runs out in total (the warm-up is the same for every policy). It bounds what scheduling can gain.

Curves and ablations train fresh runs (``runs/<name>/`` under the output folder, each with its curves.csv) for
``curve_epochs`` epochs; plots show each run's validation length divided by Best-Fit's on the same validation
episodes. Scenario as in :mod:`dcplace.bench.cvd_heuristics` (releases off; see docs/reproductions.md).

:func:`run_regime_tables` is Tables 2-4 in the paper's regime (``--regime paper``; issue 15): the heuristics, the five
learned methods from checkpoints trained there, and the hindsight bound, with length, income and CPU allocation over
several seeds of held-out starts.
"""

from __future__ import annotations

import csv
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.bench.cvd_heuristics import DOUBLE_THRESHOLD, PAPER, TABLES, WARM, table_cells, write_records
from dcplace.bench.cvd_regime import resolve_trace
from dcplace.parallel import executor
from dcplace.policies import get_policy
from dcplace.sim.episodes import prepare, run_episodes, start_seed
from dcplace.sim.numa import NumaSim, PreparedTrace, Scenario
from dcplace.sim.numa_kernel import DECIDE
from dcplace.workload.traces import load_trace

#: The paper's learned columns (Tables 2-4): table -> method -> warm -> (length, income, CPU allocation %).
PAPER_LEARNED_FULL: dict[str, dict[str, dict[float, tuple[float, float, float]]]] = {
    "table2": {
        "schedrl": {0.0: (1024.7, 4905.5, 34.2), 0.3: (861.6, 4882.4, 45.2), 0.4: (721.8, 3933.5, 48.3),
                    0.5: (620.3, 3329.8, 52.9), 0.6: (449.4, 2280.4, 59.9)},
        "padrl": {0.0: (1008.74, 4690.24, 33.78), 0.3: (830.99, 4562.01, 44.57), 0.4: (735.94, 4024.7, 48.29),
                  0.5: (627.09, 3529.06, 52.97), 0.6: (455.09, 2237.35, 59.67)},
        "hindsight": {0.0: (1032.7, 5057.87, 34.14), 0.3: (843.64, 4731.59, 45.09), 0.4: (744.44, 4145.16, 48.83),
                      0.5: (642.33, 3555.2, 53.51), 0.6: (474.22, 2470.33, 60.36)},
        "cvd-rl": {0.0: (1464.6, 8680.2, 43.2), 0.3: (1224.3, 7883.6, 51.4), 0.4: (1061.9, 6789.3, 54.5),
                   0.5: (939.3, 6273.4, 58.4), 0.6: (712.4, 4441.9, 63.7)},
    },
    "table3": {"cvd-rl": {0.0: (3855.4, 32912.5, 45.2), 0.3: (3019.1, 26649.6, 54.1), 0.4: (2588.1, 22290.1, 58.3),
                          0.5: (2181.8, 19108.4, 63.9), 0.6: (1602.1, 12417.8, 68.6)}},
    "table4": {"cvd-rl": {0.0: (4475.5, 45303.2, 65.7), 0.3: (4229.4, 44557.6, 69.2), 0.4: (4085.9, 43343.5, 70.7),
                          0.5: (3910.8, 41888.3, 72.0), 0.6: (3707.6, 39641.6, 73.5)}},
}  # fmt: skip
#: The paper's learned lengths in today's tables: table -> method -> warm -> length.
PAPER_LEARNED: dict[str, dict[str, dict[float, float]]] = {
    key: {m: {w: v[0] for w, v in cells.items()} for m, cells in methods.items() if m in ("schedrl", "cvd-rl")}
    for key, methods in PAPER_LEARNED_FULL.items()
}
HEURISTICS = ("first-fit", "best-fit", "industrial")
LEARNED = ("schedrl", "cvd-rl", "cvd-rl-machine")  # the last is ours: the per-machine TD target


@dataclass(frozen=True)
class Run:
    """One training run of the curves / ablations."""

    name: str
    group: str  # figure6 | figure10 | figure11 | figure12 | reward
    kind: str  # cvd | schedrl
    pms: int
    filter_k: tuple[tuple[str, int], ...] = (("best-fit", 2), ("industrial", 3))
    decompose: bool = True
    lookahead: bool = True
    reward: str = "delta"
    loss: str = "cluster"
    seed_offset: int = 0
    """trained with the reproduction's seed + this (extra seeds of Figure 6: names end in ``-s<offset>``)"""


def runs(quick: bool, curve_seeds: int = 1) -> list[Run]:
    """The training runs; ``curve_seeds`` > 1 adds Figure 6's runs with seeds + 1 .. + curve_seeds - 1 (their
    learning curves then get a band over seeds in the report)."""
    sizes = (2, 5) if quick else (2, 5, 10, 20)
    big = 10 if quick else 50
    out = [Run(f"{k}-{n}pm", "figure6", k, n) for n in sizes for k in ("cvd", "schedrl")]
    out += [Run(f"{k}-{n}pm-s{j}", "figure6", k, n, seed_offset=j) for j in range(1, curve_seeds) for n in sizes
            for k in ("cvd", "schedrl")]  # fmt: skip
    out += [
        Run(f"full-{big}pm", "figure10", "cvd", big),
        Run(f"no-filter-{big}pm", "figure10", "cvd", big, filter_k=()),
        Run(f"no-decomposition-{big}pm", "figure10", "cvd", big, decompose=False),
        Run(f"no-lookahead-{big}pm", "figure10", "cvd", big, lookahead=False),
        Run(f"bf-top5-{big}pm", "figure11", "cvd", big, filter_k=(("best-fit", 5),)),
        Run(f"industrial-top5-{big}pm", "figure11", "cvd", big, filter_k=(("industrial", 5),)),
        # Mixed-XY: the Internal Scheduler's top X and Best-Fit's top Y ("our Mixed-32 approach (equivalent to the
        # original model)", whose filter is Top-3 IS + Top-2 BF); until 2026-11-27 these read Best-Fit's count first
        Run(f"mixed-21-{big}pm", "figure12", "cvd", big, filter_k=(("best-fit", 1), ("industrial", 2))),
        Run(f"mixed-43-{big}pm", "figure12", "cvd", big, filter_k=(("best-fit", 3), ("industrial", 4))),
        Run(f"mixed-64-{big}pm", "figure12", "cvd", big, filter_k=(("best-fit", 4), ("industrial", 6))),
        Run(f"vmagent-reward-{big}pm", "reward", "cvd", big, reward="vmagent"),
        Run(f"machine-td-{big}pm", "reward", "cvd", big, loss="machine"),
    ]
    return out


def _train(args: tuple[Run, str, int, int, Path, bool, bool]) -> dict[str, Any]:
    """Train one run (in a worker process); return its curve rows and the heuristic validation references."""
    import torch

    from dcplace.learn.cvd_model import CvdConfig
    from dcplace.learn.cvd_rl import CvdRlTrainer
    from dcplace.learn.dqn import DQNConfig
    from dcplace.learn.schedrl import SchedRlTrainer

    torch.set_num_threads(1)
    run, trace, epochs, seed, out, quick, keep_replay = args
    prepared = prepare(load_trace(trace, seed=0, synthetic_n=60_000), DOUBLE_THRESHOLD)
    whole = run.kind == "schedrl" or not run.decompose
    model = CvdConfig(kind=run.kind, decompose=run.decompose, lookahead=run.lookahead,
                      filter_k=run.filter_k if run.kind == "cvd" else (), machines=run.pms if whole else 0)  # fmt: skip
    dqn = DQNConfig(
        reward=run.reward,
        loss=run.loss,
        batch=1024 if run.loss == "machine" else 256,
        eval_every=1 if quick else 5,
        eval_episodes=2 if quick else 5,
        learning_starts=200 if quick else 2_000,
    )
    scenario = Scenario(pms=run.pms, release=False, warm_start=0.5)
    trainer = SchedRlTrainer if run.kind == "schedrl" else CvdRlTrainer
    tr = trainer(prepared, scenario, seed + run.seed_offset, out / "runs" / run.name, model, dqn, trace)
    tr.keep_replay = keep_replay
    ref = tr.validate_heuristic("best-fit")
    tr.train(epochs)
    return {"run": run.name, "best_fit_validation": ref, "curves": tr.curves, "wall_s": tr.wall_s}


def ceiling(sim: NumaSim, trace: PreparedTrace) -> int:
    """Requests from the first scored one on until their total CPU or memory exceeds the free total (no policy
    can place more before failing in Non-Expansion with releases off). ``sim`` is reset, at the first decision."""
    n = sim.n_active
    free = sim.free[:n].sum(axis=(0, 1))
    d = trace.demand[sim.request :]
    used = np.maximum(np.cumsum(d[:, 0]) / free[0], np.cumsum(d[:, 1]) / free[1])
    return int(np.searchsorted(used, 1.0, side="right"))


def run_reproduction(
    trace: str,
    episodes: int,
    seed: int,
    out: Path,
    quick: bool = False,
    curve_epochs: int = 40,
    workers: int = 2,
    keep_replay: bool = False,
    progress: Callable[[str], None] | None = None,
    curve_seeds: int = 1,
    ray_address: str = "",
) -> str:
    """Tables, curves, ablations; writes records.jsonl, curves.csv, figures and table.md; returns the Markdown.
    ``keep_replay``: keep each training run's replay buffer (``runs/<name>/replay.npz``, for a resume);
    ``progress``: called with a line after each table cell and each training run; ``curve_seeds``: seeds of each
    Figure 6 run (1: the seed alone, as before); ``workers`` / ``ray_address``: where the training runs go
    (:func:`dcplace.parallel.executor`; on a remote Ray cluster each run's files stay on the node that trained it,
    its curves come back)."""
    say = progress or (lambda line: None)
    trace = resolve_trace(trace, "today")
    prepared = prepare(load_trace(trace, seed=0, synthetic_n=60_000), DOUBLE_THRESHOLD)
    records: list[dict[str, Any]] = []
    for key, warm, scenario, cluster in table_cells(prepared, (0.5,) if quick else WARM):
        pols = HEURISTICS + (LEARNED if key == "table2" else ("cvd-rl", "cvd-rl-machine"))
        for pol in pols:
            results, wall, _ = run_episodes(get_policy(pol), cluster, prepared, scenario, episodes, seed, check=True)
            for i, r in enumerate(results):
                records.append(dict(table=key, policy=pol, warm_start=warm, episode=i, length=r.length,
                                    income=r.income, cpu_alloc=r.cpu_alloc_mean, final_pms=r.final_pms,
                                    status=r.status, wall_s=wall / episodes))  # fmt: skip
            say(f"{key} warm {warm:.0%} {pol}: length {np.mean([r.length for r in results]):.1f}")
        if scenario.mode == "non-expansion":
            sim = NumaSim(cluster, prepared, scenario)
            for i in range(episodes):
                if sim.reset(seed=start_seed(seed, i)) == DECIDE:
                    records.append(dict(table=key, policy="ceiling", warm_start=warm, episode=i,
                                        length=ceiling(sim, prepared)))  # fmt: skip
    write_records(records, out)

    plan = runs(quick, curve_seeds)
    epochs = 3 if quick else curve_epochs
    jobs = [(r, trace, epochs, seed, out, quick, keep_replay) for r in plan]
    finished = [0]

    def done(_: int, res: dict[str, Any]) -> None:
        finished[0] += 1
        say(f"training run {finished[0]}/{len(jobs)} done: {res['run']}")

    with executor(workers, ray_address) as ex:  # each run carries its seed: the same curves on every engine
        trained = ex.map(_train, jobs, done)
    rows = []
    for run, res in zip(plan, trained, strict=True):
        for c in res["curves"]:
            if c["validation_length"] == c["validation_length"]:
                ref = res["best_fit_validation"]
                rows.append(dict(run=run.name, group=run.group, kind=run.kind, pms=run.pms, epoch=c["epoch"],
                                 validation_length=c["validation_length"], best_fit=ref,
                                 ratio=c["validation_length"] / ref, wall_s=c["wall_s"]))  # fmt: skip
    with open(out / "curves.csv", "w", encoding="utf-8", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    plot_curves(rows, out)
    md = render_markdown(records, rows, trace, episodes, epochs)
    (out / "table.md").write_text(md, encoding="utf-8")
    return md


def _mean(records: list[dict[str, Any]], table: str, pol: str, warm: float, field: str = "length") -> float:
    vals = [float(r[field]) for r in records if r["table"] == table and r["policy"] == pol and r["warm_start"] == warm]
    return float(np.mean(vals)) if vals else float("nan")


def render_markdown(
    records: list[dict[str, Any]], rows: list[dict[str, Any]], trace: str, episodes: int, epochs: int
) -> str:
    lines = [
        f"# CVD-RL reproduction: paper vs dcplace ({trace}, {episodes} episodes per cell on held-out starts, "
        "releases off)",
        "",
        "Scheduled length (mean). `ceiling`: no policy can place more (total free capacity after the common warm-up). "
        "`margin`: CVD-RL over the best heuristic, ours (the paper's loss, and `cvd-rl-machine`: our per-machine TD "
        "target) and the paper's.",
    ]
    for key, (title, _) in TABLES.items():
        warms = sorted({float(r["warm_start"]) for r in records if r["table"] == key})
        if not warms:
            continue
        pols = [p for p in (*HEURISTICS, *LEARNED) if any(r["policy"] == p and r["table"] == key for r in records)]
        head = ["warm"] + [f"paper {p}" for p in (*HEURISTICS, *PAPER_LEARNED[key])] + [f"ours {p}" for p in pols]
        head += ["ceiling", "margin cvd-rl", "margin cvd-rl-machine", "margin paper"]
        lines += ["", f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        for w in warms:
            cells = [f"{w:.0%}"]
            cells += [f"{PAPER[key][p][w][0]:g}" for p in HEURISTICS]
            cells += [f"{PAPER_LEARNED[key][p][w]:g}" for p in PAPER_LEARNED[key]]
            cells += [f"{_mean(records, key, p, w):.1f}" for p in pols]
            c = _mean(records, key, "ceiling", w)
            cells.append("-" if c != c else f"{c:.1f}")
            best = max(_mean(records, key, p, w) for p in HEURISTICS)
            cells.append(f"{_mean(records, key, 'cvd-rl', w) / best - 1:+.1%}")
            cells.append(f"{_mean(records, key, 'cvd-rl-machine', w) / best - 1:+.1%}")
            pbest = max(PAPER[key][p][w][0] for p in HEURISTICS)
            cells.append(f"{PAPER_LEARNED[key]['cvd-rl'][w] / pbest - 1:+.1%}")
            lines.append("| " + " | ".join(cells) + " |")
    lines += ["", f"## Training runs ({epochs} epochs each): best and last validation length / Best-Fit's", ""]
    lines += ["| figure | run | PMs | best ratio | last ratio | wall s |", "|---|---|---|---|---|---|"]
    for name in dict.fromkeys(r["run"] for r in rows):
        rr = [r for r in rows if r["run"] == name]
        lines.append(f"| {rr[0]['group']} | {name} | {rr[0]['pms']} | {max(r['ratio'] for r in rr):.3f} | "
                     f"{rr[-1]['ratio']:.3f} | {rr[-1]['wall_s']:.0f} |")  # fmt: skip
    return "\n".join(lines) + "\n"


def plot_curves(rows: list[dict[str, Any]], out: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    groups = {
        "figure6": "Figure 6: CVD-RL vs SchedRL by cluster size",
        "figure10": "Figure 10: operator ablations",
        "figure11": "Figure 11: filter designs",
        "figure12": "Figure 12: filter size k",
        "reward": "Rewards (delta vs VMAgent's +1) and the per-machine TD target",
    }
    for g, title in groups.items():
        sel = [r for r in rows if r["group"] == g]
        if g == "figure6":
            sizes = sorted({r["pms"] for r in sel})
            fig, axes = plt.subplots(1, len(sizes), figsize=(3.6 * len(sizes), 3.2), squeeze=False)
            for ax, n in zip(axes[0], sizes, strict=True):
                for kind in ("cvd", "schedrl"):
                    rr = [r for r in sel if r["pms"] == n and r["kind"] == kind and r["run"] == f"{kind}-{n}pm"]
                    ax.plot([r["epoch"] for r in rr], [r["ratio"] for r in rr], "o-", ms=3, label=kind)
                ax.axhline(1.0, color="grey", lw=0.8, ls="--")
                ax.set_title(f"{n} PMs")
                ax.set_xlabel("epoch")
                ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
            axes[0][0].set_ylabel("validation length / Best-Fit")
            axes[0][0].legend()
        else:
            if g == "reward":
                sel += [r for r in rows if r["group"] == "figure10" and r["run"].startswith("full")]
            if g in ("figure11", "figure12"):
                sel += [r for r in rows if r["group"] == "figure10" and r["run"].startswith("full")]
            fig, ax = plt.subplots(figsize=(6, 3.4))
            for name in dict.fromkeys(r["run"] for r in sel):
                rr = [r for r in sel if r["run"] == name]
                ax.plot([r["epoch"] for r in rr], [r["ratio"] for r in rr], "o-", ms=3, label=name)
            ax.axhline(1.0, color="grey", lw=0.8, ls="--")
            ax.set_xlabel("epoch")
            ax.xaxis.set_major_locator(MaxNLocator(integer=True))  # whole epochs
            ax.set_ylabel("validation length / Best-Fit")
            ax.legend(fontsize=7)
        fig.suptitle(title)
        fig.tight_layout()
        fig.savefig(out / f"{g}.png", dpi=90)
        plt.close(fig)


# --- Tables 2-4 in the paper's regime (issue 15, item 5) --------------------------------------------------------------

REGIME_EPISODES = 5
"""Episodes per cell and seed of the paper-regime tables by default (x 5 seeds: 25 per cell; Tables 2-4 took 3.5
minutes on one core at load 3, 2026-11-26)."""
REGIME_LEARNED = ("cvd-rl", "cvd-rl-machine", "schedrl", "padrl", "hindsight")
"""The learned columns of the regime's tables (checkpoints ``dcplace.learn.numa_policies.REGIME_SHIPPED``)."""
FIXED_SIZE = ("schedrl", "padrl", "hindsight")
"""In Table 2 only, as in the paper, whose versions cannot change machine count. Ours: SchedRL's network is tied to
50 machines; PADRL and HL are built on CVD-RL's per-machine network and could act at 100 (leaving them out is a
choice, kept to match the paper's tables)."""
METRICS = (("length", "length", 1.0), ("income", "income", 1.0), ("CpuAllo %", "cpu_alloc", 100.0))
"""(row label, record field, scale) of each table row; the paper's tuples are in this order."""


def regime_policies(key: str) -> tuple[str, ...]:
    """The policies of table ``key`` in the regime's reproduction: the heuristics, then the learned methods that
    apply at its machine count."""
    return HEURISTICS + tuple(p for p in REGIME_LEARNED if key == "table2" or p not in FIXED_SIZE)


def run_regime_tables(
    trace: str,
    episodes: int,
    seeds: int,
    seed: int,
    out: Path,
    quick: bool = False,
    regime: str = "paper",
    progress: Callable[[str], None] | None = None,
    tables: tuple[str, ...] = tuple(TABLES),
) -> str:
    """Tables 2-4 (those of ``tables``) in ``regime`` (a name of :data:`dcplace.bench.cvd_regime.REGIMES`) with the
    learned methods trained there beside the heuristics and the hindsight bound; writes records.jsonl and table.md,
    returns the Markdown.

    Seeds ``seed .. seed + seeds - 1``: seed ``s`` draws the regime's trace (restored long-lived VMs, shared CPU)
    with ``s`` and its ``episodes`` starts from VMAgent's rows [1000, 10000) with ``start_seed(s, i)``; the
    checkpoints were trained on rows [10000, 15000) of seed 0's trace, so every start is held out (never used for
    training or validation). Records: one per table x warm x policy x seed x episode (policy ``hindsight-bound``:
    :func:`dcplace.sim.hindsight.episode_bounds`, Non-Expansion only). ``quick``: Table 2 at 50 % only."""
    from dcplace.bench.cvd_heuristics import BOUND
    from dcplace.bench.cvd_regime import regime_named
    from dcplace.learn.numa_policies import shipped_path
    from dcplace.sim.hindsight import episode_bounds

    say = progress or (lambda line: None)
    reg = regime_named(regime)
    trace = resolve_trace(trace, "paper")  # the regime's tables are defined on Huawei-East-1
    policies = {p: get_policy(p) for p in HEURISTICS}
    policies |= {p: get_policy(p, checkpoint=str(shipped_path(p, regime))) for p in REGIME_LEARNED}
    records: list[dict[str, Any]] = []
    for s in range(seed, seed + seeds):
        prepared = reg.prepare(trace, s)
        for key, warm, scenario, cluster in table_cells(prepared, (0.5,) if quick else WARM, reg):
            if key not in tables or (quick and key != "table2"):
                continue
            base = dict(table=key, warm_start=warm, seed=s, trace=trace, regime=regime)
            if scenario.mode == "non-expansion":
                for i, b in enumerate(episode_bounds(cluster, prepared, scenario, episodes, s)):
                    records.append(base | dict(policy=BOUND, episode=i, length=b))
            for pol in regime_policies(key):
                results, wall, _ = run_episodes(policies[pol], cluster, prepared, scenario, episodes, s, check=True)
                for i, r in enumerate(results):
                    records.append(base | dict(policy=pol, episode=i, length=r.length, income=r.income,
                                               cpu_alloc=r.cpu_alloc_mean, final_pms=r.final_pms, status=r.status,
                                               wall_s=wall / episodes))  # fmt: skip
            say(f"seed {s} {key} warm {warm:.0%}: done")
    write_records(records, out)
    md = render_regime_markdown(records, trace, episodes, reg.label)
    (out / "table.md").write_text(md, encoding="utf-8")
    return md


def seed_means(records: list[dict[str, Any]], table: str, pol: str, warm: float, field: str) -> np.ndarray:
    """The mean of ``field`` over each seed's episodes of one cell (seeds in increasing order)."""
    sel = [r for r in records if r["table"] == table and r["policy"] == pol and r["warm_start"] == warm and field in r]
    seeds = sorted({int(r["seed"]) for r in sel})
    return np.array([np.mean([float(r[field]) for r in sel if r["seed"] == s]) for s in seeds])


def render_regime_markdown(records: list[dict[str, Any]], trace: str, episodes: int, label: str) -> str:
    """The regime's tables from the records: per cell the paper's columns beside ours (mean over seeds ± standard
    deviation of the seeds' means), then each learned method's gain over the best heuristic of the cell and its
    share of what the hindsight bound leaves (gain / (bound - best heuristic))."""
    from dcplace.bench.cvd_heuristics import BOUND

    n_seeds = len({r["seed"] for r in records})
    lines = [
        f"# CVD-RL Tables 2-4 in the paper's regime ({trace}, {label}; {n_seeds} seeds x {episodes} held-out "
        "episodes per cell)",
        "",
        "Ours: mean over seeds ± standard deviation of the seeds' means. Each seed redraws the regime's trace "
        "(restored "
        "long-lived VMs, shared CPU) and the starts (VMAgent's rows [1000, 10000); the learned checkpoints were "
        "trained on rows [10000, 15000) of seed 0's trace). Paper: Tables 2-4 (its ± is over its own runs). Income "
        f"uses our price model, so only its ratios compare. `{BOUND}`: no policy, knowing the future, places more.",
    ]
    for key, (title, _) in TABLES.items():
        rows = [r for r in records if r["table"] == key]
        if not rows:
            continue
        pols = [p for p in (*regime_policies(key), BOUND) if any(r["policy"] == p for r in rows)]
        paper_learned = PAPER_LEARNED_FULL[key]
        head = ["warm", "metric", *(f"paper {p}" for p in (*HEURISTICS, *paper_learned)), *(f"ours {p}" for p in pols)]
        lines += ["", f"## {title}", "", "| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
        warms = sorted({float(r["warm_start"]) for r in rows})
        for w in warms:
            for mi, (metric, field, scale) in enumerate(METRICS):
                cells = [f"{w:.0%}", metric]
                cells += [f"{PAPER[key][p][w][mi]:g}" for p in HEURISTICS]
                cells += [f"{paper_learned[p][w][mi]:g}" for p in paper_learned]
                for p in pols:
                    m = seed_means(records, key, p, w, field) * scale
                    cells.append(f"{m.mean():.1f} ± {m.std():.1f}" if len(m) else "-")
                lines.append("| " + " | ".join(cells) + " |")
        learned = [p for p in pols if p in REGIME_LEARNED]
        lines += ["", "Length over the cell's best heuristic (mean over seeds ± s.d.; share of the bound's gain):",
                  "", "| warm | best heuristic | " + " | ".join(learned) + " | hindsight bound | paper cvd-rl |",
                  "|" + "---|" * (len(learned) + 4)]  # fmt: skip
        for w in warms:
            best = max(HEURISTICS, key=lambda p: seed_means(records, key, p, w, "length").mean())
            ref = seed_means(records, key, best, w, "length")
            bound = seed_means(records, key, BOUND, w, "length")
            cells = [f"{w:.0%}", best]
            for p in learned:
                gain = seed_means(records, key, p, w, "length") / ref - 1
                share = "" if not len(bound) else f" ({(gain * ref).mean() / (bound - ref).mean():.0%})"
                cells.append(f"{gain.mean():+.1%} ± {gain.std():.1%}{share}")
            cells.append(f"{(bound / ref - 1).mean():+.1%}" if len(bound) else "-")
            pbest = max(PAPER[key][p][w][0] for p in HEURISTICS)
            cells.append(f"{paper_learned['cvd-rl'][w][0] / pbest - 1:+.1%}")
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
