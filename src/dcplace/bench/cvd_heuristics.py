"""Reproduction of the heuristic columns of CVD-RL's Tables 2, 3 and 4 (``../shared/papers/002_...txt``, 5.4-5.5).

Spec: Table 2 = 50 PMs Non-Expansion; Table 3 = 100 PMs Non-Expansion; Table 4 = Expansion from 50 PMs by 10 up to
110. Warm start 0, 30, 40, 50, 60 %. Machines of 2 NUMA nodes x (40 CPU, 90 GB), double-NUMA above 32 GB,
VMAgent's start range, releases off. Why releases off: with releases on, 50 machines never fill on
Huawei-East-1 (an episode runs to the end of the trace, ~60,000 requests, see ``docs/reproductions.md``), while
the paper reports lengths of 600-4,500; VMAgent's own baseline script compares ``allow_release == 'True'`` with a
YAML boolean and so never releases either. Every record is written to ``records.jsonl`` (one row per table x
policy x warm start x episode); the Markdown table is built from the records only.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import lru_cache
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.bench.cvd_regime import TODAY, Regime, regime_named, resolve_trace
from dcplace.cluster.numa import NumaCluster
from dcplace.parallel import executor
from dcplace.policies import get_policy
from dcplace.policies.numa_heuristics import warm_up_jit
from dcplace.sim.episodes import check_hostable, run_episodes
from dcplace.sim.hindsight import episode_bounds
from dcplace.sim.numa import PreparedTrace, Scenario

WARM = (0.0, 0.3, 0.4, 0.5, 0.6)
POLICIES = ("first-fit", "best-fit", "industrial", "random")
BOUND = "hindsight-bound"
PAPER_COLUMNS = {"first-fit": "First-Fit", "best-fit": "Best-Fit", "industrial": "Internal-Scheduler"}

#: The paper's published heuristic numbers: table -> policy -> warm -> (length, income, cpu alloc %).
PAPER: dict[str, dict[str, dict[float, tuple[float, float, float]]]] = {
    "table2": {
        "first-fit": {0.0: (1282.3, 6942.1, 39.16), 0.3: (1050.4, 6178.2, 48.18), 0.4: (910.5, 5344.7, 51.42),
                      0.5: (806.9, 4805.3, 56.40), 0.6: (593.3, 3354.9, 62.29)},
        "best-fit": {0.0: (1386.8, 7880.5, 41.7), 0.3: (1149.7, 7157.4, 50.4), 0.4: (1010.1, 6244.2, 53.9),
                     0.5: (852.8, 5295.4, 57.4), 0.6: (669.2, 3947.8, 63.2)},
        "industrial": {0.0: (1398.6, 8191.5, 41.6), 0.3: (1144.2, 7751.7, 50.6), 0.4: (1004.5, 6428.6, 53.8),
                       0.5: (844.0, 5112.9, 57.5), 0.6: (661.9, 4391.4, 63.3)},
    },
    "table3": {
        "first-fit": {0.0: (3454.0, 27886.4, 41.61), 0.3: (2786.9, 24133.7, 51.88), 0.4: (2439.8, 21270.0, 56.98),
                      0.5: (1862.0, 14572.4, 61.55), 0.6: (1410.7, 10275.8, 67.18)},
        "best-fit": {0.0: (3812.0, 33110.3, 45.0), 0.3: (2965.9, 27289.1, 53.5), 0.4: (2565.1, 22768.9, 57.9),
                     0.5: (2078.4, 17456.7, 63.1), 0.6: (1502.9, 11009.4, 67.9)},
        "industrial": {0.0: (3824.6, 31975.9, 45.0), 0.3: (3003.8, 26935.9, 54.0), 0.4: (2604.0, 22448.6, 58.5),
                       0.5: (2106.3, 17296.8, 63.5), 0.6: (1589.7, 12258.0, 68.5)},
    },
    "table4": {
        "first-fit": {0.0: (3953.0, 34765.1, 59.36), 0.3: (3658.6, 33442.6, 63.42), 0.4: (3543.4, 32875.2, 65.17),
                      0.5: (3429.9, 32112.4, 67.09), 0.6: (3273.0, 30656.5, 68.61)},
        "best-fit": {0.0: (4366.6, 43570.6, 64.3), 0.3: (4083.1, 42080.8, 67.7), 0.4: (3965.3, 41593.3, 69.4),
                     0.5: (3818.6, 40612.0, 70.7), 0.6: (3599.3, 38239.0, 72.5)},
        "industrial": {0.0: (4446.8, 44721.7, 64.6), 0.3: (4195.6, 44320.8, 68.2), 0.4: (4079.0, 41208.5, 69.8),
                       0.5: (3894.1, 42009.9, 71.3), 0.6: (3735.6, 40597.8, 73.1)},
    },
}  # fmt: skip

TABLES = {
    "table2": ("Table 2: 50 PMs, Non-Expansion", dict(pms=50, mode="non-expansion")),
    "table3": ("Table 3: 100 PMs, Non-Expansion", dict(pms=100, mode="non-expansion")),
    "table4": (
        "Table 4: Expansion 50 -> 110 PMs",
        dict(pms=50, mode="expansion", max_pms=110, expand_step=10),
    ),
}
DOUBLE_THRESHOLD = 32.0


def table_cells(
    prepared: PreparedTrace, warms: tuple[float, ...], regime: Regime = TODAY
) -> Iterator[tuple[str, float, Scenario, NumaCluster]]:
    """Every (table, warm start) cell of Tables 2-4 under ``regime``: its scenario and cluster, checked and compiled
    for."""
    for key in TABLES:
        for warm in warms:
            yield key, warm, *table_cell(prepared, key, warm, regime)


def table_cell(prepared: PreparedTrace, key: str, warm: float, regime: Regime) -> tuple[Scenario, NumaCluster]:
    """One cell's scenario and cluster, checked against the trace and compiled for."""
    scenario = regime.scenario(warm, **TABLES[key][1])  # type: ignore[arg-type]
    cluster = regime.cluster(scenario.machines)
    check_hostable(cluster, prepared)
    warm_up_jit()
    return scenario, cluster


def write_records(records: list[dict[str, Any]], out: Path) -> None:
    """``out/records.jsonl``, one JSON object per line, replaced whole (never half-written)."""
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / "records.jsonl.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        for rec in records:
            fh.write(json.dumps(rec) + "\n")
    tmp.replace(out / "records.jsonl")


def run_reproduction(
    trace: str,
    episodes: int,
    seed: int,
    out: Path,
    quick: bool = False,
    regime: str = "today",
    progress: Callable[[str], None] | None = None,
    workers: int = 1,
    ray_address: str = "",
    also: tuple[str, ...] = (),
) -> str:
    """Run every cell, write ``records.jsonl`` and ``table.md`` under ``out``, return the Markdown (``progress``:
    called with a line per policy after each cell). ``also``: more NUMA policies (registered names or
    ``package.module:Class``) played in every cell on the same episodes, after the paper's.

    ``regime``: a name of :data:`dcplace.bench.cvd_regime.REGIMES`; ``today`` (default) is the setting of the module
    docstring. Any other adds the hindsight bound of every Non-Expansion episode (policy ``hindsight-bound``) where
    the regime's end rule is the paper's. ``workers`` / ``ray_address``: where the cells run
    (:func:`dcplace.parallel.executor`; 1 and '': here, one after the other); the records are the same on every
    engine, in the same order, ``wall_s`` aside."""
    reg = regime_named(regime)
    trace = resolve_trace(trace, regime)
    n = reg.episodes(episodes)
    jobs = [(regime, trace, seed, n, key, warm, also) for key in TABLES for warm in ((0.0, 0.5) if quick else WARM)]

    def done(_: int, res: tuple[list[dict[str, Any]], list[str]]) -> None:
        for line in res[1]:
            if progress is not None:
                progress(line)

    with executor(workers, ray_address) as ex:
        cells = ex.map(cell_records, jobs, done)
    records = [rec for recs, _ in cells for rec in recs]
    write_records(records, out)
    md = render_markdown(records, trace, n, None if regime == "today" else reg, also)
    (out / "table.md").write_text(md, encoding="utf-8")
    return md


@lru_cache(maxsize=2)
def _prepared(regime: str, trace: str, seed: int) -> PreparedTrace:
    """The trace's kernel arrays under a regime, once per process (a worker runs several cells)."""
    return regime_named(regime).prepare(trace, seed)


def cell_records(
    job: tuple[str, str, int, int, str, float, tuple[str, ...]],
) -> tuple[list[dict[str, Any]], list[str]]:
    """One (table, warm start) cell: (its records, its progress lines). ``job``: (regime, trace, seed, episodes,
    table, warm start, more policies); everything else is derived from these, so the cell is the same wherever it
    runs."""
    regime, trace, seed, n, key, warm, also = job
    reg = regime_named(regime)
    prepared = _prepared(regime, trace, seed)
    scenario, cluster = table_cell(prepared, key, warm, reg)
    records: list[dict[str, Any]] = []
    lines = []
    if regime != "today" and scenario.mode == "non-expansion" and scenario.end == "first-failure":
        for i, bound in enumerate(episode_bounds(cluster, prepared, scenario, n, seed)):
            records.append(dict(table=key, policy=BOUND, warm_start=warm, episode=i, trace=trace, seed=seed,
                                length=bound, regime=regime))  # fmt: skip
    for pol in POLICIES + also:
        results, wall, _ = run_episodes(get_policy(pol, seed=seed), cluster, prepared, scenario, n, seed, check=True)
        for i, r in enumerate(results):
            rec = dict(table=key, policy=pol, warm_start=warm, episode=i, trace=trace, seed=seed,
                       length=r.length, income=r.income, cpu_alloc=r.cpu_alloc_mean,
                       mem_alloc=r.mem_alloc_mean, pms_in_use=r.pms_in_use_mean, final_pms=r.final_pms,
                       final_cpu_alloc=r.final_cpu_alloc,
                       expansions=r.expansions, status=r.status, wall_s=wall / n)  # fmt: skip
            records.append(rec if regime == "today" else rec | dict(regime=regime, rejected=r.rejected))
        lines.append(f"{key} warm {warm:.0%} {pol}: length {np.mean([r.length for r in results]):.1f}")
    return records, lines


def render_markdown(
    records: list[dict[str, object]],
    trace: str,
    episodes: int,
    regime: Regime | None = None,
    also: tuple[str, ...] = (),
) -> str:
    """Tables from records: per warm start and metric, the paper's heuristics beside ours (mean ± std), and the
    hindsight bound where the records have it. ``regime``: None for today's setting, else the reading named in the
    title."""
    setting = f"releases off, double-NUMA > {DOUBLE_THRESHOLD:g} GB" if regime is None else f"regime: {regime.label}"
    lines = [
        f"# CVD-RL heuristic columns: paper vs dcplace ({trace}, {episodes} episodes per cell, {setting})",
        "",
        "Paper numbers from Tables 2-4 of CVD-RL; ours measured by `dcplace reproduce cvd-heuristics`. Income uses "
        "our price model (0.04 per vCPU-hour + 0.005 per GB-hour), so only its ratios compare. Ours: mean ± "
        "standard deviation over the cell's episodes (not a confidence interval: the report gives those).",
    ]
    if any(r["policy"] == BOUND for r in records):
        lines.append(f"`{BOUND}` (length rows): no policy, knowing the future, places more (`dcplace.sim.hindsight`).")
    policies = POLICIES + also + ((BOUND,) if any(r["policy"] == BOUND for r in records) else ())
    for key, (title, _) in TABLES.items():
        rows = [r for r in records if r["table"] == key]
        if not rows:
            continue
        lines += ["", f"## {title}", ""]
        head = (
            ["warm", "metric"] + [f"paper {PAPER_COLUMNS[p]}" for p in PAPER_COLUMNS] + [f"ours {p}" for p in policies]
        )
        lines.append("| " + " | ".join(head) + " |")
        lines.append("|" + "---|" * len(head))
        for warm in sorted({float(r["warm_start"]) for r in rows}):  # type: ignore[arg-type]
            for mi, (metric, field, scale) in enumerate(
                (("length", "length", 1.0), ("income", "income", 1.0), ("CpuAllo %", "cpu_alloc", 100.0))
            ):
                cells = [f"{warm:.0%}", metric]
                for p in PAPER_COLUMNS:
                    cells.append(f"{PAPER[key][p][warm][mi]:g}")
                for p in policies:
                    vals = np.array(
                        [float(r[field]) for r in rows if r["policy"] == p and r["warm_start"] == warm and field in r]  # type: ignore[arg-type]
                    )
                    cells.append(f"{vals.mean() * scale:.1f} ± {vals.std() * scale:.1f}" if len(vals) else "-")
                lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"
