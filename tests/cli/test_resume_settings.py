"""`train ... --resume` takes the run's settings from the config.toml it started with (options.Resume).

Before: `train nara --resume --steps 128` and `train cvd-rl --resume --hidden 32` were silently ignored (the
checkpoint's values won), `train cvd-rl --resume` needed `--pms` again, and config.toml kept the first length."""

from __future__ import annotations

import json
import tomllib

from typer.testing import CliRunner

from dcplace.cli.main import app

NARA = ["train", "nara", "--iterations", "1", "--steps", "64", "--eval-episodes", "1"]


def _run(args: list[str]):
    return CliRunner().invoke(app, args)


def test_a_resumed_nara_run_keeps_its_settings_and_records_its_new_length(tmp_path):
    out = tmp_path / "n"
    assert _run([*NARA, "--out", str(out)]).exit_code == 0
    changed = _run(["train", "nara", "--out", str(out), "--resume", "--steps", "128", "--iterations", "2"])
    assert changed.exit_code == 2
    assert changed.stderr.strip() == (
        f"error: --steps 128 would change the run in {out} (it has 64); a resumed run keeps its settings, only "
        "--iterations, --workers, --ray-address may change"
    )
    assert not (out / "train.json").read_text().count('"iterations": 2')  # nothing trained
    same = _run(["train", "nara", "--out", str(out), "--resume", "--steps", "64", "--iterations", "2"])
    assert same.exit_code == 0, same.output
    assert f"its other settings are the run's ({out / 'config.toml'})" in same.stderr
    settings = tomllib.loads((out / "config.toml").read_text())
    assert settings["iterations"] == 2 and settings["ppo"]["steps_per_iteration"] == 64
    assert json.loads((out / "train.json").read_text())["iterations"] == 2


def test_resume_refuses_config_another_command_and_an_empty_folder(tmp_path):
    out = tmp_path / "n"
    assert _run([*NARA, "--out", str(out)]).exit_code == 0
    both = _run(["train", "nara", "--out", str(out), "--resume", "--config", str(out / "config.toml")])
    assert both.exit_code == 2 and "--config and --resume do not go together" in both.stderr
    other = _run(["train", "schedrl", "--out", str(out), "--resume"])
    assert other.exit_code == 2
    assert f"{out / 'config.toml'} holds the settings of `dcplace train nara`, not of `dcplace train schedrl`" in (
        other.stderr
    )
    empty = _run(["train", "cvd-rl", "--out", str(tmp_path / "none"), "--resume"])
    assert empty.exit_code == 2 and "holds no run to resume (no checkpoint.pt)" in empty.stderr


def test_a_dqn_run_resumes_without_repeating_its_flags(tmp_path):
    """`train cvd-rl --resume` needed --pms (and --trace) again; a changed --hidden was ignored."""
    out = tmp_path / "c"
    first = _run(["train", "cvd-rl", "--trace", "synthetic", "--pms", "4", "--epochs", "1", "--eval-every", "1",
                  "--hidden", "16", "--keep-replay", "--out", str(out)])  # fmt: skip
    assert first.exit_code == 0, first.output
    hidden = _run(["train", "cvd-rl", "--out", str(out), "--resume", "--epochs", "2", "--hidden", "32"])
    assert (
        hidden.exit_code == 2
        and "--hidden 32 would change the run" in hidden.stderr
        and "(it has 16)" in (hidden.stderr)
    )
    again = _run(["train", "cvd-rl", "--out", str(out), "--resume", "--epochs", "2"])
    assert again.exit_code == 0, again.output
    settings = tomllib.loads((out / "config.toml").read_text())
    assert (settings["epochs"], settings["pms"], settings["hidden"], settings["trace"]) == (2, 4, 16, "synthetic")


def test_a_run_without_config_toml_resumes_from_its_checkpoint_and_says_so(tmp_path):
    """A reproduction's training run (runs/<name>) has a checkpoint and no config.toml."""
    out = tmp_path / "n"
    assert _run([*NARA, "--out", str(out)]).exit_code == 0
    (out / "config.toml").unlink()
    res = _run(["train", "nara", "--out", str(out), "--resume", "--iterations", "2"])
    assert res.exit_code == 0, res.output
    assert f"note: {out} has no config.toml, so the run's settings are its checkpoint's" in res.stderr
    assert "its other settings are the checkpoint's" in res.stderr
    assert not (out / "config.toml").exists()  # flags would not describe the run
    wrong = _run(["train", "nara", "--out", str(out), "--resume", "--iterations", "3", "--dataset", "azure"])
    assert wrong.exit_code == 2 and "meta.dataset" in wrong.stderr  # the checked settings are still checked


def test_a_run_on_a_relative_trace_path_resumes(tmp_path, monkeypatch):
    """config.toml names the trace by absolute path; the checkpoint held it as given (lt.csv), so the resume was
    refused ("field 'meta.trace' is 'lt.csv'"), and so was --trace lt.csv given again."""
    import numpy as np

    rng = np.random.default_rng(0)
    rows = [f"{i},{rng.choice([1, 2, 4, 8])},{rng.choice([2, 4, 16])},{i},{i + rng.integers(50, 500)}"
            for i in range(3000)]  # fmt: skip
    (tmp_path / "lt.csv").write_text("vmid,cpu,mem,at,lt\n" + "\n".join(rows) + "\n")
    monkeypatch.chdir(tmp_path)
    first = _run(["train", "cvd-rl", "--trace", "lt.csv", "--pms", "4", "--epochs", "1", "--eval-every", "1",
                  "--keep-replay", "--out", "runs/y"])  # fmt: skip
    assert first.exit_code == 0, first.output
    again = _run(["train", "cvd-rl", "--resume", "--epochs", "2", "--trace", "lt.csv", "--out", "runs/y"])
    assert again.exit_code == 0, again.output
    assert tomllib.loads((tmp_path / "runs/y/config.toml").read_text())["trace"] == str(tmp_path / "lt.csv")
