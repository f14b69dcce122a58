"""Durable state: SQLite reload is exact, group commit batches concurrent callers, a failed commit stops writes."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcplace.engine import NotFound, Placement, PlacementEngine, StoreError, VmRequest
from dcplace.errors import InputError


def busy(e: PlacementEngine) -> None:
    for i in range(6):
        e.add_machine(f"pm{i}", [40, 40], [90, 80], rack=f"r{i // 3}")
    for i in range(40):
        e.place(VmRequest(f"v{i}", 1 + i % 7, 1 + i % 11, multi=i % 5 == 0))
    for i in range(0, 40, 3):
        e.release(f"v{i}")
    e.drain("pm1")
    e.fail("pm2")
    e.remove_machine("pm2")
    e.add_machine("pm-new", 20, 40)  # takes the freed slot


def test_reload_gives_the_same_state(tmp_path) -> None:
    db = tmp_path / "cluster.db"
    e = PlacementEngine.open(db)
    busy(e)
    snap, free = e.snapshot(), e.state.free.copy()
    e.close()
    r = PlacementEngine.open(db)
    assert r.snapshot() == snap
    assert np.array_equal(r.state.free[: r.state.active], free[: e.state.active])
    r.check_invariants()
    # and it goes on from there
    assert isinstance(r.place(VmRequest("after", 1, 1)), Placement)
    r.close()
    assert "after" in {v["id"] for v in PlacementEngine.open(db).snapshot()["vms"]}


def test_a_state_the_engine_accepted_opens_again(tmp_path) -> None:
    """A numerical review's case: the fit check admits a VM that leaves a node at -FIT_TOL less one rounding
    (-5.0000004e-10), every invariant holds and the row is committed, but opening the database checked -FIT_TOL and,
    placing the rows in another order, refused it: the service could not restart. Loading now accepts what the
    invariants accept, and so does restoring a snapshot (whose VMs come sorted by id)."""
    path = tmp_path / "x.db"
    e = PlacementEngine.open(path, numa=1)
    e.add_machine("m", 10, 10)
    for vid, cpu in [("v0", 0.7), ("v1", 1.9), ("v2", 1.4)]:
        assert e.place(VmRequest(vid, cpu, 1), explain=False).accepted
    e.release("v0")
    assert e.place(VmRequest("v0", 0.7, 1), explain=False).accepted
    assert e.place(VmRequest("last", 6.0000000005, 1), explain=False).accepted
    assert e.machine("m").free_cpu[0] < -5e-10  # below -FIT_TOL, within the invariants' tolerance
    e.check_invariants()
    snap = e.snapshot()
    e.close()
    again = PlacementEngine.open(path, numa=1)
    assert sorted(r.id for r in again.vms()) == ["last", "v0", "v1", "v2"]
    again.check_invariants()
    again.close()
    PlacementEngine.restore(snap).check_invariants()


def test_numa_mismatch_is_an_input_error(tmp_path) -> None:
    db = tmp_path / "c.db"
    PlacementEngine.open(db, numa=2).close()
    with pytest.raises(InputError, match="2 NUMA nodes, not 4"):
        PlacementEngine.open(db, numa=4)


def test_group_commit_serves_concurrent_callers(tmp_path) -> None:
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    for i in range(20):
        e.add_machine(f"pm{i}", 40, 90)

    def worker(t: int) -> None:
        for i in range(15):
            e.place(VmRequest(f"t{t}-{i}", 1, 2))

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(8)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert e.store is not None
    stats = e.store.stats()  # type: ignore[attr-defined]
    assert stats["durable"] == stats["submitted"] == 20 + 120
    assert stats["commits"] < stats["submitted"]  # concurrent placements shared fsyncs
    e.close()
    r = PlacementEngine.open(db)
    assert len(r.vms()) == 120
    r.check_invariants()


def test_threads_with_scarce_room_never_over_commit(tmp_path) -> None:
    """Threads placing, releasing, draining, failing and evacuating at once, with far more demand than room (the
    test above has 120 one-core VMs on 800 cores, where over-commit is impossible with or without the lock). A
    watcher thread checks the invariants while they run; at the end the VMs are those the answers left."""
    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    for i in range(4):
        e.add_machine(f"pm{i}", [8, 8], [16, 16])
    placed: set[str] = set()  # what the answers said, per kind (ids are unique: each VM is placed at most once)
    released: set[str] = set()
    dropped: set[str] = set()  # by a failed machine (fit nowhere else)
    guard = threading.Lock()  # for the test's own bookkeeping of answers
    stop = threading.Event()
    errors: list[BaseException] = []

    def worker(t: int) -> None:
        mine: list[str] = []
        for i in range(80):
            vm = f"t{t}-{i}"
            if e.place(VmRequest(vm, 1 + (t + i) % 6, 1 + i % 9, multi=i % 7 == 0), explain=False).accepted:
                mine.append(vm)
                with guard:
                    placed.add(vm)
            if i % 3 == 2 and mine:
                old = mine.pop(0)
                try:
                    e.release(old)
                except NotFound:  # a failed machine dropped it first (its answer is in `dropped`)
                    continue
                with guard:
                    released.add(old)

    def operator() -> None:
        for i in range(30):
            m = f"pm{i % 4}"
            e.drain(m)
            e.evacuate(m)
            e.activate(m)
            if i % 10 == 9:
                report = e.fail(m)
                with guard:
                    dropped.update(r.vm for r in report.dropped)
                e.activate(m)

    def watcher() -> None:
        while not stop.is_set():
            try:
                e.check_invariants()
            except BaseException as x:  # reported by the main thread
                errors.append(x)
                return

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(6)] + [threading.Thread(target=operator)]
    watch = threading.Thread(target=watcher)
    watch.start()
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    stop.set()
    watch.join()
    assert not errors, errors[0]
    e.check_invariants()
    live = placed - released - dropped
    assert {r.id for r in e.vms()} == live and not released & dropped
    assert len(placed) < 6 * 80  # room was scarce: some were refused
    e.close()
    again = PlacementEngine.open(db)
    assert {r.id for r in again.vms()} == live
    again.check_invariants()
    again.close()


def test_failed_commit_stops_the_engine(tmp_path, caplog) -> None:
    """Fail-stop; and an operator learns of it from the log (one critical line naming the file) and from /metrics
    (``dcplace_store_healthy`` 0), not only from the next call's 503."""
    from dcplace.service.metrics import ServiceMetrics

    e = PlacementEngine.open(tmp_path / "c.db")
    e.add_machine("pm0", 40, 90)
    store = e.store
    scrape = ServiceMetrics(e).registry.get_sample_value
    assert scrape("dcplace_store_healthy") == 1 and scrape("dcplace_store_pending_operations") == 0

    def broken(c: object, at: float) -> None:
        raise OSError("disk full")

    store._write = broken  # type: ignore[union-attr, method-assign]
    with pytest.raises(StoreError, match="disk full"):
        e.place(VmRequest("a", 1, 1))
    with pytest.raises(StoreError, match="restart"):
        e.place(VmRequest("b", 1, 1))
    assert scrape("dcplace_store_healthy") == 0
    said = [r for r in caplog.records if r.levelname == "CRITICAL"]
    assert len(said) == 1 and "c.db failed (OSError: disk full)" in said[0].getMessage()


def test_a_refused_open_leaves_no_new_database(tmp_path) -> None:
    """``numa`` is checked before the file is made (a new database recorded 0 or 100000 NUMA nodes for good); a
    new database whose open fails later is removed with its side files; an existing one is never removed."""
    db = tmp_path / "c.db"
    for bad in (0, 257, True, 2.0):
        with pytest.raises(InputError, match="must be a whole number from 1 to 256"):
            PlacementEngine.open(db, numa=bad)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="field 'policy': must be one of"):
        PlacementEngine.open(db, policy="no-such-policy")
    assert list(tmp_path.iterdir()) == []
    PlacementEngine.open(db).close()
    with pytest.raises(InputError, match="holds machines with 2 NUMA nodes, not 4"):
        PlacementEngine.open(db, numa=4)
    again = PlacementEngine.open(db)
    assert again.numa == 2
    again.close()


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.integers(0, 3), st.sampled_from([0.25, 0.5, 1.0, 2.5, 7.0]), st.booleans(),
                          st.booleans(), st.booleans()), min_size=0, max_size=60))  # fmt: skip
def test_loading_at_once_builds_the_state_one_by_one_builds(tmp_path, monkeypatch, rows):
    """Opening a database places its VMs in one compiled loop (43 us a VM one at a time: 43 s for a million); the
    state must be the one the per-VM path builds, array for array, and so must the pinned set."""
    db = tmp_path / f"c{len(list(tmp_path.iterdir()))}.db"
    e = PlacementEngine.open(db)
    for m in range(4):
        e.add_machine(f"m{m}", [16, 16], [32, 32])
    for i, (m, size, multi, pinned, release) in enumerate(rows):
        try:
            e.assign(f"v{i}", f"m{m}", None if multi else i % 2, size, 2 * size)
        except InputError:  # full
            continue
        if pinned:
            e.pin(f"v{i}")
        if release and i % 3 == 0:
            e.release(f"v{i}")
    e.close()
    took: list[bool] = []
    at_once = _LOAD_AT_ONCE  # (the fixture lives across hypothesis's examples: undone at the end of each)
    monkeypatch.setattr(
        PlacementEngine, "_load_vms_at_once", lambda self, vms: took.append(at_once(self, vms)) or took[-1]
    )
    fast = PlacementEngine.open(db)
    fast.close()
    assert took == [True]  # the rows were all good: loaded at once, not by the fallback
    monkeypatch.setattr(PlacementEngine, "_load_vms_at_once", lambda self, vms: False)
    slow = PlacementEngine.open(db)
    slow.close()
    for name, value in vars(slow.state).items():
        other = getattr(fast.state, name)
        if isinstance(value, np.ndarray):
            assert np.array_equal(other, value), name
        else:
            assert other == value, name
    assert fast.pinned == slow.pinned and fast.counters == slow.counters
    fast.check_invariants()
    monkeypatch.undo()


_LOAD_AT_ONCE = PlacementEngine._load_vms_at_once
