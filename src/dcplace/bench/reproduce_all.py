"""``dcplace reproduce all``: every reproduction, records first (one sub-folder each), then one report.

Layout of ``out``::

    cvd-heuristics/  cvd-rl-paper/  cvd-rl/  nara/  hmip/  reopt/     each reproduction's records, tables, figures
    run.json                                   command, commit, date, machine, wall time, the quick settings
    report.html  report.md  report_files/      the report (:mod:`dcplace.bench.report`)
    claims.json                                its claims and their outcomes, for scripts

CVD-RL runs in the paper's regime (:func:`dcplace.bench.cvd_regime.resolve_regime`; today's reading where
Huawei-East-1 is absent): the heuristic columns in ``cvd-heuristics/`` and Tables 2-4 with every learned method in
``cvd-rl-paper/``; ``cvd-rl/`` keeps today's reading (releases off) for the figures only it has (learning curves,
ablations, filters: Figures 6 and 10-12).

Two cores: Nara's reproduction (the longest) runs in a second process beside the other three, whose report sections
are drawn while it finishes. Every reproduction gets the same arguments as its own ``dcplace reproduce`` command, so
its records are the ones that command writes for the same seed.
"""

from __future__ import annotations

import datetime
import json
import platform
import shutil
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from dcplace.atomic import write_text
from dcplace.bench.provenance import commit, machine

LAYOUT = frozenset({"cvd-heuristics", "cvd-rl-paper", "cvd-rl", "nara", "hmip", "reopt", "run.json", "report.html",
                    "report.md", "report_files", "claims.json", "config.toml"})  # fmt: skip
"""Every name :func:`run_all` (and ``reproduce all``'s config.toml) writes into its folder (the module docstring's
layout): an ``--out`` holding only these is an earlier run, finished or not."""


@dataclass(frozen=True)
class AllSettings:
    """What each reproduction runs with (the quick form's values are :meth:`quick_form`'s)."""

    trace: str = "auto"
    cvd_episodes: int = 20
    """episodes per cell, CVD-RL heuristic and learned tables"""
    curve_epochs: int = 40
    nara_episodes: int = 20
    """Nara: episodes per cell on gamma and delta (:data:`dcplace.bench.nara_baselines.GAMMA_DELTA_EPISODES`)"""
    nara_alpha_beta_episodes: int = 100
    """Nara: episodes per cell on alpha and beta (:data:`dcplace.bench.nara_baselines.ALPHA_BETA_EPISODES`)"""
    workers: int = 2
    seed: int = 0
    quick: bool = False
    curve_seeds: int = 5
    """seeds of each CVD-RL Figure 6 training run (bands in the report's learning curves from 2 on)"""
    regime_seeds: int = 5
    """CVD-RL in the paper's regime: evaluation seeds (each redraws the regime's trace and the held-out starts)"""
    nara_by_topology: tuple[tuple[str, int], ...] = ()
    """Nara: (topology, episodes) pairs, only those topologies (empty: every topology, ``nara_episodes`` each, or
    the reproduction's own quick form)"""

    @staticmethod
    def quick_form(seed: int = 0, trace: str = "auto", cvd_episodes: int = 5, workers: int = 2) -> AllSettings:
        """The demo: each reproduction's quick form, except Nara, which runs 20 episodes per cell on alpha and beta
        (where its claims are checked: 5 left margin intervals up to +-13 points wide, 20 of +-2 to 5; an alpha
        episode takes well under a second, so 20 add about 10 s) and 2 on gamma, and leaves delta out (one Nara
        episode of 4,096 requests on 2,560 servers takes minutes); CVD-RL's Figure 6 runs get 3 seeds (a band over
        seeds in the learning curves)."""
        nara = (("alpha", 20), ("beta", 20), ("gamma", 2))
        return AllSettings(trace=trace, cvd_episodes=cvd_episodes, nara_episodes=2, seed=seed, quick=True,
                           curve_seeds=3, nara_by_topology=nara, workers=workers)  # fmt: skip

    def describe(self) -> str:
        """What the run used, in words (the report's 'quick form' line)."""
        if not self.quick:
            return (
                f"no (full): CVD-RL heuristic tables {self.cvd_episodes} episodes per cell at warm 0-60 %, in the "
                f"paper's regime (where Huawei-East-1 is here) Tables 2-4 {self.regime_seeds} seeds x 5 episodes per "
                "cell; today's reading's tables "
                f"{self.cvd_episodes} episodes per cell, "
                f"{self.curve_epochs}-epoch training runs ({self.curve_seeds} seeds each for Figure 6); Nara "
                f"{self.nara_episodes} episodes per cell on gamma and delta, {self.nara_alpha_beta_episodes} on alpha "
                "and beta; "
                "HMIP every beta; re-optimisation on the whole of Huawei-East-1 and Azure V1"
            )
        nara = ", ".join(f"{n} on {t}" for t, n in self.nara_by_topology) or "2 (1 on delta)"
        left_out = [t for t in ("alpha", "beta", "gamma", "delta") if t not in dict(self.nara_by_topology)]
        nara += f"; {', '.join(left_out)} left out" if self.nara_by_topology and left_out else ""
        return (
            f"yes: CVD-RL heuristics {self.cvd_episodes} episodes per cell at warm 0 and 50 %; in the paper's regime "
            f"(where Huawei-East-1 is here) Table 2 at 50 % warm, {self.regime_seeds} seeds x 3 episodes; today's "
            "reading's learned tables 3 "
            f"episodes per cell at 50 % warm; 3-epoch training runs on 2-10 PMs ({self.curve_seeds} seeds each for "
            f"Figure 6, one for the ablations); Nara episodes per cell: {nara}; HMIP Table IX: mix1 at beta 0.7 "
            "(25 x 25) only; "
            "re-optimisation on the first 24 hours of Huawei-East-1 every 6 hours and on the threshold. "
            "Fewer episodes give wider intervals"
        )


def reopt_traces(s: AllSettings) -> tuple[str, ...]:
    """The re-optimisation replay's traces: Huawei-East-1 and Azure V1 where present (the quick form: Huawei-East-1
    only, its first 24 hours), else the synthetic trace."""
    from dcplace.bench.reopt import auto_traces

    return auto_traces(("huawei-east-1",) if s.quick else ("huawei-east-1", "azure-v1"))


def run_all(
    out: Path, settings: AllSettings, command: str, say: Callable[[str], None] = lambda s: None
) -> tuple[Path, list[Any]]:
    """Run the four reproductions into ``out``, write ``run.json`` and the report; return the report's path and
    its claims. ``say`` gets one line per finished reproduction (progress)."""
    from dcplace.bench import cvd_heuristics, cvd_reproduction, hmip, reopt
    from dcplace.bench.cvd_regime import resolve_regime
    from dcplace.bench.report import build_section, write_report

    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()

    def tagged(name: str) -> Callable[[str], None]:
        return lambda line: say(f"{name}: {line}")

    started = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M:%S")
    s = settings
    nara_code = (
        "import json, sys; from pathlib import Path; from dcplace.bench import nara_reproduction as n; "
        "n.run_reproduction(Path(sys.argv[1]), episodes=int(sys.argv[2]), seed=int(sys.argv[3]), "
        "quick=sys.argv[4] == '1', episodes_by_topology=json.loads(sys.argv[5]), "
        "alpha_beta_episodes=int(sys.argv[6]))"
    )
    by_topology = json.dumps(dict(s.nara_by_topology) or None)
    args = [str(out / "nara"), str(s.nara_episodes), str(s.seed), "1" if s.quick else "0", by_topology,
            str(s.nara_alpha_beta_episodes)]  # fmt: skip
    # stderr through a pipe read by a thread (never full, so the child never stalls): its lines are progress
    nara = subprocess.Popen([sys.executable, "-c", nara_code, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)  # fmt: skip
    log: list[str] = []

    def pump() -> None:
        assert nara.stderr is not None
        for line in nara.stderr:
            log.append(line)
            say(f"nara: {line.rstrip()}")

    reader = threading.Thread(target=pump, daemon=True)
    reader.start()

    def nara_failed() -> None:
        """Raise, between two reproductions, once the Nara child has failed: it runs beside them, and its failure
        was said only after all of them (minutes later in the quick form). The reproductions finished so far keep
        their records; only ``nara/`` and one begun and not finished are removed."""
        if nara.poll() not in (None, 0):
            reader.join()
            raise RuntimeError(f"the Nara reproduction failed (exit {nara.returncode}):\n{''.join(log[-40:])}")

    sections = []
    begun, done = {"nara"}, set()  # an interrupted run removes the folders it began and did not finish
    try:
        regime = resolve_regime("auto", s.trace)
        begun.add("cvd-heuristics")
        cvd_heuristics.run_reproduction(s.trace, s.cvd_episodes, s.seed, out / "cvd-heuristics", quick=s.quick,
                                        regime=regime, progress=tagged("cvd-heuristics"))  # fmt: skip
        say(f"cvd-heuristics ({regime} regime) done ({time.perf_counter() - t0:.0f} s)")
        done.add("cvd-heuristics")
        nara_failed()
        if regime == "today":  # no paper regime here: a folder from an earlier run must not be reported as this one's
            shutil.rmtree(out / "cvd-rl-paper", ignore_errors=True)
            done.add("cvd-rl-paper")
        else:
            begun.add("cvd-rl-paper")
            cvd_reproduction.run_regime_tables(
                s.trace,
                3 if s.quick else cvd_reproduction.REGIME_EPISODES,
                s.regime_seeds,
                s.seed,
                out / "cvd-rl-paper",
                quick=s.quick,
                regime=regime,
                progress=tagged("cvd-rl-paper"),
            )
            say(f"cvd-rl-paper done ({time.perf_counter() - t0:.0f} s)")
            done.add("cvd-rl-paper")
            nara_failed()
        begun.add("cvd-rl")
        cvd_reproduction.run_reproduction(
            s.trace,
            3 if s.quick else s.cvd_episodes,
            s.seed,
            out / "cvd-rl",
            quick=s.quick,
            curve_epochs=s.curve_epochs,
            workers=s.workers,
            progress=tagged("cvd-rl"),
            curve_seeds=s.curve_seeds,
        )
        say(f"cvd-rl done ({time.perf_counter() - t0:.0f} s)")
        done.add("cvd-rl")
        nara_failed()
        begun.add("hmip")
        hmip.run_reproduction(out / "hmip", quick=s.quick, workers=s.workers, seed=s.seed, progress=tagged("hmip"))
        say(f"hmip done ({time.perf_counter() - t0:.0f} s)")
        done.add("hmip")
        nara_failed()
        begun.add("reopt")
        reopt.run_reproduction(reopt_traces(s), 24.0 if s.quick else 0.0, out / "reopt", quick=s.quick, seed=s.seed)
        say(f"reopt done ({time.perf_counter() - t0:.0f} s)")
        done.add("reopt")
        nara_failed()
        for name in ("cvd-heuristics", "cvd-rl-paper", "cvd-rl", "hmip", "reopt"):
            sections.append(build_section(out, name))
        nara.wait()
        reader.join()
    except BaseException:
        nara.kill()
        nara.wait()
        for name in begun - done:  # figures without records must not outlive the run that left them unfinished;
            shutil.rmtree(out / name, ignore_errors=True)  # folders it never reached keep an earlier run's results
        raise
    nara_failed()
    say(f"nara done ({time.perf_counter() - t0:.0f} s)")
    sections.insert(3, build_section(out, "nara"))
    meta = {
        "command": command,
        "commit": commit(),
        "date": started,
        "machine": machine(),
        "python": platform.python_version(),
        "wall_s": round(time.perf_counter() - t0, 1),
        "quick": s.describe(),
        "settings": asdict(s),
    }
    write_text(out / "run.json", json.dumps(meta, indent=2) + "\n")
    return write_report(out, meta, [x for x in sections if x is not None])
