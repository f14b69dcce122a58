"""An error names the flag the bad value came from: a damaged checkpoint file is --checkpoint's, not --policy's; a
bad top-k filter entry is --filter's, written as the user wrote it."""

from __future__ import annotations

from typer.testing import CliRunner

from dcplace.cli.main import app

runner = CliRunner()


def test_a_damaged_checkpoint_is_named_by_checkpoint(tmp_path):
    bad = tmp_path / "g.pt"
    bad.write_text("garbage\n")
    res = runner.invoke(app, ["simulate", "numa", "--trace", "synthetic", "--pms", "5", "--episodes", "1",
                              "--policy", "cvd-rl", "--checkpoint", str(bad)])  # fmt: skip
    assert res.exit_code == 2
    assert f"--checkpoint: {bad}: not a readable checkpoint" in res.output and "--policy" not in res.output


def test_a_relative_checkpoint_path_is_named_by_checkpoint_too(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "g.pt").write_text("garbage\n")
    res = runner.invoke(app, ["simulate", "numa", "--trace", "synthetic", "--pms", "5", "--episodes", "1",
                              "--policy", "cvd-rl", "--checkpoint", "./g.pt"])  # fmt: skip
    assert res.exit_code == 2 and "--checkpoint: g.pt: not a readable checkpoint" in res.output


def test_an_unknown_policy_is_still_named_by_policy():
    res = runner.invoke(app, ["simulate", "numa", "--trace", "synthetic", "--pms", "5", "--policy", "no-such"])
    assert res.exit_code == 2 and "--policy" in res.output


def test_a_bad_filter_entry_is_named_by_filter(tmp_path):
    res = runner.invoke(app, ["train", "cvd-rl", "--filter", "bogus:2", "--epochs", "1", "--out", str(tmp_path / "r")])
    assert res.exit_code == 2
    assert "--filter: entry bogus:2 needs a heuristic among best-fit, industrial, first-fit" in res.output
    assert "('bogus'" not in res.output and not (tmp_path / "r").exists()
