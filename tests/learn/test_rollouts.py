"""Rollouts played elsewhere give the same training run: inline == a local process pool == Ray (when installed), for
PPO (Nara) and Double DQN (CVD-RL, both TD rules), with the same transitions, losses and weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from dcplace.cluster.topology import fabric
from dcplace.errors import InputError
from dcplace.learn.cvd_model import CvdConfig
from dcplace.learn.cvd_rl import CvdRlTrainer
from dcplace.learn.dqn import ROLLOUT_TAG, TRAIN_SEED_BASE, DQNConfig
from dcplace.learn.hindsight_learning import HindsightTrainer
from dcplace.learn.ppo import PPOConfig, PPOTrainer
from dcplace.learn.rollouts import Recorder
from dcplace.learn.schedrl import SchedRlTrainer
from dcplace.parallel import Inline, executor
from dcplace.sim.episodes import prepare, start_seed
from dcplace.sim.numa import Scenario
from dcplace.workload.synthetic import synthetic_trace

TINY = fabric(4, 4, 2, 1, name="tiny")
PPO = PPOConfig(steps_per_iteration=200, minibatch=64, epochs=2, eval_every=2, eval_episodes=1)
TRACE = prepare(synthetic_trace(20_000, seed=0), 32.0)
DQN = DQNConfig(batch=32, buffer=3_000, updates_per_epoch=4, learning_starts=50, eval_every=2, eval_episodes=1,
                episodes_per_epoch=3)  # fmt: skip
SCENARIO = Scenario(pms=4, warm_start=0.5, release=False)


def _ppo(out: Path) -> PPOTrainer:
    return PPOTrainer(TINY, "uniform", 5, out, PPO)


def _cvd(out: Path, loss: str = "cluster") -> CvdRlTrainer:
    return CvdRlTrainer(TRACE, SCENARIO, 3, out, CvdConfig(), DQNConfig(**{**DQN.to_dict(), "loss": loss}),
                        "synthetic")  # fmt: skip


def _schedrl(out: Path) -> SchedRlTrainer:
    return SchedRlTrainer(TRACE, SCENARIO, 3, out, CvdConfig(kind="schedrl", filter_k=(), machines=4), DQN)


BUILDERS = {"ppo": _ppo, "cvd-cluster": _cvd, "cvd-machine": lambda o: _cvd(o, "machine"), "schedrl": _schedrl}


def _run(build, out: Path, workers: int, ray_address: str = "", steps: int = 3):
    tr = build(out)
    with executor(workers, ray_address) as ex:
        tr.use_executor(ex)
        tr.train(steps)
    state = {k: v.clone() for k, v in tr.net.state_dict().items()}
    rows = [{k: v for k, v in r.items() if k != "wall_s"} for r in tr.curves]
    buffer = {k: v[: tr.buffer.size].copy() for k, v in tr.buffer.arrays.items()} if hasattr(tr, "buffer") else {}
    return state, rows, buffer, tr.episodes


def _same(a, b) -> None:
    sa, ra, ba, ea = a
    sb, rb, bb, eb = b
    assert ea == eb
    assert repr(ra) == repr(rb)  # losses, lengths / acceptance, counters: every curve value equal (nan too)
    assert sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)
    assert ba.keys() == bb.keys() and all(np.array_equal(ba[k], bb[k]) for k in ba)


@pytest.mark.parametrize("what", list(BUILDERS))
def test_a_process_pool_collects_the_same_run_as_one_process(tmp_path, what):
    inline = _run(BUILDERS[what], tmp_path / "inline", 1)
    pool = _run(BUILDERS[what], tmp_path / "pool", 2)
    _same(inline, pool)


def test_ray_collects_the_same_run_as_one_process(tmp_path):
    pytest.importorskip("ray")
    for what in ("ppo", "cvd-machine"):
        one = _run(BUILDERS[what], tmp_path / f"{what}-1", 1)
        _same(one, _run(BUILDERS[what], tmp_path / f"{what}-ray", 2, "local"))


def test_ppo_batch_does_not_depend_on_the_worker_count_and_surplus_episodes_are_drawn_again(tmp_path):
    """Three workers play waves of three; the episodes beyond the batch are not counted, so the next iteration
    starts from the first one not used."""
    a, b = _ppo(tmp_path / "a"), _ppo(tmp_path / "b")
    with executor(3) as ex:
        b.use_executor(ex)
        a.train(2)
        b.train(2)
    assert a.episodes == b.episodes
    assert [r["steps"] for r in a.curves] == [r["steps"] for r in b.curves]


def test_resume_after_parallel_collection_continues_exactly(tmp_path):
    whole = _run(_cvd, tmp_path / "whole", 1, steps=4)
    tr = _cvd(tmp_path / "part")
    tr.keep_replay = True
    with executor(2) as ex:
        tr.use_executor(ex)
        tr.train(2)
    again = CvdRlTrainer.resume(TRACE, SCENARIO, 3, tmp_path / "part", "synthetic")
    again.train(4)
    assert again.episodes == whole[3]
    assert all(torch.equal(v, whole[0][k]) for k, v in again.net.state_dict().items())


def test_recorded_episode_fills_the_buffer_as_direct_adds_would(tmp_path):
    recorded_run, direct_run = _cvd(tmp_path / "a", "machine"), _cvd(tmp_path / "b", "machine")
    recorded, length = recorded_run.play(4)
    assert isinstance(recorded, Recorder) and len(recorded.rows) > length > 0
    recorded.into(recorded_run.buffer)
    rng = np.random.default_rng([ROLLOUT_TAG, 3, 4])
    assert direct_run.run_episode(rng, start_seed(TRAIN_SEED_BASE + 3, 4)) == length
    assert recorded_run.buffer.size == direct_run.buffer.size == len(recorded.rows)
    for k, v in direct_run.buffer.arrays.items():
        assert np.array_equal(recorded_run.buffer.arrays[k], v), k


def test_hindsight_learning_refuses_workers(tmp_path):
    tr = HindsightTrainer(TRACE, SCENARIO, 0, tmp_path, CvdConfig(), DQN)
    tr.use_executor(Inline())
    with executor(2) as ex, pytest.raises(InputError, match="one process"):
        tr.use_executor(ex)
