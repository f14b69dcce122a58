"""``simulate numa`` warms a copy of the policy up before timing: the policy itself is untouched, so its numbers are
the same as without the warm-up (a policy with state of its own included)."""

from __future__ import annotations

from dcplace.cluster.numa import NumaCluster
from dcplace.policies import get_policy
from dcplace.sim.episodes import prepare, run_episodes
from dcplace.sim.episodes import warm_up as _warm_up_policy
from dcplace.sim.numa import Scenario
from dcplace.workload.traces import load_trace


class Fickle:
    """A user's policy with state of its own: random for its first 100 decisions, best-fit after."""

    def __init__(self) -> None:
        self.calls = 0
        self.first, self.best = get_policy("random"), get_policy("best-fit")

    def choose(self, view):
        self.calls += 1
        return (self.first if self.calls <= 100 else self.best).choose(view)


def test_the_warm_up_leaves_the_policy_and_its_numbers_as_they_were():
    prepared = prepare(load_trace("synthetic", seed=0), 32)
    cluster, sc = NumaCluster.uniform(10), Scenario(pms=10)
    plain = run_episodes(Fickle(), cluster, prepared, sc, 2, 0)[0]
    pol = Fickle()
    _warm_up_policy(pol, cluster, prepared, sc, 0)
    warmed = run_episodes(pol, cluster, prepared, sc, 2, 0)[0]
    assert [(r.length, r.income) for r in warmed] == [(r.length, r.income) for r in plain]
    # the check can fail: warming the policy itself up (64 of its 100 random decisions spent) changes the numbers
    spent = Fickle()
    run_episodes(spent, cluster, prepared, sc.__class__(pms=10, max_requests=64), 1, 0)
    assert [(r.length, r.income) for r in run_episodes(spent, cluster, prepared, sc, 2, 0)[0]] != [
        (r.length, r.income) for r in plain
    ]


class Counting:
    """A user's policy that counts its decisions (first-fit's choice)."""

    def __init__(self) -> None:
        self.calls = 0
        self.inner = get_policy("first-fit")

    def choose(self, view):
        self.calls += 1
        return self.inner.choose(view)


def test_the_copy_decides_not_the_policy():
    prepared = prepare(load_trace("synthetic", seed=0), 32)
    pol = Counting()
    _warm_up_policy(pol, NumaCluster.uniform(10), prepared, Scenario(pms=10), 0)
    assert pol.calls == 0
