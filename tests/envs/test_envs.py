"""The Gymnasium adapter: the checker passes for every mode, masks mean what the docstring says."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import dcplace.envs  # noqa: F401  (registers the environments)


@pytest.mark.parametrize(
    "kwargs",
    [dict(pms=5), dict(pms=10, mode="expansion", max_pms=20, release=False), dict(pms=8, warm_start=0.5)],
)
def test_check_env(kwargs):
    env = gym.make("dcplace/NumaVM-v0", **kwargs)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(env.unwrapped, skip_render_check=True)


def test_masked_episode_returns_scheduled_length():
    env = gym.make("dcplace/NumaVM-v0", pms=20, mode="expansion", max_pms=40, release=False)
    obs, info = env.reset(seed=3)
    total, done = 0.0, False
    while not done:
        mask = env.unwrapped.action_masks()
        assert np.array_equal(mask, info["action_mask"]) and np.array_equal(mask, obs["action_mask"].astype(bool))
        assert mask.any()
        obs, reward, term, trunc, info = env.step(int(np.flatnonzero(mask)[-1]))
        total += reward
        done = term or trunc
    assert info["episode"]["length"] == total > 0
    assert info["episode"]["final_pms"] == 40 and not info["invalid_action"]


def test_double_numa_both_actions_of_a_machine_mean_the_machine():
    env = gym.make("dcplace/NumaVM-v0", pms=4, double_threshold=4.0, release=False)
    _obs, info = env.reset(seed=0)
    sim = env.unwrapped.sim
    # find a double-NUMA request by stepping with first-fit
    while not sim.trace.multi[sim.request]:
        _, _, term, trunc, info = env.step(int(np.flatnonzero(info["action_mask"])[0]))
        assert not (term or trunc)
    mask = info["action_mask"].reshape(4, 2)
    assert np.array_equal(mask[:, 0], mask[:, 1])
    m = int(np.flatnonzero(mask[:, 1])[0])
    before = sim.free[m].copy()
    r = sim.request
    env.step(2 * m + 1)
    assert sim.pm_of[r] == m and sim.node_of[r] == -1
    assert np.array_equal(before - sim.free[m], np.tile(sim.trace.demand[r] / 2, (2, 1)))  # half on each node


def test_invalid_action_terminates_with_info():
    env = gym.make("dcplace/NumaVM-v0", pms=3)
    _, info = env.reset(seed=0)
    bad = np.flatnonzero(~info["action_mask"])
    if len(bad) == 0:  # make one machine full so an action is invalid
        env.unwrapped.sim.free[0] = 0.0
        bad = np.array([0])
    _, reward, term, _, info = env.step(int(bad[0]))
    assert term and reward == 0.0 and info["invalid_action"]
