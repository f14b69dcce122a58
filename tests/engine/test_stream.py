"""Streams that go on past the first rejection; learned policies act through the engine."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from dcplace.cli.main import app
from dcplace.cluster.numa import NumaCluster
from dcplace.engine import PlacementEngine, VmRequest
from dcplace.engine.stream import engine_for, run_stream
from dcplace.policies import get_policy
from dcplace.sim.episodes import prepare
from dcplace.sim.numa import NumaSim, Scenario
from dcplace.workload.synthetic import synthetic_trace


def test_stream_counts_rejections_and_goes_on() -> None:
    trace = prepare(synthetic_trace(n=3000, seed=2), 32.0)
    res = run_stream(engine_for(NumaCluster.uniform(8), "best-fit"), trace, samples=20)
    assert res.requests == 3000 and 0 < res.rejected < res.requests
    assert sum(res.rejections.values()) == res.rejected and res.accepted + res.rejected == res.requests
    # the paper's length is where the simulator's Non-Expansion episode ends
    sim = NumaSim(NumaCluster.uniform(8), trace, Scenario(pms=8, warm_start=0.0, start_range=(0, 1)))
    sim.reset(seed=0)
    get_policy("best-fit").run(sim)  # type: ignore[attr-defined]
    assert res.first_rejection == sim.result().length
    assert [s.requests for s in res.samples] == sorted(s.requests for s in res.samples)
    assert all(0 <= s.cpu_alloc <= 1 and s.machines_in_use <= 8 for s in res.samples)


def test_simulate_numa_stream_mode_prints_one_json_object() -> None:
    out = CliRunner().invoke(app, ["simulate", "stream", "--pms", "6", "--max-requests", "800",
                                   "--json"])  # fmt: skip
    assert out.exit_code == 0, out.output
    rec = json.loads(out.output)
    assert rec["requests"] == 800 and rec["accepted"] + rec["rejected"] == 800 and len(rec["timeline"]) > 10


@pytest.mark.parametrize("policy", ["cvd-rl-machine"])
def test_learned_policy_decides_and_explains_through_the_engine(policy: str) -> None:
    e = PlacementEngine(2, policy)
    for i in range(6):
        e.add_machine(f"pm{i}", 40, 90)
    got = [e.place(VmRequest(f"v{i}", float(1 + i % 8), float(2 + i % 16), i % 7 == 0)) for i in range(40)]
    assert all(d.accepted for d in got)
    x = got[1].explanation
    assert x is not None and x.policy == policy and x.chosen is not None and x.candidates
    e.fail("pm0")
    e.check_invariants()
