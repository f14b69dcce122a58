"""Outputs that fit the ecosystem: ``solve --out FILE`` (the assignment), ``simulate --out FILE`` (one record per
episode), folders as before plus those files, tables not cut when piped, progress on stderr only."""

from __future__ import annotations

import csv
import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dcplace.cli.main import app

runner = CliRunner()


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path, encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh))


def test_solve_out_json_and_csv_give_every_vm_a_machine_and_disks(tmp_path):
    res = runner.invoke(app, ["solve", "--instance", "exp1", "--method", "greedy", "--out", str(tmp_path / "a.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "a.json").read_text())
    rows = doc["assignment"]
    assert doc["verified"] and len(rows) == doc["vms"] > 0
    assert [r["vm"] for r in rows] == list(range(doc["vms"])) and all(r["disks"] for r in rows)
    assert len({r["machine"] for r in rows}) == doc["pms_used"]
    res = runner.invoke(app, ["solve", "--instance", "exp1", "--method", "greedy", "--out", str(tmp_path / "a.csv")])
    assert res.exit_code == 0, res.output
    table = _csv(tmp_path / "a.csv")
    assert [(int(r["vm"]), int(r["machine"]), [int(d) for d in r["disks"].split(";")]) for r in table] == [
        (r["vm"], r["machine"], r["disks"]) for r in rows
    ]
    res = runner.invoke(app, ["solve", "--instance", "exp1", "--method", "greedy", "--out", str(tmp_path / "dir")])
    assert res.exit_code == 0, res.output
    assert {p.name for p in (tmp_path / "dir").iterdir()} >= {"result.json", "config.toml", "assignment.csv"}


def test_solve_out_numa_batch_gives_machine_and_numa_node(tmp_path):
    sys.path.insert(0, str(Path(__file__).parents[1] / "placement"))
    from test_numa_batch import write_dataset

    data = write_dataset(tmp_path / "batch", seed=0)
    out = tmp_path / "batch.csv"
    res = runner.invoke(app, ["solve", "--instance", str(data), "--time-limit", "20", "--out", str(out)])
    assert res.exit_code == 0, res.output
    rows = _csv(out)
    assert rows and set(rows[0]) == {"vm", "machine", "numa_node"}
    assert {int(r["numa_node"]) for r in rows} <= {-1, 0, 1}


@pytest.mark.parametrize("kind", ["numa", "netalloc"])
def test_simulate_out_file_has_one_record_per_episode(tmp_path, kind):
    args = ["--pms", "6"] if kind == "numa" else ["--requests", "16"]
    out = tmp_path / "episodes.csv"
    res = runner.invoke(app, ["simulate", kind, *args, "--episodes", "3", "--out", str(out), "--json"])
    assert res.exit_code == 0, res.output
    summary = json.loads(res.stdout)
    rows = _csv(out)
    assert [int(r["episode"]) for r in rows] == [0, 1, 2]
    if kind == "numa":
        mean = sum(float(r["length"]) for r in rows) / 3
        assert mean == pytest.approx(summary["length_mean"]) and "income" in rows[0]
    else:
        mean = sum(float(r["acceptance"]) for r in rows) / 3
        assert mean == pytest.approx(summary["acceptance_mean"]) and any(k.startswith("bw_util_") for k in rows[0])
    folder = tmp_path / "run"
    res = runner.invoke(app, ["simulate", kind, *args, "--episodes", "2", "--out", str(folder)])
    assert res.exit_code == 0, res.output
    assert {p.name for p in folder.iterdir()} >= {"result.json", "config.toml", "episodes.csv"}


def test_simulate_out_parquet_is_written_or_says_what_it_needs(tmp_path):
    out = tmp_path / "e.parquet"
    res = runner.invoke(app, ["simulate", "numa", "--pms", "6", "--episodes", "2", "--out", str(out)])
    try:
        import pyarrow  # noqa: F401
    except ImportError:
        assert res.exit_code == 2 and "needs pyarrow" in res.output and not out.exists()
    else:
        import pandas as pd

        assert res.exit_code == 0 and len(pd.read_parquet(out)) == 2


def test_piped_tables_are_not_cut_and_progress_stays_off_stdout():
    p = subprocess.run([sys.executable, "-m", "dcplace.cli.main", "simulate", "netalloc", "--requests", "16",
                        "--episodes", "2"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert p.returncode == 0, p.stderr
    assert "rejected (net/cap)" in p.stdout and "…" not in p.stdout
    p = subprocess.run([sys.executable, "-m", "dcplace.cli.main", "simulate", "numa", "--pms", "6", "--episodes",
                        "2"], capture_output=True, text=True, timeout=300)  # fmt: skip
    assert "income (price units)" in p.stdout and "per vCPU-hour" in p.stdout


def test_an_output_file_in_missing_folders_is_written(tmp_path):
    """`--out nodir/sub/x.csv` was a FileNotFoundError traceback after the whole run (a folder's parents were made)."""
    res = runner.invoke(app, ["simulate", "numa", "--trace", "synthetic", "--pms", "5", "--episodes", "1",
                              "--out", str(tmp_path / "a" / "b" / "x.csv")])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert len(_csv(tmp_path / "a" / "b" / "x.csv")) == 1
    res = runner.invoke(app, ["solve", "--instance", "exp1", "--method", "greedy", "--out",
                              str(tmp_path / "c" / "d.json")])  # fmt: skip
    assert res.exit_code == 0 and json.loads((tmp_path / "c" / "d.json").read_text())["verified"], res.output


def test_a_runs_config_toml_repeats_it_from_any_folder(tmp_path, monkeypatch):
    """config.toml kept `trace = "lt.csv"` as given, so `--config` failed outside the run's folder."""
    import numpy as np

    work, elsewhere = tmp_path / "work", tmp_path / "elsewhere"
    work.mkdir()
    elsewhere.mkdir()
    rng = np.random.default_rng(0)
    rows = [f"{i},{rng.choice([1, 2, 4, 8])},{rng.choice([2, 4, 16])},{i},{i + rng.integers(50, 500)}"
            for i in range(3000)]  # fmt: skip
    (work / "lt.csv").write_text("vmid,cpu,mem,at,lt\n" + "\n".join(rows) + "\n")  # Huawei-East-1's layout
    monkeypatch.chdir(work)
    args = ["simulate", "numa", "--trace", "lt.csv", "--pms", "5", "--episodes", "2", "--json"]
    first = runner.invoke(app, [*args, "--out", "o1"])
    assert first.exit_code == 0, first.output
    assert f'trace = "{work / "lt.csv"}"' in (work / "o1" / "config.toml").read_text()
    monkeypatch.chdir(elsewhere)
    again = runner.invoke(app, ["simulate", "numa", "--config", str(work / "o1" / "config.toml"), "--json"])
    assert again.exit_code == 0, again.output
    strip = ("trace", "wall_s", "decisions_per_s")
    assert {k: v for k, v in json.loads(again.output).items() if k not in strip} == {
        k: v for k, v in json.loads(first.output).items() if k not in strip
    }
