"""The searched scoring rule (issue 15): its compiled features equal a direct recomputation from the state, Best-Fit's
weights reproduce Best-Fit's episodes, and rule files are checked."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

from conftest import tiny_numa_episodes
from dcplace.errors import InputError
from dcplace.policies import get_policy
from dcplace.policies.numa_search import RuleSpec, SearchedRule, searched_rule
from dcplace.sim import NumaSim
from dcplace.sim import numa_kernel as K
from dcplace.sim.episodes import finish


def _count(fr: np.ndarray, c: float, m: float, multi: bool) -> int:
    """How many (c, m) requests fit a machine with node free ``fr`` (K, 2), one at a time (the definition)."""
    fr = fr.copy()
    n = 0
    while True:
        if multi:
            if np.all(fr >= np.array([c, m]) / len(fr) - 1e-9):
                fr -= np.array([c, m]) / len(fr)
                n += 1
                continue
            return n
        nodes = np.flatnonzero(np.all(fr >= np.array([c, m]) - 1e-9, axis=1))
        if not len(nodes):
            return n
        fr[nodes[0]] -= (c, m)
        n += 1


def _direct_features(rule: SearchedRule, view, a: int) -> np.ndarray:
    spec = rule.spec
    Kn = view.numa
    m, k = divmod(a, Kn)
    before = np.asarray(view.free, float)
    after = before.copy()
    if view.multi:
        after[m] -= np.asarray(view.demand) / Kn
    else:
        after[m, k] -= view.demand
    cap = np.asarray(view.capacity, float)
    frac = after[m] / cap[m]
    phi = [after[m, :, 0].sum() / cap[m, :, 0].sum(),
           after[m, :, 0].sum() / cap[m, :, 0].sum() if view.multi else frac[k, 0],
           after[m, :, 1].sum() / cap[m, :, 1].sum(),
           float(view.vm_count[m] == 0),
           float(np.ptp(frac[:, 0]) + np.ptp(frac[:, 1]))]  # fmt: skip
    lost = [_count(before[m], c, mm, mu) - _count(after[m], c, mm, mu)
            for (c, mm), mu in zip(spec.demand, spec.multi, strict=True)]  # fmt: skip
    phi.append(float(np.dot(lost, spec.freq)))
    for t in spec.large:
        c, mm = spec.demand[t]
        total = sum(_count(before[i], c, mm, spec.multi[t]) for i in range(view.active) if view.usable[i])
        phi.append(lost[t] / (1 + total))
    return np.array(phi)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ep=tiny_numa_episodes())
def test_features_equal_a_direct_recomputation(ep):
    cluster, trace, scenario = ep
    sim = NumaSim(cluster, trace, scenario)
    if sim.reset(seed=0) != K.DECIDE:
        return
    rule = SearchedRule(RuleSpec.for_trace(trace, n_large=2))
    while sim.status == K.DECIDE:
        view = sim.view()
        phi = rule.features(view)
        feas = view.feasible()
        assert np.array_equal(~np.isnan(phi[:, 0]), feas)
        for a in np.flatnonzero(feas):
            np.testing.assert_allclose(phi[a], _direct_features(rule, view, int(a)), atol=1e-12)
        a = rule.choose(view)
        assert a == int(np.argmax(np.where(feas, rule.score(view), -np.inf)))
        sim.step(a)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ep=tiny_numa_episodes())
def test_best_fit_weights_reproduce_best_fit(ep):
    # Best-Fit's key is (machine CPU left, node CPU left, machine memory left); on uniform machines the fractions
    # rank alike, and weights far apart make the sum lexicographic
    cluster, trace, scenario = ep
    spec = RuleSpec.for_trace(trace)
    w = np.zeros(len(spec.weights))
    w[:3] = (1.0, 1e-4, 1e-8)
    out = []
    for pol in (get_policy("best-fit"), SearchedRule(spec.with_weights(w))):
        sim = NumaSim(cluster, trace, scenario)
        if sim.reset(seed=0) == K.DECIDE:
            finish(sim, pol)
        out.append((sim.result().length, sim.pm_of.tolist(), sim.node_of.tolist()))
    assert out[0] == out[1]


def test_rule_files_are_checked(tmp_path):
    bad = tmp_path / "x.json"
    bad.write_text('{"format": "dcplace-cvd"}')
    with pytest.raises(InputError, match="not a searched rule"):
        RuleSpec.load(bad)
    with pytest.raises(InputError, match="cannot read"):
        RuleSpec.load(tmp_path / "missing.json")
    with pytest.raises(InputError, match="weights must have"):
        RuleSpec((1.0,), ((1.0, 1.0),), (False,), (1.0,), ())
    with pytest.raises(InputError, match="needs its rule file"):
        searched_rule()


def test_rule_files_round_trip_through_the_policy_registry(tmp_path):
    from conftest import make_table
    from dcplace.sim import PreparedTrace

    spec = RuleSpec.for_trace(PreparedTrace.build(make_table([(0, 10, 2, 4), (1, 10, 16, 64)])))
    path = tmp_path / "rule.json"
    path.write_text(spec.with_weights(np.arange(len(spec.weights), dtype=float)).to_json(note="test"))
    pol = get_policy("dcplace.policies.numa_search:searched_rule", checkpoint=str(path))
    assert isinstance(pol, SearchedRule)
    assert pol.spec == RuleSpec.load(path)
    assert pol.spec.weights == tuple(float(x) for x in range(len(spec.weights)))
