"""The worked example of docs/policies.md (a user's worst-fit) runs from Python, from the CLI by module:Class, and
as an entry point of an installed distribution; bad references are one sentence and exit 2."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from dcplace.cluster import NumaCluster
from dcplace.sim import NumaSim, Scenario
from dcplace.sim.episodes import prepare, run_episodes
from dcplace.sim.numa_kernel import DECIDE
from dcplace.workload import synthetic_trace
from dcplace.workload.traces import load_trace

EXAMPLES = Path(__file__).resolve().parents[2] / "docs" / "examples"
sys.path.insert(0, str(EXAMPLES))
from worst_fit import WorstFit  # noqa: E402

TRACE = prepare(synthetic_trace(5_000, seed=3), 32.0)


def _cli(*args: str, pythonpath: str = str(EXAMPLES)) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([pythonpath, os.environ.get("PYTHONPATH", "")])}
    return subprocess.run(
        [sys.executable, "-m", "dcplace.cli.main", *args], capture_output=True, text=True, env=env, timeout=300
    )


def test_worst_fit_from_python_decides_worst_fit_at_every_step():
    sim = NumaSim(NumaCluster.uniform(6), TRACE, Scenario(pms=6, warm_start=0.3, start_range=(0, 100)))
    pol = WorstFit()
    status = sim.reset(seed=1)
    steps = 0
    while status == DECIDE:
        view = sim.view()
        a = pol.choose(view)
        mask = view.feasible()
        left = np.repeat(view.free[:, :, 0].sum(axis=1), view.numa)
        assert mask[a] and left[a] == left[mask].max()  # the most CPU left, among feasible actions
        status = sim.step(a)
        sim.check_invariants()
        steps += 1
    assert steps > 10
    results, _, _ = run_episodes(pol, NumaCluster.uniform(20), TRACE, Scenario(pms=20), 2, seed=0, check=True)
    assert all(r.length > 0 for r in results)


def test_worst_fit_from_the_cli_by_module_and_class():
    p = _cli("simulate", "numa", "--trace", "synthetic", "--policy", "worst_fit:WorstFit", "--pms", "20",
             "--episodes", "2", "--json")  # fmt: skip
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    trace = prepare(load_trace("synthetic", seed=0), 32.0)
    results, _, _ = run_episodes(WorstFit(), NumaCluster.uniform(20), trace, Scenario(pms=20), 2, 0)
    assert out["length_mean"] == np.mean([r.length for r in results])


def test_an_entry_point_makes_it_a_name_for_every_command(tmp_path):
    pkg = tmp_path / "myplug"
    pkg.mkdir()
    (pkg / "__init__.py").write_text((EXAMPLES / "worst_fit.py").read_text())
    dist = tmp_path / "myplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: myplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        "[dcplace.policies]\nworst-fit = myplug:WorstFit\nbroken = myplug:Missing\nbest-fit = myplug:WorstFit\n"
    )
    listed = _cli("policies", pythonpath=str(tmp_path))
    assert listed.returncode == 0 and "worst-fit" in listed.stdout
    assert "plugin myplug:WorstFit" in listed.stdout
    # a plugin that fails to import, or is named like a built-in, is said (both were silent)
    assert "warning: plugin 'broken' (myplug:Missing) fails to import" in listed.stderr, listed.stderr
    assert "warning: plugin 'best-fit' (myplug:WorstFit) is shadowed by the built-in numa policy" in listed.stderr
    ran = _cli("simulate", "numa", "--policy", "worst-fit", "--pms", "20", "--episodes", "1", "--json",
               pythonpath=str(tmp_path))  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert json.loads(ran.stdout)["length_mean"] > 0


def test_bad_references_are_one_sentence_and_exit_2():
    for spec in ("no_such_module:X", "worst_fit:Nope", "worst_fit", "json:dumps"):
        p = _cli("simulate", "numa", "--policy", spec, "--episodes", "1")
        assert p.returncode == 2, (spec, p.stderr)
        assert "Traceback" not in p.stderr and p.stderr.count("\n") == 1 and "--policy" in p.stderr, p.stderr


def test_a_user_network_policy_object_runs_through_the_library_loop():
    from dcplace.bench.netalloc_runner import run_policy
    from dcplace.policies import NetPolicy, NetView

    class LowestFreeServer(NetPolicy):
        name = "lowest-index"

        def choose(self, view: NetView) -> int:
            return int(np.flatnonzero(view.action_mask())[0])

    run = run_policy("alpha", "uniform", LowestFreeServer(), n_requests=40, episodes=2, seed=0, check=True)
    assert run.policy == "lowest-index" and len(run.results) == 2
    assert 0 < run.summary()["acceptance_mean"] <= 1


def test_the_network_aware_example_runs_from_python_and_the_cli_alike():
    """docs/examples/rack_first.py, a user's NetPolicy through public names only: the same numbers from Python and
    by module:Class on the CLI, and it keeps requests in one rack as it says."""
    from rack_first import RackFirst

    from dcplace.bench.netalloc_runner import run_policy

    s = run_policy("alpha", "uniform", RackFirst(), episodes=2, seed=0).summary()
    r = _cli("simulate", "netalloc", "--policy", "rack_first:RackFirst", "--topology", "alpha", "--dataset",
             "uniform", "--episodes", "2", "--json")  # fmt: skip
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["acceptance_mean"] == s["acceptance_mean"] > 0.3
    assert s["locality"]["single server"] + s["locality"]["one rack"] > 0.9
    text = (EXAMPLES / "rack_first.py").read_text()
    assert "dcplace.policies" in text and "._" not in text.replace("__", "")  # no private names


def test_a_users_policy_joins_the_papers_tables_on_the_same_episodes(tmp_path):
    """`reproduce cvd-heuristics --also mod:Class` plays it in every cell beside the paper's heuristics, on the same
    episodes (a user's method could not be put in a paper's table); a wrong or duplicate --also is refused before
    any work."""
    out = tmp_path / "out"
    r = _cli("reproduce", "cvd-heuristics", "--trace", "synthetic", "--quick", "--also", "worst_fit:WorstFit",
             "--out", str(out))  # fmt: skip
    assert r.returncode == 0, r.stderr
    recs = [json.loads(line) for line in (out / "records.jsonl").read_text().splitlines()]
    mine = [x for x in recs if x["policy"] == "worst_fit:WorstFit"]
    best = [x for x in recs if x["policy"] == "best-fit"]
    assert len(mine) == len(best) > 0 and "ours worst_fit:WorstFit" in (out / "table.md").read_text()
    # the paper's columns are those of a run without it (the same episodes, wall time aside)
    plain = _cli("reproduce", "cvd-heuristics", "--trace", "synthetic", "--quick", "--out", str(tmp_path / "plain"))
    assert plain.returncode == 0, plain.stderr
    drop = lambda rows: [{k: v for k, v in x.items() if k != "wall_s"} for x in rows]  # noqa: E731
    before = [json.loads(line) for line in (tmp_path / "plain" / "records.jsonl").read_text().splitlines()]
    assert drop(before) == drop([x for x in recs if x["policy"] != "worst_fit:WorstFit"])
    for cmd, also, said in (
        ("cvd-heuristics", "best-fit", "--also: names 'best-fit', which the table already has"),
        ("cvd-heuristics", "nope:X", "--also: policy 'nope:X': cannot import module 'nope'"),
        ("nara-baselines", "worst_fit:WorstFit", "--also"),
    ):
        bad = _cli("reproduce", cmd, "--quick", "--also", also, "--out", str(tmp_path / "bad"))
        assert bad.returncode == 2 and said in bad.stderr and "Traceback" not in bad.stderr, bad.stderr
        assert not (tmp_path / "bad").exists()
