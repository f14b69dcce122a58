"""A user's policy that misbehaves is named as the culprit, in one sentence, wherever it runs: in the simulators, in
the live engine and behind the service, an exception from it or a value that is not an action is a PolicyError
(exit 2, HTTP 422), and a whole-number action outside the cluster is an infeasible action (the episode's status
``invalid``, said on stderr; the engine's rejection with code ``invalid``), never a dcplace traceback or a 500.
(Found by a researcher's walkthrough, 2026-11-27: the engine raised IndexError in its explanation, the service
answered 500, and 1.5 was truncated to action 1.)"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from fastapi.testclient import TestClient

from dcplace.engine import PlacementEngine, Rejection, VmRequest
from dcplace.errors import InputError, PolicyError
from dcplace.policies import NetPolicy, NumaPolicy, ScoredNumaPolicy
from dcplace.service import create_app


class Outside(NumaPolicy):
    def choose(self, view):
        return 10**9


class Fractional(NumaPolicy):
    def choose(self, view):
        return 1.5


class Raises(NumaPolicy):
    def choose(self, view):
        raise RuntimeError("my policy bug")


class WrongShape(ScoredNumaPolicy):
    def score(self, view):
        return np.zeros(3)


class RanksOutside(ScoredNumaPolicy):
    """Chooses well (first feasible) but ranks a candidate that is no action here."""

    def score(self, view):
        return -np.arange(view.free.shape[0] * view.free.shape[1], dtype=float)

    def rank(self, view, n):
        return [(10**6, (1.0,)), *super().rank(view, n)]


class NaNScores(ScoredNumaPolicy):
    def score(self, view):
        return np.full(view.free.shape[0] * view.free.shape[1], np.nan)


class AvoidsUsedMachines(ScoredNumaPolicy):
    """-inf on every node of a machine that holds a VM: where all feasible scores are -inf, the choice must still be
    feasible (np.argmax over the masked scores returned action 0, an infeasible one)."""

    def score(self, view):
        return np.repeat(np.where(view.vm_count > 0, -np.inf, 0.0), view.free.shape[1])


def _engine(policy) -> PlacementEngine:
    e = PlacementEngine(2, policy)
    for k in range(3):
        e.add_machine(f"m{k}", cpu=16, mem=64)
    return e


def test_an_action_outside_the_cluster_is_an_explained_rejection():
    e = _engine(Outside())
    d = e.place(VmRequest("a", 1, 1))
    assert isinstance(d, Rejection) and d.code == "invalid"
    assert "chose an action that cannot host the VM" in d.reason
    assert e.explain(VmRequest("b", 1, 1)).chosen is None
    e.check_invariants()
    assert e.stats()["vms"] == 0


@pytest.mark.parametrize(
    ("policy", "said"),
    [
        (Fractional(), f"the policy {__name__}:Fractional returned 1.5 (float), not an action"),
        (Raises(), f"the policy {__name__}:Raises raised RuntimeError: my policy bug"),
        (WrongShape(), f"the policy {__name__}:WrongShape raised ValueError: WrongShape.score returned shape (3,)"),
        (NaNScores(), f"the policy {__name__}:NaNScores raised ValueError: NaNScores.score returned NaN for feasible"),
    ],
)
def test_a_policy_that_fails_is_named_in_one_sentence(policy, said):
    e = _engine(policy)
    for call in (lambda: e.place(VmRequest("a", 1, 1)), lambda: e.explain(VmRequest("a", 1, 1))):
        with pytest.raises(PolicyError) as err:
            call()
        assert said in str(err.value) and isinstance(err.value, InputError)
    assert e.stats()["vms"] == 0 and e.counters["placed"] == e.counters["rejected"] == 0
    e.check_invariants()


def test_all_feasible_scores_minus_inf_still_choose_a_feasible_action():
    e = PlacementEngine(2, AvoidsUsedMachines())
    for k in range(2):
        e.add_machine(f"m{k}", cpu=8, mem=64)
    placed = [e.place(VmRequest(f"v{i}", 4, 4)) for i in range(4)]
    assert not any(isinstance(d, Rejection) for d in placed), placed
    assert e.stats()["vms"] == 4
    e.check_invariants()


def test_ranked_candidates_that_are_not_actions_are_left_out_of_explanations():
    e = _engine(RanksOutside())
    d = e.place(VmRequest("a", 1, 1))
    assert d.machine == "m0" and d.explanation.candidates[0].machine == "m0"
    assert e.assess(VmRequest("b", 1, 1))[1][0][0] == "m0"


@pytest.mark.parametrize(("policy", "status"), [(Outside(), 409), (Raises(), 422), (Fractional(), 422)])
def test_the_service_answers_a_misbehaving_policy_with_one_sentence(policy, status):
    e = _engine(policy)
    with TestClient(create_app(e), raise_server_exceptions=False) as c:
        r = c.post("/vms", json={"id": "a", "cpu": 1, "mem": 1})
        assert r.status_code == status and r.json()["detail"].startswith("the policy"), r.text
        assert c.get("/vms").json() == []
    e.close()


def test_the_extenders_prioritize_says_the_policy_failed():
    """It answered 200 with every score 0, so a broken policy looked like no preference."""
    e = _engine(Raises())
    pod = {"metadata": {"name": "p", "namespace": "d", "uid": "u"},
           "spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}  # fmt: skip
    with TestClient(create_app(e), raise_server_exceptions=False) as c:
        r = c.post("/extender/prioritize", json={"Pod": pod, "NodeNames": ["m0", "m1"]})
        assert r.status_code == 422 and "raised RuntimeError: my policy bug" in r.json()["detail"], r.text
    e.close()


POLICIES = """
    from dcplace.policies import NetPolicy, NumaPolicy

    class Outside(NumaPolicy):
        def choose(self, view):
            return 10**9

    class Raises(NumaPolicy):
        def choose(self, view):
            raise RuntimeError("my policy bug")

    class NetOutside(NetPolicy):
        def choose(self, view):
            return -5

    class NetRaises(NetPolicy):
        def choose(self, view):
            raise KeyError("oops")

    class SaysSeed(NumaPolicy):
        def __init__(self, seed=0):
            self.seed = seed

        def choose(self, view):
            raise RuntimeError(f"built with seed {self.seed}")

    class Exits(NumaPolicy):
        def choose(self, view):
            import sys
            sys.exit(3)

    class FailsToBuild(NumaPolicy):
        def __init__(self):
            raise ValueError("no config file")

        def choose(self, view):
            return 0
"""


@pytest.mark.parametrize(
    ("args", "code", "said"),
    [
        (["numa", "--policy", "userpol:Raises", "--pms", "5"], 2,
         "error: the policy userpol:Raises raised RuntimeError: my policy bug"),
        (["netalloc", "--policy", "userpol:NetRaises"], 2,
         "error: the policy userpol:NetRaises raised KeyError: 'oops'"),
        (["numa", "--policy", "userpol:Outside", "--pms", "5"], 0,
         "warning: 2 of 2 episodes ended on an infeasible action of the policy userpol:Outside"),
        (["netalloc", "--policy", "userpol:NetOutside"], 0,
         "warning: the policy userpol:NetOutside picked outside its view's mask (-1 included) 256 times"),
        # with --json too (the warning was said only beside the table)
        (["numa", "--policy", "userpol:Outside", "--pms", "5", "--json"], 0,
         "warning: 2 of 2 episodes ended on an infeasible action of the policy userpol:Outside"),
        (["netalloc", "--policy", "userpol:NetOutside", "--json"], 0,
         "warning: the policy userpol:NetOutside picked outside its view's mask (-1 included) 256 times"),
        # a user's policy taking `seed` gets the run's (it was built with 0 whatever --seed said)
        (["numa", "--policy", "userpol:SaysSeed", "--pms", "5", "--seed", "5"], 2,
         "error: the policy userpol:SaysSeed raised RuntimeError: built with seed 5"),
        # sys.exit in a policy ended the run silently with its code; a constructor's exception was a traceback;
        # a built-in function as the factory (os:abort) was called and aborted the process
        (["numa", "--policy", "userpol:Exits", "--pms", "5"], 2,
         "error: the policy userpol:Exits raised SystemExit: 3"),
        (["numa", "--policy", "userpol:FailsToBuild", "--pms", "5"], 2,
         "error: --policy: the policy 'userpol:FailsToBuild' raised ValueError when built: no config file"),
        (["numa", "--policy", "os:abort", "--pms", "5"], 2,
         "error: --policy: policy 'os:abort' is a built-in function, not a class or a function of yours"),
        (["numa", "--policy", "userscript:P", "--pms", "5"], 2,
         "error: --policy: policy 'userscript:P': importing module 'userscript' raised SystemExit: usage: x ARGS"),
    ],
)  # fmt: skip
def test_the_simulators_name_the_policy(tmp_path, args, code, said):
    (tmp_path / "userpol.py").write_text(textwrap.dedent(POLICIES))
    (tmp_path / "userscript.py").write_text("import sys\nsys.exit('usage: x ARGS')\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1", "NUMBA_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "dcplace.cli.main", "simulate", *args, "--episodes", "2"]
    r = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == code, r.stderr
    lines = r.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith(said), r.stderr


def test_the_engine_builds_a_named_user_policy_with_its_seed(tmp_path, monkeypatch):
    (tmp_path / "userpol.py").write_text(textwrap.dedent(POLICIES))
    monkeypatch.syspath_prepend(str(tmp_path))
    e = PlacementEngine(2, "userpol:SaysSeed", seed=7)
    e.add_machine("m0", cpu=16, mem=64)
    with pytest.raises(PolicyError, match="built with seed 7"):
        e.place(VmRequest("a", 1, 1))


def test_net_policy_exceptions_keep_their_cause():
    class Boom(NetPolicy):
        def choose(self, view):
            raise ValueError("x")

    from dcplace.sim.policy_calls import decide

    with pytest.raises(PolicyError) as err:
        decide(Boom(), None)
    assert isinstance(err.value.__cause__, ValueError)


def test_a_bool_is_no_action_and_a_batch_over_http_places_nothing_when_its_policy_raises():
    from dcplace.sim.policy_calls import as_action

    with pytest.raises(PolicyError, match="not an action"):
        as_action(Outside(), True)  # True is 1 to Python; the Gymnasium envs refuse it too
    assert as_action(Outside(), np.int64(3)) == 3

    e = _engine(Raises())
    with TestClient(create_app(e), raise_server_exceptions=False) as c:
        vms = [{"id": f"v{i}", "cpu": 1, "mem": 1} for i in range(3)]
        r = c.post("/vms/batch", json={"vms": vms})
        assert r.status_code == 422 and "my policy bug" in r.json()["detail"]
        assert c.get("/vms").json() == []
        assert c.post("/vms/batch", json={"vms": vms, "policy": "first-fit"}).json()["placed"] == 3  # retry works
    e.check_invariants()
    e.close()
