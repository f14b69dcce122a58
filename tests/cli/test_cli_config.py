"""The CLI's settings files: --config, flags over the file, config.toml beside every result, one-sentence errors."""

from __future__ import annotations

import json
import shlex
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
from typer.testing import CliRunner

import dcplace
from dcplace.cli.main import app
from dcplace.config import leaves

runner = CliRunner()


def dcplace_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "dcplace.cli.main", *args], capture_output=True, text=True, timeout=300, check=False
    )


def numbers(out: str) -> dict[str, object]:
    """A JSON summary without its wall times."""
    return {k: v for k, v in json.loads(out).items() if k not in ("wall_s", "decisions_per_s")}


def test_version():
    p = dcplace_cli("--version")
    assert p.returncode == 0 and p.stdout.strip() == f"dcplace {dcplace.__version__}"


def test_config_file_flags_override_and_written_config_repeats_the_run(tmp_path):
    cfg = tmp_path / "run.toml"
    cfg.write_text('episodes = 2\npolicy = "first-fit"\n\n[scenario]\npms = 6\nrelease = false\n')
    p = dcplace_cli("simulate", "numa", "--config", str(cfg), "--pms", "8", "--json", "--out", str(tmp_path / "a"))
    assert p.returncode == 0, p.stderr
    first = numbers(p.stdout)
    assert first["pms"] == 8 and first["episodes"] == 2 and first["policy"] == "first-fit"  # flag over file
    assert first["release"] is False  # from the file
    written = tomllib.loads((tmp_path / "a" / "config.toml").read_text())
    assert written["scenario"]["pms"] == 8 and written["scenario"]["release"] is False and written["episodes"] == 2
    assert numbers((tmp_path / "a" / "result.json").read_text()) == first
    again = dcplace_cli("simulate", "numa", "--config", str(tmp_path / "a" / "config.toml"), "--json")
    assert again.returncode == 0, again.stderr
    assert numbers(again.stdout) == first
    plain = dcplace_cli("simulate", "numa", "--pms", "8", "--episodes", "2", "--policy", "first-fit",
                        "--no-release", "--json")  # fmt: skip
    assert numbers(plain.stdout) == first  # the same run, from flags alone


@pytest.mark.parametrize(
    ("text", "needles"),
    [
        ("episodes = \n", ["line 1", "not valid TOML"]),
        ("[scenario]\npmz = 3\n", ["'scenario.pmz'", "unknown key in table [scenario]"]),
        ('episodes = "two"\n', ["'episodes'", "must be an integer, got 'two'"]),
        ("[scenario]\npms = 0\n", ["'scenario.pms'", "must be at least 1, got 0"]),
    ],
)
def test_bad_config_file_is_one_sentence_exit_2(tmp_path, text, needles):
    cfg = tmp_path / "bad.toml"
    cfg.write_text(text)
    p = dcplace_cli("simulate", "numa", "--config", str(cfg))
    assert p.returncode == 2 and p.stdout == ""
    assert str(cfg) in p.stderr and all(n in p.stderr for n in needles), p.stderr
    assert "Traceback" not in p.stderr and len(p.stderr.strip().splitlines()) == 1


def test_a_flag_value_error_names_the_flag_even_with_a_file(tmp_path):
    cfg = tmp_path / "ok.toml"
    cfg.write_text("[scenario]\npms = 4\n")
    res = runner.invoke(app, ["simulate", "numa", "--config", str(cfg), "--warm-start", "1.5"])
    assert res.exit_code == 2 and "--warm-start must be in [0, 1), got 1.5" in res.output
    res = runner.invoke(app, ["simulate", "numa", "--config", str(tmp_path / "missing.toml")])
    assert res.exit_code == 2 and "missing.toml" in res.output


def test_solve_config_with_a_table_and_written_config(tmp_path):
    cfg = tmp_path / "solve.toml"
    cfg.write_text('instance = "exp1"\nmethod = "greedy"\n\n[hierarchical]\nbeta = 0.5\n')
    res = runner.invoke(app, ["solve", "--config", str(cfg), "--seed", "3", "--json", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["method"] == "greedy" and out["verified"]
    written = tomllib.loads((tmp_path / "o" / "config.toml").read_text())
    assert written["seed"] == 3 and written["hierarchical"]["beta"] == 0.5 and "time_limit" not in written
    res = runner.invoke(app, ["solve", "--config", str(cfg), "--beta", "2"])
    assert res.exit_code == 2 and "--beta must be in (0, 1], got 2.0" in res.output
    cfg.write_text("[hierarchical]\npacks = 0\n")
    res = runner.invoke(app, ["solve", "--config", str(cfg)])
    assert res.exit_code == 2 and "field 'hierarchical.packs': must be at least 1, got 0" in res.output
    cfg.write_text('method = "hierarchical"\n[hierarchical]\npacks = 100\n')  # checked against the problem
    res = runner.invoke(app, ["solve", "--config", str(cfg)])
    said = "field 'hierarchical.packs': must be between 1 and 70 (the problem's VMs), got 100"
    assert res.exit_code == 2 and said in res.output
    res = runner.invoke(app, ["solve", "--method", "hierarchical", "--packs", "100"])
    assert res.exit_code == 2 and "error: --packs must be between 1 and 70 (the problem's VMs), got 100" in res.output


def test_reproduce_writes_its_config(tmp_path):
    """The settings as they ran: `regime = "auto"` was written as is, so the file replayed in a folder with the
    shared data ran the paper's regime on Huawei-East-1 instead. The header's command is quoted and absolute (a
    folder named with a space split it)."""
    out = tmp_path / "my runs"
    res = runner.invoke(app, ["reproduce", "cvd-heuristics", "--trace", "synthetic", "--quick", "--out", str(out)])
    assert res.exit_code == 0, res.output
    text = (out / "config.toml").read_text(encoding="utf-8")
    written = tomllib.loads(text)
    assert written == {"trace": "synthetic", "episodes": 20, "seed": 0, "quick": True, "regime": "today",
                       "workers": 1, "ray_address": "", "also": []}  # fmt: skip
    line = text.splitlines()[1]
    assert shlex.split(line.lstrip("# "))[-2:] == ["--config", str((out / "config.toml").absolute())], line
    res = runner.invoke(app, ["reproduce", "cvd-heuristics", "--ray-address", "head", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "--ray-address must be" in res.output, res.output


def test_every_option_of_a_config_command_is_documented():
    from dcplace.cli import reproduce, simulate, solve, train

    for cls in (simulate.NumaRun, simulate.NetallocRun, solve.SolveRun, train.NaraTrainRun, train.CvdTrainRun,
                reproduce.CvdRlRun, reproduce.HmipRun):  # fmt: skip
        missing = [leaf.key for leaf in leaves(cls) if not leaf.doc]
        assert not missing, (cls.__name__, missing)


def test_nara_datasets_match_the_workload_module():
    from dcplace.cli.train import NARA_DATASETS
    from dcplace.workload.netreq import DATASETS

    assert tuple(DATASETS) == NARA_DATASETS


def test_solve_method_tables_are_the_placement_params(tmp_path):
    """Each method's table is its params dataclass: a [greedy] table sets the runs the method does, and every
    table's workers is the run's (so config.toml says what ran and repeats it)."""
    cfg = tmp_path / "g.toml"
    cfg.write_text('method = "greedy"\nworkers = 1\n[greedy]\nruns = 3\n[auto]\nworkers = 7\n')
    res = runner.invoke(app, ["solve", "--config", str(cfg), "--json", "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["runs"] == 3
    written = tomllib.loads((tmp_path / "o" / "config.toml").read_text())
    assert written["greedy"] == {"runs": 3} and written["auto"]["workers"] == 1 == written["hierarchical"]["workers"]
    again = runner.invoke(app, ["solve", "--config", str(tmp_path / "o" / "config.toml"), "--json"])
    assert json.loads(again.output)["cost"] == json.loads(res.output)["cost"]
    cfg.write_text("[greedy]\nruns = 0\n")
    res = runner.invoke(app, ["solve", "--config", str(cfg)])
    assert res.exit_code == 2 and "g.toml, field 'greedy.runs': must be at least 1, got 0" in res.output


def test_train_filter_flag_parses_and_reports():
    from dcplace.cli.train import format_filter, parse_filter

    assert parse_filter("best-fit:2,industrial:3") == (("best-fit", 2), ("industrial", 3))
    assert parse_filter("none") == () and format_filter(()) == "none"
    res = runner.invoke(app, ["train", "cvd-rl", "--filter", "bad"])
    assert res.exit_code == 2 and "--filter must be heuristic:k pairs" in res.output and "'bad'" in res.output


def test_train_writes_its_config_and_takes_one(tmp_path):
    cfg = tmp_path / "train.toml"
    cfg.write_text('trace = "synthetic"\npms = 4\nepochs = 1\nfilter_k = [["best-fit", 1]]\n'
                   "[dqn]\neval_every = 1\nlearning_starts = 50\n")  # fmt: skip
    out = tmp_path / "run"
    res = runner.invoke(app, ["train", "cvd-rl", "--config", str(cfg), "--hidden", "8", "--out", str(out)])
    assert res.exit_code == 0, res.output
    written = tomllib.loads((out / "config.toml").read_text())
    assert written["filter_k"] == [["best-fit", 1]] and written["hidden"] == 8 and written["pms"] == 4
    assert written["dqn"]["learning_starts"] == 50 and written["dqn"]["batch"] == 256
    meta = json.loads((out / "train.json").read_text())
    assert meta["epochs"] == 1 and meta["dqn"] == written["dqn"]  # the [dqn] table is the trainer's DQNConfig
    res = runner.invoke(app, ["train", "cvd-rl", "--config", str(out / "config.toml"), "--out", str(out)])
    assert res.exit_code == 2 and "already holds a run" in res.output


FLAGS_BEFORE_THE_PACKAGE = {  # every flag of every command when the CLI was one file; none may go or change meaning
    ("simulate", "numa"): "--check --checkpoint --double-threshold --episodes --expand-step --json --max-pms "
    "--max-requests --mode --no-check --no-release --oversize --pms --policy --seed --trace --warm-start",
    ("simulate", "netalloc"): "--bound --check --checkpoint --dataset --episodes --json --no-bound --no-check --policy "
    "--requests --seed --split --topology",
    ("solve",): "--beta --first-level --instance --json --method --packs --rack-size --racks-per-pod --seed --split "
    "--swads --time-limit --workers",
    ("train", "nara"): "--dataset --eval-every --init --iterations --no-resume --out --p2-hidden --ppo-epochs --resume "
    "--seed --steps --topology",
    ("train", "cvd-rl"): "--batch --decompose --epochs --eval-every --filter --hidden --lookahead --loss --mode "
    "--no-decompose --no-lookahead --no-resume --out --pms --resume --reward --seed --trace --updates-per-epoch "
    "--warm-start",
    ("train", "schedrl"): "--batch --epochs --eval-every --hidden --mode --no-resume --out --pms --resume --reward "
    "--seed --trace --updates-per-epoch --warm-start",
    ("reproduce", "cvd-heuristics"): "--episodes --no-quick --out --quick --seed --trace",
    ("reproduce", "cvd-rl"): "--curve-epochs --episodes --no-quick --out --quick --seed --trace --workers",
    ("reproduce", "nara-baselines"): "--episodes --no-quick --out --quick --seed --setting",
    ("reproduce", "nara"): "--episodes --no-quick --out --quick --seed --setting",
    ("reproduce", "hmip"): "--no-quick --out --quick --seed --workers",
    ("demo",): "--episodes",
}


@pytest.mark.parametrize("path", list(FLAGS_BEFORE_THE_PACKAGE))
def test_every_flag_of_before_is_kept_and_experiments_take_config(path):
    import typer

    cmd = typer.main.get_command(app)
    ctx = cmd.make_context("dcplace", [*path, "--help"], resilient_parsing=True)
    for name in path:
        cmd = cmd.get_command(ctx, name)  # type: ignore[attr-defined]
    flags = {opt for p in cmd.params for opt in (*p.opts, *p.secondary_opts)}
    assert set(FLAGS_BEFORE_THE_PACKAGE[path].split()) <= flags
    assert ("--config" in flags) == (path[0] != "demo")
    res = runner.invoke(app, [*path, "--help"])
    assert res.exit_code == 0 and "Usage" in res.output


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["simulate", "netalloc", "--split", "nope"], "'--split': 'nope' is not one of 'train', 'test'"),
        (["simulate", "numa", "--mode", "sideways"], "'--mode'"),
        (["solve", "--workers", "two"], "'--workers'"),
    ],
)
def test_values_typer_rejects_are_one_sentence_too(args, needle):
    p = dcplace_cli(*args)
    assert p.returncode == 2 and needle in p.stderr and p.stdout == ""
    assert len(p.stderr.strip().splitlines()) == 1 and p.stderr.startswith("error: ")


def test_flag_wording_of_both_error_conventions():
    from dcplace.cli.options import flag_wording, sentence
    from dcplace.errors import InputError

    pms = InputError("must be at least 1, got 0", field="pms")
    assert flag_wording("--pms", pms) == "--pms must be at least 1, got 0"
    assert flag_wording("--packs", InputError("packs must be at most 5, got 9", field="hierarchical.packs")) == (
        "--packs must be at most 5, got 9"
    )
    assert flag_wording("--mode", InputError("training runs in non-expansion", field="mode")) == (
        "--mode: training runs in non-expansion"
    )
    flags = {"scenario.pms": "--pms", "episodes": "--episodes"}
    core = InputError("must be at least 1, got 0", field="pms")  # core code names its own field
    assert sentence(core, flags, set(), None) == "--pms must be at least 1, got 0"
    assert sentence(core, flags, {"pms"}, Path("r.toml")) == "r.toml, field 'pms': must be at least 1, got 0"
    filed = InputError("must be at least 1, got 0", field="scenario.pms")
    assert sentence(filed, flags, {"scenario.pms"}, Path("r.toml")).startswith("r.toml, field 'scenario.pms'")
    assert sentence(InputError("bad", path="t.csv", line=3), flags, set(), None) == "t.csv, line 3: bad"


def test_train_mode_choices_are_the_simulators():
    import typing

    from dcplace.cli.train import DqnTrainRun
    from dcplace.config import field_types
    from dcplace.sim.numa import Mode

    assert typing.get_args(field_types(DqnTrainRun)["mode"]) == typing.get_args(Mode)
