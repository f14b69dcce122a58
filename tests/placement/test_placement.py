"""Batch placement (paper 004): instances as the paper states them, exact answers against brute force on tiny
instances, every returned assignment accepted by the independent checker, the checker catching violations, and the
CLI's answers and errors."""

from __future__ import annotations

import ast
import dataclasses
import itertools
import json
import math
import os
import pickle
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import placement_strategies
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcplace.errors import InputError
from dcplace.placement import (
    AutoParams,
    CompactParams,
    Deadline,
    GreedyParams,
    HierarchicalParams,
    NumaBatch,
    NumaBatchParams,
    PatternParams,
    Result,
    field_docs,
    get_method,
    method_names,
    params_for,
    register_method,
    registry,
    solve,
)
from dcplace.placement.checker import check
from dcplace.placement.problem import INSTANCES, Constraint, PMType, Problem, VMType, load_problem, make


def test_paper_instances_have_the_papers_sizes():
    sizes = {name: (p.n_vms, p.n_pms) for name, p in INSTANCES.items()}
    assert sizes == {"exp1": (70, 50), "exp2": (77, 70), "mix1": (1000, 1000), "mix2": (1000, 1000)}


def test_exp1_optimum_is_the_papers_and_verified():
    res = solve(INSTANCES["exp1"], "compact", stop=60)
    assert res.status == "optimal" and res.cost == 4540 and res.bound == 4540
    assert res.verified and not res.violations


def _brute_force(problem: Problem, ok=lambda assign: True) -> float | None:
    """Cheapest cost over every VM -> PM map that ``ok`` accepts, each PM checked for an exclusive disk assignment
    by enumeration."""
    vms = [t for t, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    pms = [t for t, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]

    def fits(pm: PMType, group: list[VMType]) -> bool:
        if sum(v.vcpu for v in group) > pm.vcpu or sum(v.mem for v in group) > pm.mem:
            return False
        sizes = [s for v in group for s in v.disks]
        owners = [i for i, v in enumerate(group) for _ in v.disks]
        for choice in itertools.product(range(len(pm.disks)), repeat=len(sizes)):
            pairs = list(zip(owners, choice, strict=True))
            if len(set(pairs)) < len(pairs):
                continue
            load = [0] * len(pm.disks)
            for s, d in zip(sizes, choice, strict=True):
                load[d] += s
            if all(x <= cap for x, cap in zip(load, pm.disks, strict=True)):
                return True
        return not sizes

    best = None
    for assign in itertools.product(range(len(pms)), repeat=len(vms)):
        if not ok(assign):
            continue
        groups: dict[int, list[VMType]] = {}
        for v, j in zip(vms, assign, strict=True):
            groups.setdefault(j, []).append(v)
        if all(fits(pms[j], g) for j, g in groups.items()):
            cost = sum(pms[j].cost for j in groups)
            best = cost if best is None else min(best, cost)
    return best


vm_types = placement_strategies.vm_types("ab")
pm_types = placement_strategies.pm_types


@st.composite
def tiny_problems(draw: st.DrawFn) -> Problem:
    vts = draw(st.lists(vm_types, min_size=1, max_size=2, unique_by=lambda t: t.name))
    pts = draw(st.lists(pm_types, min_size=1, max_size=2, unique_by=lambda t: t.name))
    vc = [draw(st.integers(1, 2)) for _ in vts]
    pc = [draw(st.integers(1, 2)) for _ in pts]
    return Problem("tiny", tuple(vts), tuple(vc), tuple(pts), tuple(pc))


@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(tiny_problems())
def test_compact_matches_brute_force_and_every_answer_is_checked(problem):
    want = _brute_force(problem)
    res = solve(problem, "compact", stop=10, params={"workers": 1})
    if want is None:
        assert res.status == "infeasible"
        return
    assert res.status == "optimal" and res.cost == want
    errors, cost = check(problem, res.vm_pm.tolist(), res.vm_disks)
    assert errors == [] and cost == want
    flat = solve(problem, "flat", stop=10, params={"workers": 1})
    assert flat.status == "optimal" and flat.cost == want and flat.verified
    pattern = solve(problem, "pattern", stop=10, params={"workers": 1})
    assert pattern.verified and pattern.bound <= want <= pattern.cost  # its bound is a bound, its answer feasible
    greedy = solve(problem, "greedy", seed=1)
    if greedy.status == "feasible":
        assert greedy.verified and greedy.cost >= want


def test_pattern_solves_the_1000_vm_mixes_near_their_bound():
    res = solve(INSTANCES["mix1"], "auto", stop=30)
    assert res.method == "auto" and res.verified and res.stats["cg_converged"]
    assert res.cost <= 66_100 and res.gap < 0.005  # the target; the optimum is 66,040


def test_hierarchical_decomposition_is_verified_and_never_below_the_optimum():
    """The paper's two-level decomposition on mix1 (25 packs x 25 swads, beta 0.7): every swad placed exactly, the
    whole assignment verified, and its cost at least the optimum (66,040) and below the paper's heuristic."""
    res = solve(INSTANCES["mix1"], "hierarchical", stop=60, params={"packs": 25, "swads": 25, "beta": 0.7})
    assert res.verified and res.stats["beta"] == 0.7
    assert 66_040 <= res.cost < 150_573


@pytest.mark.parametrize("method", ["flat", "compact", "pattern", "hierarchical", "greedy", "auto"])
def test_time_limit_is_kept_and_what_comes_back_is_checked(method):
    """A 1,000 x 1,000 instance with a 3 s limit: every method returns within it (plus 2 s for process start-up
    and model building, which no solver controls) with its best answer, verified, or none."""
    res = solve(INSTANCES["mix2"], method, stop=3, params={} if method == "greedy" else {"workers": 2})
    assert res.wall_s <= 5, res.wall_s
    assert res.cost is None or res.verified
    if res.bound is not None and res.cost is not None:
        assert res.bound <= res.cost


def test_greedy_is_seeded_and_checked():
    a = solve(INSTANCES["exp2"], "greedy", seed=3)
    b = solve(INSTANCES["exp2"], "greedy", seed=3)
    assert a.verified and a.cost == b.cost and a.stats == b.stats
    assert np.array_equal(a.vm_pm, b.vm_pm)
    assert a.stats["runs"] == 50 and a.stats["cost_min"] == a.cost


@given(
    st.lists(st.integers(-1, 9), min_size=1, max_size=6),
    st.lists(st.integers(1, 9), min_size=0, max_size=4).map(lambda xs: sorted(xs, reverse=True)),
)
def test_greedy_puts_each_disk_on_the_first_free_physical_disk_with_room(free, sizes):
    # greedy.py's rule, largest first: distinct disks, each the first in index order with room; None when one fails
    from dcplace.placement.greedy import _disks_for

    picks = _disks_for(np.array(free, dtype=np.int64), sizes)
    expected: list[int] | None = []
    for s in sizes:
        room = [d for d, f in enumerate(free) if f >= s and d not in expected]
        if not room:
            expected = None
            break
        expected.append(room[0])
    assert picks == expected


def test_checker_catches_each_violation():
    p = make("t", {"m3.xlarge": 2}, {"s3": 1, "s1": 1})  # m3.xlarge: 4 vCPU, 15 GiB, 2 x 40 GB
    ok, cost = check(p, [0, 0], [[0, 1], [0, 1]])
    assert ok == [] and cost == 200
    errors, _ = check(p, [0, 0], [[0, 0], [0, 1]])
    assert any("two virtual disks on one physical disk" in e for e in errors)
    errors, _ = check(p, [1, 1], [[0, 0], [0, 0]])  # s1: 8 vCPU, 16 GiB, one disk
    assert any("GiB assigned" in e for e in errors)
    errors, _ = check(p, [0, 5], [[0, 1], [0, 1]])
    assert any("does not exist" in e for e in errors)
    errors, _ = check(p, [0, 0], [[0, 1], [0, 7]])
    assert any("has 2" in e for e in errors)
    # a mutation review (2026-11-28): the vCPU and the physical-disk checks could be weakened unnoticed
    cpu_only = make("c", {"c3.2xlarge": 2}, {"s3": 1})  # 16 vCPU on 8, 30 of 64 GiB, 160 GB on each 512 GB disk
    assert check(cpu_only, [0, 0], [[0, 1], [0, 1]])[0] == ["PM 0 (s3) has 16 vCPU assigned, capacity 8"]
    disks = make("d", {"i2.2xlarge": 2}, {"l1": 1})  # two 800 GB disks each; l1: four of 1000 GB
    assert check(disks, [0, 0], [[0, 1], [2, 3]])[0] == []
    assert check(disks, [0, 0], [[0, 1], [0, 1]])[0] == ["disk 0 of PM 0 holds 1600 GB, size 1000",
                                                         "disk 1 of PM 0 holds 1600 GB, size 1000"]  # fmt: skip


def test_infeasible_instance_reports_the_reason():
    res = solve(make("big", {"i2.8xlarge": 1}, {"s1": 3}), "auto", stop=5)
    assert res.status == "infeasible" and "i2.8xlarge" in res.stats["reason"]
    assert res.cost is None and not res.verified


@pytest.mark.parametrize("method", ["auto", "flat", "compact", "pattern", "greedy"])
def test_every_method_says_why_an_instance_has_no_answer(method):
    """100 VMs of 1 vCPU on 4 PMs of 8: the exact methods prove it infeasible and the checker says why (auto and
    compact gave no reason); greedy, a heuristic, cannot prove it and says unknown (it said infeasible)."""
    p = make("over", {"m3.medium": 100}, {"s1": 4})
    res = solve(p, method, stop=10, params={"workers": 1} if method != "greedy" else None)
    assert res.status == ("unknown" if method == "greedy" else "infeasible") and res.vm_pm is None
    if method != "greedy":
        assert res.stats["reason"].startswith("the VMs need") or "needs" in res.stats["reason"], res.stats
    assert res.stats["reason"]


def _dcplace(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "dcplace.cli.main", *args], capture_output=True, text=True)


def test_cli_solve_json_and_errors(tmp_path):
    p = _dcplace("solve", "--instance", "exp1", "--method", "compact", "--json")
    assert p.returncode == 0, p.stderr
    out = json.loads(p.stdout)
    for key in ("instance", "method", "status", "cost", "bound", "gap", "wall_s", "pms_used", "vms", "verified"):
        assert key in out
    assert out["cost"] == 4540 and out["verified"] is True
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"vms": [{"count": 1, "vcpu": 0, "mem_gib": 1}], "pms": []}))
    p = _dcplace("solve", "--instance", str(bad))
    assert p.returncode == 2 and "vms[0].vcpu" in p.stderr and "Traceback" not in p.stderr
    p = _dcplace("solve", "--method", "simplex")
    assert p.returncode == 2 and "--method" in p.stderr
    inst = tmp_path / "mine.json"
    inst.write_text(json.dumps(INSTANCES["exp1"].to_json()))
    p = _dcplace("solve", "--instance", str(inst), "--json")
    assert p.returncode == 0 and json.loads(p.stdout)["cost"] == 4540


def _meets(c: Constraint, assign, racks) -> bool:
    """The constraint's definition, written out again for the brute force (shares nothing with the models)."""

    def unit(i):
        return assign[i] if c.level == "pm" else racks[assign[i]]

    if c.kind == "colocate":
        return len({unit(i) for i in c.vms}) == 1
    if c.kind == "anti-colocate":
        return all(unit(a) != unit(b) for k, s in enumerate(c.sets) for t in c.sets[k + 1 :] for a in s for b in t)
    used = [racks[assign[i]] for i in c.vms]
    most = max(used.count(r) for r in set(used))
    return len(set(used)) >= c.min_racks and (not c.max_per_rack or most <= c.max_per_rack)


@st.composite
def constrained_problems(draw: st.DrawFn, how_many: int = 1) -> Problem:
    base = draw(tiny_problems())
    m = base.n_pms
    racks = tuple(draw(st.lists(st.integers(0, 2), min_size=m, max_size=m)))
    cons = tuple(_draw_constraint(draw, base.n_vms) for _ in range(how_many))
    return Problem("tiny-c", base.vm_types, base.vm_counts, base.pm_types, base.pm_counts, racks, cons)


def _draw_constraint(draw: st.DrawFn, n: int) -> Constraint:
    kind = draw(st.sampled_from(["colocate", "anti-colocate", "spread"]))
    vms = draw(st.lists(st.integers(0, n - 1), min_size=min(2, n), max_size=n, unique=True))
    if kind == "anti-colocate":
        cut = draw(st.integers(1, max(1, len(vms) - 1)))
        sets = (tuple(vms[:cut]), tuple(vms[cut:])) if len(vms) > 1 else (tuple(vms),)
        c = Constraint(kind, draw(st.sampled_from(["pm", "rack"])), sets)
    elif kind == "colocate":
        c = Constraint(kind, draw(st.sampled_from(["pm", "rack"])), (tuple(vms),))
    else:
        c = Constraint(kind, "rack", (tuple(vms),), draw(st.integers(0, 2)), draw(st.integers(0, 2)))
    return c


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constrained_problems())
def test_constraints_flat_matches_brute_force_and_greedy_is_checked(problem):
    c = problem.constraints[0]
    want = _brute_force(problem, lambda assign: _meets(c, assign, problem.racks))
    flat = solve(problem, "flat", stop=10, params={"workers": 1})
    if want is None:
        assert flat.status == "infeasible"
    else:
        assert flat.status == "optimal" and flat.cost == want and flat.verified
    greedy = solve(problem, "greedy", seed=0)
    if greedy.status == "feasible":
        assert greedy.verified and want is not None and greedy.cost >= want
    auto = solve(problem, "auto", stop=10, params={"workers": 1})
    assert auto.cost == want and (want is None or auto.verified)
    compact = solve(problem, "compact", stop=10, params={"workers": 1})  # counts per class: exact (issue 18)
    if want is None:
        assert compact.status == "infeasible"
    else:
        assert compact.status == "optimal" and compact.cost == want and compact.verified


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(constrained_problems(how_many=2))
def test_compact_with_overlapping_constraints_matches_brute_force(problem):
    """Two constraints, often over the same VMs: classes split by every membership, the optimum stays exact."""
    want = _brute_force(problem, lambda a: all(_meets(c, a, problem.racks) for c in problem.constraints))
    compact = solve(problem, "compact", stop=10, params={"workers": 1})
    if want is None:
        assert compact.status == "infeasible"
    else:
        assert compact.status == "optimal" and compact.cost == want and compact.verified


def test_checker_catches_each_constraint_violation():
    p = make("c", {"m3.medium": 4}, {"s1": 4})
    racks = (0, 0, 1, 1)
    disks = [[0], [0], [0], [0]]
    cases = [
        (Constraint("colocate", "pm", ((0, 1),)), [0, 1, 2, 3], "spans 2 pms"),
        (Constraint("colocate", "rack", ((0, 2),)), [0, 1, 2, 3], "spans 2 racks"),
        (Constraint("anti-colocate", "pm", ((0,), (1,))), [0, 0, 2, 3], "share a pm"),
        (Constraint("anti-colocate", "rack", ((0,), (1,))), [0, 1, 2, 3], "share a rack"),
        (Constraint("spread", "rack", ((0, 1, 2),), 3, 0), [0, 1, 2, 3], "needs at least 3"),
        (Constraint("spread", "rack", ((0, 1),), 1, 1), [0, 1, 2, 3], "at most 1 allowed"),
    ]
    for con, vm_pm, needle in cases:
        q = Problem("c", p.vm_types, p.vm_counts, p.pm_types, p.pm_counts, racks, (con,))
        errors, _ = check(q, vm_pm, disks)
        assert any(needle in e for e in errors), (needle, errors)
        ok = [0, 2, 1, 3] if con.kind != "colocate" else [0, 0, 0, 0]
        if con.kind == "spread" and con.min_racks == 3:
            continue  # two racks cannot host a 3-rack spread
        assert check(q, ok, disks)[0] == [], con


def test_constraints_in_json_round_trip_and_errors(tmp_path):
    p = make("c", {"m3.medium": 4}, {"s1": 4})
    cons = (Constraint("colocate", "rack", ((0, 1),)), Constraint("anti-colocate", "pm", ((2,), (3,))),
            Constraint("spread", "rack", ((0, 2, 3),), 2, 2))  # fmt: skip
    q = Problem("c", p.vm_types, p.vm_counts, p.pm_types, p.pm_counts, (0, 0, 1, 1), cons)
    path = tmp_path / "c.json"
    path.write_text(json.dumps(q.to_json()))
    assert load_problem(str(path)) == q
    res = solve(q, "auto", stop=10, params={"workers": 1})
    assert res.verified and res.status in ("optimal", "feasible")
    with pytest.raises(InputError, match="does not model placement constraints"):
        solve(q, "pattern")
    both = solve(q, "compact", stop=10, params={"workers": 1})
    assert both.status == "optimal" and both.verified and both.cost == res.cost
    for patch, needle in (
        ({"racks": [0, 1]}, "field 'racks'"),
        ({"constraints": [{"kind": "near", "vms": [0]}]}, "constraints[0].kind"),
        ({"constraints": [{"kind": "colocate", "level": "pm", "vms": [0, 9]}]}, "constraints[0].vms"),
        ({"constraints": [{"kind": "spread", "level": "pm", "vms": [0, 1]}]}, "constraints[0].level"),
        ({"constraints": [{"kind": "anti-colocate", "level": "pm", "sets": [0, 1]}]}, "constraints[0].sets"),
    ):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**q.to_json(), **patch}))
        with pytest.raises(InputError, match=re.escape(needle)):
            load_problem(str(bad))
        out = subprocess.run([sys.executable, "-m", "dcplace.cli.main", "solve", "--instance", str(bad)],
                             capture_output=True, text=True)  # fmt: skip
        assert out.returncode == 2 and needle in out.stderr


def test_topology_tree_with_pack_moves_and_pattern_first_level():
    """Swads from a topology (pods of racks: two levels of assignment, then racks solved exactly), repaired by pack
    moves; and the pattern-based first level, which loses nothing against the pattern answer."""
    from dcplace.placement.hierarchical import with_racks

    mix1 = with_racks(INSTANCES["mix1"], 20, 0)
    res = solve(mix1, "hierarchical", stop=60, params={"split": "topology", "beta": 0.9, "racks_per_pod": 5})
    assert res.verified and res.stats["levels"] == 2 and res.cost >= 66040
    assert res.stats["pack_moves"] >= 1  # on this split a pod cannot re-pack without moving a pack (measured)
    pat = solve(INSTANCES["mix1"], "hierarchical", stop=60, params={"first_level": "pattern", "swads": 25})
    assert pat.verified and pat.bound <= 66040 <= pat.cost <= 1.01 * pat.bound


def test_given_packs_are_read_checked_and_used(tmp_path):
    from dcplace.placement.hierarchical import random_split

    p = make("p", {"m3.medium": 6}, {"m1": 4})
    q = Problem("p", p.vm_types, p.vm_counts, p.pm_types, p.pm_counts, packs=((0, 1, 2), (3, 4), (5,)))
    path = tmp_path / "p.json"
    path.write_text(json.dumps(q.to_json()))
    assert load_problem(str(path)) == q
    assert [a.tolist() for a in random_split(q, 25, 2, 0).packs] == [[0, 1, 2], [3, 4], [5]]
    res = solve(q, "hierarchical", stop=20, params={"swads": 1, "packs": 3, "beta": 1.0})
    assert res.verified
    for packs in ([[0, 1], [2]], [[0, 1, 2, 3, 4, 5, 5]], [[]], "all"):
        path.write_text(json.dumps({**q.to_json(), "packs": packs}))
        with pytest.raises(InputError, match="field 'packs'"):
            load_problem(str(path))


# --- one solve: registry, stop criterion, immutable results, typed params -------------------------------------------

DOCS = Path(__file__).resolve().parents[2] / "docs" / "placement.md"


def test_the_documented_user_method_registers_and_solves():
    """The worked example of docs/placement.md, run as written: a user's method with its own params dataclass,
    registered by name through public imports only, solved and verified through ``solve``."""
    text = DOCS.read_text()
    block = text.split("<!-- example: user-method -->\n```python\n", 1)[1].split("```", 1)[0]
    assert "dcplace.placement." not in block.replace("from dcplace.placement import", "")  # public names only
    space: dict = {"__name__": "__main__"}
    try:
        exec(compile(block, str(DOCS), "exec"), space)
        res = space["res"]
        assert res.method == "first-fit" and res.verified and res.cost >= 4540  # never below exp1's optimum
        assert "first-fit" in method_names()
        with pytest.raises(InputError, match=r"^key must be vcpu or mem, got 'disk'$"):
            space["FirstFitParams"](key="disk")
        again = solve(INSTANCES["exp2"], "first-fit", 10, params={"key": "vcpu"})
        assert again.verified and again.cost >= 45300
        with pytest.raises(ValueError, match="already registered"):
            register_method("first-fit", space["first_fit"], space["FirstFitParams"])
    finally:
        registry._METHODS.pop((Problem, "first-fit"), None)


def test_registry_keeps_problem_types_apart():
    assert method_names() == ["auto", "flat", "compact", "pattern", "hierarchical", "greedy"]
    assert method_names(NumaBatch) == ["relaxation-guided", "pattern", "auto", "consolidate"]
    assert get_method("auto", NumaBatch).params is NumaBatchParams
    with pytest.raises(InputError, match=r"^method must be one of auto, flat, .*, got 'simplex'$"):
        solve(INSTANCES["exp1"], "simplex")
    with pytest.raises(TypeError, match="takes GreedyParams"):
        solve(INSTANCES["exp1"], "greedy", params=CompactParams())


@pytest.mark.parametrize("method", ["flat", "compact", "pattern", "hierarchical", "greedy", "auto"])
def test_every_method_honours_a_tiny_stop(method):
    """A 0.2 s deadline on instances each method needs far longer for unbounded (mix2: 1,000 x 1,000; exp2 for
    flat, which refuses mix2's size at once): every method returns soon after (model building and process start-up
    are not interruptible), with an answer that is verified or none."""
    stop = Deadline(0.2)
    problem = INSTANCES["exp2" if method == "flat" else "mix2"]
    res = solve(problem, method, stop, 0, {} if method == "greedy" else {"workers": 1})
    # Generous: the machine running the tests may be loaded; unbounded, these runs take minutes.
    assert res.wall_s <= 20.0, res.wall_s
    assert res.cost is None or res.verified
    if method == "greedy":
        assert 1 <= res.stats["runs"] < 50  # stopped early (at least one run is always done)


def test_stop_criterion():
    d = Deadline(math.inf)
    assert d.remaining() == math.inf and not d.expired() and d.share(0.5).remaining() == math.inf
    d = Deadline(10)
    assert 7.9 < d.share(0.8).remaining() <= 8.0 and d.share(0.5, most=1).remaining() <= 1.0
    assert Deadline(1e-9).share(0.5, least=3).remaining() > 2.9
    with pytest.raises(InputError, match=r"^time_limit must be positive, got 0$"):
        Deadline(0)


def test_result_is_immutable():
    res = solve(INSTANCES["exp1"], "greedy", seed=0, params={"runs": 3})
    with pytest.raises(dataclasses.FrozenInstanceError):
        res.cost = 0.0  # type: ignore[misc]
    with pytest.raises(TypeError):
        res.stats["runs"] = 9  # type: ignore[index]
    with pytest.raises(ValueError, match="read-only"):
        res.vm_pm[0] = 3  # type: ignore[index]
    with pytest.raises(TypeError):
        res.vm_disks[0][0] = 1  # type: ignore[index]
    other = dataclasses.replace(res, method="mine")
    assert other.method == "mine" and res.method == "greedy" and other.stats == res.stats
    assert pickle.loads(pickle.dumps(res)).summary() == res.summary()
    with pytest.raises(ValueError, match="status must be one of"):
        Result("x", "m", "great")


@pytest.mark.parametrize(
    ("params", "values", "message"),
    [
        (HierarchicalParams, {"packs": 0}, "packs must be at least 1, got 0"),
        (HierarchicalParams, {"beta": 1.5}, "beta must be in (0, 1], got 1.5"),
        (HierarchicalParams, {"first_level": "best"}, "first_level must be swads, cost or pattern, got 'best'"),
        (HierarchicalParams, {"split": "rows"}, "split must be random or topology, got 'rows'"),
        (HierarchicalParams, {"rack_size": -1}, "rack_size must be at least 0, got -1"),
        (GreedyParams, {"runs": 0}, "runs must be at least 1, got 0"),
        (CompactParams, {"workers": 0}, "workers must be a whole number from 1 to 256, got 0"),
        (PatternParams, {"master_share": 1.0}, "master_share must be in (0, 1), got 1.0"),
        (AutoParams, {"compact_max_pms": 0}, "compact_max_pms must be at least 1, got 0"),
        (NumaBatchParams, {"rounds": -1}, "rounds must be at least 0, got -1"),
        (GreedyParams, {"runs": 2.5}, "runs must be an integer, got 2.5"),
        (GreedyParams, {"runs": True}, "runs must be an integer, got True"),
        (HierarchicalParams, {"beta": "high"}, "beta must be a number, got 'high'"),
    ],
)
def test_params_errors_name_the_field_and_value(params, values, message):
    with pytest.raises(InputError, match="^" + re.escape(message) + "$") as err:
        params.from_dict(values)
    assert err.value.field == next(iter(values))
    with pytest.raises(InputError, match="^" + re.escape(message) + "$"):  # the constructor checks the same
        params(**values)


def test_params_load_from_toml_and_dicts(tmp_path):
    path = tmp_path / "run.toml"
    path.write_text('[solve.hierarchical]\npacks = 10\nbeta = 1\nfirst_level = "cost"\n[solve.greedy]\nruns = 7\n')
    h = HierarchicalParams.from_toml(path, "solve.hierarchical")
    assert h == HierarchicalParams(packs=10, beta=1.0, first_level="cost") and isinstance(h.beta, float)
    assert GreedyParams.from_toml(path, "solve.greedy") == GreedyParams(runs=7)
    assert PatternParams.from_toml(path, "solve.pattern") == PatternParams()  # no table: the defaults
    assert HierarchicalParams.from_dict(h.as_dict()) == h
    assert params_for("hierarchical", {"swads": 4}) == HierarchicalParams(swads=4)
    path.write_text("[solve.greedy]\nrun = 7\n")
    with pytest.raises(InputError, match=r"field 'solve.greedy.run': unknown key in the top-level table; its keys are"):
        GreedyParams.from_toml(path, "solve.greedy")
    path.write_text("[solve.greedy]\nruns = 0\n")
    with pytest.raises(InputError, match=r"run.toml, field 'solve.greedy.runs': runs must be at least 1, got 0"):
        GreedyParams.from_toml(path, "solve.greedy")
    docs = field_docs(HierarchicalParams)
    assert set(docs) == {f.name for f in dataclasses.fields(HierarchicalParams)}
    assert docs["beta"].startswith("Safety margin on disk counts")


def test_hierarchical_solves_its_swads_through_the_registry(tmp_path):
    """The decomposition's swads go through ``solve`` (a method registered in place of compact is the one used, in
    the forked pool workers too), and the packs / swads range is checked against the problem, naming the field."""
    with pytest.raises(InputError, match=r"^packs must be between 1 and 70 \(the problem\'s VMs\), got 100$"):
        solve(INSTANCES["exp1"], "hierarchical", 10, params={"packs": 100})
    log = tmp_path / "calls"
    real = get_method("compact")

    def counting(problem, stop, seed, params):
        with open(log, "a", encoding="utf-8") as fh:
            fh.write(f"{problem.n_vms}\n")
        return real.run(problem, stop, seed, params)

    register_method("compact", counting, CompactParams, replace=True)
    try:
        res = solve(INSTANCES["exp1"], "hierarchical", 30, params={"packs": 5, "swads": 5, "beta": 1.0, "workers": 1})
    finally:
        register_method("compact", real.run, CompactParams, replace=True, current=real.current)
    assert res.verified and sum(map(int, log.read_text().split())) == 70  # every VM, through the registered method


def test_placement_imports_go_one_way():
    """No import loop inside the placement package, counting imports anywhere in a module (function-level ones
    included); the registry and the building blocks import no method."""
    root = Path(__file__).resolve().parents[2] / "src" / "dcplace" / "placement"
    graph: dict[str, set[str]] = {}
    for path in root.glob("*.py"):
        if path.stem == "__init__":
            continue
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("dcplace.placement."):
                deps.add(node.module.split(".")[2])
            elif isinstance(node, ast.ImportFrom) and node.module == "dcplace.placement":
                deps.update(a.name for a in node.names)
            elif isinstance(node, ast.Import):
                deps.update(a.name.split(".")[2] for a in node.names if a.name.startswith("dcplace.placement."))
        graph[path.stem] = deps

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(d == goal or (d not in seen and not seen.add(d) and reaches(d, goal, seen)) for d in graph[start])

    assert not [m for m in graph if reaches(m, m, set())]
    methods = {"greedy", "compact", "flat", "pattern", "hierarchical", "auto", "numa_batch", "solve"}
    for base in ("stop", "result", "params", "registry", "cpsat", "problem", "checker"):
        assert not graph[base] & methods, (base, graph[base] & methods)
    assert "registry" in graph["hierarchical"] and "solve" not in graph["hierarchical"]


def test_the_cli_solves_with_a_users_method_by_module_name(tmp_path):
    """``dcplace solve --method module:name`` imports the module (where the documented example registers
    ``first-fit``) and solves with that method, verified; a module that is missing or fails on import is one
    sentence naming --method, exit 2 (it was "must be one of auto, ...": a user's method could not be run from the
    CLI)."""
    block = DOCS.read_text().split("<!-- example: user-method -->\n```python\n", 1)[1].split("```", 1)[0]
    (tmp_path / "usermethod.py").write_text(block)
    (tmp_path / "broken.py").write_text("1 / 0\n")
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "dcplace.cli.main", "solve", "--instance", "exp1", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    ok = run("--method", "usermethod:first-fit", "--json")
    assert ok.returncode == 0, ok.stderr
    summary = json.loads(ok.stdout)  # exactly one JSON object: the example printed a line of its own before it
    assert summary["method"] == "first-fit" and summary["verified"] and summary["cost"] >= 4540
    for method, said in (
        ("nosuchmodule:x", "cannot import module 'nosuchmodule'"),
        ("broken:x", "importing module 'broken' raised ZeroDivisionError: division by zero"),
        ("usermethod:nope", "must be one of auto, flat"),
    ):
        bad = run("--method", method)
        assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
        assert "--method" in bad.stderr and said in bad.stderr, bad.stderr


def test_the_cli_says_why_there_is_no_answer_and_exits_3(tmp_path):
    """No answer: the reason under the summary line, exit 3 and one line on stderr, and nothing in --out (a review
    of the CLI in scripts: it exited 0 and wrote an assignment of a header alone, so a pipeline went on)."""
    inst = tmp_path / "over.json"
    inst.write_text(json.dumps({"name": "over", "vms": [{"type": "w", "count": 100, "vcpu": 2, "mem_gib": 4,
                                                         "disks_gb": [10]}],
                                "pms": [{"type": "p", "count": 4, "vcpu": 8, "mem_gib": 32, "disks_gb": [512],
                                         "cost": 120}]}))  # fmt: skip
    out = tmp_path / "a.csv"
    r = _dcplace("solve", "--instance", str(inst), "--out", str(out))
    assert r.returncode == 3, r.stderr
    assert "over / auto: infeasible" in r.stdout and "why: the VMs need 200 vCPU in all, the PMs have 32" in r.stdout
    assert r.stderr.startswith("dcplace: no placement: the method's status is infeasible (the VMs need 200 vCPU")
    assert "nothing was written to --out" in r.stderr and not out.exists()
    j = _dcplace("solve", "--instance", str(inst), "--json")
    assert j.returncode == 3 and json.loads(j.stdout)["status"] == "infeasible"  # stdout still one JSON object


def test_an_answer_the_checker_rejects_is_invalid_in_the_record():
    """A user's method that ignores capacity claimed ``feasible``; its record (what ``solve --json`` prints) says
    ``invalid``, as a NUMA batch's does, while ``Result.status`` keeps the method's claim beside ``verified``."""

    def everything_on_the_first(problem, stop, seed, params):
        n = problem.n_vms
        types = zip(problem.vm_types, problem.vm_counts, strict=True)
        disks = [[0] * len(t.disks) for t, c in types for _ in range(c)]
        return Result(problem.name, "lazy", "feasible", 1.0, vms=n, vm_pm=[0] * n, vm_disks=disks)

    register_method("lazy", everything_on_the_first, GreedyParams)
    try:
        res = solve(INSTANCES["exp1"], "lazy", 5)
        assert res.status == "feasible" and not res.verified and res.violations
        assert res.summary()["status"] == "invalid"
        good = solve(INSTANCES["exp1"], "greedy", 5)
        assert good.summary()["status"] == good.status == "feasible" and good.verified
    finally:
        registry._METHODS.pop((Problem, "lazy"), None)


def test_a_methods_claims_about_its_cost_are_checked():
    """A user's method returned the right assignment and cost with status optimal and bound 99999: it came out
    verified with a negative gap. A bound above the cost, or optimal with a bound below it, is now a violation; a
    verified feasible answer whose cost equals its bound is optimal (hierarchical's pattern first level on exp1)."""
    from dataclasses import replace

    from dcplace.placement import claims_checked

    good = solve(INSTANCES["exp1"], "greedy", 10, seed=0)
    assert good.verified and good.cost is not None
    high = claims_checked(replace(good, status="optimal", bound=99999.0))
    assert not high.verified and "lower bound 99999 is above its answer's cost" in high.violations[-1]
    low = claims_checked(replace(good, status="optimal", bound=good.cost - 10))
    assert not low.verified and "claims optimal, but its bound" in low.violations[-1]
    tight = claims_checked(replace(good, status="feasible", bound=good.cost))
    assert tight.verified and tight.status == "optimal"
    pattern = solve(INSTANCES["exp1"], "hierarchical", 20, params={"first_level": "pattern"})
    assert pattern.cost == pattern.bound == 4540 and pattern.status == "optimal"


def test_hierarchical_says_why_it_found_no_answer():
    res = solve(INSTANCES["exp1"], "hierarchical", 20)  # 25 packs onto 25 swads of a 70-VM instance
    assert res.status == "unknown" and "no beta from 0.7 down to 0.1" in res.stats["reason"]


@pytest.mark.parametrize(
    "text, said",
    [
        ('{"vms": [{"count": 1, "vcpu": 2, "vcpu": 64, "mem_gib": 1}], "pms": []}', "the key 'vcpu' appears twice"),
        ('{"vms": [{"count": 1, "vpcu": 2, "mem_gib": 1}], "pms": []}', "field 'vms[0].vpcu': unknown key 'vpcu'"),
        ('{"vms": [], "pms": [], "rack": []}', "field 'rack': unknown key 'rack'"),
    ],
)
def test_a_problem_files_keys_are_checked(tmp_path, text, said):
    """A repeated key kept its last value, and a misspelt one was ignored (its field took the default)."""
    path = tmp_path / "p.json"
    path.write_text(text)
    with pytest.raises(InputError, match=re.escape(said)):
        load_problem(str(path))


@pytest.mark.parametrize(
    "build, said",
    [
        (
            lambda: Problem("p", (VMType("web", 2, 8, (10,)),), (-3,), (PMType("s", 4, 16, (100,), 1),), (2,)),
            "vm_counts must be whole numbers >= 0",
        ),  # it solved to cost 0, verified
        (
            lambda: Problem("p", (VMType("web", 2, 8, (10,)),), (3, 4), (PMType("s", 4, 16, (100,), 1),), (2,)),
            "vm_types has 1 entries and vm_counts 2",
        ),  # a zip error inside greedy
        (lambda: VMType("web", -2, 8, (10,)), "vcpu must be a whole number >= 0, got -2"),
        (lambda: VMType("web", 2.5, 8, (10,)), "vcpu must be a whole number >= 0, got 2.5"),  # an ortools TypeError
        (lambda: PMType("s", 4, 16, (100,), -1), "cost must be a whole number >= 0"),
    ],
)
def test_a_problem_built_in_python_is_checked(build, said):
    with pytest.raises(InputError, match=re.escape(said)):
        build()


BAD_METHODS = """
from dataclasses import dataclass

from dcplace.placement import Params, Result, register_method


@dataclass(frozen=True)
class NoParams(Params):
    pass


def raiser(problem, stop, seed, params):
    raise RuntimeError("my method bug")


def exits(problem, stop, seed, params):
    import sys
    sys.exit(4)


def not_a_result(problem, stop, seed, params):
    return {"cost": 1}


def everything_on_pm0(problem, stop, seed, params):
    kinds = problem.vm_type_of()
    disks = [[0] * len(problem.vm_types[k].disks) for k in kinds]
    return Result(problem.name, "sloppy", "feasible", vms=len(kinds), vm_pm=[0] * len(kinds), vm_disks=disks)


def says_infeasible(problem, stop, seed, params):
    return Result(problem.name, "liar", "infeasible", vms=problem.n_vms)


for name, run in (("raiser", raiser), ("exits", exits), ("dict", not_a_result), ("sloppy", everything_on_pm0),
                  ("liar", says_infeasible)):
    register_method(name, run, NoParams)
"""


def test_a_users_method_that_misbehaves_is_named_and_its_answer_never_written(tmp_path):
    """A user's method that raised was a dcplace traceback (exit 1); one returning a dict failed inside dataclasses;
    an answer the checker rejects exited 0 and --out wrote it; a claim of infeasibility read as proven."""
    (tmp_path / "badmethods.py").write_text(BAD_METHODS)
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "OMP_NUM_THREADS": "1"}

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        cmd = [sys.executable, "-m", "dcplace.cli.main", "solve", "--instance", "exp1", *args]
        return subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)

    for method, said in (
        ("raiser", "the method raiser (badmethods:raiser) raised RuntimeError: my method bug"),
        ("exits", "the method exits (badmethods:exits) raised SystemExit: 4"),  # it ended the process, exit 4
        ("dict", "the method dict (badmethods:not_a_result) returned a dict, not a dcplace.placement.Result"),
    ):
        r = run("--method", f"badmethods:{method}")
        assert r.returncode == 2 and r.stderr.strip() == f"error: {said}", r.stderr
    out = tmp_path / "a.csv"
    r = run("--method", "badmethods:sloppy", "--out", str(out), "--json")
    assert r.returncode == 2 and json.loads(r.stdout)["status"] == "invalid", r.stdout
    assert "fails the independent check" in r.stderr and "nothing was written to --out" in r.stderr, r.stderr
    assert not out.exists()
    r = run("--method", "badmethods:liar")  # no answer: exit 3 (OUTCOME_FAILED), the claim named, not proven
    assert r.returncode == 3 and "a claim the checker cannot verify" in r.stdout and "proven" not in r.stdout
