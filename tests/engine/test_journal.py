"""The journal: committed with each change, so replaying it gives the tables; rejections recorded; pruned to its
limit; read offline while an engine holds the database; a trace of the cluster's demand that the simulator reads."""

from __future__ import annotations

import csv
import json
import math
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from conftest import journal_replay as replay
from conftest import journal_tables as tables
from dcplace.cli.main import app
from dcplace.engine import MachineSpec, PlacementEngine, StoreError, VmRequest
from dcplace.engine.journal import JournalEntry, journal_trace, read_journal, rewind
from dcplace.errors import InputError
from dcplace.sim.episodes import prepare
from dcplace.workload import load_trace
from dcplace.workload.huawei import write_huawei_events

OPS = st.lists(
    st.one_of(
        st.tuples(
            st.just("place"), st.integers(0, 30), st.integers(1, 20), st.integers(1, 24), st.booleans(), st.booleans()
        ),
        st.tuples(st.just("batch"), st.integers(0, 30), st.integers(1, 12), st.integers(1, 24), st.booleans()),
        st.tuples(st.just("release"), st.integers(0, 30)),
        st.tuples(st.just("pin"), st.integers(0, 30), st.booleans()),
        st.tuples(st.sampled_from(["drain", "activate", "fail", "remove", "evacuate"]), st.integers(0, 4)),
        st.tuples(st.just("add"), st.integers(0, 4)),
        st.tuples(st.just("reoptimise")),
        st.tuples(
            st.just("change"),
            st.integers(0, 4),
            st.sampled_from([None, 8, 24]),
            st.sampled_from([None, 40]),
            st.sampled_from(["keep", None, "r2"]),
        ),
        st.tuples(st.just("move"), st.integers(0, 30), st.integers(0, 4), st.integers(0, 1)),
        st.tuples(st.just("reconcile"), st.integers(0, 30), st.integers(0, 4)),
    ),
    max_size=60,
)


def apply(e: PlacementEngine, op: tuple[object, ...]) -> None:
    kind = op[0]
    try:
        if kind == "place":
            e.place(VmRequest(f"v{op[1]}", float(op[2]), float(op[3]), multi=bool(op[4]), pinned=bool(op[5])))  # type: ignore[arg-type]
        elif kind == "batch":
            n = int(op[1])  # type: ignore[call-overload]
            e.place_arrays([f"w{n}", f"w{n + 1}"], [op[2], 1.0], [op[3], 2.0], [op[4], False])
        elif kind == "release":
            e.release(f"v{op[1]}")
        elif kind == "pin":
            e.pin(f"v{op[1]}", bool(op[2]))
        elif kind == "add":
            e.add_machine(f"m{op[1]}", 16, 32)
        elif kind == "reoptimise":
            e.reoptimise(now=0.0)
        elif kind == "change":
            e.change_machine(f"m{op[1]}", op[2], op[3], **({} if op[4] == "keep" else {"rack": op[4]}))  # type: ignore[arg-type]
        elif kind == "move":
            rec = e.vm(f"v{op[1]}")
            e.move(rec.id, f"m{op[2]}", None if rec.multi else int(op[3]))  # type: ignore[call-overload]
        elif kind == "reconcile":  # drift: one VM gone, another moved, the rest as recorded
            rows = e.export_allocations()
            rows = [r for r in rows if r["vm"] != f"v{op[1]}"]
            if rows:
                rows[0] = {**rows[0], "machine": f"m{op[2]}"}
            e.reconcile(rows)
        else:
            mid = f"m{op[1]}"
            {"drain": e.drain, "activate": e.activate, "fail": e.fail, "remove": e.remove_machine,
             "evacuate": e.evacuate}[kind](mid)  # type: ignore[index, operator]  # fmt: skip
    except InputError:  # NotFound, Conflict, a machine with VMs removed: nothing changed, nothing journalled
        pass


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_replaying_the_journal_gives_the_tables(tmp_path_factory, ops) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path_factory.mktemp("j") / "c.db"
    e = PlacementEngine.open(db)
    for i in range(3):
        e.add_machine(f"m{i}", 16, 32)
    for i in range(8):  # VMs on every machine, so that evacuations and re-optimisation have something to move
        e.place(VmRequest(f"v{i}", 3 + i % 4, 5 + i % 7, multi=i == 5), policy="vmagent-best-fit" if i % 2 else None)
    for op in ops:
        apply(e, op)
    entries = e.journal(limit=None)
    assert replay(entries) == tables(e)
    assert [x.seq for x in entries] == sorted({x.seq for x in entries})
    assert sum(x.event == "rejected" for x in entries) == e.counters["rejected"]
    assert sum(x.event == "placed" for x in entries) == e.counters["placed"] + e.counters["imported"]
    assert sum(x.event == "released" for x in entries) == e.counters["released"]
    assert sum(x.event == "dropped" for x in entries) == e.counters["dropped"]
    e.close()
    assert read_journal(db, limit=None) == entries  # offline, after the engine closed: the same rows
    r = PlacementEngine.open(db)
    assert replay(r.journal(limit=None)) == tables(r)  # what reloads is what the journal says
    r.close()


def test_a_failed_commit_journals_nothing_of_it(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    e.place(VmRequest("a", 2, 4))
    store = e.store
    assert store is not None

    def broken(c: object, at: float) -> None:
        raise OSError("disk full")

    store._write = broken  # type: ignore[method-assign]
    with pytest.raises(StoreError):
        e.place(VmRequest("b", 2, 4))
    e.close()
    r = PlacementEngine.open(db)
    assert [(x.event, x.vm) for x in r.journal()] == [("machine-added", None), ("placed", "a")]
    assert replay(r.journal()) == tables(r)
    r.close()


def test_rejections_moves_and_reasons_are_recorded(tmp_path: Path) -> None:
    e = PlacementEngine.open(tmp_path / "c.db")
    e.add_machines([MachineSpec("m0", 8, 16), MachineSpec("m1", 8, 16)])
    e.place(VmRequest("a", 4, 8, uid="pod-1"))
    e.place(VmRequest("big", 100, 8))
    e.drain("m0")
    e.evacuate("m0")
    e.fail("m1")  # a's new machine: nowhere left for it
    by = {(x.event, x.vm): x for x in e.journal()}
    assert by[("placed", "a")].detail == {"uid": "pod-1"} and by[("placed", "a")].machine == "m0"
    assert by[("rejected", "big")].detail == {"reason": "no-fit"} and by[("rejected", "big")].cpu == 100
    moved = by[("moved", "a")]
    assert moved.machine == "m1" and moved.detail == {"from": "m0", "from_node": 0, "by": "evacuation"}
    assert by[("dropped", "a")].machine == "m1"
    # the machine filter finds the move away from m0 too, and nothing of m1's own placements
    assert [x.event for x in e.journal(machine="m0")] == ["machine-added", "placed", "machine-drained", "moved"]
    assert [x.event for x in e.journal(vm="a")] == ["placed", "moved", "dropped"]
    assert [x.vm for x in e.journal(event="rejected")] == ["big"]
    assert e.journal(tail=2) == e.journal()[-2:] and [x.event for x in e.journal(vm="a", tail=1)] == ["dropped"]
    assert e.journal(vm="a", after=e.journal(vm="a")[0].seq, tail=5) == e.journal(vm="a")[1:]
    page = e.journal(limit=2)
    assert [x.seq for x in page + e.journal(after=page[-1].seq)] == [x.seq for x in e.journal()]
    for bad, field in (({"event": "placd"}, "event"), ({"limit": 0}, "limit"), ({"after": -1}, "after"),
                       ({"after": 2**63}, "after"),
                       ({"vm": ""}, "vm"), ({"limit": 10_001}, "limit"), ({"tail": 0}, "tail")):  # fmt: skip
        with pytest.raises(InputError) as err:
            e.journal(**bad)  # type: ignore[arg-type]
        assert err.value.field == field
    e.close()


def test_the_journal_is_pruned_to_its_limit_and_can_be_off(tmp_path: Path) -> None:
    e = PlacementEngine.open(tmp_path / "c.db", journal_keep=100)
    e.add_machine("m0", 1000, 2000)
    for i in range(1200):
        e.place(VmRequest(f"v{i}", 0.5, 1))
    entries = e.journal(limit=None)
    assert 100 <= len(entries) <= 1100
    assert entries[-1].vm == "v1199" and entries[0].seq == entries[-1].seq - len(entries) + 1
    from dcplace.service.metrics import ServiceMetrics

    scrape = ServiceMetrics(e).registry.get_sample_value
    kept = len(e.journal(limit=None))
    assert scrape("dcplace_journal_entries") == kept and scrape("dcplace_journal_keep") == 100
    assert scrape("dcplace_journal_written_total") == e.journal(tail=1)[0].seq
    e.close()
    off = PlacementEngine.open(tmp_path / "c.db", journal_keep=0)
    assert ServiceMetrics(off).registry.get_sample_value("dcplace_journal_keep") == 0
    off.place(VmRequest("quiet", 1, 1))
    assert off.journal(vm="quiet") == [] and off.journal(limit=None)[-1].vm == "v1199"  # what was there stays
    off.close()
    with pytest.raises(InputError) as err:
        PlacementEngine.open(tmp_path / "other.db", journal_keep=-1)
    assert err.value.field == "journal_keep" and not (tmp_path / "other.db").exists()
    with pytest.raises(InputError, match="no database"):
        PlacementEngine().journal()


def test_an_old_database_gets_a_journal_that_says_it_began_late(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 8, 16)
    e.place(VmRequest("a", 1, 1))
    e.close()
    with sqlite3.connect(db) as conn:  # as schema 2 left it: no journal table
        conn.execute("DROP TABLE journal")
        conn.execute("PRAGMA user_version = 2")
    conn.close()
    assert read_journal(db) == []
    r = PlacementEngine.open(db)
    began = r.journal()
    assert [(x.event, x.detail) for x in began] == [("journal-resumed", {"off_since": 0.0})]
    assert [v.id for v in r.vms()] == ["a"]
    r.release("a")
    assert [(x.event, x.vm) for x in r.journal()] == [("journal-resumed", None), ("released", "a")]
    # a release whose placement the journal never saw is left out of a trace, and counted
    r.place(VmRequest("b", 1, 1))
    table, summary = journal_trace(r.journal(limit=None))
    assert summary.unmatched == 1 and len(table) == 1 and summary.resumed_at == began[0].at
    r.close()
    # the state before the journal began is not in it: said, not guessed
    with pytest.raises(InputError, match="began there, on a cluster that was running already"):
        PlacementEngine.read_state_at(db, seq=0)
    assert [v["id"] for v in PlacementEngine.read_state_at(db, seq=began[0].seq)["vms"]] == ["a"]


def test_read_offline_while_an_engine_holds_the_database(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 8, 16)
    e.place(VmRequest("a", 1, 1))
    assert [x.vm for x in read_journal(db, event="placed")] == ["a"]  # the live service's database, read-only
    e.close()
    with pytest.raises(InputError, match="does not exist"):
        read_journal(tmp_path / "none.db")


def _without_multi(src: Path, dst: Path) -> Path:
    with src.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.reader(fh))
    drop = rows[0].index("multi")
    with dst.open("w", encoding="utf-8", newline="") as fh:
        csv.writer(fh, lineterminator="\n").writerows([c for i, c in enumerate(r) if i != drop] for r in rows)
    return dst


def test_the_trace_of_the_journal_is_the_demand(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 8, 16)
    e.place(VmRequest("a", 2, 4))
    e.place(VmRequest("b", 3, 5, multi=True))
    e.place(VmRequest("huge", 50, 5))
    e.release("a")
    e.place(VmRequest("a", 1, 1))  # the id again: a new request
    entries = e.journal(limit=None)
    at = {(x.event, x.vm): x.at for x in entries}
    t0 = min(x.at for x in entries if x.event == "placed")
    table, summary = journal_trace(entries)
    assert (summary.requests, summary.still_running, summary.rejected, summary.unmatched) == (3, 2, 0, 0)
    assert (summary.adjusted, summary.resumed_at) == (0, None)
    assert summary.start == t0 and summary.names == ("a", "b", "a")  # request i: the trace's vmid i
    assert table.cpu.tolist() == [2, 3, 1] and table.mem.tolist() == [4, 5, 1]
    assert table.multi_numa.tolist() == [False, True, False]
    assert table.arrival[0] == 0 and math.isclose(table.departure[0], at[("released", "a")] - t0)
    assert np.isinf(table.departure[1:]).all()
    with_refused, s = journal_trace(entries, rejected="include")
    assert s.rejected == 1 and len(with_refused) == 4 and s.lifetime_s == pytest.approx(table.departure[0])
    with pytest.raises(InputError, match="no VM has left yet"):
        journal_trace([x for x in entries if x.event != "released"], rejected="include")
    with pytest.raises(InputError) as err:
        journal_trace(entries, rejected="maybe")
    assert err.value.field == "rejected"
    e.close()

    runner = CliRunner()
    out = tmp_path / "trace.csv"
    res = runner.invoke(app, ["cluster", "trace", str(out), "--db", str(db)])
    assert res.exit_code == 0, res.output
    named = runner.invoke(app, ["cluster", "trace", str(tmp_path / "t.json"), "--db", str(db)])  # a CSV, named so
    assert named.exit_code == 2 and "must end in .csv" in named.stderr and not (tmp_path / "t.json").exists()
    assert "wrote 3 requests" in res.output
    back = load_trace(str(out), seed=0)
    assert back.cpu.tolist() == [2, 3, 1] and np.isinf(back.departure[1:]).all()
    # b spanned both nodes with 5 GB: the trace says so, and a replay keeps it whatever the threshold
    assert back.numa_given and back.multi_numa.tolist() == [False, True, False]
    assert prepare(back, 32.0).table.multi_numa.tolist() == [False, True, False]
    assert prepare(back.subset([0, 1]), 0.5).table.multi_numa.tolist() == [False, True]
    quoted = tmp_path / "quoted.csv"  # the header as a CSV reader reads it: quoted, after a blank line
    lines = out.read_text(encoding="utf-8").splitlines()
    quoted.write_text("\n" + ",".join(f'"{c}"' for c in lines[0].split(",")) + "\n" + "\n".join(lines[1:]) + "\n",
                      encoding="utf-8")  # fmt: skip
    assert load_trace(str(quoted), seed=0).multi_numa.tolist() == [False, True, False]
    plain = load_trace(str(_without_multi(out, tmp_path / "plain.csv")), seed=0)  # an event log without the column
    assert not plain.numa_given and prepare(plain, 4.5).table.multi_numa.tolist() == [False, True, False]
    # the VMs' own ids ride along in a name column the readers pass by (the form's vmid is a number)
    with out.open(encoding="utf-8", newline="") as fh:
        rows = list(csv.DictReader(fh))
    assert [(r["vmid"], r["type"], r["name"]) for r in rows] == [("0", "0", "a"), ("1", "0", "b"), ("0", "1", "a"),
                                                                 ("2", "0", "a")]  # fmt: skip
    again = runner.invoke(app, ["cluster", "trace", str(out), "--db", str(db)])
    assert again.exit_code == 2 and "already exists" in again.output
    sim = runner.invoke(app, ["simulate", "numa", "--trace", str(out), "--pms", "1", "--episodes", "1", "--json"])
    assert sim.exit_code == 0, sim.output
    # its own history on its own machines, without the VMs it holds now (they are in the trace)
    own = ["compare", "cluster", "--db", str(db), "--trace", str(out), "--requests", "3", "--windows", "1",
           "--policies", "best-fit", "--policies", "first-fit", "--json"]  # fmt: skip
    res = runner.invoke(app, [*own, "--empty"])
    assert res.exit_code == 0, res.output
    result = json.loads(res.stdout)
    assert result["vms"] == 0 and [r["mean"]["mean"] for r in result["rows"]] == [3.0, 3.0]
    full = json.loads(runner.invoke(app, own).stdout)  # on top of the VMs it holds: double the load
    assert full["vms"] == 2


def test_a_journal_turned_off_and_on_says_so_and_a_trace_starts_there(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    e.place(VmRequest("a", 2, 4))
    e.close()
    off = PlacementEngine.open(db, journal_keep=0)  # the operator turns it off for a while
    off.release("a")
    off.place(VmRequest("a", 8, 4))
    off.place(VmRequest("b", 1, 1))
    off.close()
    inherit = PlacementEngine.open(db)  # a cluster command keeps the service's setting: still off
    inherit.pin("b")
    inherit.close()
    on = PlacementEngine.open(db, journal_keep=1000)
    on.release("a")
    on.place(VmRequest("c", 3, 3))
    events = [(x.event, x.vm) for x in on.journal()]
    assert events == [("machine-added", None), ("placed", "a"), ("journal-resumed", None), ("released", "a"),
                      ("placed", "c")]  # fmt: skip
    resumed = on.journal(event="journal-resumed")[0]
    assert resumed.detail is not None and resumed.detail["off_since"] < resumed.at
    table, summary = journal_trace(on.journal(limit=None))
    # the 8-core release is not paired with the 2-core placement from before the gap
    assert (summary.requests, summary.unmatched, summary.resumed_at) == (1, 1, resumed.at)
    assert table.cpu.tolist() == [3.0]
    on.close()
    again = PlacementEngine.open(db)  # on stays on, with no second marker
    again.place(VmRequest("d", 1, 1))
    assert [x.event for x in again.journal(event="journal-resumed")] == ["journal-resumed"]
    again.close()


def test_a_trace_survives_a_clock_step_and_a_placement_without_its_release() -> None:
    def entry(seq: int, at: float, event: str, vm: str) -> JournalEntry:
        return JournalEntry(seq, at, event, vm, "m0", 0, 1.0, 2.0, False, None)

    entries = [entry(1, 100.0, "placed", "a"), entry(2, 99.0, "released", "a"),  # the clock stepped back
               entry(3, 101.0, "placed", "b"), entry(4, 102.0, "placed", "b"),  # b's release never recorded
               entry(5, 103.0, "released", "b")]  # fmt: skip
    table, summary = journal_trace(entries)
    assert (summary.requests, summary.adjusted, summary.unmatched, summary.stepped_back) == (2, 1, 1, 1)
    assert table.arrival.tolist() == [0.0, 2.0] and table.departure[0] > table.arrival[0]
    assert table.departure[1] == 3.0 and summary.names == ("a", "b")


def test_a_traces_names_follow_its_rows_after_a_clock_step(tmp_path: Path) -> None:
    """Rows are sorted by arrival and keep their vmid; each row's name is its own VM's, quoted as CSV quotes."""
    odd = 'x,"y"\nz'
    entries = [
        JournalEntry(1, 200.0, "placed", "late", "m0", 0, 1.0, 2.0, False, None),
        JournalEntry(2, 150.0, "placed", odd, "m0", 0, 3.0, 2.0, False, None),
        JournalEntry(3, 100.0, "placed", "third", "m0", 0, 2.0, 2.0, False, None),
    ]  # the clock stepped back twice: the journal's order is what happened (a clock review: the VMs placed after a
    # step back arrived an hour before those placed before them)
    table, summary = journal_trace(entries)
    assert table.vmid.tolist() == [0, 1, 2] and table.arrival.tolist() == [0.0, 0.0, 0.0]
    assert table.cpu.tolist() == [1.0, 3.0, 2.0] and summary.stepped_back == 2
    out = tmp_path / "t.csv"
    write_huawei_events(table, out, [summary.names[int(v)] for v in table.vmid])
    with out.open(encoding="utf-8", newline="") as fh:
        assert [(r["vmid"], r["cpu"], r["name"]) for r in csv.DictReader(fh)] == [("0", "1", "late"), ("1", "3", odd),
                                                                                 ("2", "2", "third")]  # fmt: skip
    assert load_trace(str(out), seed=0).cpu.tolist() == [1.0, 3.0, 2.0]  # the readers pass the column by


def test_cluster_journal_on_the_command_line(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    e.place(VmRequest("a", 2, 4, pinned=True))
    e.place(VmRequest("big", 64, 4))
    e.close()
    runner = CliRunner()
    res = runner.invoke(app, ["cluster", "journal", "--db", str(db), "--vm", "a"])
    assert res.exit_code == 0, res.output
    assert " placed " in res.output and '{"pinned":true}' in res.output
    res = runner.invoke(app, ["cluster", "journal", "--db", str(db), "--tail", "1", "--json"])
    assert res.exit_code == 0 and '"event": "rejected"' in res.output and '"next": null' in res.output
    for args, said in ((["--after", "99999999999999999999999"], "--after"), (["--event", "nope"], "--event"),
                       (["--tail", "0"], "--tail")):  # fmt: skip
        bad = runner.invoke(app, ["cluster", "journal", "--db", str(db), *args])
        assert bad.exit_code == 2 and f"error: {said}: " in bad.output, bad.output
    missing = runner.invoke(app, ["cluster", "journal", "--db", str(tmp_path / "none.db")])
    assert missing.exit_code == 2 and "error: --db: " in missing.output


def test_a_database_read_through_a_link_after_a_crash_is_read_whole(tmp_path: Path) -> None:
    db = tmp_path / "real" / "c.db"
    db.parent.mkdir()
    code = (
        "import os, sys; from dcplace.engine import PlacementEngine, VmRequest; e = PlacementEngine.open(sys.argv[1]); "
        "e.add_machine('m0', 16, 32); [e.place(VmRequest(f'v{i}', 1, 1)) for i in range(5)]; os._exit(0)"
    )
    subprocess.run([sys.executable, "-c", code, str(db)], check=True, env={**os.environ, "OMP_NUM_THREADS": "1"})
    assert Path(f"{db}-wal").stat().st_size > 0  # what the crash left is in the -wal beside the real file
    link = tmp_path / "link.db"
    link.symlink_to(db)
    direct = read_journal(db)
    assert [x.vm for x in direct] == [None, "v0", "v1", "v2", "v3", "v4"]
    assert read_journal(link) == direct


def test_pages_end_where_the_entries_do(tmp_path: Path) -> None:
    e = PlacementEngine.open(tmp_path / "c.db")
    e.add_machine("m0", 16, 32)
    for i in range(5):
        e.place(VmRequest(f"v{i}", 1, 1))
    first, more = e.journal_page(limit=3)
    assert len(first) == 3 and more == first[-1].seq
    rest, more = e.journal_page(after=more, limit=3)
    assert [x.vm for x in rest] == ["v2", "v3", "v4"] and more is None  # exactly the entries left: the last page
    assert e.journal_page(tail=2) == (e.journal()[-2:], None)
    e.close()


def test_rejections_retried_under_their_id_are_one_request() -> None:
    def entry(seq: int, at: float, event: str, vm: str) -> JournalEntry:
        return JournalEntry(seq, at, event, vm, None if event == "rejected" else "m0", None, 4.0, 8.0, False, None)

    entries = [entry(1, 0.0, "rejected", "a"), entry(2, 1.0, "rejected", "a"), entry(3, 2.0, "placed", "a"),
               entry(4, 3.0, "rejected", "b"), entry(5, 4.0, "placed", "c"),
               entry(6, 6.0, "released", "c")]  # fmt: skip
    table, summary = journal_trace(entries, rejected="include")
    assert (summary.requests, summary.rejected, summary.rejections, summary.retries) == (3, 1, 3, 2)
    # from a's placement on: b, rejected, runs c's lifetime (2 s); c leaves when it did
    assert table.arrival.tolist() == [0.0, 1.0, 2.0] and table.departure.tolist()[1:] == [3.0, 4.0]
    skipped = journal_trace(entries)[1]
    assert (skipped.requests, skipped.rejected, skipped.rejections, skipped.retries) == (2, 0, 3, 0)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS)
def test_rewinding_the_journal_gives_every_state_the_cluster_was_in(tmp_path_factory, ops) -> None:  # type: ignore[no-untyped-def]
    db = tmp_path_factory.mktemp("r") / "c.db"
    e = PlacementEngine.open(db)
    seen = [(0, e.snapshot())]
    for i in range(3):
        e.add_machine(f"m{i}", 16, 32)
    for i in range(8):
        e.place(VmRequest(f"v{i}", 3 + i % 4, 5 + i % 7, multi=i == 5, pinned=i == 2, uid=f"u{i}" if i % 3 else None),
                policy="vmagent-best-fit" if i % 2 else None)  # fmt: skip
    seen.append((e.journal(tail=1)[0].seq, e.snapshot()))
    for op in ops:
        apply(e, op)
        last = e.journal(tail=1)
        seen.append((last[0].seq if last else 0, e.snapshot()))
    now, entries = e.snapshot(), e.journal(limit=None)
    for seq, then in seen:
        assert rewind(now, [x for x in entries if x.seq > seq], seq) == then, seq
    e.close()
    # and from the database, also while an engine holds it, by seq and by time
    r = PlacementEngine.open(db)
    seq, then = seen[len(seen) // 2]
    assert PlacementEngine.read_state_at(db, seq=seq) == then | {"seq": seq}
    at = r.journal(after=seq - 1, limit=1)[0].at if seq else 0.0
    assert PlacementEngine.read_state_at(db, at=at) == then | {"seq": seq} or any(x.at == at for x in entries
                                                                                 if x.seq > seq)  # fmt: skip
    r.close()


def test_a_rewind_over_tables_changed_without_the_journal_is_one_sentence(tmp_path: Path) -> None:
    """An upgrade review: a dcplace from before the journal released VMs in a newer file (so did a hand edit), and
    `cluster rewind` printed a KeyError traceback, `GET /state/snapshot?seq=` answered 500."""
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    for i in range(4):
        e.place(VmRequest(f"v{i}", 1, 2))
    placed = {x.vm: x.seq for x in e.journal(event="placed", limit=None)}
    e.close()
    with sqlite3.connect(db) as conn:
        conn.execute("DELETE FROM vms WHERE id = 'v1'")  # released, and no entry says so
    for kw, name in (({"seq": placed["v0"]}, "seq"), ({"at": 0.0}, "at")):
        with pytest.raises(InputError, match=f"entry {placed['v1']} \\(placed v1\\) does not match") as bad:
            PlacementEngine.read_state_at(db, **kw)  # type: ignore[arg-type]
        assert bad.value.field == name
    assert len(PlacementEngine.read_state_at(db, seq=placed["v2"])["vms"]) == 2  # what it can rewind, it does
    res = CliRunner().invoke(app, ["cluster", "rewind", str(tmp_path / "then.json"), "--db", str(db), "--seq", "1"])
    assert res.exit_code == 2 and "does not match the state" in res.output and "Traceback" not in res.output
    assert not (tmp_path / "then.json").exists()


def test_a_journal_that_began_on_a_running_cluster_does_not_invent_its_first_state(tmp_path: Path) -> None:
    """A file of schema 2 first opened by a dcplace whose journal began without a journal-resumed entry: rewinding
    to before its first entry gave the machines and VMs it held then as the state at any earlier time."""
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    e.place(VmRequest("old", 1, 2))
    e.close()
    with sqlite3.connect(db) as conn:  # the history before, as such a file has it: none
        conn.execute("DELETE FROM journal")
        conn.execute("DELETE FROM sqlite_sequence WHERE name = 'journal'")
    e = PlacementEngine.open(db)
    e.place(VmRequest("new", 1, 2))
    e.close()
    assert [x.vm for x in read_journal(db, limit=None)] == ["new"]
    assert [v["id"] for v in PlacementEngine.read_state_at(db, seq=1)["vms"]] == ["new", "old"]
    for kw in ({"seq": 0}, {"at": 0.0}):
        with pytest.raises(InputError, match="began on a cluster that held machines already"):
            PlacementEngine.read_state_at(db, **kw)  # type: ignore[arg-type]
    with sqlite3.connect(db) as conn:  # no entry at all yet (a file upgraded, then nothing done): the same
        conn.execute("DELETE FROM journal")
    with pytest.raises(InputError, match="began on a cluster that held machines already"):
        PlacementEngine.read_state_at(db, seq=0)
    fresh = PlacementEngine.open(tmp_path / "fresh.db")
    fresh.add_machine("m0", 16, 32)
    fresh.close()
    assert PlacementEngine.read_state_at(tmp_path / "fresh.db", seq=0) == {"numa": 2, "machines": [], "vms": [],
                                                                         "seq": 0}  # fmt: skip


def test_a_rewind_stops_where_the_journal_does(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db, journal_keep=10)
    e.add_machine("m0", 1000, 2000)
    for i in range(1100):  # past 10 by 1,000: pruned to the newest 10, then 90 more
        e.place(VmRequest(f"v{i}", 0.5, 1))
    kept = e.journal(limit=None)
    oldest = kept[0].seq
    assert len(e.vms()) == 1100 and len(kept) == 100 and all(x.event == "placed" for x in kept)
    back = PlacementEngine.read_state_at(db, seq=oldest - 1)
    assert [v["id"] for v in back["vms"]] == sorted(f"v{i}" for i in range(1000))
    with pytest.raises(InputError, match="no longer reaches back to that time") as err:  # when the pruned ones were
        PlacementEngine.read_state_at(db, at=1.0)  # is gone with them: not the oldest state kept, labelled 1970
    assert err.value.field == "at"
    with pytest.raises(InputError, match="no longer holds") as err:
        PlacementEngine.read_state_at(db, seq=oldest - 2)
    assert err.value.field == "seq"
    e.close()
    runner = CliRunner()
    out = tmp_path / "then.json"
    res = runner.invoke(app, ["cluster", "rewind", str(out), "--db", str(db), "--seq", str(oldest - 1)])
    assert res.exit_code == 0, res.output
    assert json.loads(out.read_text()) == back
    for args, said in ((["--seq", "1"], "--seq"), (["--at", "yesterday"], "--at"), ([], "--seq"),
                       (["--at", "1e20"], "--at"), (["--seq", "99999999"], "--seq"), (["--seq", "-1"], "--seq"),
                       (["--seq", "1", "--at", "0"], "--seq")):  # fmt: skip
        bad = runner.invoke(app, ["cluster", "rewind", str(tmp_path / "x.json"), "--db", str(db), *args])
        assert bad.exit_code == 2 and f"error: {said}: " in bad.output, bad.output
        assert not (tmp_path / "x.json").exists()
    traced = runner.invoke(app, ["cluster", "trace", str(tmp_path / "t.csv"), "--db", str(db)])
    assert traced.exit_code == 0 and "wrote 100 requests" in traced.output
    assert "note: 1,000 VMs running now are not in the trace" in traced.output  # said, not silently under-loaded
    off = PlacementEngine.open(db, journal_keep=0)
    off.place(VmRequest("quiet", 1, 1))
    off.close()
    on = PlacementEngine.open(db, journal_keep=100)
    on.close()
    with pytest.raises(InputError, match="the journal was off"):
        PlacementEngine.read_state_at(db, seq=oldest)


def test_a_rewind_refuses_what_it_cannot_know(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    e.place(VmRequest("v1", 1, 1, pinned=True, uid="u1"))
    s = e.journal(tail=1)[0].seq
    e.release("v1")
    e.close()
    assert PlacementEngine.read_state_at(db, seq=s)["vms"][0] | {"cpu": 1} == {
        "id": "v1",
        "machine": "m0",
        "node": 0,
        "cpu": 1,
        "mem": 1.0,
        "multi": False,
        "pinned": True,
        "uid": "u1",
    }
    for kw, field, said in (({"seq": s + 5}, "seq", "last entry is"), ({"seq": -1}, "seq", "a journal entry"),
                            ({"at": 1e20}, "at", "year 9999"),
                            ({"seq": 1, "at": 0}, "seq", "exactly one")):  # fmt: skip
        with pytest.raises(InputError, match=said) as err:
            PlacementEngine.read_state_at(db, **kw)  # type: ignore[arg-type]
        assert err.value.field == field
    with sqlite3.connect(db) as conn:  # a release written before releases kept the pin and uid
        conn.execute("UPDATE journal SET detail = NULL WHERE event = 'released'")
    conn.close()
    with pytest.raises(InputError, match="written before the journal kept what undoes it"):
        PlacementEngine.read_state_at(db, seq=s)
    off = PlacementEngine.open(db, journal_keep=0)  # off now: the state holds what it never saw
    off.place(VmRequest("quiet", 1, 1))
    off.close()
    with pytest.raises(InputError, match="the journal is off"):
        PlacementEngine.read_state_at(db, seq=s + 1)
    runner = CliRunner()
    res = runner.invoke(app, ["cluster", "trace", str(tmp_path / "t.csv"), "--db", str(db)])
    assert res.exit_code == 0 and "note: the journal has been off since " in res.output


def test_a_time_maps_to_the_state_in_commit_order(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    for i in range(4):
        e.place(VmRequest(f"v{i}", 1, 1))
    e.close()
    with sqlite3.connect(db) as conn:  # v0-v3 stamped 1000, 1040, 1200, then 1050: the clock stepped back
        for seq, at in ((1, 900), (2, 1000), (3, 1040), (4, 1200), (5, 1050)):
            conn.execute("UPDATE journal SET at = ? WHERE seq = ?", (at, seq))
    conn.close()
    ids = lambda at: [v["id"] for v in PlacementEngine.read_state_at(db, at=at)["vms"]]  # noqa: E731
    assert ids(1060) == ["v0", "v1"]  # v2 (stamped 1200) came after 1060, and v3 after v2, whatever its stamp
    assert ids(1020) == ["v0"] and ids(5000) == ["v0", "v1", "v2", "v3"] and ids(0) == []


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(seed=st.integers(0, 10_000))
def test_replaying_the_trace_with_the_clusters_policy_repeats_what_it_did(tmp_path_factory, seed) -> None:  # type: ignore[no-untyped-def]
    """The trace is faithful: the cluster's own policy on its own machines, fed the trace, decides exactly as the
    cluster did (rejections change nothing, so leaving them out changes no decision)."""
    from dcplace.cluster.numa import NumaCluster
    from dcplace.engine.stream import engine_for, run_stream
    from dcplace.sim.numa import PreparedTrace

    rng = np.random.default_rng(seed)
    e = PlacementEngine.open(tmp_path_factory.mktemp("t") / "c.db")
    caps = [(16, 32), (24, 48), (16, 64)]
    e.add_machines([MachineSpec(f"m{i}", c, m) for i, (c, m) in enumerate(caps)])
    live: list[str] = []
    for i in range(60):
        cpu, mem = float(rng.integers(1, 9)), float(rng.integers(1, 17))
        e.place(VmRequest(f"v{i}", cpu, mem, multi=bool(rng.random() < 0.2)))
        if e.vm_page().vms and rng.random() < 0.4:
            live = [v.id for v in e.vms()]
            e.release(live[int(rng.integers(len(live)))])
    entries = e.journal(limit=None)
    table, _ = journal_trace(entries)
    cluster = NumaCluster(np.array([[[c, m]] * 2 for c, m in caps], float))  # cores and GB per node, as given
    res = run_stream(engine_for(cluster, "best-fit"), PreparedTrace.build(table))
    slot = {f"m{i}": i for i in range(len(caps))}
    placed = [x for x in entries if x.event == "placed"]
    want = [slot[str(x.machine)] * 2 + (x.node or 0) for x in placed]
    assert res.actions.tolist() == want and res.rejected == 0
    e.close()


def test_with_the_journal_off_a_rejection_waits_for_no_commit(tmp_path: Path) -> None:
    e = PlacementEngine.open(tmp_path / "c.db", journal_keep=0)
    e.add_machine("m0", 4, 8)
    store = e.store
    assert store is not None
    before = store.stats()["submitted"]
    assert not e.place(VmRequest("big", 64, 8)).accepted
    assert store.stats()["submitted"] == before  # nothing queued: answered at once, as before the journal
    e.close()


def _ctrl_c_as_a_terminal_sends_it() -> None:
    """In the child: SIGINT's default action, whatever the test runner does with it (a shell runs a command started
    with ``&`` with SIGINT ignored, and a child inherits that: the follow never saw the test's Ctrl-C)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_DFL)


def test_cluster_journal_follows_what_happens(tmp_path: Path) -> None:
    import selectors
    import signal

    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("m0", 16, 32)
    e.place(VmRequest("first", 1, 1))
    p = subprocess.Popen([sys.executable, "-m", "dcplace.cli.main", "cluster", "journal", "--db", str(db), "--follow",
                          "--every", "0.1", "--json", "--event", "placed"], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE, env={**os.environ, "OMP_NUM_THREADS": "1"},
                         preexec_fn=_ctrl_c_as_a_terminal_sends_it)  # fmt: skip
    assert p.stdout is not None
    sel = selectors.DefaultSelector()
    sel.register(p.stdout, selectors.EVENT_READ)
    got = bytearray()  # read from the descriptor itself: a buffered readline can hold a second line select won't see

    def next_vm() -> str:
        while b"\n" not in got:
            assert sel.select(timeout=60), "no line within 60 s"
            chunk = os.read(p.stdout.fileno(), 65536)  # type: ignore[union-attr]
            assert chunk, "the follow ended"
            got.extend(chunk)
        line, _, rest = bytes(got).partition(b"\n")
        got[:] = rest
        return str(json.loads(line)["vm"])

    try:
        assert next_vm() == "first"
        for name in ("a", "b"):
            e.place(VmRequest(name, 1, 1))
            e.release(name)  # not placed: filtered out
        assert [next_vm(), next_vm()] == ["a", "b"]
    finally:
        p.send_signal(signal.SIGINT)
        try:
            _, err = p.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            p.kill()
            _, err = p.communicate()
        e.close()
    assert p.returncode == 0 and b"stopped following after seq" in err, err
