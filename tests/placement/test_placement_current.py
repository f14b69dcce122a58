"""Batch placement from a current placement (issue 14 part 1): machine + migration cost, pinned VMs. The compact
model against a brute force that shares nothing with it, the greedy from the current placement as an upper bound,
the checker's recomputation, the instance format's fields and errors, and methods that refuse with their reason."""

from __future__ import annotations

import itertools
import json
import tempfile
from dataclasses import replace
from pathlib import Path

import numpy as np
import placement_strategies
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from dcplace.errors import InputError
from dcplace.placement import Problem, solve
from dcplace.placement.checker import check, cost_parts, verify
from dcplace.placement.current import relabel
from dcplace.placement.greedy import greedy_once
from dcplace.placement.problem import INSTANCES, load_problem, with_current

EXAMPLE = Path(__file__).parent / "current_example.json"


def _brute_force(problem: Problem) -> float | None:
    """Cheapest machine + migration cost over every VM -> PM map (pinned VMs on their PM), each PM checked for an
    exclusive disk assignment by enumeration with the pinned VMs' disks fixed."""
    vms = [t for t, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    pms = [t for t, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
    cur = list(problem.current)
    pinned = set(problem.pinned)
    mig = list(problem.migration_cost) or [-(-v.mem // 4) for v in vms]

    def fits(j: int, ids: list[int]) -> bool:
        pm = pms[j]
        if sum(vms[i].vcpu for i in ids) > pm.vcpu or sum(vms[i].mem for i in ids) > pm.mem:
            return False
        free = [i for i in ids if i not in pinned]
        base = [0] * len(pm.disks)
        for i in ids:
            if i in pinned:
                for s, d in zip(vms[i].disks, problem.current_disks[i], strict=True):
                    base[d] += s
        sizes = [s for i in free for s in vms[i].disks]
        owners = [i for i in free for _ in vms[i].disks]
        for choice in itertools.product(range(len(pm.disks)), repeat=len(sizes)):
            pairs = list(zip(owners, choice, strict=True))
            if len(set(pairs)) < len(pairs):
                continue
            load = list(base)
            for s, d in zip(sizes, choice, strict=True):
                load[d] += s
            if all(x <= cap for x, cap in zip(load, pm.disks, strict=True)):
                return True
        return False

    best = None
    for assign in itertools.product(range(len(pms)), repeat=len(vms)):
        if any(assign[i] != cur[i] for i in pinned):
            continue
        groups: dict[int, list[int]] = {}
        for i, j in enumerate(assign):
            groups.setdefault(j, []).append(i)
        if all(fits(j, g) for j, g in groups.items()):
            cost = sum(pms[j].cost for j in groups)
            cost += sum(mig[i] for i in range(len(vms)) if cur[i] >= 0 and assign[i] != cur[i])
            best = cost if best is None else min(best, cost)
    return best


vm_types = placement_strategies.vm_types("ab")
pm_types = placement_strategies.pm_types


@st.composite
def current_problems(draw: st.DrawFn, costs: str = "any") -> Problem:
    """A tiny problem with a feasible current placement (a greedy run's answer), some VMs new, some pinned, and
    migration costs: the default, per VM at random (splitting types into classes), all 0 or all huge."""
    vts = draw(st.lists(vm_types, min_size=1, max_size=2, unique_by=lambda t: t.name))
    pts = draw(st.lists(pm_types, min_size=1, max_size=2, unique_by=lambda t: t.name))
    vc = [draw(st.integers(1, 2)) for _ in vts]
    pc = [draw(st.integers(1, 2)) for _ in pts]
    base = Problem("tiny", tuple(vts), tuple(vc), tuple(pts), tuple(pc))
    out = greedy_once(base, np.random.default_rng(draw(st.integers(0, 1000))))
    assume(out is not None)
    assert out is not None
    vm_pm, vm_disks = out
    new = draw(st.lists(st.booleans(), min_size=base.n_vms, max_size=base.n_vms))
    cur = [-1 if n else int(j) for n, j in zip(new, vm_pm, strict=True)]
    placed = [i for i, j in enumerate(cur) if j >= 0]
    pinned = draw(st.lists(st.sampled_from(placed), unique=True, max_size=1)) if placed and costs == "any" else []
    kind = draw(st.sampled_from(["default", "random"])) if costs == "any" else costs
    mig = {
        "default": [],
        "random": draw(st.lists(st.integers(0, 30), min_size=base.n_vms, max_size=base.n_vms)),
        "zero": [0] * base.n_vms,
        "huge": [10**6] * base.n_vms,
    }[kind]
    return with_current(base, cur, vm_disks, mig, pinned)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(current_problems())
def test_compact_matches_brute_force_with_migration_cost_and_pinned_vms(problem):
    want = _brute_force(problem)
    assert want is not None  # the current placement with the new VMs left out is no answer, but greedy found one
    res = solve(problem, "compact", stop=10, params={"workers": 1})
    assert res.status == "optimal" and res.cost == want and res.verified, res.violations
    errors, cost = check(problem, res.vm_pm.tolist(), res.vm_disks)
    assert errors == [] and cost == want
    machine, migration, moves = cost_parts(problem, res.vm_pm.tolist())
    assert res.stats == {"machine_cost": machine, "migration_cost": migration, "migrations": moves}
    assert machine + migration == want
    for i in problem.pinned:
        assert res.vm_pm[i] == problem.current[i] and tuple(res.vm_disks[i]) == problem.current_disks[i]
    greedy = solve(problem, "greedy", seed=1, params={"runs": 5})
    if greedy.status == "feasible":
        assert greedy.verified and greedy.cost >= want
    auto = solve(problem, "auto", stop=10, params={"workers": 1})
    assert auto.verified and auto.cost == want


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(current_problems(costs="huge"))
def test_with_a_huge_migration_cost_nothing_moves(problem):
    res = solve(problem, "compact", stop=10, params={"workers": 1})
    assert res.verified and res.stats["migrations"] == 0
    cur = np.asarray(problem.current)
    assert (res.vm_pm[cur >= 0] == cur[cur >= 0]).all()


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(current_problems(costs="zero"))
def test_with_zero_migration_cost_the_optimum_is_the_from_scratch_one(problem):
    scratch = replace(problem, current=(), current_disks=(), migration_cost=(), pinned=())
    res = solve(problem, "compact", stop=10, params={"workers": 1})
    ref = solve(scratch, "compact", stop=10, params={"workers": 1})
    assert res.status == ref.status == "optimal" and res.cost == ref.cost and res.verified


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(current_problems(costs="random"))
def test_relabelled_scratch_answer_keeps_machine_cost_and_migrates_no_more(problem):
    scratch = replace(problem, current=(), current_disks=(), migration_cost=(), pinned=())
    ref = solve(scratch, "compact", stop=10, params={"workers": 1})
    assert ref.vm_pm is not None and ref.vm_disks is not None
    vm_pm, vm_disks = relabel(problem, ref.vm_pm, ref.vm_disks)
    errors, total = check(problem, vm_pm.tolist(), vm_disks)
    assert errors == []
    machine, migration, _ = cost_parts(problem, vm_pm.tolist())
    assert machine == ref.cost and total == machine + migration
    assert migration <= cost_parts(problem, ref.vm_pm.tolist())[1]


def test_greedy_from_current_keeps_vms_unless_it_empties_their_pm():
    p = INSTANCES["exp1"]
    vm_pm, vm_disks = greedy_once(p, np.random.default_rng(3)) or (None, None)
    assert vm_pm is not None and vm_disks is not None
    problem = with_current(p, vm_pm, vm_disks, pinned=[0, 1])
    res = solve(problem, "greedy", seed=0, params={"runs": 3})
    assert res.verified
    moved = np.flatnonzero(res.vm_pm != vm_pm)
    emptied = set(vm_pm[moved].tolist())
    assert not emptied & set(res.vm_pm.tolist())  # a VM moves only off a PM the answer no longer uses
    assert res.cost <= res.stats["machine_cost"] + res.stats["migration_cost"]
    # from an unchanged placement the greedy never costs more than staying put
    stay = verify(problem, replace(res, vm_pm=vm_pm, vm_disks=vm_disks, cost=None))
    assert stay.verified and res.cost <= stay.stats["machine_cost"]


def test_example_instance_solves_and_reports_the_cost_parts():
    problem = load_problem(str(EXAMPLE))
    assert problem.current == (0, 1, -1, 2, 3) and problem.pinned == (0,)
    assert problem.migration_cost == (8, 5, 8, 50, 50)  # 7.5 GiB rounds up to 8; a type's and a VM's overrides
    res = solve(problem, "auto", stop=10)
    assert res.status == "optimal" and res.cost == _brute_force(problem) and res.verified
    s = res.summary()
    assert s["cost"] == s["machine_cost"] + s["migration_cost"] and s["migrations"] >= 0
    assert load_problem_roundtrip(problem) == problem


def load_problem_roundtrip(problem: Problem) -> Problem:
    """``problem`` written by ``to_json`` and read back by ``load_problem``."""
    with tempfile.TemporaryDirectory() as d:
        path = Path(d) / "p.json"
        path.write_text(json.dumps(problem.to_json()))
        return replace(load_problem(str(path)), name=problem.name)


@pytest.mark.parametrize(
    ("change", "field", "words"),
    [
        (lambda d: d["current"].__setitem__(1, {"pm": 9, "disks": [0]}), "current[1].pm", "PM 9 does not exist"),
        (lambda d: d["current"].__setitem__(1, {"pm": 1, "disks": [3]}), "current[1].disks", "disk numbers"),
        (lambda d: d["current"].__setitem__(1, {"pm": 1}), "current[1].disks", "1 virtual disks"),
        (lambda d: d["current"].__setitem__(1, "pm1"), "current[1]", "must be null or an object"),
        (lambda d: d["current"].pop(), "current", "5 entries"),
        (lambda d: d.__setitem__("pinned", [2]), "pinned", "VM 2 is pinned but has no current PM"),
        (lambda d: d.__setitem__("pinned", [7]), "pinned", "VM numbers in 0..4"),
        (lambda d: d.__setitem__("migration_costs", [1, 2]), "migration_costs", "5 integers"),
        (lambda d: d["vms"][0].__setitem__("migration_cost", -1), "vms[0].migration_cost", "whole number from 0"),
        (
            lambda d: d["pms"][0].__setitem__("vcpu", 3) or d["current"].__setitem__(1, {"pm": 0, "disks": [0]}),
            "current",
            "puts 4 vCPU and 15.0 GiB on PM 0",
        ),
    ],
)
def test_bad_current_placements_name_the_field(tmp_path, change, field, words):
    doc = json.loads(EXAMPLE.read_text())
    change(doc)
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError) as err:
        load_problem(str(path))
    assert err.value.field == field and words in str(err.value) and str(path) in str(err.value)


def test_disk_over_capacity_in_the_current_placement_is_refused(tmp_path):
    doc = json.loads(EXAMPLE.read_text())
    doc["pms"][0]["disks_gb"] = [40]
    doc["current"][1] = {"pm": 0, "disks": [0]}  # two 32 GB disks on one 40 GB disk
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(InputError, match="64 GB on disk 0 of PM 0"):
        load_problem(str(path))


@pytest.mark.parametrize("method", ["pattern", "hierarchical", "flat"])
def test_methods_without_a_current_placement_model_refuse_with_the_reason(method):
    problem = load_problem(str(EXAMPLE))
    with pytest.raises(InputError, match=f"method {method} does not start from a current placement .*; use auto"):
        solve(problem, method, stop=5)


def test_checker_catches_a_moved_pinned_vm_and_a_wrong_cost():
    problem = load_problem(str(EXAMPLE))
    res = solve(problem, "compact", stop=10)
    vm_pm = res.vm_pm.tolist()
    vm_disks = [list(d) for d in res.vm_disks]
    vm_pm[0] = 1 - vm_pm[0]  # the pinned VM to the other s2
    vm_disks[0] = [0]
    errors, _ = check(problem, vm_pm, vm_disks)
    assert any("pinned VM 0 moved" in e for e in errors)
    wrong = verify(problem, replace(res, cost=res.cost - 1, verified=False))
    assert not wrong.verified and any("checker computes" in v for v in wrong.violations)
    # a mutation review (2026-11-28): an over-claimed cost and a pinned VM moved to another physical disk of its own
    # PM passed unnoticed when those comparisons were weakened
    high = verify(problem, replace(res, cost=res.cost + 1, verified=False))
    assert not high.verified and any("checker computes" in v for v in high.violations)


def test_a_pinned_vm_moved_to_another_disk_of_its_pm_is_caught(tmp_path: Path) -> None:
    spec = json.loads(EXAMPLE.read_text(encoding="utf-8"))
    spec["pinned"] = [3]  # VM 3: an m3.xlarge on PM 2 (four disks), its disks 0 and 1
    path = tmp_path / "p.json"
    path.write_text(json.dumps(spec), encoding="utf-8")
    problem = load_problem(str(path))
    vm_pm, vm_disks = [0, 1, 3, 2, 3], [[0], [0], [0], [0, 1], [2, 3]]
    assert check(problem, vm_pm, vm_disks)[0] == []
    vm_disks[3] = [2, 3]  # the same PM, other disks
    assert check(problem, vm_pm, vm_disks)[0] == ["pinned VM 3 moved from PM 2 disks [0, 1] to PM 2 disks [2, 3]"]


def test_scratch_problems_are_unchanged_by_the_new_fields():
    res = solve(INSTANCES["exp1"], "compact", stop=60)
    assert res.cost == 4540 and "migrations" not in res.stats
