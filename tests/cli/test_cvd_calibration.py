"""``dcplace reproduce cvd-calibration``: the distance measure, one reading's records (the hindsight bound above
every heuristic), and the command's help and its one-sentence error without the shared traces."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from dcplace.bench.cvd_calibration import BOUND, HEURISTICS, distance, run_reading
from dcplace.bench.cvd_heuristics import PAPER
from dcplace.bench.cvd_regime import Regime


def _dcplace(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dcplace.cli.main", *args], capture_output=True, text=True,
                          timeout=300, check=False, env=env)  # fmt: skip


def test_distance_is_zero_at_the_papers_numbers_and_grows_with_each_term():
    rows = [
        {"policy": h, "warm_start": w, "length": PAPER["table2"][h][w][0], "cpu_alloc": PAPER["table2"][h][w][2] / 100}
        for h in HEURISTICS
        for w in (0.0, 0.5)
    ]
    assert distance(rows)["distance"] == pytest.approx(0.0, abs=1e-12)
    longer = [r | {"length": 2 * r["length"]} for r in rows]  # lengths x2, the gap unchanged
    d = distance(longer)
    assert d["length"] == pytest.approx(0.6931, abs=1e-3) and d["gap"] == pytest.approx(0.0, abs=1e-12)
    tied = [r | {"length": PAPER["table2"]["first-fit"][r["warm_start"]][0]} for r in rows]  # no Best-Fit gap
    assert distance(tied)["gap"] > 0.05


def test_one_reading_records_every_cell_and_a_bound_above_every_heuristic():
    rows = run_reading("synthetic", Regime(release=True), (0.5,), episodes=2, seed=0)
    assert {r["policy"] for r in rows} == {*HEURISTICS, BOUND}
    assert len(rows) == 2 * (len(HEURISTICS) + 1)
    for i in range(2):
        bound = next(r["length"] for r in rows if r["policy"] == BOUND and r["episode"] == i)
        assert all(r["length"] <= bound for r in rows if r["episode"] == i)
    single = run_reading("synthetic", Regime(release=True, end="first-single-failure"), (0.5,), episodes=1, seed=0)
    assert BOUND not in {r["policy"] for r in single}  # the bound holds for the paper's end rule only


def test_help_and_the_error_without_shared_traces(tmp_path):
    p = _dcplace("reproduce", "cvd-calibration", "--help")
    assert p.returncode == 0 and "Usage" in p.stdout
    env = os.environ | {"DCPLACE_DATA": str(tmp_path)}
    p = _dcplace("reproduce", "cvd-calibration", "--quick", "--out", str(tmp_path / "out"), env=env)
    assert p.returncode == 2
    assert "needs the shared huawei-east-1 or azure-v1 trace" in p.stderr
    assert "Traceback" not in p.stderr


def test_cvd_heuristics_regime_paper_needs_huawei_and_names_the_field(tmp_path):
    p = _dcplace("reproduce", "cvd-heuristics", "--regime", "paper", "--trace", "synthetic", "--quick", "--out",
                 str(tmp_path))  # fmt: skip
    assert p.returncode == 2 and "huawei-east-1 only" in p.stderr and "Traceback" not in p.stderr
    p = _dcplace("reproduce", "cvd-heuristics", "--regime", "tomorrow", "--out", str(tmp_path))
    assert p.returncode == 2 and "Traceback" not in p.stderr
