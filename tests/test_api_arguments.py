"""Wrong arguments to the public Python API are one InputError naming the argument (a Python user's walkthrough,
stop 36: each of these was a raw numpy/AttributeError/TypeError from deep inside, or a misleading sentence)."""

from __future__ import annotations

import pytest

from dcplace.bench.netalloc_runner import run_policy
from dcplace.cluster import NumaCluster
from dcplace.engine import PlacementEngine, VmRequest
from dcplace.errors import InputError
from dcplace.placement import load_problem, solve
from dcplace.policies import get_policy
from dcplace.sim import Scenario
from dcplace.sim.episodes import prepare, run_episodes
from dcplace.workload import synthetic_trace


def _episodes(seed: object = 0, trace: object = None) -> object:
    trace = prepare(synthetic_trace(300), 32.0) if trace is None else trace
    return run_episodes(get_policy("best-fit"), NumaCluster.uniform(5), trace, Scenario(pms=5), 1, seed)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    "call, field",
    [
        (lambda: _episodes(seed=-1), "seed"),
        (lambda: _episodes(seed=1.5), "seed"),
        (lambda: _episodes(trace=synthetic_trace(300)), "trace"),  # a RequestTable, not prepared
        (lambda: run_policy("alpha", "uniform", "tetris", 8, 1, seed=-1), "seed"),
        (lambda: run_policy("alpha", "azure", "tetris", 8, 1, split="dev"), "split"),
        (lambda: run_policy("alpha", "uniform", get_policy("best-fit"), 8, 1), "policy"),
        (lambda: solve(load_problem("exp1"), "greedy", "10"), "stop"),  # type: ignore[arg-type]
        (lambda: solve("exp1"), "problem"),  # type: ignore[arg-type]
        (lambda: synthetic_trace(-3), "'n'"),
        (lambda: PlacementEngine(2).reoptimise("best-fit"), "policy"),  # type: ignore[arg-type]
        (lambda: PlacementEngine(2).place(VmRequest("v", 1.0, 1.0), policy=3), "policy"),  # type: ignore[arg-type]
    ],
)
def test_a_wrong_argument_is_one_sentence_naming_it(call, field):
    with pytest.raises(InputError, match=field):
        call()


def test_the_engine_takes_a_policy_object():
    """engine.place(req, policy=<a policy object>) said "could not be built without arguments"."""
    e = PlacementEngine(2)
    e.add_machine("pm0", 16, 32)
    d = e.place(VmRequest("v", 1.0, 1.0), policy=get_policy("first-fit"))
    assert d.accepted and d.machine == "pm0"
