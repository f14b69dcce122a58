"""make_room lets the calls waiting for the engine's lock go first between two racks: the lock that makes it possible,
a placement that arrives mid-search (the plan is then made on the state it left), and threads placing, releasing and
executing plans at once, against the database reloaded."""

from __future__ import annotations

import contextlib
import random
import threading
import time
from typing import Any

import pytest

from dcplace.cluster.topology import preset
from dcplace.engine import NetJob, NetworkEngine, NotFound, check_room_plan, locks
from dcplace.engine.locks import YieldingLock
from dcplace.policies.base import NetPolicy
from dcplace.policies.registry import get_net_policy
from dcplace.sim.netalloc_episodes import episode_requests

ALPHA = preset("alpha")


def _until(condition: Any, seconds: float = 5.0) -> bool:
    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.001)
    return True


def test_the_lock_counts_its_waiters_and_lets_them_go_first() -> None:
    lock = YieldingLock()
    order: list[str] = []

    def waiter() -> None:
        with lock:
            order.append("waiter")

    with lock:
        with lock:  # re-entrant
            assert not lock.let_waiters_go()  # nobody waits
        t = threading.Thread(target=waiter)
        t.start()
        assert _until(lambda: lock.waiting == 1)
        with lock:  # held twice: the outer hold is not this call's to give away
            assert not lock.let_waiters_go()
        assert lock.let_waiters_go()
        order.append("holder")  # the lock is held again, after the waiter had it
        assert lock.waiting == 0
    t.join()
    assert order == ["waiter", "holder"]


def test_the_lock_refuses_a_release_by_another_thread_and_counts_a_timed_out_waiter_out() -> None:
    lock = YieldingLock()
    with lock:
        seen: list[object] = []

        def other() -> None:
            seen.append(lock.acquire(blocking=False))
            seen.append(lock.acquire(timeout=0.05))
            try:
                lock.release()
            except RuntimeError as e:
                seen.append(str(e))

        t = threading.Thread(target=other)
        t.start()
        t.join()
        assert seen == [False, False, "cannot release a lock this thread does not hold"]
        assert lock.waiting == 0
        assert not lock.let_waiters_go()
    assert lock.acquire(blocking=False)  # free again
    lock.release()


def test_an_error_while_stepping_aside_still_takes_the_lock_back(monkeypatch: pytest.MonkeyPatch) -> None:
    """An exception while the holder waits for the waiters (a signal's handler raising) leaves it holding the lock
    again, so the error it raised is the one seen, not "cannot release a lock this thread does not hold"."""
    lock = YieldingLock()

    class Interrupted:
        sleep = staticmethod(time.sleep)

        @staticmethod
        def perf_counter() -> float:
            raise RuntimeError("a signal's handler raised")

    waiter = threading.Thread(target=lambda: lock.acquire() and lock.release())
    with pytest.raises(RuntimeError, match="a signal's handler raised"), lock:
        waiter.start()
        assert _until(lambda: lock.waiting == 1)
        monkeypatch.setattr(locks, "time", Interrupted)
        lock.let_waiters_go()
    waiter.join()
    assert lock.acquire(blocking=False)
    lock.release()
    with pytest.raises(ValueError, match="timeout for a non-blocking call"):
        lock.acquire(blocking=False, timeout=1)


def _count_step_asides(engine: NetworkEngine) -> list[bool]:
    """A list that fills, as the engine's searches try to step aside, with whether each did."""
    stepped: list[bool] = []
    let_go = engine.lock.let_waiters_go

    def counted(*args: Any) -> bool:
        stepped.append(let_go(*args))
        return stepped[-1]

    engine.lock.let_waiters_go = counted  # type: ignore[method-assign]
    return stepped


class _Hooked(NetPolicy):
    """A registered policy (tetris-bw by default) whose first decision after :meth:`arm` calls the hook (once: kept
    in a list emptied in place, as the engine puts a policy's attributes back after a dry run, which would arm a
    rebound one again). Its ``rng`` is the inner policy's, which the engine saves and puts back."""

    name = "hooked"

    def __init__(self, inner: str = "tetris-bw") -> None:
        self.inner = get_net_policy(inner, seed=0)
        self.hooks: list[Any] = []

    @property
    def rng(self) -> Any:
        return getattr(self.inner, "rng", None)

    def arm(self, hook: Any) -> None:
        self.hooks[:] = [hook]

    def choose(self, view: Any) -> int:
        if self.hooks:
            self.hooks.pop()()
        return int(self.inner.choose(view))


def _episode_refusals(engine: NetworkEngine, seed: int, n: int = 160) -> Any:
    """The jobs of an alpha episode placed in turn (two released every third), yielding each the network refuses."""
    req = episode_requests(ALPHA, "uniform", n, seed % 7 + 1, seed)
    for i in range(len(req.cpu)):
        job = NetJob(f"j{i}", int(req.cpu[i]), int(req.mem[i]), max(int(req.bw[i]), 1) / 1e6, hold=i % 5 + 1)
        d = engine.place(job)
        if not d.accepted and d.reason == "network":
            yield job
        if i % 3 == 0 and i:
            for j in engine.jobs()[:2]:
                engine.release(j.id)


@pytest.mark.parametrize("yields", [True, False])
def test_a_placement_arriving_mid_search_goes_first_and_the_plan_is_made_on_the_state_it_left(yields: bool) -> None:
    """A placement that waits for the lock while make_room searches is placed between two racks (stepping aside;
    holding the lock, after the plan): the plan then counts it, passes the independent checker on the state as it
    is after both, and carried out (executed on every other refusal) leaves the engine's invariants whole."""
    policy = _Hooked()
    engine = NetworkEngine(ALPHA, policy)
    engine.make_room_yields = yields
    small = NetJob("x", 1, 1, 0.01)
    midway = asked = 0
    threads: list[threading.Thread] = []

    def arrive() -> None:  # in make_room's first decision, under the lock: a placement starts waiting for it
        t = threading.Thread(target=engine.place, args=(small,))
        t.start()
        threads.append(t)
        assert _until(lambda: engine.lock.waiting == 1)

    for k, job in enumerate(_episode_refusals(engine, seed=3)):
        policy.arm(arrive)
        execute = k % 2 == 1
        plan = engine.make_room(job, execute=execute)
        threads.pop().join()
        asked += 1
        running = {j.id: j.as_dict() for j in engine.jobs()}
        assert "x" in running  # the placement went through, before or after the plan
        if plan.accepted and plan.moves:
            inventory = {row["id"] for row in plan.as_dict()["inventory"]}
            midway += "x" in inventory
            if execute:
                assert set(running) == inventory | ({"x"} if "x" not in inventory else set())
            else:
                before = [row for j, row in running.items() if j != "x" or "x" in inventory]
                request = {"id": job.id, "cpu": job.cpu, "mem": job.mem, "bw": job.bw}
                assert check_room_plan(ALPHA, before, [], request, plan.as_dict()) == []
        engine.check_invariants()
        engine.release("x")
        if asked == 12:
            break
    assert asked == 12
    if yields:
        assert midway > 0, "no placement went first in 12 searches"
    else:
        assert midway == 0


def test_a_placement_beside_a_search_decides_as_it_would_alone() -> None:
    """The random draws: a search steps aside with the policy where it found it, so a placement made meanwhile draws
    what it would have drawn with no search at all, and so does the next one."""
    engines, policies = [], []
    for _ in range(2):
        policies.append(_Hooked("random"))
        engines.append(NetworkEngine(ALPHA, policies[-1]))
    searched, alone = engines
    small = [NetJob("x", 3, 3, 0.05), NetJob("y", 3, 3, 0.05)]
    threads: list[threading.Thread] = []
    beside: list[Any] = []

    def arrive() -> None:
        t = threading.Thread(target=lambda: beside.append(searched.place(small[0])))
        t.start()
        threads.append(t)
        assert _until(lambda: searched.lock.waiting == 1)

    refusals = zip(_episode_refusals(searched, seed=4), _episode_refusals(alone, seed=4), strict=False)
    for checked, (job, same) in enumerate(refusals):
        assert job == same
        policies[0].arm(arrive)
        searched.make_room(job)
        threads.pop().join()
        assert beside.pop().as_dict() == alone.place(small[0]).as_dict()
        assert searched.place(small[1]).as_dict() == alone.place(small[1]).as_dict()
        for e in engines:
            for j in ("x", "y"):
                if j in {p.id for p in e.jobs()}:
                    e.release(j)
        if checked == 5:
            break
    assert [j.as_dict() for j in searched.jobs()] == [j.as_dict() for j in alone.jobs()]


def test_changes_that_undo_themselves_leave_the_plans_as_good() -> None:
    """A thread drains and activates a server over and over (each pair a change that leaves the state as it was)
    while make_room searches: every search starts over on the racks left, and the best racks found before each change
    are tried again at the end, so each plan moves as few jobs as the undisturbed search's (a review found a second
    change forgot the first's best rack: 7-8 moves instead of 6)."""
    engine = NetworkEngine(ALPHA, "tetris-bw")
    stepped = _count_step_asides(engine)
    server = engine.servers()[0].name
    stop = threading.Event()

    def churn() -> None:
        while not stop.is_set():
            with engine.lock:
                engine.drain_server(server)
                engine.activate_server(server)
            time.sleep(0.0005)

    compared = 0
    for job in _episode_refusals(engine, seed=3, n=3000):
        quiet = engine.make_room(job)
        if not quiet.accepted or not quiet.moves:
            continue
        churner = threading.Thread(target=churn)
        churner.start()
        try:
            busy = engine.make_room(job)
        finally:
            stop.set()
            churner.join()
            stop.clear()
        assert busy.accepted
        assert len(busy.moves) == len(quiet.moves), (job.id, len(busy.moves), len(quiet.moves))
        compared += 1
        if compared == 12:
            break
    assert compared == 12
    assert any(stepped), "no search stepped aside: the test exercised nothing"


def test_threads_placing_releasing_and_executing_plans_never_over_commit_and_the_file_agrees(tmp_path) -> None:
    """Three threads at once on one engine with a database: two place and release jobs of an alpha episode, one
    asks make_room of what the network refuses and executes every other plan. The invariants hold throughout, the
    searches stepped aside, and the file reloaded holds exactly the jobs running, where they run."""
    engine = NetworkEngine.open(tmp_path / "n.db", ALPHA, "tetris-bw")
    req = episode_requests(ALPHA, "uniform", 200, 2, 5)
    jobs = [
        NetJob(f"j{i}", int(req.cpu[i]), int(req.mem[i]), max(int(req.bw[i]), 1) / 1e6, hold=3)
        for i in range(len(req.cpu))
    ]
    refused: list[NetJob] = []
    stepped = _count_step_asides(engine)
    errors: list[BaseException] = []
    done = threading.Event()

    def placer(part: int) -> None:
        rng = random.Random(part)
        try:
            for job in jobs[part::2]:
                d = engine.place(job)
                if not d.accepted and d.reason == "network":
                    refused.append(job)
                running = engine.jobs()
                if len(running) > 6 and rng.random() < 0.5:
                    with contextlib.suppress(NotFound):  # the other placer may have released it first
                        engine.release(rng.choice(running).id)
        except BaseException as e:  # reported by the main thread
            errors.append(e)

    def planner() -> None:
        k = 0
        try:
            while not done.is_set() or refused:
                if not refused:
                    time.sleep(0.001)
                    continue
                job = refused.pop()
                if job.id in {j.id for j in engine.jobs()}:
                    continue
                k += 1
                engine.make_room(job, execute=k % 2 == 0)
                with engine.lock:
                    engine.check_invariants()
        except BaseException as e:
            errors.append(e)

    threads = [threading.Thread(target=placer, args=(p,)) for p in (0, 1)] + [threading.Thread(target=planner)]
    for t in threads:
        t.start()
    for t in threads[:2]:
        t.join()
    done.set()
    threads[2].join()
    assert not errors, errors
    engine.check_invariants()
    running = {j.id: j.as_dict() for j in engine.jobs()}
    engine.close()
    reopened = NetworkEngine.open(tmp_path / "n.db", ALPHA, "tetris-bw")
    assert {j.id: j.as_dict() for j in reopened.jobs()} == running
    reopened.check_invariants()
    reopened.close()
    assert any(stepped), "no search stepped aside: the test exercised nothing"


@pytest.mark.parametrize("execute", [False, True])
def test_every_plan_is_checked_even_once_the_lock_is_let_go(monkeypatch: pytest.MonkeyPatch, execute: bool) -> None:
    """A plan that changes nothing is re-checked after make_room lets the lock go (the check replays what the search
    saw, so placements need not wait for it); an executed one before it is recorded. Either way a plan the checker
    refuses is a RuntimeError (a planner's bug), and nothing is recorded."""
    from dcplace.engine import network

    engine = NetworkEngine(ALPHA, "tetris-bw")
    job = next(iter(_episode_refusals(engine, seed=3)))
    before = [j.as_dict() for j in engine.jobs()]
    seen: list[int] = []

    def refuse(top: Any, jobs: Any, drained: Any, request: Any, plan: Any) -> list[str]:
        seen.append(len(jobs))
        return ["a fault planted by the test"]

    monkeypatch.setattr(network, "check_room_plan", refuse)
    with pytest.raises(RuntimeError, match="failed its check: a fault planted by the test"):
        engine.make_room(job, execute=execute)
    assert seen == [len(before)]
    assert [j.as_dict() for j in engine.jobs()] == before


def test_a_listing_reused_from_the_last_one_is_what_a_fresh_one_says() -> None:
    """The engine lists a job again from its last listing while its allocation and hold are the same objects:
    through placements, releases, executed plans, moves told step by step and reconciles that release a job and route
    another anew, every listing equals one built afresh; and a live allocation's arrays cannot be written."""
    engine = NetworkEngine(ALPHA, "tetris-bw")

    def listing() -> list[dict[str, Any]]:
        return [j.as_dict() for j in engine.jobs()]

    def same_as_fresh() -> None:
        listed = listing()
        engine._shown.clear()
        assert listed == listing()

    for k, job in enumerate(_episode_refusals(engine, seed=5)):
        same_as_fresh()
        plan = engine.make_room(job, execute=k % 3 == 0)
        same_as_fresh()
        if plan.accepted and plan.moves and not plan.executed:
            first = [m.as_dict() for m in plan.moves if m.step == 0]
            engine.moves([{k: v for k, v in m.items() if k != "step"} for m in first])
            same_as_fresh()
        if k % 4 == 1 and len(engine.jobs()) > 2:
            rows = listing()
            del rows[0]  # released
            changed = rows[-1]  # its bandwidth halved, its links left to the engine: routed anew
            changed["bw"] /= 2
            del changed["links"]
            report = engine.reconcile(rows, force=True)
            assert report.released and report.changed, report
            same_as_fresh()
        if k == 12:
            break
    some, rid = next(iter(engine._rid.items()))  # the same allocation shown with another hold (a plan's job) is so
    assert engine._placement(some, rid, hold=99).hold == 99
    assert engine.job(some).hold == engine._hold[some] != 99
    with pytest.raises(ValueError, match="read-only"):
        engine.sim.active[rid].cpu[0] += 1
    engine.check_invariants()
