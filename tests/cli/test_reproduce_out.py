"""``reproduce --out``: an earlier run of the same command may be replaced, anything else is refused before any work
(exit 2, one sentence naming --out), so two runs never mix in one folder and nobody's files are lost."""

from __future__ import annotations

import re

import pytest
from typer.testing import CliRunner

from dcplace.cli.main import app
from dcplace.cli.options import made_by
from dcplace.cli.reproduce import check_reproduce_out as check_out
from dcplace.errors import InputError

runner = CliRunner()
HEADER = "# The resolved settings of `dcplace reproduce {}`; repeat the run with\n"


def test_missing_empty_and_same_command_folders_are_fine(tmp_path):
    check_out(tmp_path / "new", "dcplace reproduce nara")
    check_out(tmp_path, "dcplace reproduce nara")  # empty
    (tmp_path / ".gitkeep").write_text("")
    check_out(tmp_path, "dcplace reproduce nara")  # hidden entries only
    (tmp_path / "config.toml").write_text(HEADER.format("nara"))
    (tmp_path / "table.md").write_text("earlier\n")
    assert made_by(tmp_path) == "dcplace reproduce nara"
    check_out(tmp_path, "dcplace reproduce nara")


@pytest.mark.parametrize(
    ("files", "said"),
    [
        ({"config.toml": HEADER.format("hmip")}, "the output of `dcplace reproduce hmip`"),
        ({"notes.txt": "mine\n"}, "files that `dcplace reproduce nara` did not write (no config.toml of it)"),
        ({"config.toml": "[reproduce]\nseed = 0\n"}, "files that `dcplace reproduce nara` did not write"),
    ],
)
def test_another_commands_or_foreign_files_are_refused(tmp_path, files, said):
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    with pytest.raises(InputError, match=re.escape("already holds " + said)):
        check_out(tmp_path, "dcplace reproduce nara")


def test_a_file_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(InputError, match="is an existing file; it must name a folder"):
        check_out(tmp_path / "f", "dcplace reproduce nara")


def test_the_cli_refuses_before_any_work_and_leaves_the_folder_as_it_was(tmp_path):
    out = tmp_path / "out"
    cheap = ["reproduce", "cvd-heuristics", "--trace", "synthetic", "--quick", "--out", str(out)]
    ok = runner.invoke(app, cheap)
    assert ok.exit_code == 0, ok.output
    assert made_by(out) == "dcplace reproduce cvd-heuristics"
    again = runner.invoke(app, cheap)  # the same command: replaced
    assert again.exit_code == 0, again.output
    before = {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()}
    res = runner.invoke(app, ["reproduce", "nara-baselines", "--quick", "--out", str(out)])
    assert res.exit_code == 2
    assert "--out" in res.output and "the output of `dcplace reproduce cvd-heuristics`" in res.output
    assert "Traceback" not in res.output
    assert {p.name: p.read_bytes() for p in out.iterdir() if p.is_file()} == before
    assert not (out / "fig2_alpha_uniform.png").exists()


def test_a_records_file_that_exists_is_named_as_such(tmp_path):
    out = tmp_path / "episodes.csv"
    cmd = ["simulate", "netalloc", "--policy", "tetris", "--topology", "alpha", "--episodes", "1", "--out", str(out)]
    assert runner.invoke(app, cmd).exit_code == 0
    first = out.read_bytes()
    res = runner.invoke(app, cmd)
    assert res.exit_code == 2 and f"--out {out} already exists; remove it or choose another name" in res.output
    assert out.read_bytes() == first


def test_parquet_without_pyarrow_is_refused_before_the_run(tmp_path):
    import importlib.util

    if importlib.util.find_spec("pyarrow") is not None:
        pytest.skip("pyarrow is installed: Parquet is written")
    out = tmp_path / "e.parquet"
    res = runner.invoke(app, ["simulate", "netalloc", "--episodes", "1", "--out", str(out)])
    assert res.exit_code == 2 and "writing Parquet needs pyarrow" in res.output and "--out" in res.output
    assert not out.exists() and "acceptance" not in res.output  # nothing ran


@pytest.mark.parametrize("cmd", [["reproduce", "all", "--quick"], ["demo"]])
def test_all_and_demo_refuse_a_folder_they_did_not_write(tmp_path, cmd):
    (tmp_path / "nara").mkdir()  # what an interrupted run leaves is theirs
    (tmp_path / "notes.txt").write_text("mine\n")
    res = runner.invoke(app, [*cmd, "--out", str(tmp_path)])
    assert res.exit_code == 2 and "--out" in res.output
    assert "already holds notes.txt, which `dcplace" in res.output and "did not write" in res.output
    assert sorted(p.name for p in tmp_path.iterdir()) == ["nara", "notes.txt"]


def test_an_interrupted_all_run_is_theirs_to_rerun(tmp_path):
    from dcplace.bench.reproduce_all import LAYOUT

    for name in ("nara", "cvd-heuristics", "config.toml"):  # sub-folders before run.json, as a Ctrl-C leaves them
        (tmp_path / name).mkdir() if "." not in name else (tmp_path / name).write_text("")
    check_out(tmp_path, "dcplace demo", LAYOUT)
    (tmp_path / "x.csv").write_text("")
    with pytest.raises(InputError, match=re.escape("already holds x.csv")):
        check_out(tmp_path, "dcplace demo", LAYOUT)


@pytest.mark.parametrize(
    "args",
    [
        ["cvd-heuristics", "--episodes", "10"],
        ["cvd-calibration", "--rounds", "3"],
        ["cvd-rl", "--curve-epochs", "7"],
        ["nara-baselines", "--alpha-beta-episodes", "30"],
        ["nara", "--episodes", "4"],
        ["all", "--nara-episodes", "4"],
    ],
)
def test_quick_refuses_a_count_it_would_replace(tmp_path, args):
    """--quick sets its own episode counts: an explicit one beside it ran the quick count and recorded the ignored
    one in config.toml. Refused before any work, naming the flag; the flag without --quick is fine."""
    out = tmp_path / "out"
    res = runner.invoke(app, ["reproduce", *args, "--quick", "--out", str(out)])
    flag = args[1]
    said = f"with --quick (the quick form sets its own), got {args[2]}"
    assert res.exit_code == 2 and f"{flag} must be left at " in res.output and said in res.output, res.output
    assert not out.exists()


def test_quick_all_keeps_the_workers_asked_for():
    from dcplace.bench.reproduce_all import AllSettings

    assert AllSettings.quick_form(0, "auto", 5, workers=1).workers == 1
