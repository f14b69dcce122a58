"""Load shedding (``serve --max-in-flight``, ``--max-listings``): over the limits a request is answered 429 at once
with one sentence and ``Retry-After``, nothing done; the health check and the metrics are never shed; what was
admitted completes; the counts return to zero. Against a real uvicorn server, with the engine's lock held so that
admitted requests stay in flight."""

from __future__ import annotations

import asyncio
import logging
import re
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dcplace.engine import MachineSpec, PlacementEngine
from dcplace.service import create_app
from dcplace.service.admission import Gate

from .conftest import lock_held, server_thread


def _engine(tmp_path: Path) -> PlacementEngine:
    engine = PlacementEngine.open(tmp_path / "c.db")
    engine.add_machines([MachineSpec(f"pm{i}", 40, 90) for i in range(4)])
    return engine


def _in_flight(url: str) -> float:
    text = httpx.get(f"{url}/metrics", timeout=10).text
    return float(next(line.split()[-1] for line in text.splitlines() if line.startswith("dcplace_http_in_flight ")))


def _wait_until(check, timeout_s: float = 20.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout_s
    while not check():
        assert time.monotonic() < deadline, "never"
        time.sleep(0.05)


def test_over_the_limit_a_request_is_refused_at_once_and_nothing_is_done(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    app = create_app(engine, max_in_flight=3, max_listings=1)
    with server_thread(engine, app) as url, ThreadPoolExecutor(4) as pool:
        with lock_held(engine) as done:
            admitted = [pool.submit(httpx.post, f"{url}/vms", json={"id": f"a{i}", "cpu": 1, "mem": 1}, timeout=60)
                        for i in range(2)]  # fmt: skip
            listing = pool.submit(httpx.get, f"{url}/vms", timeout=60)
            _wait_until(lambda: _in_flight(url) == 3)
            t0 = time.perf_counter()
            refused = httpx.post(f"{url}/vms", json={"id": "late", "cpu": 1, "mem": 1}, timeout=10)
            took = time.perf_counter() - t0
            health = httpx.get(f"{url}/healthz", timeout=10)
            scrape = httpx.get(f"{url}/metrics", timeout=10).text
            done.set()
            assert [f.result().status_code for f in admitted] == [201, 201]
            assert listing.result().status_code == 200
        assert refused.status_code == 429 and took < 2.0, (refused.status_code, took)
        assert refused.headers["retry-after"] == "1"
        said = refused.json()["detail"]
        assert said.startswith("the service has 3 requests in flight, its limit (serve --max-in-flight)"), said
        assert said.count(". ") == 0 and "nothing was done" in said
        assert health.status_code == 200  # never shed: an orchestrator would restart the one process serving
        assert 'dcplace_http_shed_total{reason="in_flight"} 1.0' in scrape
        assert 'dcplace_http_requests_total{code="429",method="POST",route="/vms"} 1.0' in scrape
        assert "late" not in {r.id for r in engine.vms()} and {"a0", "a1"} <= {r.id for r in engine.vms()}
        _wait_until(lambda: _in_flight(url) == 0)
        assert httpx.post(f"{url}/vms", json={"id": "late", "cpu": 1, "mem": 1}, timeout=10).status_code == 201
    engine.close()


def test_listings_have_a_limit_of_their_own(tmp_path: Path) -> None:
    engine = _engine(tmp_path)
    app = create_app(engine, max_in_flight=100, max_listings=2)
    with server_thread(engine, app) as url, ThreadPoolExecutor(4) as pool:
        with lock_held(engine) as done:
            first = [pool.submit(httpx.get, f"{url}/{path}", timeout=60) for path in ("vms", "state/snapshot")]
            _wait_until(lambda: _in_flight(url) == 2)
            third = httpx.get(f"{url}/allocations", timeout=10)
            machines = httpx.head(f"{url}/machines", timeout=10)
            other = pool.submit(httpx.get, f"{url}/state", timeout=60)  # not a listing: admitted, waits its turn
            _wait_until(lambda: _in_flight(url) == 3)
            done.set()
            assert [f.result().status_code for f in first] == [200, 200] and other.result().status_code == 200
        for r in (third, machines):
            assert r.status_code == 429 and r.headers["retry-after"] == "1"
        assert third.json()["detail"].startswith("the service is building 2 listings, its limit (serve --max-listings)")
        _wait_until(lambda: _in_flight(url) == 0)
        assert httpx.get(f"{url}/allocations", timeout=10).status_code == 200
    engine.close()


def test_a_bad_limit_is_refused(tmp_path: Path) -> None:
    engine = PlacementEngine.open(tmp_path / "c.db")
    with pytest.raises(ValueError, match="at least 1"):
        create_app(engine, max_in_flight=0)
    engine.close()


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["place", "list", "probe", "finish"]), st.integers(0, 9)), max_size=40),
       st.integers(1, 4), st.integers(1, 3))  # fmt: skip
def test_the_middleware_never_admits_past_its_limits(steps, limit: int, listings: int) -> None:
    """Requests arrive and finish in any order at the real middleware, over an application that holds each until
    told to finish: the application never has more than ``limit`` requests, or ``listings`` listings, at once;
    what is refused is a 429 that reaches no application; probes always pass; every count returns to zero."""
    from dcplace.service.admission import Admission

    async def run() -> None:
        inside: dict[int, tuple[bool, asyncio.Event]] = {}
        seen = {"most": 0, "most_listings": 0, "refused": 0}

        async def app(scope, receive, send) -> None:  # type: ignore[no-untyped-def]
            if scope["path"] == "/healthz":
                return
            key = id(scope)
            inside[key] = (scope["path"] == "/vms" and scope["method"] == "GET", asyncio.Event())
            seen["most"] = max(seen["most"], len(inside))
            seen["most_listings"] = max(seen["most_listings"], sum(x for x, _ in inside.values()))
            await inside[key][1].wait()
            del inside[key]

        gate = Gate(limit, listings, log_every_s=1e9)
        middleware = Admission(app, gate)
        tasks = []
        for op, k in steps:
            if op == "finish":
                if inside:
                    list(inside.values())[k % len(inside)][1].set()
            else:
                method, path = {"place": ("POST", "/vms"), "list": ("GET", "/vms"), "probe": ("GET", "/healthz")}[op]
                sent: list[dict[str, object]] = []

                async def send(message: dict[str, object], sent: list[dict[str, object]] = sent) -> None:
                    sent.append(message)

                scope = {"type": "http", "method": method, "path": path, "headers": []}
                tasks.append((asyncio.ensure_future(middleware(scope, None, send)), sent))
            await asyncio.sleep(0)
            await asyncio.sleep(0)
            assert 0 <= gate.in_flight == len(inside) <= limit
            assert 0 <= gate.listing == sum(x for x, _ in inside.values()) <= listings
        for _, event in list(inside.values()):
            event.set()
        await asyncio.gather(*(t for t, _ in tasks))
        for _, sent in tasks:
            if sent:  # only refusals answer here (the application above sends nothing)
                assert sent[0]["status"] == 429
                seen["refused"] += 1
        assert gate.in_flight == 0 and gate.listing == 0
        assert seen["most"] <= limit and seen["most_listings"] <= listings

    asyncio.run(run())


def test_a_log_reader_that_stops_reading_does_not_stop_the_service(tmp_path: Path) -> None:
    """With ``--log-level info`` (a line per request) and stderr a pipe nobody reads, the pipe fills after about
    700 lines: logging wrote on the event loop, so every request then hung (a paused reader held placements and
    the health check 9 s in the review). Lines go through a queue to a writer thread now; the service answers, and
    the lines are all there once the pipe is read."""
    import signal

    from .conftest import free_port, start_serve

    port = free_port()
    proc = start_serve(tmp_path / "c.db", port, "--log-level", "info")
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            for i in range(2000):  # about 180 KB of log lines, the pipe holds 64 KB
                assert client.get("/state", headers={"x-request-id": f"r{i}"}).status_code == 200
            assert client.get("/healthz").status_code == 200
    finally:
        proc.send_signal(signal.SIGTERM)
        err = proc.stderr.read().decode() if proc.stderr else ""  # type: ignore[union-attr]
        proc.wait(30)
    assert "request r1999" in err and "stopped; every acknowledged change is durable" in err
    assert err.index("request r1999") < err.index("stopped;")


def test_serve_raises_its_open_file_limit_to_the_hard_one(tmp_path: Path) -> None:
    """Started with a soft limit of 256 open files, the service takes the hard one: each connection is a file, and
    at 256 an overload review saw 500s and reset health checks."""
    import resource
    import signal

    from .conftest import free_port, start_serve

    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    if hard == resource.RLIM_INFINITY or hard <= 256:
        pytest.skip(f"this machine's hard limit on open files is {hard}")
    port = free_port()
    proc = start_serve(tmp_path / "c.db", port, open_files=256)
    try:
        metrics = httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)
    assert f"process_max_fds {float(hard)}" in metrics


def test_the_log_writer_stops_even_when_stderr_is_stalled(monkeypatch) -> None:
    """With stderr stalled and the log queue full, stopping the log writer raised ``queue.Full`` out of serve's
    shutdown (no stopped line, a traceback), or waited for stderr for ever; it gives up after its timeouts, and the
    lines it could not queue are counted."""
    import logging
    import sys
    import threading

    from dcplace.cli import serve

    release = threading.Event()

    asked: list[str] = []

    class Stalled:
        def write(self, text: str) -> int:
            asked.append(text)
            release.wait(30)
            return len(text)

        def flush(self) -> None:
            pass

    monkeypatch.setattr(sys, "stderr", Stalled())
    monkeypatch.setattr(serve._Listener, "put_s", 0.2)
    monkeypatch.setattr(serve._Listener, "join_s", 0.2)
    logs = serve._Logs(logging.INFO, queue_size=3)
    try:
        for i in range(20):
            logging.getLogger("dcplace.test").info("line %d", i)
        deadline = time.monotonic() + 10
        while not asked and time.monotonic() < deadline:  # the writer has taken a line, and is stuck writing it
            time.sleep(0.01)
        said = sum(int(m) for m in re.findall(r"(\d+) log line\(s\) dropped", "".join(asked)))
        assert logs.handler.dropped + said >= 20 - 3 - 1  # one taken by the stalled writer, three queued
        t0 = time.perf_counter()
        logs.stop()  # no exception
        assert time.perf_counter() - t0 < 5
        assert logs.handler not in logging.getLogger("dcplace").handlers
    finally:
        release.set()


def test_a_broken_stderr_does_not_end_the_log_writer(monkeypatch) -> None:
    """The dropped-lines message was written outside the handler's error handling: a broken pipe there ended the
    writer thread, and every line after was dropped unsaid. The writer lives on."""
    import logging
    import sys

    from dcplace.cli import serve

    class Broken:
        def write(self, text: str) -> int:
            raise BrokenPipeError(32, "Broken pipe")

        def flush(self) -> None:
            pass

    monkeypatch.setattr(logging, "raiseExceptions", False)  # handleError stays quiet, as in production
    monkeypatch.setattr(sys, "stderr", Broken())
    logs = serve._Logs(logging.INFO, queue_size=2)
    try:
        logs.handler.dropped = 5  # as if lines had been dropped: the next line says so first
        logging.getLogger("dcplace.test").info("after")
        time.sleep(0.3)
        assert logs.listener._thread is not None and logs.listener._thread.is_alive()
    finally:
        logs.stop()


def _big_engine(n: int, id_of=lambda i: f"vm-{i:06d}") -> PlacementEngine:  # type: ignore[no-untyped-def]
    import numpy as np

    engine = PlacementEngine(2)
    engine.add_machines([MachineSpec(f"pm{i}", 4096, 1 << 20) for i in range(40)])
    engine.place_arrays([id_of(i) for i in range(n)], np.ones(n), np.ones(n), np.zeros(n, np.bool_))
    return engine


def _asking(url: str, path: str):  # type: ignore[no-untyped-def]
    """A connection that asks for ``path`` and reads nothing yet (a small receive buffer)."""
    import socket

    host, port = url.removeprefix("http://").split(":")
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.connect((host, int(port)))
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return sock


@pytest.mark.parametrize("path", ["/vms", "/state/snapshot"])
def test_a_listing_whose_client_reads_nothing_is_cut_off(path: str, caplog: pytest.LogCaptureFixture) -> None:
    """A client that asks for a listing and reads nothing held its place for as long as it kept the connection open
    (with --max-listings 1, every other listing was a 429 from then on); an answer in one piece (the snapshot) freed
    its place at once while its megabytes sat in the connection's buffer. Now the place is held while the client
    takes nothing, and after ``listing_stall_s`` the connection is reset (buffers dropped), the place freed,
    counted, said once, and uvicorn's "returned without completing response" error is not logged for it."""
    engine = _big_engine(60_000)  # 7.5 MB of JSON: more than the kernel's buffers on both ends of the connection hold
    app = create_app(engine, max_listings=1, listing_stall_s=1.0)
    uvicorn_said: list[str] = []  # uvicorn's loggers do not reach the root logger caplog reads
    heard = logging.Handler()
    heard.emit = lambda record: uvicorn_said.append(record.getMessage())  # type: ignore[method-assign]
    with server_thread(engine, app) as url, caplog.at_level("WARNING"):
        logging.getLogger("uvicorn.error").addHandler(heard)  # after uvicorn configured its loggers (it clears them)
        stuck = _asking(url, path)
        _wait_until(lambda: _in_flight(url) == 1)
        time.sleep(0.3)
        assert httpx.get(f"{url}/vms?limit=1", timeout=10).status_code == 429  # the one place is held ...
        _wait_until(lambda: _in_flight(url) == 0, timeout_s=30)  # ... until the stalled listing is cut off
        assert httpx.get(f"{url}/vms?limit=1", timeout=10).status_code == 200
        scrape = httpx.get(f"{url}/metrics", timeout=10).text
        stuck.settimeout(10)
        got, reset = b"", False
        try:
            while chunk := stuck.recv(1 << 20):
                got += chunk
        except ConnectionResetError:  # reset: nothing more was kept for it
            reset = True
        stuck.close()
        logging.getLogger("uvicorn.error").removeHandler(heard)
    assert "dcplace_http_listings_cut_total 1.0" in scrape
    assert reset and not got.rstrip().endswith(b"]")  # cut short, not finished
    said = [r.getMessage() for r in caplog.records]
    assert sum("listing(s) cut off" in m for m in said) == 1, said
    assert not any("without completing response" in m for m in said + uvicorn_said), uvicorn_said
    engine.close()


def test_a_slow_reader_of_a_listing_with_long_ids_is_not_cut_off() -> None:
    """The deadline is on the client taking nothing, not on each chunk: 1,000 VMs whose ids are 256 emoji are 3 MB
    of JSON, which a client reading about 1.5 MB a second takes two seconds for; with a one-second limit per chunk
    it was cut off while reading (a review)."""
    engine = _big_engine(2_000, lambda i: f"{i:06d}" + "\N{GRINNING FACE}" * 250)
    app = create_app(engine, listing_stall_s=1.0)
    with server_thread(engine, app) as url:
        slow = _asking(url, "/vms")
        slow.settimeout(10)
        got = b""
        while not got.endswith(b"\r\n0\r\n\r\n"):  # a chunked answer ends with a chunk of size 0
            chunk = slow.recv(8 * 1024)
            assert chunk, "closed early"
            got += chunk
            time.sleep(0.003)
        slow.close()
        scrape = httpx.get(f"{url}/metrics", timeout=10).text
    assert len(got) > 6_000_000 and "dcplace_http_listings_cut_total 0.0" in scrape
    engine.close()


def test_what_a_client_has_not_taken_counts_the_kernels_send_queue() -> None:
    """The stall measure counts the kernel's send queue too: the kernel takes more from asyncio's buffer only once a
    large part of its own queue has gone, so asyncio's buffer alone stood still for seconds while a slow client read
    (and a listing was cut off while it was being read)."""
    import socket

    from dcplace.service.admission import _buffered

    class Transport:  # what asyncio's transport answers: its own buffer empty, the socket's queue full
        def __init__(self, sock: socket.socket) -> None:
            self.sock = sock

        def get_write_buffer_size(self) -> int:
            return 0

        def get_extra_info(self, name: str) -> object:
            return self.sock if name == "socket" else None

    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen()
    client = socket.create_connection(server.getsockname())
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    peer, _ = server.accept()
    peer.setblocking(False)
    sent = 0
    try:
        while True:
            sent += peer.send(b"x" * 65536)
    except BlockingIOError:  # the kernel holds what it can
        pass
    queued = _buffered(Transport(peer))
    assert queued is not None and queued > 0 and queued <= sent
    client.recv(4096)
    time.sleep(0.05)
    assert _buffered(Transport(peer)) <= queued  # type: ignore[operator]
    for s in (client, peer, server):
        s.close()


def test_a_client_listing_again_at_once_does_not_meet_its_own_listing() -> None:
    """A keep-alive client asking for ``/machines`` again as soon as it has the answer: its next request runs as
    soon as the answer is written, and met the listing before it still holding its place (a send awaited in a task
    of its own, then a 50 ms wait for the kernel's acknowledgements): a 429 now and then (a CI run's poller)."""
    engine = _engine_in_memory()
    app = create_app(engine, max_listings=1)
    with server_thread(engine, app) as url, httpx.Client(base_url=url, timeout=30) as client:
        codes = [client.get("/machines").status_code for _ in range(400)]
    assert set(codes) == {200}, {c: codes.count(c) for c in set(codes)}


def _engine_in_memory() -> PlacementEngine:
    engine = PlacementEngine(2)
    engine.add_machines([MachineSpec(f"pm{i}", 40, 90) for i in range(6)])
    return engine
