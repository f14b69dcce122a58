"""The Gymnasium adapter: the checker passes for every mode, masks mean what the docstring says."""

from __future__ import annotations

import dataclasses
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
    assert info["result"]["length"] == total > 0
    assert info["result"]["final_pms"] == 40 and not info["invalid_action"]


def test_rounding_below_zero_stays_inside_the_observation_space():
    """A numerical review: VMs of a third of a core, released, then a VM filling the node, leave free capacity at
    -7.1e-15 (the fit tolerance admits it), and the observation left its own ``Box(low=0)``."""
    env = gym.make("dcplace/NumaVM-v0", pms=4)
    obs, _ = env.reset(seed=0)
    sim = env.unwrapped.sim
    sim.free[0, 0, 0] = -7.1e-15  # what the running sum leaves
    obs = env.unwrapped._obs()
    assert env.observation_space.contains(obs) and obs["machines"][0, 0, 0] == 0.0


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


# --- An RL researcher's walkthrough (stop 36): Gymnasium's own wrappers, settings checked at make, reset options ---


def test_gymnasiums_episode_statistics_wrappers_work_on_both_envs():
    """NumaVM put its result under info["episode"], the key RecordEpisodeStatistics reserves: both wrappers failed."""
    for env_id, kwargs in (("dcplace/NumaVM-v0", dict(pms=5, release=False)), ("dcplace/NetAlloc-v0", {})):
        env = gym.wrappers.RecordEpisodeStatistics(gym.make(env_id, **kwargs))
        _obs, info = env.reset(seed=0)
        done, steps = False, 0
        while not done:
            mask = env.unwrapped.action_masks()
            _obs, _r, term, trunc, info = env.step(int(np.flatnonzero(mask)[0]))
            done, steps = term or trunc, steps + 1
        assert info["episode"]["l"] == steps
    vec = gym.wrappers.vector.RecordEpisodeStatistics(gym.make_vec("dcplace/NumaVM-v0", num_envs=2, pms=5,
                                                                     release=False))  # fmt: skip
    vec.reset(seed=0)
    ends = 0
    for _ in range(400):
        masks = np.stack(vec.unwrapped.call("action_masks"))
        _obs, _r, term, trunc, _info = vec.step(np.array([int(np.flatnonzero(m)[0]) if m.any() else 0 for m in masks]))
        ends += int((term | trunc).sum())
    assert ends > 0


@pytest.mark.parametrize(
    "env_id, kwargs, field",
    [
        ("dcplace/NetAlloc-v0", dict(requests=-1), "requests"),
        ("dcplace/NetAlloc-v0", dict(requests="32"), "requests"),
        ("dcplace/NetAlloc-v0", dict(requests=0), "requests"),
        ("dcplace/NetAlloc-v0", dict(split="val"), "split"),
        ("dcplace/NetAlloc-v0", dict(k=0), "'k'"),
        ("dcplace/NetAlloc-v0", dict(rewards="x"), "rewards"),
        ("dcplace/NetAlloc-v0", dict(topology=123), "topology"),
        ("dcplace/NetAlloc-v0", dict(dataset="nope"), "dataset"),
        ("dcplace/NetAlloc-v0", dict(render_mode="human"), "render_mode"),
        ("dcplace/NumaVM-v0", dict(numa=2.5), "numa"),
        ("dcplace/NumaVM-v0", dict(node_mem="90"), "node_mem"),
        ("dcplace/NumaVM-v0", dict(node_cpu=0), "node_cpu"),
        ("dcplace/NumaVM-v0", dict(node_cpu=-1), "node_cpu"),
        ("dcplace/NumaVM-v0", dict(double_threshold="x"), "double_threshold"),
        ("dcplace/NumaVM-v0", dict(render_mode="human"), "render_mode"),
    ],
)
@pytest.mark.filterwarnings("ignore:.*render_mode")  # Gymnasium's own warning, before our error
def test_bad_settings_are_one_sentence_naming_the_setting_at_make(env_id, kwargs, field):
    """They were numpy errors, TypeErrors, errors blaming another field, or (k=0) accepted with other dynamics."""
    from dcplace.errors import InputError

    with pytest.raises(InputError, match=field):
        gym.make(env_id, **kwargs)


def test_a_request_file_is_replayed_by_netalloc(tmp_path):
    from dcplace.errors import InputError

    path = tmp_path / "r.csv"
    path.write_text("cpu,mem,bw,hold\n1,1,0.1,2\n2,2,0.1,1\n3,1,0.2,1\n")
    env = gym.make("dcplace/NetAlloc-v0", dataset=str(path)).unwrapped
    env.reset(seed=0)
    assert env.n_requests == 3 and list(env.sim.requests.cpu) == [1, 2, 3]
    with pytest.raises(InputError, match="replayed as it is"):
        gym.make("dcplace/NetAlloc-v0", dataset=str(path), requests=5)


def test_numa_step_before_reset_and_bad_reset_options_are_refused():
    from dcplace.errors import InputError

    env = gym.make("dcplace/NumaVM-v0", pms=5).unwrapped
    with pytest.raises(RuntimeError, match="reset"):
        env.step(0)
    events = len(env.sim.trace.ev_req)
    for start in (events, -1, 2.5, True):
        with pytest.raises(InputError, match="start_event"):
            env.reset(seed=0, options={"start_event": start})
    with pytest.raises(InputError, match="options"):
        env.reset(seed=0, options={"start": 3})
    with pytest.raises(InputError, match="options"):
        gym.make("dcplace/NetAlloc-v0").reset(seed=0, options={"x": 1})


def test_reset_with_an_episode_replays_the_clis_episodes():
    """The CLI's episodes are reproducible in the environment: reset(seed=s, options={"episode": i})."""
    from dcplace.cluster.numa import NumaCluster
    from dcplace.errors import InputError
    from dcplace.policies import get_policy
    from dcplace.sim.episodes import prepare, run_episodes
    from dcplace.sim.numa import Scenario
    from dcplace.workload.traces import load_trace

    sc = Scenario(pms=5, warm_start=0.3)
    trace = prepare(load_trace("synthetic"), 32.0)
    results, _, _ = run_episodes(get_policy("first-fit"), NumaCluster.uniform(5), trace, sc, 3, 7)
    env = gym.make("dcplace/NumaVM-v0", pms=5, warm_start=0.3).unwrapped
    for episode, want in enumerate(results):
        _obs, info = env.reset(seed=7, options={"episode": episode})
        done = False
        while not done:  # first-fit: the first feasible action
            _obs, _r, term, trunc, info = env.step(int(np.flatnonzero(env.action_masks())[0]))
            done = term or trunc
        assert info["result"] == dataclasses.asdict(want), episode
    assert len({r.start_request for r in results}) == 3  # three different episodes
    with pytest.raises(InputError, match="needs reset"):
        env.reset(options={"episode": 0})


@pytest.mark.filterwarnings("ignore:.*render_mode")
@pytest.mark.parametrize("env_id", ["dcplace/NetAlloc-v0", "dcplace/NumaVM-v0"])
def test_tools_that_ask_for_a_render_mode_first_can_retry_without_one(env_id):
    """Stable-Baselines3's make_vec_env asks for render_mode="rgb_array" and retries without one on a TypeError
    only: it failed on both environments. The refusal is a TypeError too, and render() is None (it raised)."""
    try:
        gym.make(env_id, render_mode="rgb_array")
    except TypeError:  # what such a tool catches
        env = gym.make(env_id)
    else:
        raise AssertionError("an unknown render mode was accepted")
    env.reset(seed=0)
    assert env.render() is None
    env.close()
