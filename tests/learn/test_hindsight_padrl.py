"""Hindsight Learning and PADRL (issue 15): the demand forecast's incremental numpy LSTM equals torch's, its targets,
tiny training runs whose examples and checkpoints are consistent (labels among the candidates, the frozen forecast
saved unchanged), and the command-line entries with the registered policies."""

from __future__ import annotations

import json
from dataclasses import replace

import numpy as np
import pytest
import torch
from typer.testing import CliRunner

from dcplace.cli.main import app
from dcplace.cluster.numa import NumaCluster
from dcplace.errors import InputError
from dcplace.learn import forecast as FC
from dcplace.learn.config import HINDSIGHT_DQN, DQNConfig, HindsightConfig
from dcplace.learn.cvd_model import CvdConfig
from dcplace.learn.dqn import load
from dcplace.learn.hindsight_learning import HindsightTrainer
from dcplace.learn.padrl import PadrlTrainer
from dcplace.policies import get_policy
from dcplace.sim.episodes import prepare, run_episodes
from dcplace.sim.numa import Scenario
from dcplace.workload.synthetic import synthetic_trace

torch.set_num_threads(1)
TRACE = prepare(synthetic_trace(20_000, seed=0), 32.0)
SCENARIO = Scenario(pms=4, warm_start=0.5, release=True)


def test_incremental_forecast_equals_the_torch_lstm_and_restarts_per_episode():
    torch.manual_seed(0)
    model = FC.DemandLSTM(8).eval()
    x = np.random.default_rng(0).random((12, FC.F_IN))
    with torch.no_grad():
        want = model(torch.from_numpy(x).float()[None])[0].numpy()
    state = FC.ForecastState(model)
    got = np.array([state.see(100 + t, x[t]).copy() for t in range(12)])
    np.testing.assert_allclose(got, want, atol=1e-5)
    np.testing.assert_allclose(state.see(111, x[11]), want[11], atol=1e-5)  # the same request: no new step
    np.testing.assert_allclose(state.see(5, x[0]), want[0], atol=1e-5)  # a lower index: a new episode
    np.testing.assert_allclose(state.see(5 + FC.EPISODE_GAP + 1, x[0]), want[0], atol=1e-5)  # a jump: new episode


def test_forecast_targets_are_the_next_horizon_means():
    x = np.array([[0.1, 0.1, 0.0], [0.5, 0.2, 1.0], [0.2, 0.4, 0.0], [0.8, 0.1, 1.0]])
    y = FC.targets(x, horizon=2)
    np.testing.assert_allclose(y[0], [0.35, 0.3, 0.5, 0.5])  # requests 1 and 2; request 1 is large (0.5 >= 0.4)
    np.testing.assert_allclose(y[2], [0.8, 0.1, 1.0, 1.0])  # only request 3 is left
    np.testing.assert_allclose(y[3], y[2])


def test_hindsight_training_records_consistent_labels_and_acts(tmp_path):
    hs = HindsightConfig(window=15, extra=3, repairs=2, solve_s=5.0)
    dqn = replace(HINDSIGHT_DQN, batch=16, learning_starts=8, updates_per_epoch=4, eval_every=1, eval_episodes=1)
    tr = HindsightTrainer(TRACE, SCENARIO, 0, tmp_path, CvdConfig(), dqn, "synthetic", hs)
    tr.train(3)
    n, label = tr.buffer.arrays["n"][: tr.buffer.size], tr.buffer.arrays["label"][: tr.buffer.size]
    assert tr.labels == tr.buffer.size and tr.repaired <= tr.windows
    assert np.all((0 <= label) & (label < n)) and np.all(n <= tr.cfg.candidate_cap + 1)
    if tr.buffer.size:
        loss = tr.td_loss(tr.buffer.sample(np.arange(tr.buffer.size)))
        assert torch.isfinite(loss)
    net, meta = load(tmp_path / "policy.pt")
    assert meta["hindsight"]["window"] == 15 and meta["dqn"]["loss"] == "imitation" and net.cfg.machine_td
    pol = get_policy("hindsight", checkpoint=str(tmp_path / "policy.pt"))
    res, _, _ = run_episodes(pol, tr.cluster, TRACE, SCENARIO, 2, 0)
    assert all(r.length > 0 for r in res)


def test_padrl_keeps_its_trained_forecast_frozen_and_acts(tmp_path):
    dqn = DQNConfig(loss="machine", batch=64, buffer=5_000, updates_per_epoch=8, learning_starts=100, eval_every=1,
                    eval_episodes=1, episodes_per_epoch=2, zero_init=True)  # fmt: skip
    tr = PadrlTrainer(TRACE, SCENARIO, 0, tmp_path, CvdConfig(), dqn, "synthetic", horizon=16, forecast_steps=5)
    trained = {k: v.clone() for k, v in tr.net.forecast.state_dict().items()}
    tr.train(2)
    assert tr.cfg.forecast_hidden == 32 and tr.cfg.row_width == 5 + FC.F_OUT
    assert {"mse", "mse_naive"} <= set(tr.meta()["forecast"])
    net, _ = load(tmp_path / "checkpoint.pt")
    for k, v in net.forecast.state_dict().items():
        assert torch.equal(v, trained[k]), k  # the DQN updates never touch the forecast
    pol = get_policy("padrl", checkpoint=str(tmp_path / "policy.pt"))
    res, _, _ = run_episodes(pol, tr.cluster, TRACE, SCENARIO, 2, 0)
    assert all(r.length > 0 for r in res)
    with pytest.raises(InputError, match="forecast"):
        get_policy("padrl", checkpoint=str(_plain_checkpoint(tmp_path)))
    with pytest.raises(InputError, match="no shipped hindsight checkpoint"):
        get_policy("hindsight")


def _plain_checkpoint(tmp_path):
    from dcplace.learn.cvd_rl import CvdRlTrainer

    dqn = DQNConfig(batch=64, buffer=5_000, updates_per_epoch=1, learning_starts=100, eval_every=1, eval_episodes=1,
                    episodes_per_epoch=1)  # fmt: skip
    CvdRlTrainer(TRACE, SCENARIO, 0, tmp_path / "plain", CvdConfig(), dqn).train(1)
    return tmp_path / "plain" / "policy.pt"


@pytest.mark.parametrize("command", ["hindsight", "padrl"])
def test_cli_train_entries(tmp_path, command):
    runner = CliRunner()
    out = tmp_path / command
    args = ["train", command, "--regime", "today", "--trace", "synthetic", "--pms", "4", "--epochs", "1",
            "--out", str(out)]  # fmt: skip
    if command == "hindsight":
        args += ["--window", "10", "--solve-s", "2"]
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    assert json.loads((out / "train.json").read_text())["epochs"] == 1
    policy = ["--policy", command, "--checkpoint", str(out / "policy.pt")]
    res = runner.invoke(app, ["simulate", "numa", "--trace", "synthetic", "--pms", "8", "--no-release", *policy,
                              "--episodes", "1", "--json"])  # fmt: skip
    assert res.exit_code == 0 and json.loads(res.output)["policy"] == command, res.output
    res = runner.invoke(app, ["train", command, "--regime", "nowhere", "--out", str(tmp_path / "x")])
    assert res.exit_code == 2 and "regime" in res.output


def test_cli_name_lists_match_the_library():
    from dcplace.bench.cvd_regime import REGIMES
    from dcplace.cli.train import REGIME_NAMES, REWARD_NAMES
    from dcplace.learn.rewards import REWARDS

    assert set(REGIME_NAMES) == set(REGIMES) and set(REWARD_NAMES) == set(REWARDS)


def test_delta_cpu_reward_weighs_probe_types_by_cores():
    from dcplace.learn.dqn import probe_types
    from dcplace.learn.rewards import DeltaReward, numa_reward
    from dcplace.sim.numa import NumaSim

    probes = probe_types(TRACE)
    reward = numa_reward("delta-cpu", probes)
    assert isinstance(reward, DeltaReward) and reward.name == "delta-cpu"
    _, _, weight = reward.probes
    np.testing.assert_allclose(weight, probes[2] * probes[0][:, 0] / (probes[2] * probes[0][:, 0]).sum())
    sim = NumaSim(NumaCluster.uniform(4), TRACE, Scenario(pms=4, warm_start=0.0, release=False))
    sim.reset(seed=0)
    assert reward(sim, 0) == pytest.approx(1.0)  # an empty machine: the request consumes exactly its own room


def test_neither_new_trainer_offers_a_resume(tmp_path):
    with pytest.raises(InputError, match="cannot be resumed"):
        HindsightTrainer.resume(TRACE, SCENARIO, 0, tmp_path, "synthetic")
    with pytest.raises(InputError, match="cannot be resumed"):
        PadrlTrainer.resume(TRACE, SCENARIO, 0, tmp_path, "synthetic")


def test_a_used_folder_offers_resume_only_where_there_is_one(tmp_path):
    """padrl and hindsight pointed to a --resume they do not have."""
    from dcplace.cli.train import _fresh_folder

    (tmp_path / "checkpoint.pt").write_bytes(b"")
    with pytest.raises(InputError) as no_resume:
        _fresh_folder(tmp_path, resumable=False)
    assert str(no_resume.value).endswith("already holds a run; choose another --out")
    with pytest.raises(InputError, match="pass --resume to continue it"):
        _fresh_folder(tmp_path)


def test_a_resumed_run_says_where_it_stands_and_where_it_goes(tmp_path):
    """`train nara --resume` without --iterations ran on to the default 150 without a word."""
    from typer.testing import CliRunner

    from dcplace.cli.main import app

    out = tmp_path / "nr"
    first = CliRunner().invoke(app, ["train", "nara", "--iterations", "1", "--steps", "64", "--out", str(out)])
    assert first.exit_code == 0, first.output
    again = CliRunner().invoke(app, ["train", "nara", "--out", str(out), "--resume", "--iterations", "2"])
    assert again.exit_code == 0, again.output
    assert f"resuming {out} at iteration 1; training on to iteration 2 (--iterations)" in again.stderr
    done = CliRunner().invoke(app, ["train", "nara", "--out", str(out), "--resume", "--iterations", "1"])
    assert "at iteration 2; training nothing (--iterations 1: 2 done already)" in done.stderr
