"""``dcplace compare cluster``: policies from a live cluster's state on the same windows of a trace."""

from __future__ import annotations

import copy
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from dcplace.bench.compare import CLUSTER_METRICS, compare_cluster, window_starts
from dcplace.cli.main import app
from dcplace.cluster.numa import NumaCluster
from dcplace.engine import PlacementEngine, VmRequest
from dcplace.engine.stream import engine_for, run_stream
from dcplace.errors import InputError
from dcplace.policies import NumaPolicy, NumaView, get_policy
from dcplace.sim.episodes import prepare
from dcplace.sim.numa import NumaSim, Scenario
from dcplace.workload.traces import load_trace

runner = CliRunner()


def _cluster(machines: int, vms: int, seed: int = 0, drained: int = 0) -> PlacementEngine:
    rng = np.random.default_rng(seed)
    e = PlacementEngine(2, "best-fit")
    for m in range(machines):
        e.add_machine(f"pm{m}", [float(rng.choice([16, 24, 48]))] * 2, [float(rng.choice([32, 64, 128]))] * 2)
    for i in range(vms):
        e.place(VmRequest(f"vm{i}", float(rng.choice([1, 2, 4, 8])), float(rng.choice([2, 4, 8, 16])),
                          bool(rng.random() < 0.1)))  # fmt: skip
    for m in range(drained):
        e.drain(f"pm{m}")
    return e


def test_a_window_from_an_empty_cluster_is_the_simulators_episode() -> None:
    """Independent of the engine: from an empty cluster, a window's placements before its first rejection are the
    length of the simulator's episode that starts at the same request (no warm start)."""
    pms = 4
    snap = engine_for(NumaCluster.uniform(pms)).snapshot()
    prepared = prepare(load_trace("synthetic", seed=1), 32.0)  # the synthetic trace is drawn with the run's seed
    table = compare_cluster(["best-fit", "first-fit"], snap, "synthetic", requests=400, windows=3, seed=1)
    starts = table.context["starts"]
    assert starts == window_starts(len(prepared.arrival_events), 400, 3, 1)
    for policy in ("best-fit", "first-fit"):
        for w, first in enumerate(starts):
            ev = int(prepared.arrival_events[first])
            sim = NumaSim(NumaCluster.uniform(pms), prepared, Scenario(pms=pms, warm_start=0.0,
                                                                        start_range=(ev, ev + 1)))  # fmt: skip
            sim.reset(seed=0)
            get_policy(policy).run(sim)  # type: ignore[attr-defined]
            got = table.episode_metrics[policy][w]["first_rejection"]
            assert got == min(sim.result().length, 400), (policy, w)
    assert any(e["accepted"] < 400 for e in table.episode_metrics["best-fit"])  # the windows do reject: a real test


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(machines=st.integers(1, 6), vms=st.integers(0, 40), drained=st.integers(0, 2), seed=st.integers(0, 99),
       policy=st.sampled_from(["first-fit", "industrial", "random"]))  # fmt: skip
def test_windows_keep_every_invariant_and_leave_the_state_alone(machines: int, vms: int, drained: int, seed: int,
                                                                policy: str) -> None:  # fmt: skip
    snap = _cluster(machines, vms, seed, min(drained, machines)).snapshot()
    before = copy.deepcopy(snap)
    args: dict[str, Any] = {"requests": 60, "windows": 3, "seed": seed}
    table = compare_cluster(["best-fit", policy], snap, "synthetic", **args)  # engines' invariants checked inside
    assert snap == before  # every window started from the same state: none was changed
    cap_machines = table.context["machines"]
    for rows in table.episode_metrics.values():
        for e in rows:
            assert 0 <= e["first_rejection"] <= e["accepted"] <= 60
            assert sum(v for k, v in e.items() if k.startswith("rejected_")) == 60 - e["accepted"]
            assert 0 <= e["machines_in_use"] <= cap_machines
            assert 0 <= e["cpu_alloc"] <= 1 + 1e-9 and 0 <= e["mem_alloc"] <= 1 + 1e-9
    again = compare_cluster(["best-fit", policy], snap, "synthetic", **args)
    assert again.episode_metrics == table.episode_metrics  # same seed, same numbers


def test_the_clusters_vms_stay_and_drained_machines_take_nothing() -> None:
    src = _cluster(5, 30, seed=3, drained=2)
    snap = src.snapshot()
    where = {v["id"]: (v["machine"], v["node"]) for v in snap["vms"]}
    engine = PlacementEngine.restore(snap, "best-fit")
    res = run_stream(engine, prepare(load_trace("synthetic", seed=0), 32.0), start_event=500, max_requests=300,
                     samples=0, prefix="t-")  # fmt: skip
    assert res.accepted > 0 and res.rejected > 0
    now = {r.id: (r.machine, r.node) for r in engine.vms()}
    assert {k: now[k] for k in where} == where  # every VM of the cluster where it was
    new = set(now) - set(where)
    assert new and all(k.startswith("t-") for k in new)
    assert not any(now[k][0] in ("pm0", "pm1") for k in new)  # drained: nothing new there
    engine.check_invariants()


def _by_hand(snap: dict[str, Any], spec: str, prepared: Any, start: int, requests: int) -> dict[str, float]:
    """One window as the docs describe it, assembled here: a fresh policy, the state restored, the stream played."""
    from dcplace.bench.compare import split_checkpoint

    name, checkpoint = split_checkpoint(spec)
    engine = PlacementEngine.restore(snap, get_policy(name, checkpoint=checkpoint))
    res = run_stream(engine, prepared, start_event=int(prepared.arrival_events[start]), max_requests=requests,
                     samples=0, prefix="whatif-")  # fmt: skip
    return {"accepted": float(res.accepted), "first_rejection": float(res.first_rejection),
            "machines_in_use": float(np.count_nonzero(engine.state.vm_count))}  # fmt: skip


@pytest.mark.parametrize("spec", ["best-fit", "industrial"])
def test_every_window_starts_from_the_clusters_vms(spec: str) -> None:
    """Each window is the cluster's state, restored, then the trace: its numbers are those of a window assembled by
    hand, and not those of the same machines empty (a window that dropped the cluster's VMs passed every test)."""
    full = _cluster(6, 120, seed=5, drained=1).snapshot()
    empty = {**full, "vms": []}
    prepared = prepare(load_trace("synthetic", seed=2), 32.0)
    table = compare_cluster([spec, "first-fit"], full, "synthetic", requests=300, windows=3, seed=2)
    got = [{k: e[k] for k in ("accepted", "first_rejection", "machines_in_use")} for e in table.episode_metrics[spec]]
    assert got == [_by_hand(full, spec, prepared, w, 300) for w in table.context["starts"]]
    assert got != [_by_hand(empty, spec, prepared, w, 300) for w in table.context["starts"]]


class Tiring(NumaPolicy):
    """A policy with state of its own: first-fit for its first 30 decisions, then it declines everything."""

    name = "tiring"

    def __init__(self) -> None:
        self.decisions = 0

    def choose(self, view: NumaView) -> int:
        self.decisions += 1
        feasible = np.flatnonzero(view.feasible())
        return int(feasible[0]) if self.decisions <= 30 and len(feasible) else -1


def test_a_policy_that_keeps_state_starts_every_window_afresh() -> None:
    """A policy object keeps what it learnt between decisions (PADRL's forecast runs on: the engine never resets it,
    a service's stream goes on); one object shared by the windows made a window's numbers depend on the windows
    before it (144 of 300 of PADRL's decisions differed in a review)."""
    snap = _cluster(12, 60, seed=1).snapshot()
    table = compare_cluster(["best-fit", f"{__name__}:Tiring"], snap, "synthetic", requests=100, windows=3, seed=0)
    rows = table.episode_metrics[f"{__name__}:Tiring"]
    assert [e["accepted"] for e in rows] == [30.0] * 3 and [e["rejected_declined"] for e in rows] == [70.0] * 3


def test_a_policy_that_cannot_act_on_these_machines_is_refused_first(tmp_path: Path) -> None:
    """A 4-NUMA cluster with a network trained for 2 nodes per machine: its compiled code wrote past its arrays and
    the process died of heap corruption (a review); now one sentence before any window, and the engine and the
    service refuse the pairing at the start."""
    e = PlacementEngine(4)
    for m in range(4):
        e.add_machine(f"m{m}", [16] * 4, [64] * 4)
    state = tmp_path / "n4.json"
    state.write_text(json.dumps(e.snapshot()))
    for policy in ("cvd-rl", "cvd-rl-machine"):
        res = runner.invoke(app, ["compare", "cluster", "--snapshot", str(state), "--policies", "best-fit",
                                  "--policies", policy, "--requests", "50", "--windows", "2"])  # fmt: skip
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert res.stderr.strip().splitlines() == [f"error: --policies: {policy}: {policy} acts on machines of 2 NUMA "
                                                   "nodes, and this cluster's have 4: give a checkpoint trained for "
                                                   "4"], res.stderr  # fmt: skip
    with pytest.raises(InputError, match="acts on machines of 2 NUMA nodes"):
        PlacementEngine(4, "cvd-rl")
    with pytest.raises(InputError, match="acts on machines of 2 NUMA nodes"):
        e.place(VmRequest("v", 1, 1), "cvd-rl")
    e.check_invariants()
    agent = get_policy("cvd-rl").agent  # type: ignore[attr-defined]
    with pytest.raises(InputError, match="trained for machines of 2 NUMA nodes"):  # any caller of the network
        agent.act(e.state.view(1.0, 1.0, False))


def test_the_traces_vm_ids_never_meet_the_clusters() -> None:
    """A cluster whose VMs are named as the trace's would be (``whatif-<row>``): the same numbers as with other
    names (without a prefix of its own the first such placement was a conflict)."""
    prepared = prepare(load_trace("synthetic", seed=0), 32.0)
    first = window_starts(len(prepared.arrival_events), 100, 2, 0)
    rows = [int(prepared.ev_req[prepared.arrival_events[f + k]]) for f in first for k in range(3)]
    plain = _cluster(4, len(rows), seed=1)
    snap = plain.snapshot()
    renamed = copy.deepcopy(snap)
    names = {f"vm{i}": f"whatif-{r}" for i, r in enumerate(rows)}
    for v in renamed["vms"]:
        v["id"] = names[v["id"]]
    renamed["vms"].sort(key=lambda v: v["id"])
    a = compare_cluster(["best-fit", "first-fit"], snap, "synthetic", requests=100, windows=2, seed=0)
    b = compare_cluster(["best-fit", "first-fit"], renamed, "synthetic", requests=100, windows=2, seed=0)
    assert a.episode_metrics == b.episode_metrics


def test_a_database_is_read_while_its_engine_holds_it_and_not_written(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    owner = PlacementEngine.open(db)
    for m in range(3):
        owner.add_machine(f"pm{m}", 24, 64)
    for i in range(10):
        owner.place(VmRequest(f"vm{i}", 2.0, 4.0, False))

    def files() -> dict[str, str]:  # the database and its log (the -shm file is the readers' index: a read marks it)
        return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(tmp_path.iterdir())
                if not p.name.endswith("-shm")}  # fmt: skip

    before = files()
    with pytest.raises(InputError):  # the owner holds the database: a second engine is refused ...
        PlacementEngine.open(db)
    assert PlacementEngine.read_snapshot(db) == owner.snapshot()  # ... but its state can be read
    assert files() == before
    owner.close()


def _state_file(tmp_path: Path, machines: int = 4) -> str:
    path = tmp_path / "state.json"
    path.write_text(json.dumps(_cluster(machines, 12).snapshot()))
    return str(path)


def test_the_command_prints_and_writes(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    for m in range(4):
        e.add_machine(f"pm{m}", 24, 64)
    e.close()
    res = runner.invoke(app, ["compare", "cluster", "--db", str(db), "--policies", "best-fit", "--policies",
                              "random", "--requests", "80", "--windows", "3",
                              "--out", str(tmp_path / "out")])  # fmt: skip
    assert res.exit_code == 0, res.output
    assert "windows from the cluster's state" in res.stdout and "random" in res.stdout
    header = (tmp_path / "out" / "episodes.csv").read_text().splitlines()[0].split(",")
    assert header[:2] == ["policy", "episode"] and set(CLUSTER_METRICS) <= set(header)
    assert json.loads((tmp_path / "out" / "result.json").read_text())["simulator"] == "cluster"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        ([], "--db: give exactly one of --db"),
        (["--db", "DB", "--snapshot", "STATE"], "--db: give exactly one of --db"),
        (["--db", "nowhere.db"], "--db: nowhere.db does not exist"),
        (["--snapshot", "nowhere.json"], "--snapshot: cannot read nowhere.json"),
        (["--snapshot", "NOTJSON"], "is not JSON"),
        (["--snapshot", "NOTSTATE"], "is not a cluster's state"),
        (["--snapshot", "EMPTY"], "the cluster has no machines"),
        (["--snapshot", "STATE", "--requests", "100000"], "--requests: the trace has 20000 requests"),
        (["--snapshot", "STATE", "--requests", "19999", "--windows", "3"], "--windows: the trace has room for 2"),
        (["--snapshot", "STATE", "--windows", "0"], "--windows must be at least 1"),
        (["--snapshot", "STATE", "--policies", "best-fit", "--policies", "nope"], "--policies: nope: must be one of"),
        (["--snapshot", "STATE", "--policies", "best-fit"], "needs at least two policies"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(flags: list[str], said: str, tmp_path: Path,
                                              monkeypatch: pytest.MonkeyPatch) -> None:  # fmt: skip
    files = {"DB": str(tmp_path / "c.db"), "STATE": _state_file(tmp_path)}
    (tmp_path / "c.db").write_bytes(b"")
    (tmp_path / "notjson.txt").write_text("{")
    (tmp_path / "notstate.json").write_text('{"machines": []}')
    (tmp_path / "empty.json").write_text(json.dumps(PlacementEngine(2).snapshot()))
    files |= {"NOTJSON": str(tmp_path / "notjson.txt"), "NOTSTATE": str(tmp_path / "notstate.json"),
              "EMPTY": str(tmp_path / "empty.json")}  # fmt: skip
    args = [files.get(f, f) for f in flags]
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["compare", "cluster", *args])
    assert res.exit_code == 2, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0] and "Traceback" not in res.output, res.stderr


def test_a_database_no_engine_holds_is_read_without_a_file_beside_it(tmp_path: Path) -> None:
    """A read-only connection to a WAL database leaves empty -wal and -shm files beside it (and fails on a read-only
    mount); where no engine holds it and its -wal holds nothing it is read as an immutable file. A crashed service's
    -wal, holding committed changes, is still read."""
    import subprocess
    import sys

    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("pm0", 24, 64)
    e.place(VmRequest("vm0", 2.0, 4.0, False))
    e.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db"]
    snap = PlacementEngine.read_snapshot(db)
    assert [v["id"] for v in snap["vms"]] == ["vm0"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["c.db"]  # nothing beside it, nothing changed
    crash = ("import os, sys; from dcplace.engine import PlacementEngine, VmRequest; e = PlacementEngine.open("
             "sys.argv[1]); e.place(VmRequest('vm1', 2.0, 4.0, False)); os._exit(0)")  # fmt: skip
    subprocess.run([sys.executable, "-c", crash, str(db)], check=True, timeout=120)
    assert (tmp_path / "c.db-wal").stat().st_size > 0  # committed, not yet in the main file
    assert sorted(v["id"] for v in PlacementEngine.read_snapshot(db)["vms"]) == ["vm0", "vm1"]


@pytest.mark.parametrize(
    ("change", "said"),
    [
        (lambda s: s.update(numa="2"), "numa is '2', not a whole number"),
        (lambda s: s.update(numa=True), "numa is True, not a whole number"),
        (lambda s: s["machines"][0].update(slot=0.5), "machines[0].slot is 0.5"),
        (lambda s: s["machines"][0].update(capacity=[[10**400, 8], [8, 8]]), "int too large to convert to float"),
        (lambda s: s["machines"][0].update(capacity=[[8, "8"], [8, 8]]), "machines[0].capacity is not a list of"),
        (lambda s: s["vms"][0].update(cpu=10**400), "int too large to convert to float"),
        (lambda s: s["vms"][0].update(pinned="yes"), "vms[0].pinned is 'yes'"),
        (lambda s: s["vms"][0].update(machine=7), "vms[0].machine is 7"),
        (lambda s: s["vms"][0].pop("uid"), "vms[0] is not an object with exactly id, machine"),
        (lambda s: s["vms"].append(s["vms"][0]), "a VM 'vm0' is already placed"),
        (lambda s: s["vms"][0].update(cpu=float("nan")), "VM 'vm0', cpu: must be a number"),
        (lambda s: s["vms"][0].update(node=7), "VM 'vm0', node: must be a NUMA node from 0 to 1"),
        (lambda s: s.update(numa=4), "has capacity [[48.0, 64.0], [48.0, 64.0]], not [cores, GB] for each of 4"),
        (lambda s: s["machines"][0].update(status="zzz"), "has status 'zzz', not active, drained or failed"),
        (
            lambda s: (s.clear(), s.update(detail="this service needs a bearer token")),
            "holds an error answer of the service, not a cluster's state: this service needs a bearer token",
        ),
    ],
)
def test_a_state_with_a_wrong_field_is_one_sentence(change, said: str, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Fields of the wrong type were taken (``"2"`` NUMA nodes, a ``"yes"`` pin) or failed with a traceback (a slot
    of 0.5, a 400-digit number): a review of ``compare cluster``."""
    snap = _cluster(3, 5).snapshot()
    change(snap)
    path = tmp_path / "state.json"
    path.write_text(json.dumps(snap))
    res = runner.invoke(app, ["compare", "cluster", "--snapshot", str(path), "--requests", "20", "--windows", "2"])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: --snapshot: ") and said in lines[0], lines


def test_capacity_plans_play_the_same_windows_with_machines_added() -> None:
    """``cluster plan``: the cluster as it is plays exactly what ``compare cluster`` plays with the same policy; with
    as many new machines as a window has requests, each big enough for any VM, every request is accepted (each
    finds an empty machine at least)."""
    from dcplace.bench.compare import plan_capacity

    snap = _cluster(4, 40, seed=2).snapshot()
    plan = plan_capacity([0, 3, 60], snap, 64.0, [256.0, 256.0], "best-fit", "synthetic", requests=60, windows=4,
                         seed=1)  # fmt: skip
    same = compare_cluster(["best-fit", "first-fit"], snap, "synthetic", requests=60, windows=4, seed=1)
    assert plan.episode_metrics["+0 machines"] == same.episode_metrics["best-fit"]
    assert plan.context["starts"] == same.context["starts"] and plan.context["added"] == [0, 3, 60]
    assert any(e["accepted"] < 60 for e in plan.episode_metrics["+0 machines"])  # the cluster as it is rejects
    assert [e["accepted"] for e in plan.episode_metrics["+60 machines"]] == [60.0] * 4
    assert [r.policy for r in plan.rows] == ["+0 machines", "+3 machines", "+60 machines"]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--add", "5"], "--add: needs at least two numbers of machines"),
        (["--add", "0", "--add", "5", "--add", "5"], "--add: names 5 twice"),
        (["--add", "-1"], "--add: takes whole numbers from 0 to 100,000"),
        (["--cpu", "0"], "--cpu must be a number at least"),
        (["--mem", "1", "--mem", "2", "--mem", "3"], "--mem must give one value per NUMA node (2), got 3"),
        (["--policy", "nope"], "--policy: nope: must be one of"),
        (["--metric", "speed"], "--metric"),
    ],
)
def test_a_bad_plan_is_one_sentence_and_exit_2(flags: list[str], said: str, tmp_path: Path) -> None:
    res = runner.invoke(app, ["cluster", "plan", "--snapshot", _state_file(tmp_path), "--requests", "20",
                              "--windows", "2", *flags])  # fmt: skip
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], lines


def test_the_tie_warning_names_a_metric_that_can_help(tmp_path: Path) -> None:
    """Tied on machines_in_use, the warning suggested --metric machines_in_use and said every request was accepted
    when they were not (a newcomer's walkthrough)."""
    state = _state_file(tmp_path, machines=40)  # room for everything: every policy accepts all, packs alike
    for metric, said in (("accepted", "try --metric machines_in_use"), ("first_rejection", "try another --metric")):
        res = runner.invoke(app, ["compare", "cluster", "--snapshot", state, "--policies", "best-fit", "--policies",
                                  "industrial", "--requests", "10", "--windows", "2", "--metric", metric])  # fmt: skip
        assert res.exit_code == 0, res.output
        warning = [line for line in res.stderr.splitlines() if line.startswith("warning: every policy tied")]
        assert len(warning) == 1 and said in warning[0] and f"{metric} cannot tell" in warning[0], res.stderr
    out = json.loads(runner.invoke(app, ["compare", "cluster", "--snapshot", state, "--requests", "10", "--windows",
                                         "2", "--json"]).stdout)  # fmt: skip
    assert {"rejected_cpu", "rejected_mem", "rejected_declined"} <= set(out["rows"][0])  # by reason, always there


def test_a_target_finds_the_fewest_machines_the_windows_support(tmp_path: Path) -> None:
    """``cluster plan --target``: the fewest new machines with which the mean share of requests accepted reaches the
    target, checked against plain plans of that number and one fewer; one sentence where even --max-add falls
    short; the intervals of requests accepted stay within the window."""
    from dcplace.bench.compare import plan_capacity

    snap = _cluster(4, 40, seed=2).snapshot()
    args: dict[str, Any] = {"trace": "synthetic", "requests": 200, "windows": 4, "seed": 1}
    found = plan_capacity([], snap, 16.0, 32.0, "best-fit", target=0.9, **args)
    k = found.context["fewest"]
    assert k > 1 and found.rows[0].policy == "+0 machines" and found.rows[-1].policy == f"+{k} machines"

    def share(n: int) -> float:
        plan = plan_capacity([0, n], snap, 16.0, 32.0, "best-fit", **args)
        return sum(e["accepted"] for e in plan.episode_metrics[f"+{n} machines"]) / (200 * 4)

    assert share(k) >= 0.9 > share(k - 1)
    assert found.context["tried"][str(k)] == share(k)
    assert all(r.mean.hi <= 200 for r in found.rows)
    with pytest.raises(InputError, match="even 3 more machines accept"):
        plan_capacity([], snap, 16.0, 32.0, "best-fit", target=0.9, max_add=3, **args)
    res = runner.invoke(app, ["cluster", "plan", "--snapshot", _state_file(tmp_path), "--target", "1.5",
                              "--requests", "20", "--windows", "2"])  # fmt: skip
    assert res.exit_code == 2 and res.stderr.strip().startswith("error: --target must be a share above 0")
