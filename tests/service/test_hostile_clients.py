"""What a hostile or careless client found (a review against a running server, 2026-11-28): each answer is a 4xx or
an extender ``Error`` for that request alone, and the service keeps serving everyone else."""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest
from fastapi.testclient import TestClient
from hypothesis import given, settings
from hypothesis import strategies as st

from dcplace.engine import PlacementEngine, VmRequest, check_id
from dcplace.errors import InputError
from dcplace.service import create_app

from .conftest import lock_held, server_thread

POD = {"spec": {"containers": [{"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}}]}}


@pytest.fixture
def client(tmp_path):
    engine = PlacementEngine.open(tmp_path / "c.db")
    with TestClient(create_app(engine), raise_server_exceptions=False) as c:
        for i in range(2):
            assert c.post("/machines", json={"id": f"m{i}", "cpu": 40, "mem": [90, 90]}).status_code == 201
        yield c
    engine.close()


def _pod(name: str, namespace: str = "ns", uid: str = "u1") -> dict[str, object]:
    return {**POD, "metadata": {"name": name, "namespace": namespace, "uid": uid}}


def test_a_pod_name_the_database_cannot_store_is_refused_and_the_service_lives_on(client) -> None:
    """A lone surrogate in a pod's name went through filter and bind to the store, whose commit failed: every call
    answered 503 until a restart. Now the filter refuses the pod, bind knows nothing of it, and the service serves."""
    raw = (
        '{"Pod":{"metadata":{"name":"p\\ud800","namespace":"ns","uid":"u1"},"spec":{"containers":[{"resources":'
        '{"requests":{"cpu":"1","memory":"1Gi"}}}]}},"NodeNames":["m0"]}'
    )
    f = client.post("/extender/filter", content=raw, headers={"content-type": "application/json"})
    assert f.status_code == 200 and "Pod.metadata.name" in f.json()["Error"] and f.json()["NodeNames"] == []
    bind = '{"PodName":"p\\ud800","PodNamespace":"ns","PodUID":"u1","Node":"m0"}'
    b = client.post("/extender/bind", content=bind, headers={"content-type": "application/json"})
    assert b.status_code == 200 and "was not filtered" in b.json()["Error"]
    assert client.get("/healthz").status_code == 200
    assert client.post("/vms", json={"id": "after", "cpu": 1, "mem": 1}).status_code == 201


@pytest.mark.parametrize(
    ("name", "namespace"),
    [("bad\nname", "ns"), ("nul\x00x", "ns"), ("t\tab", "ns"), ("x", "ns\x7f"), ("x" * 300, "ns")],
)
def test_the_extender_keeps_the_id_rules(client, name, namespace) -> None:
    """Ids the HTTP routes refuse (control characters, over 256 characters) were recorded through bind, and
    ``GET /allocations`` then exported rows ``POST /allocations`` refuses."""
    f = client.post("/extender/filter", json={"Pod": _pod(name, namespace), "NodeNames": ["m0"]}).json()
    assert "Pod.metadata.name" in f["Error"] and f["NodeNames"] == []
    assert len(f["Error"]) < 400  # a 20 MB name is not echoed back whole
    b = client.post("/extender/bind", json={"PodName": name, "PodNamespace": namespace, "Node": "m0"}).json()
    assert "was not filtered" in b["Error"]
    assert client.get("/vms").json() == []


def test_a_huge_uid_is_not_kept(client) -> None:
    f = client.post("/extender/filter", json={"Pod": _pod("p", uid="u" * 10_000), "NodeNames": ["m0"]}).json()
    assert "Pod.metadata.uid" in f["Error"] and "10000" in f["Error"]


@pytest.mark.parametrize("value", ["1e400", "1e" + "9" * 5000, "9" * 400])
def test_an_overflowing_quantity_is_an_error_not_a_500(client, value) -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"resources": {"requests": {"cpu": value}}}]}}
    f = client.post("/extender/filter", json={"Pod": pod, "NodeNames": ["m0"]})
    assert f.status_code == 200 and "cpu" in f.json()["Error"] and "too large" in f.json()["Error"]
    p = client.post("/extender/prioritize", json={"Pod": pod, "NodeNames": ["m0"]})
    assert p.status_code == 200 and p.json() == [{"Host": "m0", "Score": 0}]


def test_deeply_nested_node_objects_are_echoed_back(client) -> None:
    """The kept ``Nodes`` items went back through the framework's serializer, which stops at depth 100: a 500."""
    deep: object = "leaf"
    for _ in range(300):
        deep = [deep]
    items = [{"metadata": {"name": "m0"}, "x": deep}]
    f = client.post("/extender/filter", json={"Pod": _pod("p"), "Nodes": {"items": items}})
    assert f.status_code == 200 and f.json()["Error"] == "" and f.json()["Nodes"]["items"] == items


def test_concurrent_binds_of_one_pod_all_succeed_once(client) -> None:
    """Bind is idempotent: retries racing each other (the scheduler retries after a timeout) all answer success,
    and the pod is recorded once. Its check and its assign were two steps, so a racing retry could read "not
    placed" and then fail with "already placed"."""
    assert client.post("/extender/filter", json={"Pod": _pod("p"), "NodeNames": ["m0", "m1"]}).json()["Error"] == ""
    bind = {"PodName": "p", "PodNamespace": "ns", "PodUID": "u1", "Node": "m1"}
    with ThreadPoolExecutor(8) as pool:
        answers = list(pool.map(lambda _: client.post("/extender/bind", json=bind).json(), range(32)))
    assert answers == [{"Error": ""}] * 32
    assert [(v["id"], v["machine"]) for v in client.get("/vms").json()] == [("ns/p", "m1")]


_BAD = st.sampled_from([chr(c) for c in (*range(0x20), 0x7F, 0xD800, 0xDBFF, 0xDC00, 0xDFFF)])


@settings(max_examples=60, deadline=None)
@given(st.text(min_size=0, max_size=20), _BAD, st.text(min_size=0, max_size=20))
def test_no_id_with_a_control_character_or_surrogate_reaches_the_engine(before, bad, after) -> None:
    """The engine is the one authority on ids, whichever way they come (HTTP, extender, Python, CSV import)."""
    vid = f"a{before}{bad}{after}z"
    engine = PlacementEngine()
    engine.add_machine("m0", [8, 8], [16, 16])
    with pytest.raises(InputError, match="control characters"):
        check_id(vid, "id")
    with pytest.raises(InputError, match="control characters"):
        engine.place(VmRequest(vid, 1, 1))
    with pytest.raises(InputError, match="control characters"):
        engine.assign(vid, "m0", 0, 1, 1)
    with pytest.raises(InputError, match="control characters"):
        engine.add_machine(vid, [8, 8], [16, 16])
    with pytest.raises(InputError, match="control characters"):  # its own quick id check let them through
        engine.place_arrays(["ok", vid], [1, 1], [1, 1])
    assert engine.stats()["vms"] == 0


def test_a_placement_waiting_for_the_lock_does_not_stall_the_event_loop(tmp_path) -> None:
    """``POST /vms`` took the engine's lock on the event-loop thread: while a long call held it (a CP-SAT
    re-optimisation, a large batch), one waiting placement froze every route, health checks and metrics included;
    and ``/healthz`` itself waited for the lock to count machines."""
    engine = PlacementEngine.open(tmp_path / "l.db")
    engine.add_machine("m0", [8, 8], [16, 16])
    with server_thread(engine) as url, httpx.Client(base_url=url, timeout=30) as c, lock_held(engine) as done:
        with ThreadPoolExecutor(2) as pool:
            waiting = pool.submit(c.post, "/vms", json={"id": "v", "cpu": 1, "mem": 1})
            time.sleep(0.5)  # the placement is in, waiting for the lock
            t0 = time.perf_counter()
            answers = [httpx.get(f"{url}{path}", timeout=10) for path in ("/healthz", "/metrics", "/openapi.json")]
            took = time.perf_counter() - t0
            assert not waiting.done()
            batch = pool.submit(httpx.post, f"{url}/vms/batch", json={"vms": [{"id": "b", "cpu": 1, "mem": 1}]},
                                timeout=30)  # fmt: skip
            time.sleep(0.3)
            again = httpx.get(f"{url}/healthz", timeout=10)
            assert not batch.done() and not waiting.done()  # both wait for the lock, off the event loop
            done.set()
            assert waiting.result().status_code == 201 and batch.result().status_code == 200, batch.result().text
        assert [a.status_code for a in answers] == [200, 200, 200] and took < 3.0, took
        assert again.status_code == 200 and again.json()["vms"] == 0  # answered while both waited
    engine.close()


@pytest.mark.parametrize("path", ["/healthz", "/metrics", "/vms", "/state", "/machines/m0", "/openapi.json"])
def test_head_answers_as_get_without_the_body(tmp_path, path) -> None:
    """HEAD is required of every GET resource; only /healthz had it (405 elsewhere)."""
    engine = PlacementEngine.open(tmp_path / "h.db")
    engine.add_machine("m0", [8, 8], [16, 16])
    with server_thread(engine) as url:
        get, head = httpx.get(url + path), httpx.head(url + path)
        assert head.status_code == get.status_code == 200 and head.content == b""
        assert head.headers["content-type"] == get.headers["content-type"]
        assert httpx.head(url + "/nope").status_code == 404
    engine.close()


def test_head_on_a_streamed_listing_builds_none_of_it(tmp_path, monkeypatch) -> None:
    """HEAD was answered by building the whole GET and dropping it: for 100,000 VMs about half a second of the event
    loop for headers. A streamed listing now ends at its first body message; the connection stays usable."""
    import numpy as np

    import dcplace.service.app as service_app

    engine = PlacementEngine.open(tmp_path / "h.db")
    engine.add_machine("m0", [4096, 4096], [1 << 20, 1 << 20])
    n = 2_500
    engine.place_arrays([f"v{i}" for i in range(n)], np.ones(n), np.ones(n), np.zeros(n, np.bool_))
    built = []
    real = service_app.vm_rows_json
    monkeypatch.setattr(service_app, "vm_rows_json", lambda chunk: built.append(1) or real(chunk))
    with server_thread(engine) as url, httpx.Client(base_url=url) as client:
        head = client.head("/vms?limit=2000")
        assert head.status_code == 200 and head.content == b"" and built == []
        assert head.headers["content-type"] == "application/json" and 'rel="next"' in head.headers["link"]
        get = client.get("/vms?limit=2000")  # the same connection, kept alive
        assert get.status_code == 200 and len(get.json()) == 2000 and len(built) == 2
    engine.close()
