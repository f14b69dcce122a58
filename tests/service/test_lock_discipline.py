"""Lock discipline (a review of the engine, store and service, 2026-11-28): nothing waits on the event loop, the
committer never dies silently, a bind is one step and acknowledged only when durable, probes and scrapes never wait
behind a long call, and no commit is waited for while the engine's lock is held."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient

from dcplace.engine import Conflict, PlacementEngine, ReoptPolicy, StoreError, VmRequest
from dcplace.service import create_app

from .conftest import lock_held, record_threads, server_thread

POD = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}


def _engine(tmp_path, name: str = "c.db") -> PlacementEngine:
    engine = PlacementEngine.open(tmp_path / name)
    for i in range(2):
        engine.add_machine(f"m{i}", [8, 8], [16, 16])
    return engine


def test_a_cancelled_waiter_whose_loop_closes_does_not_kill_the_committer(tmp_path) -> None:
    """A ``place_async`` cancelled while its commit was slow left its loop registered; once that loop had closed,
    waking it raised in the committer thread, which died without failing the store: every later call hung."""
    engine = _engine(tmp_path)
    store = engine.store
    assert store is not None
    write = store._write

    def slow(c: object, at: float) -> None:
        time.sleep(0.3)
        write(c, at)  # type: ignore[arg-type]

    store._write = slow  # type: ignore[method-assign]

    async def impatient() -> None:
        await asyncio.wait_for(engine.place_async(VmRequest("a", 1, 1)), 0.05)

    with pytest.raises(asyncio.TimeoutError):
        asyncio.run(impatient())  # the loop closes here, while the commit is still being written
    store._write = write  # type: ignore[method-assign]
    done = threading.Event()
    threading.Thread(target=lambda: (engine.place(VmRequest("b", 1, 1)), done.set()), daemon=True).start()
    assert done.wait(10), "the committer died: a placement waits for a commit that never comes"
    engine.check_store()
    engine.close()
    reopened = PlacementEngine.open(tmp_path / "c.db")
    assert {v.id for v in reopened.vms()} == {"a", "b"}  # the cancelled one was decided, then made durable
    reopened.close()


def test_an_unexpected_error_in_the_committer_stops_the_store_not_silently(tmp_path) -> None:
    engine = _engine(tmp_path)
    store = engine.store
    assert store is not None
    wake = store._wake_async
    calls = []

    def buggy(error: bool) -> None:
        calls.append(error)
        if len(calls) == 1:
            raise RuntimeError("a bug in the committer")
        wake(error)

    store._wake_async = buggy  # type: ignore[method-assign]
    engine.place(VmRequest("a", 1, 1))  # its commit is durable; waking raised after it
    deadline = time.time() + 5
    while time.time() < deadline and not calls[-1:] == [True]:
        time.sleep(0.01)
    with pytest.raises(StoreError, match="a bug in the committer"):
        engine.place(VmRequest("b", 1, 1))
    engine.close()


def test_bind_is_one_step_refuses_drained_machines_and_is_idempotent(tmp_path) -> None:
    engine = _engine(tmp_path)
    p = engine.bind(VmRequest("ns/p", 1, 1), "m1")
    assert p.machine == "m1" and engine.vm("ns/p").machine == "m1"
    assert engine.bind(VmRequest("ns/p", 1, 1), "m1") == p  # a retry
    # a new pod under the old name (a StatefulSet recreated it before the old pod's DELETE came) is not a retry: it
    # was answered as one, and its 3 extra cores went uncounted
    with pytest.raises(Conflict, match="already placed on machine 'm1' with 1 cores and 1 GB, not the 4 and 8"):
        engine.bind(VmRequest("ns/p", 4, 8), "m1")
    assert engine.vm("ns/p").cpu == 1
    with pytest.raises(Conflict, match="already placed on machine 'm1'"):
        engine.bind(VmRequest("ns/p", 1, 1), "m0")
    engine.evacuate("m0")  # drained: an evacuation emptied it, and a bind must not refill it
    with pytest.raises(Conflict, match="machine 'm0' is drained: it takes no new VMs"):
        engine.bind(VmRequest("ns/q", 1, 1), "m0")
    with pytest.raises(Conflict, match="does not fit on machine 'm1'"):
        engine.bind(VmRequest("ns/big", 100, 1), "m1")
    engine.check_invariants()
    engine.close()


def test_a_bind_retry_after_a_failed_commit_is_not_acknowledged(tmp_path) -> None:
    """The first bind's commit failed (503); its retry found the pod in memory on that node and answered success,
    while the database never held it."""
    engine = _engine(tmp_path)
    with TestClient(create_app(engine), raise_server_exceptions=False) as c:
        pod = {**POD, "metadata": {"name": "p", "namespace": "ns", "uid": "u"}}
        assert c.post("/extender/filter", json={"Pod": pod, "NodeNames": ["m0"]}).json()["Error"] == ""

        def broken(_: object, at: float) -> None:
            raise OSError("disk full")

        engine.store._write = broken  # type: ignore[union-attr, method-assign]
        bind = {"PodName": "p", "PodNamespace": "ns", "PodUID": "u", "Node": "m0"}
        assert c.post("/extender/bind", json=bind).status_code == 503
        retry = c.post("/extender/bind", json=bind)
        assert retry.status_code == 503 and "disk full" in retry.json()["detail"]
    engine.close()


def test_a_placement_retry_after_a_failed_commit_is_not_acknowledged(tmp_path) -> None:
    """A retried ``POST /vms`` is answered with the VM's placement (``replayed``) only once that placement is
    durable: after its commit failed, the retry is 503 like the first answer, never 200."""
    engine = _engine(tmp_path)
    with TestClient(create_app(engine), raise_server_exceptions=False) as c:

        def broken(_: object, at: float) -> None:
            raise OSError("disk full")

        engine.store._write = broken  # type: ignore[union-attr, method-assign]
        vm = {"id": "v", "cpu": 1, "mem": 1}
        assert c.post("/vms", json=vm).status_code == 503
        for retry in (c.post("/vms", json=vm), c.post("/vms/batch", json={"vms": [vm]})):
            assert retry.status_code == 503 and "disk full" in retry.json()["detail"]
    engine.close()


def test_a_placement_retry_waits_for_the_first_commit(tmp_path) -> None:
    """The retry of a placement whose commit is still under way (the first answer lost meanwhile) is answered once
    that commit is durable, not before: the retry is a barrier behind it."""
    engine = _engine(tmp_path)
    committing, release = threading.Event(), threading.Event()
    write = engine.store._write  # type: ignore[union-attr]

    def slow(batch: object, at: float) -> None:
        committing.set()  # the first placement is in memory and its commit has begun
        release.wait(10)
        write(batch, at)

    engine.store._write = slow  # type: ignore[union-attr, method-assign]
    with ThreadPoolExecutor(2) as pool:
        first = pool.submit(engine.place, VmRequest("v", 1, 1))
        assert committing.wait(10)
        retry = pool.submit(engine.place, VmRequest("v", 1, 1))
        time.sleep(0.3)
        assert not first.done() and not retry.done()  # neither is durable yet
        release.set()
        assert retry.result(10).replayed and retry.result().machine == first.result(10).machine
    engine.close()
    reopened = PlacementEngine.open(tmp_path / "c.db")
    assert reopened.vm("v").machine == first.result().machine
    reopened.close()


def test_a_replay_tells_nothing_of_a_policys_decision_time(tmp_path) -> None:
    """``place_async`` decides on the event loop only for a policy whose last decision was fast. A retry naming a
    policy never used (answered in microseconds, the policy never built) recorded that time, and the policy's
    first real decision (building it, compiling a learned one: seconds) then ran on the loop."""
    engine = _engine(tmp_path)
    engine.place(VmRequest("v", 1, 1), "first-fit")
    again = asyncio.run(engine.place_async(VmRequest("v", 1, 1), "industrial"))
    assert again.replayed and "industrial" not in engine._decision_s and "industrial" not in engine._policies
    engine.close()


def test_probes_and_scrapes_do_not_wait_behind_the_lock_or_the_thread_pool(tmp_path) -> None:
    """With the engine's lock held and the worker threads all taken by reads waiting for it, ``/healthz`` waited
    for a worker thread (2.5 s, and then for the lock). Both are answered on the event loop now."""
    engine = _engine(tmp_path)
    with server_thread(engine) as url, lock_held(engine) as done:
        with ThreadPoolExecutor(45) as pool:
            # /state: not a listing, which has a limit of its own (4 by default) that would refuse most of them
            reads = [pool.submit(httpx.get, f"{url}/state", timeout=60) for _ in range(45)]
            time.sleep(0.5)  # the pool's 40 threads wait for the lock
            t0 = time.perf_counter()
            health = httpx.get(f"{url}/healthz", timeout=10)
            scrape = httpx.get(f"{url}/metrics", timeout=10)
            took = time.perf_counter() - t0
            done.set()
            assert all(r.result().status_code == 200 for r in reads)
    assert health.status_code == 200 and scrape.status_code == 200 and took < 3.0, took
    assert "dcplace_machines" in scrape.text
    engine.close()


def test_a_policys_first_decision_is_not_made_on_the_event_loop(tmp_path) -> None:
    """Building a policy and compiling its code took 3-25 s on the loop for a learned one: the first decision with
    a policy goes to a worker thread, later ones are decided in place."""
    engine = _engine(tmp_path)
    seen = record_threads(engine, "_place_locked")

    async def three() -> None:
        await engine.place_async(VmRequest("a", 1, 1))  # the default policy: warm, decided on the loop
        await engine.place_async(VmRequest("b", 1, 1), "first-fit")  # never used: built in a worker thread
        await engine.place_async(VmRequest("c", 1, 1), "first-fit")  # used: on the loop

    asyncio.run(three())
    assert seen == [True, False, True]
    batch_threads = record_threads(engine, "_place_batch_locked")
    asyncio.run(engine.place_batch_async([VmRequest("d", 1, 1), VmRequest("e", 1, 1)]))
    assert batch_threads == [False]  # a batch always decides in a worker thread
    engine.close()


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_huge_placement_body_is_refused_before_it_is_parsed(tmp_path, fast_path) -> None:
    """A body is parsed on the event loop: 57 MB of junk to POST /vms held every request for 7 s. Both the fast
    path and FastAPI's route answer the same 413, sent with a length or in chunks."""
    engine = _engine(tmp_path)
    with TestClient(create_app(engine, fast_path=fast_path), raise_server_exceptions=False) as c:
        body = b"[" + b"0," * 50_000 + b"0]"
        r = c.post("/vms", content=body, headers={"content-type": "application/json"})
        assert r.status_code == 413 and "POST /vms/batch" in r.json()["detail"]
        chunked = c.post("/vms", content=iter([body[:60_000], body[60_000:]]),
                         headers={"content-type": "application/json"})  # fmt: skip
        assert chunked.status_code == 413 and "POST /vms/batch" in chunked.json()["detail"]
        ok = c.post("/vms/batch", json={"vms": [{"id": f"v{i}", "cpu": 0.01, "mem": 0.01} for i in range(1000)]})
        assert ok.status_code == 200  # other routes keep the service's limit
    engine.close()


def test_a_background_event_waits_for_its_commit_without_the_lock(tmp_path) -> None:
    engine = _engine(tmp_path)
    for i in range(4):
        engine.place(VmRequest(f"v{i}", 1, 1))
    held_while_waiting: list[bool] = []
    wait = engine._wait

    def watched(ticket: int) -> None:
        held_while_waiting.append(engine.lock._is_owned())  # type: ignore[attr-defined]
        wait(ticket)

    engine._wait = watched  # type: ignore[method-assign]
    rep = engine.reoptimise_if_due(ReoptPolicy(every_s=1.0), now=1e9)
    assert rep is not None and held_while_waiting == [False]
    engine.close()


def test_a_bug_in_a_background_event_is_reported_and_the_timer_goes_on(tmp_path) -> None:
    engine = _engine(tmp_path)
    calls = []

    def buggy(policy: ReoptPolicy, now: float) -> None:
        calls.append(now)
        raise RuntimeError("solver bug")

    engine.reoptimise_if_due = buggy  # type: ignore[method-assign]
    with TestClient(create_app(engine, ReoptPolicy(every_s=1.0), check_every_s=0.05)) as c:
        deadline = time.time() + 10
        while time.time() < deadline and len(calls) < 3:
            time.sleep(0.02)
        last = c.get("/reoptimise/last").json()
    assert len(calls) >= 3 and "RuntimeError: solver bug" in last["error"]
    engine.close()


def test_a_slow_policy_decides_off_the_event_loop_until_it_is_fast_again(tmp_path) -> None:
    engine = _engine(tmp_path)
    engine.slow_s = 0.1  # far above a fast decision's time even on a loaded machine
    seen: list[bool] = []
    place = engine._place_locked
    slow = {"next": False}

    def watched(*args: object) -> int:
        seen.append(threading.current_thread() is threading.main_thread())
        if slow["next"]:
            time.sleep(0.3)  # a user's policy taking 300 ms a decision
        return place(*args)  # type: ignore[arg-type]

    engine._place_locked = watched  # type: ignore[method-assign]

    async def run() -> None:
        await engine.place_async(VmRequest("a", 1, 1))
        slow["next"] = True
        await engine.place_async(VmRequest("b", 1, 1))  # on the loop: nothing said it was slow yet
        await engine.place_async(VmRequest("c", 1, 1))  # slow last time: a worker thread
        slow["next"] = False
        await engine.place_async(VmRequest("d", 1, 1))  # still in a thread (its last decision was slow)
        await engine.place_async(VmRequest("e", 1, 1))  # fast again: back on the loop

    asyncio.run(run())
    assert seen == [True, True, False, False, True]
    engine.close()


def test_the_probe_port_says_when_the_main_event_loop_is_stuck(tmp_path) -> None:
    """The probe port runs its own loop, so it answered 200 while the main loop was stuck and the service answered
    nothing. The main loop beats a heartbeat; silent past ``stale_s``, the probe answers 503, and 200 again once
    the loop runs."""
    import asyncio
    import socket
    import threading

    from dcplace.service.probe import Heartbeat, ProbeServer

    engine = _engine(tmp_path)
    heartbeat = Heartbeat(every_s=0.1, stale_s=1.0)
    loop = asyncio.new_event_loop()  # the main loop, as uvicorn runs it
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    beating = asyncio.run_coroutine_threadsafe(heartbeat.run(), loop)
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    url = f"http://127.0.0.1:{sock.getsockname()[1]}/healthz"
    probe = ProbeServer(engine, [sock], heartbeat)
    probe.start()
    try:
        time.sleep(0.3)
        assert httpx.get(url, timeout=5).status_code == 200
        loop.call_soon_threadsafe(time.sleep, 2.5)  # a handler that blocks the loop
        time.sleep(1.8)
        stuck = httpx.get(url, timeout=5)
        assert stuck.status_code == 503, stuck.text
        assert stuck.json()["detail"].startswith("the service's main event loop has not run for ")
        time.sleep(1.5)
        assert httpx.get(url, timeout=5).status_code == 200  # it runs again
    finally:
        probe.stop()
        sock.close()
        beating.cancel()
        time.sleep(0.3)  # the cancellation runs on the loop before it stops
        loop.call_soon_threadsafe(loop.stop)
        thread.join(5)
        loop.close()
        engine.close()


def test_the_application_beats_the_heartbeat_it_is_given(tmp_path) -> None:
    """``create_app(heartbeat=...)`` beats it from the application's own loop while it runs (without that, the
    probe port would answer 503 ten seconds after every start and an orchestrator restart the pod in a loop)."""
    from fastapi.testclient import TestClient

    from dcplace.service import create_app
    from dcplace.service.probe import Heartbeat

    engine = _engine(tmp_path)
    heartbeat = Heartbeat(every_s=0.05, stale_s=0.5)
    heartbeat.last -= 100  # as if silent long ago
    assert heartbeat.silent_for() is not None
    with TestClient(create_app(engine, heartbeat=heartbeat)) as client:
        assert client.get("/healthz").status_code == 200
        time.sleep(0.3)
        assert heartbeat.silent_for() is None
        first = heartbeat.last
        time.sleep(0.3)
        assert heartbeat.last > first
    engine.close()
