"""Drift: making the records what the cluster runs (``PlacementEngine.reconcile``) and recording a migration done
outside dcplace (``PlacementEngine.move``), from an operator's review (2026-11-29): a re-import of a fresh export of
reality stopped at the first changed VM, and a hand migration could only be recorded as a release and a new
placement, which are not one step and lost the VM's pin and uid."""

from __future__ import annotations

import json
import time
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import journal_replay, journal_tables
from dcplace.cli.main import app
from dcplace.engine import Conflict, MachineSpec, NotFound, PlacementEngine, VmRequest
from dcplace.engine.journal import BY
from dcplace.errors import InputError


def _cluster(e: PlacementEngine, seed: int, vms: int = 40) -> None:
    rng = np.random.default_rng(seed)
    for m in range(6):
        e.add_machine(f"m{m}", 16, 32)
    for i in range(vms):
        cpu = float(rng.choice([1, 2, 4]))
        e.place(VmRequest(f"v{i}", cpu, cpu, bool(rng.random() < 0.2), bool(rng.random() < 0.2),
                          f"u{i}" if rng.random() < 0.3 else None), explain=False)  # fmt: skip


def _reality(e: PlacementEngine, seed: int) -> list[dict[str, object]]:
    """What the cluster runs after drift the records missed: VMs made, deleted, resized (recreated), migrated, pins
    changed, on a copy of the records (so it fits the machines, as reality does)."""
    rng = np.random.default_rng(10_000 + seed)
    r = e.copy()
    for vm in [v.id for v in r.vms()]:
        x = rng.random()
        rec = r.vm(vm)
        if x < 0.15:
            r.release(vm)
        elif x < 0.25:  # recreated under its name with another size
            r.release(vm)
            r.place(VmRequest(vm, rec.cpu / 2, rec.mem, rec.multi), explain=False)
        elif x < 0.45:  # migrated by hand somewhere it fits
            for m in r.machines():
                node = None if rec.multi else int(rng.integers(0, 2))
                try:
                    r.move(vm, m.id, node)
                    break
                except Conflict:
                    continue
        elif x < 0.55:
            r.pin(vm, vm not in r.pinned)
    for i in range(int(rng.integers(0, 8))):
        r.place(VmRequest(f"new{i}", 1, 1), explain=False)
    return r.export_allocations()


def _as_inventory(e: PlacementEngine) -> dict[str, tuple[object, ...]]:
    return {v.id: (v.machine, v.node, v.cpu, v.mem, v.multi, v.id in e.pinned, e.uids.get(v.id)) for v in e.vms()}


def _rows(rows: list[dict[str, object]]) -> dict[str, tuple[object, ...]]:
    return {str(r["vm"]): (r["machine"], r["node"], r["cpu"], r["mem"], r["node"] is None, r["pinned"], r["uid"])
            for r in rows}  # fmt: skip


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000))
def test_reconcile_makes_the_records_the_inventory_and_the_journal_says_how(tmp_path_factory, seed) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path_factory.mktemp("rec") / "c.db"
    e = PlacementEngine.open(db)
    _cluster(e, seed)
    rows = _reality(e, seed)
    before, journal_before = e.snapshot(), len(e.journal(limit=None))
    dry = e.reconcile(rows, execute=False)
    assert e.snapshot() == before and len(e.journal(limit=None)) == journal_before  # a dry run changes nothing
    done = e.reconcile(rows)
    assert done.as_dict() | {"applied": False} == dry.as_dict()  # the dry run said what was done
    assert _as_inventory(e) == _rows(rows)
    e.check_invariants()
    assert journal_replay(e.journal(limit=None)) == journal_tables(e)  # moves as moves: the history holds
    moved = {m[0] for m in done.moved}
    assert moved.isdisjoint(done.replaced) and moved.isdisjoint(done.added)
    assert {x.vm for x in e.journal(event="moved", limit=None)} >= moved
    again = e.reconcile(rows)  # nothing left to do
    assert (again.added, again.removed, again.moved, again.replaced, again.repinned) == ((), (), (), (), ())
    e.close()
    reopened = PlacementEngine.open(db)
    assert _as_inventory(reopened) == _rows(rows)
    reopened.close()


def test_an_inventory_that_does_not_fit_is_refused_whole_naming_its_row() -> None:
    e = PlacementEngine(2, "first-fit")
    e.add_machine("m0", 8, 16)
    e.add_machine("m1", 8, 16)
    e.assign("a", "m0", 0, 4, 4)
    e.pin("a")
    before, pins = e.snapshot(), set(e.pinned)
    rows = [{"vm": "a", "machine": "m1", "node": 0, "cpu": 4, "mem": 4},
            {"vm": "b", "machine": "m1", "node": 0, "cpu": 4, "mem": 4},
            {"vm": "c", "machine": "m1", "node": 0, "cpu": 1, "mem": 1}]  # fmt: skip
    with pytest.raises(Conflict, match=r"does not fit on machine 'm1' node 0") as err:
        e.reconcile(rows)
    assert err.value.field == "[0].machine"  # the move that found no room, as the row it came from
    assert e.snapshot() == before and e.pinned == pins
    with pytest.raises(NotFound) as err:
        e.reconcile([{"vm": "a", "machine": "m9", "node": 0, "cpu": 4, "mem": 4}])
    assert err.value.field == "[0].machine" and e.snapshot() == before
    with pytest.raises(InputError, match="a second time"):
        e.reconcile([rows[0], rows[0]])
    e.check_invariants()


def test_a_swap_on_full_machines_is_one_step() -> None:
    """Reality swapped two VMs that fill their nodes: moved one at a time, neither fits; all moves leave first."""
    e = PlacementEngine(2, "first-fit")
    e.add_machine("m0", 8, 16)
    e.add_machine("m1", 8, 16)
    e.assign("a", "m0", 0, 8, 16)  # each fills its node
    e.assign("b", "m1", 0, 8, 16)
    rows = [{"vm": "a", "machine": "m1", "node": 0, "cpu": 8, "mem": 16},
            {"vm": "b", "machine": "m0", "node": 0, "cpu": 8, "mem": 16}]  # fmt: skip
    with pytest.raises(Conflict):
        e.move("a", "m1", 0)
    rep = e.reconcile(rows)
    assert len(rep.moved) == 2 and (e.vm("a").machine, e.vm("b").machine) == ("m1", "m0")
    e.check_invariants()


def test_a_row_without_pin_or_uid_keeps_the_records_and_one_with_them_sets_them() -> None:
    e = PlacementEngine(2, "first-fit")
    e.add_machine("m0", 8, 16)
    e.place(VmRequest("a", 1, 1, pinned=True, uid="u1"))
    e.place(VmRequest("b", 1, 1, pinned=True))
    here = {v.id: (v.machine, v.node) for v in e.vms()}
    a = {"vm": "a", "machine": here["a"][0], "node": here["a"][1], "cpu": 1, "mem": 1}  # what reality knows
    rows = [a, {"vm": "b", "machine": here["b"][0], "node": here["b"][1], "cpu": 1, "mem": 1, "pinned": False}]
    rep = e.reconcile(rows)
    assert rep.repinned == ("b",) and rep.unchanged == 1
    assert e.pinned == {"a"} and e.uids == {"a": "u1"}
    rep = e.reconcile([{**rows[0], "uid": "u2"}, rows[1]])  # another incarnation under its name
    assert rep.replaced == ("a",) and e.uids == {"a": "u2"} and "a" in e.pinned


def test_move_records_a_migration_done_outside(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 8, 16)
    e.add_machine("m1", 8, 16)
    e.place(VmRequest("a", 2, 2, pinned=True, uid="u"))
    e.place(VmRequest("s", 2, 2, multi=True))
    before = e.snapshot()
    asked = e.move("a", "m1", 1, execute=False)  # before migrating: would it fit?
    assert (asked.machine, asked.node) == ("m1", 1) and e.snapshot() == before and e.counters["migrated"] == 0
    rec = e.move("a", "m1", 1, now=5.0)
    assert (rec.machine, rec.node) == ("m1", 1) and "a" in e.pinned and e.uids["a"] == "u"
    assert e.moved_at["a"] == 5.0 and e.counters["migrated"] == 1
    assert e.move("a", "m1", 1).machine == "m1" and e.counters["migrated"] == 1  # already there: nothing done
    assert e.move("s", "m1", None).node is None
    for args, kind, words in ((("s", "m0", 0), InputError, "split over every node"),
                              (("a", "m0", None), InputError, "on one node"),
                              (("a", "m9", 0), NotFound, "m9"), (("zz", "m0", 0), NotFound, "zz"),
                              (("a", "m0", 5), InputError, "NUMA node")):  # fmt: skip
        with pytest.raises(kind, match=words):
            e.move(*args)
    e.assign("big", "m0", 0, 8, 8)
    with pytest.raises(Conflict, match="does not fit"):
        e.move("a", "m0", 0)
    assert e.vm("a").machine == "m1"  # left where it was
    e.check_invariants()
    moved = e.journal(vm="a", event="moved", limit=None)
    assert [(x.machine, x.node, x.detail) for x in moved] == [
        ("m1", 1, {"from": "m0", "from_node": 0, "by": "reported"})
    ]
    assert journal_replay(e.journal(limit=None)) == journal_tables(e)
    e.close()


def test_reconcile_and_move_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 8, 16)
    e.add_machine("m1", 8, 16)
    e.assign("a", "m0", 0, 2, 2)
    e.assign("gone", "m0", 1, 2, 2)
    e.close()
    inv = tmp_path / "inv.csv"
    inv.write_text("vm,machine,node,cpu,mem\na,m1,1,2,2\nnew,m0,all,2,2\n", encoding="utf-8")
    runner = CliRunner()
    dry = runner.invoke(app, ["cluster", "reconcile", str(inv), "--db", str(db), "--dry-run"])
    assert dry.exit_code == 0 and "would change (dry run): 1 recorded, 1 released, 1 moved" in dry.output, dry.output
    t0 = time.time()
    done = runner.invoke(app, ["cluster", "reconcile", str(inv), "--db", str(db), "--json"])
    assert done.exit_code == 0 and '"applied": true' in done.output, done.output
    e = PlacementEngine.open(db)
    assert {v.id: (v.machine, v.node) for v in e.vms()} == {"a": ("m1", 1), "new": ("m0", None)}
    # the offline commands move on the service's clock, so a service started after them cools the VM down
    t1 = time.time()
    assert list(e.moved_at) == ["a"] and t0 <= e.moved_at["a"] <= t1
    # a size recorded anew keeps its last move, as resize() does, unless the row names another uid (a new VM)
    e.reconcile([{"vm": "a", "machine": "m1", "node": 1, "cpu": 3, "mem": 2},
                 {"vm": "new", "machine": "m0", "node": "all", "cpu": 2, "mem": 2}], now=t1)  # fmt: skip
    assert e.vm("a").cpu == 3 and e.moved_at["a"] <= t1
    e.reconcile([{"vm": "a", "machine": "m0", "node": 0, "cpu": 2, "mem": 2},  # resized and moved: moved now
                 {"vm": "new", "machine": "m0", "node": "all", "cpu": 2, "mem": 2}], now=t1 + 50)  # fmt: skip
    assert e.moved_at["a"] == t1 + 50
    e.reconcile([{"vm": "a", "machine": "m1", "node": 1, "cpu": 3, "mem": 2},
                 {"vm": "new", "machine": "m0", "node": "all", "cpu": 2, "mem": 2}], now=t1)  # fmt: skip
    e.close()
    e = PlacementEngine.open(db)
    assert list(e.moved_at) == ["a"]
    e.reconcile([{"vm": "a", "machine": "m1", "node": 1, "cpu": 3, "mem": 2, "uid": "another"},
                 {"vm": "new", "machine": "m0", "node": "all", "cpu": 2, "mem": 2}], now=t1)  # fmt: skip
    assert not e.moved_at
    e.reconcile([{"vm": "a", "machine": "m1", "node": 1, "cpu": 2, "mem": 2},
                 {"vm": "new", "machine": "m0", "node": "all", "cpu": 2, "mem": 2}], now=t1)  # fmt: skip
    e.close()
    res = runner.invoke(app, ["cluster", "move", "a", "m0", "--node", "0", "--db", str(db), "--dry-run"])
    assert res.exit_code == 0 and "a would fit on m0 node 0 (dry run)" in res.output, res.output
    res = runner.invoke(app, ["cluster", "move", "a", "m0", "--node", "0", "--db", str(db)])
    assert res.exit_code == 0 and "a now on m0 node 0" in res.output, res.output
    e = PlacementEngine.open(db)
    assert e.moved_at["a"] >= t1 and e.vm("a").machine == "m0"
    e.close()
    bad = tmp_path / "bad.csv"
    bad.write_text("vm,machine,node,cpu,mem\na,m1,1,2,2\nb,m1,1,99,2\n", encoding="utf-8")
    for args, said in ((["cluster", "reconcile", str(bad), "--db", str(db)], f"{bad}, line 3, field 'vm'"),
                       (["cluster", "move", "a", "m9", "--node", "0", "--db", str(db)], "MACHINE: "),
                       (["cluster", "move", "a", "m0", "--db", str(db)], "--node"),
                       (["cluster", "move", "a", "m0", "--node", "x", "--db", str(db)], "--node")):  # fmt: skip
        res = runner.invoke(app, args)
        assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output, (args, res.output)


@pytest.mark.parametrize("machines", [4, 600])  # 600: the heuristics' capacity index decides from 512 machines
def test_a_machine_changed_while_it_hosts_vms_takes_what_its_new_capacity_holds(machines: int) -> None:
    """An operator's review: a machine replaced by a bigger one (or moved to another rack) could not be changed while
    it hosted VMs; re-registering it was a 409, and removing it needed it empty."""
    e = PlacementEngine(2, "best-fit")
    e.add_machines([MachineSpec(f"m{m}", 8, 16, "r1") for m in range(machines)])
    e.import_allocations([{"vm": f"a{m}", "machine": f"m{m}", "node": 0, "cpu": 6, "mem": 6} for m in range(machines)])
    big = f"m{machines - 1}"
    with pytest.raises(Conflict, match="node 0 holds 6 cores of VMs, more than the 4 asked for") as err:
        e.change_machine(big, 4)
    assert err.value.field == "cpu" and e.machine(big).cpu == [8.0, 8.0]
    info = e.change_machine(big, [32, 8], None, rack="r9")  # the new box: one bigger node, memory as it was
    assert (info.cpu, info.mem, info.rack, info.free_cpu) == ([32.0, 8.0], [16.0, 16.0], "r9", [26.0, 8.0])
    d = e.place(VmRequest("huge", 20, 4), explain=False)  # only the new node can take it
    assert (d.machine, d.node) == (big, 0)
    assert e.change_machine(big, rack=None).rack is None and e.change_machine(big).cpu == [32.0, 8.0]
    e.check_invariants()
    with pytest.raises(NotFound):
        e.change_machine("nope", 1)


@pytest.mark.parametrize("form", ["csv", "json"])
def test_cluster_export_round_trips_through_import_and_reconcile(tmp_path: Path, form: str) -> None:
    """`dcplace cluster export` (the group's help named an export that did not exist): the allocations and machines
    as `serve --machines --import` and `cluster reconcile` read them, written while an engine holds the database."""
    from dcplace.engine import read_allocations_at, read_machines_at

    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", [8, 12.5], [16, 0.1], "r,1")  # a comma in a rack, a capacity that is no whole number
    e.add_machine("m1", 16, 32)
    e.place(VmRequest("a", 1, 1, pinned=True, uid="u-1"))
    e.place(VmRequest('s,"q"', 2, 0.05, multi=True))
    out, machines = tmp_path / f"a.{form}", tmp_path / f"m.{form}"
    runner = CliRunner()
    res = runner.invoke(app, ["cluster", "export", str(out), "--db", str(db), "--machines", str(machines)])
    assert res.exit_code == 0 and "wrote 2 allocations" in res.output and "2 machines" in res.output, res.output
    fresh = PlacementEngine(2, "best-fit")
    fresh.add_machines(read_machines_at(machines)[0])
    rows, lines = read_allocations_at(out)
    assert fresh.import_allocations(rows, str(out), lines) == 2
    assert fresh.snapshot() == e.snapshot()
    assert e.reconcile(rows, source=str(out), lines=lines).unchanged == 2  # the inventory it wrote is the records
    e.close()
    again = runner.invoke(app, ["cluster", "export", str(out), "--db", str(db)])
    assert again.exit_code == 2 and "already exists" in again.output
    bad = runner.invoke(app, ["cluster", "export", str(tmp_path / "x.txt"), "--db", str(db)])
    assert bad.exit_code == 2 and ".csv or .json" in bad.output


def test_an_inventory_older_than_the_records_leaves_what_changed_since(tmp_path: Path) -> None:
    """An operator's walkthrough: an inventory taken, then a create notification recorded a new VM, then the periodic
    reconcile with that inventory released the new VM. With ``as_of`` (the inventory's time) the records of VMs
    that changed since stand."""
    import time

    e = PlacementEngine.open(tmp_path / "c.db")
    e.add_machine("m0", 8, 16)
    e.add_machine("m1", 8, 16)
    e.assign("a", "m0", 0, 1, 1)
    e.assign("b", "m0", 0, 1, 1)
    e.assign("c", "m0", 1, 1, 1)
    inventory = [{"vm": "a", "machine": "m1", "node": 0, "cpu": 1, "mem": 1},  # moved by hand
                 {"vm": "b", "machine": "m0", "node": 0, "cpu": 1, "mem": 1},
                 {"vm": "c", "machine": "m0", "node": 1, "cpu": 1, "mem": 1}]  # fmt: skip
    taken = time.time()
    time.sleep(0.01)
    e.assign("late", "m1", 1, 1, 1)  # a create notification after the inventory was taken
    e.move("c", "m1", 1)  # and a migration reported meanwhile
    e.release("b")  # and a delete
    stale = e.reconcile(inventory, execute=False)  # without as_of the stale inventory undoes all three
    assert set(stale.removed) == {"late"} and set(stale.added) == {"b"} and {m[0] for m in stale.moved} == {"a", "c"}
    rep = e.reconcile(inventory, as_of=taken)
    assert rep.newer == ("b", "c", "late") and rep.removed == () and rep.added == ()
    assert [m[0] for m in rep.moved] == ["a"]  # what the inventory knows better is still done
    assert {v.id: v.machine for v in e.vms()} == {"a": "m1", "c": "m1", "late": "m1"}
    e.check_invariants()
    e.close()
    memory = PlacementEngine(2, "first-fit")
    with pytest.raises(InputError, match="needs the journal") as err:
        memory.reconcile([], as_of=taken)
    assert err.value.field == "as_of"


def test_placements_after_a_dry_run_or_a_refused_reconcile_still_evict_old_explanations(tmp_path: Path) -> None:
    """A correctness review: the dry runs' save-and-restore put the explanation cache back as a plain dict, so once
    it was full the next placement raised TypeError after the VM was in the ledger and before its commit (a 500,
    and a retry answered 'replayed' for a VM a restart did not have)."""
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db, keep_explanations=3)
    e.add_machine("A", 64, 128)
    for i in range(3):
        e.place(VmRequest(f"v{i}", 1, 1))
    e.evacuate("A", execute=False)
    with pytest.raises(NotFound):
        e.reconcile([{"vm": "v0", "machine": "nope", "node": 0, "cpu": 1, "mem": 1}], force=True)
    e.reconcile(e.export_allocations(), execute=False)
    for i in range(3, 8):
        assert e.place(VmRequest(f"v{i}", 1, 1)).accepted
    e.close()
    again = PlacementEngine.open(db)
    assert len(again.vms()) == 8
    again.close()


def test_a_placement_that_fails_after_the_ledger_took_it_leaves_nothing_behind(monkeypatch) -> None:
    """The same review's second half: an error between the ledger's place and the commit (any bug there) left the VM
    in memory only, and a retry was answered 'replayed' for it. It is undone now, and a retry places it."""
    e = PlacementEngine(2, "best-fit")
    e.add_machine("A", 8, 16)
    before, counters = e.snapshot(), dict(e.counters)

    def broken(*args: object) -> None:
        raise RuntimeError("a bug after the ledger's place")

    monkeypatch.setattr(e, "_explain", broken)  # runs after the policy chose and before the ledger's place...
    monkeypatch.setattr(e, "_remember", broken)  # ...and this one after it
    with pytest.raises(RuntimeError):
        e.place(VmRequest("x", 1, 1), explain=False)
    assert e.snapshot() == before and e.counters == counters
    monkeypatch.undo()
    assert not e.place(VmRequest("x", 1, 1)).replayed
    e.check_invariants()


def test_a_rewind_to_an_entry_inside_a_reconcile_gives_the_state_after_it(tmp_path: Path) -> None:
    """A correctness review: the journal of a swap on full nodes plus an added VM, rewound to an entry between
    them, over-committed a node, and restoring that state was a Conflict."""
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("A", 4, 8)
    e.add_machine("B", 4, 8)
    e.assign("x", "A", 0, 3, 3)
    e.assign("y", "B", 0, 4, 4)
    before = e.journal(tail=1)[0].seq
    e.reconcile([{"vm": "x", "machine": "B", "node": 0, "cpu": 3, "mem": 3},
                 {"vm": "y", "machine": "A", "node": 0, "cpu": 4, "mem": 4},
                 {"vm": "z", "machine": "B", "node": 0, "cpu": 1, "mem": 1}])  # fmt: skip
    after, entries = e.snapshot(), e.journal(after=before, limit=None)
    e.close()
    assert len(entries) == 3 and len({x.at for x in entries}) == 1  # one operation, one time
    for x in entries:
        state = PlacementEngine.read_state_at(db, seq=x.seq)
        assert state == after | {"seq": entries[-1].seq}, x  # and it says which entry it is the state after
        PlacementEngine.restore(state).check_invariants()
    assert PlacementEngine.read_state_at(db, seq=before)["vms"] != after["vms"]
    out = tmp_path / "then.json"
    res = CliRunner().invoke(app, ["cluster", "rewind", str(out), "--db", str(db), "--seq", str(entries[0].seq)])
    assert res.exit_code == 0 and f"after journal entry {entries[-1].seq}" in res.stdout, res.output
    assert f"entry {entries[0].seq} is inside one operation" in res.stderr, res.output


def test_the_journal_says_who_moved_a_vm(tmp_path: Path) -> None:
    """An operator's walkthrough: every move was journalled alike, so an audit could not tell dcplace's own
    decisions from drift it was told of. The VM entries now say why (``by``), where it was not a client's own call."""
    e = PlacementEngine.open(tmp_path / "c.db")
    e.add_machine("A", 16, 32)
    e.add_machine("B", 16, 32)
    e.place(VmRequest("p", 1, 1))
    e.import_allocations([{"vm": "i", "machine": "A", "node": 0, "cpu": 1, "mem": 1}])
    e.move("p", "B", 1)
    e.reconcile([{"vm": "p", "machine": "A", "node": 1, "cpu": 1, "mem": 1},
                 {"vm": "i", "machine": "A", "node": 0, "cpu": 1, "mem": 1}])  # fmt: skip
    e.evacuate("A")
    e.release("p")
    said = [(x.event, x.vm, (x.detail or {}).get("by")) for x in e.journal(limit=None) if x.vm]
    evacuated = sorted(x for x in said if x[2] == "evacuation")
    assert [x for x in said if x[2] != "evacuation"] == [("placed", "p", None), ("placed", "i", "import"),
                                                          ("moved", "p", "reported"), ("moved", "p", "reconcile"),
                                                          ("released", "p", None)]  # fmt: skip
    assert evacuated == [("moved", "i", "evacuation"), ("moved", "p", "evacuation")]
    assert journal_replay(e.journal(limit=None)) == journal_tables(e)
    # and one asks for them by it: in Python, over HTTP, on the command line
    for by in BY:
        want = [x for x in said if x[2] == by]
        got = [(x.event, x.vm, x.detail["by"]) for x in e.journal(limit=None, by=by)]
        assert got == want and (by not in ("import", "reported", "reconcile", "evacuation") or got), by
    page, more = e.journal_page(by="evacuation", limit=1)
    assert len(page) == 1 and page[0].detail["by"] == "evacuation" and more is not None
    assert [x.detail["by"] for x in e.journal_page(by="evacuation", after=more)[0]] == ["evacuation"]
    with pytest.raises(InputError, match="must be one of import, reconcile") as bad:
        e.journal(by="client")
    assert bad.value.field == "by"
    e.close()
    res = CliRunner().invoke(app, ["cluster", "journal", "--db", str(tmp_path / "c.db"), "--by", "reported", "--json"])
    assert res.exit_code == 0 and [x["vm"] for x in json.loads(res.stdout)["entries"]] == ["p"], res.output
    res = CliRunner().invoke(app, ["cluster", "journal", "--db", str(tmp_path / "c.db"), "--by", "nobody"])
    assert res.exit_code == 2 and "--by" in res.output, res.output


def test_resize_records_a_new_size_where_the_vm_runs(tmp_path: Path) -> None:
    """An operator's walkthrough: a resize could only be recorded as DELETE then POST /allocations (two steps, the
    pin lost) or by sending the whole inventory."""
    e = PlacementEngine.open(tmp_path / "c.db")
    e.add_machine("A", 8, 16)
    e.place(VmRequest("a", 2, 2, pinned=True, uid="u"))
    e.assign("b", "A", 0, 4, 4)
    where = (e.vm("a").machine, e.vm("a").node)
    rec = e.resize("a", 3, 6)
    assert (rec.machine, rec.node, rec.cpu, rec.mem) == (*where, 3.0, 6.0)
    assert "a" in e.pinned and e.uids["a"] == "u"
    with pytest.raises(Conflict, match="does not fit"):
        e.resize("a", 8, 8)  # node 0 holds b's 4 of 8 cores
    assert (e.vm("a").cpu, "a" in e.pinned, e.uids.get("a")) == (3.0, True, "u")  # left as it was
    with pytest.raises(NotFound):
        e.resize("nope", 1, 1)
    with pytest.raises(InputError):
        e.resize("a", -1, 1)
    e.check_invariants()
    events = [(x.event, (x.detail or {}).get("by")) for x in e.journal(vm="a", limit=None)]
    assert events[-2:] == [("released", "resize"), ("placed", "resize")]
    assert journal_replay(e.journal(limit=None)) == journal_tables(e)
    e.close()


def test_as_of_is_refused_where_the_journal_was_pruned_past_it(tmp_path: Path) -> None:
    """A final review: the check never fired (the entry a time maps to is never before the oldest kept), so a VM
    placed after the inventory, whose entries were pruned since, was released."""
    import time

    e = PlacementEngine.open(tmp_path / "c.db", journal_keep=10)
    e.add_machine("A", 4096, 8192)
    e.place(VmRequest("old", 1, 1))
    taken = time.time()
    time.sleep(0.01)
    e.place(VmRequest("late", 1, 1))
    e.place_batch([VmRequest(f"b{i}", 1, 1) for i in range(1100)])  # prunes late's entry
    with pytest.raises(InputError, match="no longer reaches back") as err:
        e.reconcile(e.export_allocations()[:1], as_of=taken)
    assert err.value.field == "as_of" and "late" in {v.id for v in e.vms()}
    e.close()


def test_a_store_that_refuses_changes_memory_holds_stops_the_engine(tmp_path: Path, monkeypatch) -> None:
    """A final review: only `place` undid its change when the store refused it; a batch, a move or a resize left
    memory ahead of the database, and a retry of the batch was answered 'replayed' for VMs a restart lacked. Now any
    refusal after memory changed stops the engine (fail-stop) until it is restarted."""
    from dcplace.engine import StoreError

    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("A", 8, 16)
    store = e.store
    real = store.submit  # type: ignore[union-attr]

    def refuse(changes: list[object]) -> int:
        raise StoreError("refused")

    monkeypatch.setattr(store, "submit", refuse)
    with pytest.raises(StoreError):
        e.place_batch([VmRequest("b1", 1, 1)])
    monkeypatch.setattr(store, "submit", real)
    with pytest.raises(StoreError, match="holds changes its database did not take"):
        e.place_batch([VmRequest("b1", 1, 1)])  # not 'replayed': the engine stopped
    with pytest.raises(StoreError):
        e.health()
    e.close()
    again = PlacementEngine.open(db)
    assert again.vms() == []  # what is durable
    again.close()


def test_dry_runs_work_on_copies_so_readers_without_the_lock_see_nothing_change() -> None:
    """A final review: a dry run changed the live ledger and put a copy back, so /healthz and /metrics (read without
    the lock) saw 116 of 40,000 VMs during a dry-run reconcile of an empty inventory, and the heuristics' indexes
    rebuilt after every dry run. Dry runs now work on copies; the live objects are never touched."""
    e = PlacementEngine(2, "best-fit")
    e.add_machine("A", 64, 128)
    e.add_machine("B", 64, 128)
    for i in range(20):
        e.place(VmRequest(f"v{i}", 1, 1), explain=False)
    live, free = e.state, e.state.free.copy()
    seen: list[int] = []
    real_release = type(live).release

    def watched(self: object, v: int) -> None:  # every release a dry run makes, on whichever ledger it makes it
        seen.append(id(self))
        real_release(self, v)  # type: ignore[arg-type]

    type(live).release = watched  # type: ignore[method-assign]
    try:
        e.reconcile([], execute=False, force=True)
        e.evacuate("A", execute=False)
        e.move("v0", "B", 1, execute=False)
    finally:
        type(live).release = real_release  # type: ignore[method-assign]
    assert seen and id(live) not in seen  # the copies were changed, never the live ledger
    assert e.state is live and np.array_equal(live.free, free) and len(live.slot_of_vm) == 20
    e.check_invariants()


def test_an_inventory_that_would_release_most_vms_needs_force() -> None:
    """A final review: an empty or truncated inventory (a failed export) released every VM, and the records then
    showed room that the cluster's VMs are using."""
    e = PlacementEngine(2, "first-fit")
    e.add_machine("A", 64, 128)
    for i in range(10):
        e.assign(f"v{i}", "A", 0, 1, 1)
    before = e.snapshot()
    for rows in ([], e.export_allocations()[:4]):
        with pytest.raises(Conflict, match="more than half") as err:
            e.reconcile(rows)
        assert err.value.field == "force" and e.snapshot() == before
    assert len(e.reconcile(e.export_allocations()[:5]).removed) == 5  # half: done
    assert len(e.reconcile([], force=True).removed) == 5
    e.check_invariants()


def test_fixes_from_the_review_of_the_fixes(tmp_path: Path, monkeypatch) -> None:
    """A review of the fixes above: a resize of a failed machine's VM dropped it from memory only; a rack that was
    no string reached the database (fail-stop) or rewound wrongly; readers without the lock saw a dry run's changes;
    an error before the lock was taken for an as_of reconcile left the lock held; the mass-release guard counted
    VMs the inventory could not know of; an error late in a dry run left its copies installed."""
    import threading
    import time

    from dcplace.engine import reopt

    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("A", 8, 16)
    e.add_machine("B", 8, 16)
    e.assign("v1", "A", 0, 2, 2)
    e.pin("v1")
    e.state.set_status(e.state.slot_of_machine["A"], 3)  # failed while hosting v1 (what older versions could write)
    before = e.snapshot()
    with pytest.raises(Conflict, match="has failed"):
        e.resize("v1", 3, 4)
    assert e.snapshot() == before and "v1" in e.pinned
    e.state.set_status(e.state.slot_of_machine["A"], 1)
    e.assign("w1", "B", 1, 1, 1)
    e.assign("w2", "B", 1, 1, 1)
    for bad in (["r1"], 7):
        with pytest.raises(InputError, match="must be a string"):
            e.change_machine("A", rack=bad)  # type: ignore[arg-type]
    assert e.store.stats()["healthy"]  # type: ignore[union-attr]

    seen: list[tuple[int, int]] = []
    live = e.state
    real_release = type(live).release

    def watched(self: object, v: int) -> None:
        scraped: list[int] = []  # a scrape runs in another thread: it does not get the lock the dry run holds
        t = threading.Thread(target=lambda: scraped.append(e.stats(wait_s=0.0)["vms"]))
        t.start()
        t.join()
        seen.append((e.health()["vms"], scraped[0]))  # what a probe and a scrape see meanwhile
        real_release(self, v)  # type: ignore[arg-type]

    type(live).release = watched  # type: ignore[method-assign]
    try:
        e.reconcile([], execute=False, force=True)
    finally:
        type(live).release = real_release  # type: ignore[method-assign]
    assert len(seen) == 3 and all(x == (3, 3) for x in seen), seen  # the live count, never the copy's

    def broken() -> dict[str, int]:
        raise RuntimeError("stats failed")

    monkeypatch.setattr(e.store, "stats", broken)
    with pytest.raises(RuntimeError):
        e.reconcile(e.export_allocations(), as_of=time.time())
    monkeypatch.undo()
    took: list[bool] = []
    t = threading.Thread(target=lambda: took.append(e.lock.acquire(timeout=2) and (e.lock.release() or True)))
    t.start()
    t.join()
    assert took == [True]  # the lock was released

    taken = time.time()
    time.sleep(0.01)
    for i in range(3):
        e.assign(f"late{i}", "B", 0, 1, 1)
    with pytest.raises(Conflict, match="more than half"):
        e.reconcile([], as_of=taken)  # 3 VMs it could know of, and it would release them

    def bug(*args: object) -> None:
        raise RuntimeError("a bug late in the dry run")

    e.pin("v1", False)
    monkeypatch.setattr(reopt, "plan_summary", bug)
    kept, live = e.snapshot(), e.state
    with pytest.raises(RuntimeError):
        e.evacuate("A", execute=False)
    assert e.state is live and e.snapshot() == kept
    e.check_invariants()
    e.close()
