"""Flags whose values the work cannot take are refused before any work, in one sentence naming the flag, exit 2
(found by a walkthrough of every command with bad input, 2026-11-27: ``--workers 100000`` forked thousands of
processes and filled the memory, huge counts were OverflowError tracebacks, ``--hidden 100000000`` asked torch for
40 PB, ``--sigma inf`` crashed the search, an unwritable ``--out`` was a PermissionError after the whole run, and a
``cluster`` command wrote dcplace's tables into any empty file)."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dcplace.cli.main import app
from dcplace.engine import PlacementEngine

runner = CliRunner()


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["solve", "--instance", "exp1", "--method", "hierarchical", "--workers", "100000"],
         "--workers must be a whole number from 1 to 256, got 100000"),
        (["solve", "--instance", "exp1", "--workers", "3000000000"], "--workers must be a whole number from 1 to 256"),
        (["simulate", "numa", "--max-requests", "99999999999999999999"],
         "--max-requests must be at most 2147483647 in size"),
        (["train", "cvd-rl", "--hidden", "100000000"], "--hidden must be from 1 to 4096, got 100000000"),
        (["train", "nara", "--p2-hidden", "1000000000"], "--p2-hidden must be from 0 to 4096"),
        (["train", "cvd-rl", "--filter", "best-fit:99999999999999999999"], "(k from 1 to 1000)"),
        (["train", "nalb-learned", "--sigma", "inf"], "--sigma must be a positive finite number, got inf"),
        (["train", "nalb-learned", "--pop", "99999999999999999999"], "--pop must be at most 2147483647 in size"),
    ],
)  # fmt: skip
def test_values_the_work_cannot_take_are_refused_first(tmp_path: Path, args: list[str], said: str) -> None:
    out = tmp_path / "out"
    res = runner.invoke(app, [*args, "--out", str(out)])
    assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output, res.output
    assert not out.exists()  # nothing half-written (train nalb-learned --sigma inf left out/config.toml)


def _as_unprivileged() -> list[str]:
    """A prefix that runs a command without root's power to write anywhere (root's file permissions do not bind)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("running as root without setpriv: file permissions cannot be tested")
    caps = "-dac_override,-dac_read_search,-fowner"
    return ["setpriv", "--bounding-set", caps, "--inh-caps", caps, "--"]


def test_an_out_that_cannot_be_written_is_refused_before_the_run(tmp_path: Path) -> None:
    ro = tmp_path / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src"), "OMP_NUM_THREADS": "1"}
    for args in (["simulate", "numa", "--episodes", "1", "--out", str(ro / "x.csv")],
                 ["solve", "--instance", "exp1", "--out", str(ro / "sub" / "a")]):  # fmt: skip
        p = subprocess.run([*_as_unprivileged(), sys.executable, "-m", "dcplace.cli.main", *args], env=env,
                           capture_output=True, text=True, timeout=300)  # fmt: skip
        assert p.returncode == 2 and f"cannot write in {ro} (permission denied)" in p.stderr, p.stderr
    assert list(ro.iterdir()) == []


def test_an_out_folder_with_a_folder_where_the_result_goes_is_refused(tmp_path: Path) -> None:
    (tmp_path / "o" / "result.json").mkdir(parents=True)
    res = runner.invoke(app, ["solve", "--instance", "exp1", "--out", str(tmp_path / "o")])
    assert res.exit_code == 2 and "result.json is a folder, where the run writes its result.json" in res.output
    assert [p.name for p in (tmp_path / "o").iterdir()] == ["result.json"]  # config.toml was left beside it


def test_cluster_commands_refuse_a_file_that_is_not_a_cluster_database(tmp_path: Path) -> None:
    empty, text = tmp_path / "e.txt", tmp_path / "t.txt"
    empty.write_bytes(b"")
    text.write_text("hello\n")
    for db, said in ((empty, "is not a dcplace cluster database"), (text, "is not a SQLite database")):
        res = runner.invoke(app, ["cluster", "reoptimise", "--db", str(db), "--dry-run"])
        assert res.exit_code == 2 and said in res.output, res.output
    assert empty.read_bytes() == b""  # it became a 36 KB database, even with --dry-run
    db = tmp_path / "c#1 100%.db"  # '#' and '%' in the name: the read-only check's URI must escape them
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    e.close()
    with sqlite3.connect(db) as conn:  # a real cluster database still opens
        assert conn.execute("SELECT count(*) FROM machines").fetchone() == (1,)
    res = runner.invoke(app, ["cluster", "reoptimise", "--db", str(db), "--dry-run"])
    assert res.exit_code == 0, res.output
    assert not (tmp_path / "c").exists()  # an unescaped URI opened "c" (the name up to '#') and created it


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["cluster", "reoptimise", "--db", "DB", "--dry-run", "--migration-weight", "1e308"],
         "--migration-weight: must be from 0 to 1e6"),  # it blamed a --migration-cost flag that does not exist
        (["reproduce", "reopt", "--traces", "nope", "--out", "OUT"], "error: --traces: trace must be one of"),
        (["reproduce", "reopt", "--report-only", "--out", "OUT"], "error: --out OUT holds no records.jsonl"),
        (["train", "nara", "--topology", "alpha,,beta", "--out", "OUT"], "--topology must be comma-separated names"),
    ],
)  # fmt: skip
def test_errors_name_the_flag_the_user_gave(tmp_path: Path, args: list[str], said: str) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    e.close()
    out = tmp_path / "out"
    args = [str(db) if a == "DB" else str(out) if a == "OUT" else a for a in args]
    res = runner.invoke(app, args)
    assert res.exit_code == 2 and said.replace("OUT", str(out)) in res.output, res.output


def test_running_out_of_memory_is_one_sentence(monkeypatch: pytest.MonkeyPatch) -> None:
    """With the memory guard off (--force) a size the system cannot map was a MemoryError traceback."""
    import dcplace.cluster.numa as numa

    def too_big(*args: object, **kw: object) -> None:
        raise MemoryError("Unable to allocate 59.6 GiB")

    monkeypatch.setattr(numa.NumaCluster, "__init__", too_big)
    res = runner.invoke(app, ["simulate", "numa", "--episodes", "1"])
    assert res.exit_code == 2 and "error: out of memory (Unable to allocate 59.6 GiB)" in res.output, res.output
