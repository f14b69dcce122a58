"""The HTTP API: every user mistake is a 4xx with one sentence, explanations, metrics, health, the extender."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from dcplace.engine import PlacementEngine
from dcplace.service import create_app


@pytest.fixture(params=[True, False], ids=["fast-path", "fastapi-routes"])
def client(tmp_path, request):
    """Every API test runs twice: POST /vms and DELETE /vms/{id} answered by the fast path and by FastAPI's routes."""
    engine = PlacementEngine.open(tmp_path / "c.db")
    with TestClient(create_app(engine, fast_path=request.param), raise_server_exceptions=False) as c:
        for i in range(3):
            assert c.post("/machines", json={"id": f"pm{i}", "cpu": 40, "mem": [90, 90]}).status_code == 201
        yield c
    engine.close()


def one_sentence(r) -> str:
    body = r.json()
    assert set(body) >= {"detail"} and isinstance(body["detail"], str) and "\n" not in body["detail"]
    return body["detail"]


def test_place_explain_release(client: TestClient) -> None:
    r = client.post("/vms", json={"id": "vm-1", "cpu": 4, "mem": 8})
    assert r.status_code == 201, r.text
    body = r.json()
    assert body["machine"] == "pm0" and body["node"] == 0
    x = body["explanation"]
    assert x["feasible"] == 3 and x["chosen"]["machine"] == "pm0" and len(x["candidates"]) == 3
    assert client.get("/vms/vm-1/explanation").json() == x
    assert client.get("/vms/vm-1").json()["machine"] == "pm0"
    dry = client.post("/explain", json={"cpu": 1, "mem": 1})
    assert dry.status_code == 200 and dry.json()["chosen"]["machine"] == "pm0"
    assert client.get("/machines/pm0").json()["free_cpu"] == [36.0, 40.0]
    assert client.delete("/vms/vm-1").json()["cpu"] == 4.0
    assert client.get("/state").json()["vms"] == 0


@pytest.mark.parametrize(
    ("method", "path", "body", "status", "words"),
    [
        ("post", "/machines", {"id": "pm0", "cpu": 41, "mem": 90}, 409, "already registered with another capacity"),
        ("post", "/machines", {"id": "x", "cpu": [1, 2, 3], "mem": 90}, 422, "one value per NUMA node"),
        ("post", "/machines", {"id": "x", "cpu": -4, "mem": 90}, 422, "field 'cpu"),
        ("post", "/machines", {"id": "", "cpu": 4, "mem": 90}, 422, "field 'id'"),
        ("post", "/machines/nope/drain", None, 404, "no machine 'nope'"),
        ("delete", "/machines/nope", None, 404, "no machine 'nope'"),
        ("post", "/vms", {"id": "v", "cpu": "four", "mem": 8}, 422, "field 'cpu'"),
        ("post", "/vms", {"id": "v", "cpu": 4, "mem": 0}, 422, "field 'mem'"),
        ("post", "/vms", {"id": "v", "cpu": 4}, 422, "field 'mem'"),
        ("post", "/vms", {"id": "v", "cpu": 4, "mem": 8, "policy": "nope"}, 422, "field 'policy'"),
        ("post", "/vms", {"id": "v", "cpu": 4, "mem": 8, "colour": "red"}, 422, "colour"),
        ("post", "/vms", {"id": "v", "cpu": 400, "mem": 8}, 409, "no machine can host"),
        ("post", "/vms", [1, 2], 422, "valid dictionary"),
        ("post", "/vms", None, 422, "the request needs a JSON body"),
        ("delete", "/vms/", None, 405, "DELETE is not allowed on /vms; it takes GET, HEAD, OPTIONS, POST"),
        ("delete", "/vms/nope", None, 404, "no VM 'nope'"),
        ("get", "/vms/nope/explanation", None, 404, "no VM 'nope'"),
        ("post", "/allocations", [{"vm": "a", "machine": "pm9", "node": 0, "cpu": 1, "mem": 1}], 404, "[0]"),
        # JSON types are strict: true was 1 core, "4" was 4 and "yes" a split VM
        ("post", "/vms", {"id": "v", "cpu": True, "mem": 8}, 422, "field 'cpu'"),
        ("post", "/vms", {"id": "v", "cpu": "4", "mem": 8}, 422, "field 'cpu'"),
        ("post", "/vms", {"id": "v", "cpu": 4, "mem": 8, "multi_numa": "yes"}, 422, "field 'multi_numa'"),
        ("post", "/explain", {"cpu": 4, "mem": 8, "multi_numa": 1}, 422, "field 'multi_numa'"),
        ("post", "/allocations", [{"vm": "a", "machine": "pm0", "node": "0", "cpu": 1, "mem": 1}], 422, "node"),
    ],
)
def test_user_mistakes_are_4xx_with_one_sentence(client, method, path, body, status, words) -> None:
    kw = {} if body is None else {"json": body}
    r = getattr(client, method)(path, **kw)
    assert r.status_code == status, r.text
    assert words in one_sentence(r)


def test_rejection_carries_reason_and_explanation(client: TestClient) -> None:
    client.post("/machines/pm1/drain")
    client.post("/machines/pm2/fail")
    r = client.post("/vms", json={"id": "big", "cpu": 60, "mem": 8})
    assert r.status_code == 409
    body = r.json()
    assert body["code"] == "no-fit" and body["explanation"]["infeasible"] == {
        "cpu": 0, "mem": 0, "numa": 1, "drained": 1, "failed": 1,
    }  # fmt: skip


def test_a_retried_placement_gets_its_placement_back_and_changes_nothing(client: TestClient) -> None:
    """A client whose answer was lost cannot tell whether its VM was placed: a retry was a 409 that read like a
    refusal. The same request again is now 200 with the placement, ``replayed``, even after the VM's pin changed;
    another size or span under that id stays 409, and nothing is placed twice (one by one or in a batch)."""
    first = client.post("/vms", json={"id": "a", "cpu": 30, "mem": 8, "pinned": True})
    assert first.status_code == 201 and first.json()["replayed"] is False
    state = client.get("/state").json()
    again = client.post("/vms", json={"id": "a", "cpu": 30, "mem": 8, "pinned": True, "explain": False})
    assert again.status_code == 200, again.text
    assert again.json() == {**first.json(), "explanation": None, "replayed": True}
    for other in ({"cpu": 30, "mem": 9}, {"cpu": 29, "mem": 8}, {"cpu": 30, "mem": 8, "multi_numa": True}):
        r = client.post("/vms", json={"id": "a", **other})
        assert r.status_code == 409 and "a retry asks for the same" in one_sentence(r)
    assert client.put("/vms/a/pinned", json={"pinned": False}).status_code == 200  # an operator unpins it
    unpinned = client.post("/vms", json={"id": "a", "cpu": 30, "mem": 8, "pinned": True})
    assert unpinned.status_code == 200 and unpinned.json()["replayed"]  # still a retry; the pin stays as it is
    assert client.get("/vms/a").json()["pinned"] is False
    assert client.put("/vms/a/pinned", json={"pinned": True}).status_code == 200
    batch = {"vms": [{"id": "a", "cpu": 30, "mem": 8, "pinned": True}, {"id": "b", "cpu": 30, "mem": 8}]}
    one = client.post("/vms/batch", json=batch).json()
    assert (one["placed"], one["replayed"]) == (1, 1) and [x["replayed"] for x in one["results"]] == [True, False]
    assert (one["results"][0]["machine"], one["results"][0]["node"]) == (first.json()["machine"], first.json()["node"])
    two = client.post("/vms/batch", json=batch).json()
    assert (two["placed"], two["replayed"]) == (0, 2) and [x["replayed"] for x in two["results"]] == [True, True]
    assert [x["machine"] for x in two["results"]] == [x["machine"] for x in one["results"]]
    bad = client.post("/vms/batch", json={"vms": [{"id": "c", "cpu": 1, "mem": 1}, {"id": "b", "cpu": 1, "mem": 1}]})
    assert bad.status_code == 409 and "'b' is already placed" in one_sentence(bad)
    assert client.get("/vms/c").status_code == 404  # all or nothing
    after = client.get("/state").json()
    assert after["vms"] == state["vms"] + 1 and client.get("/vms/a").json()["pinned"] is True


def test_a_uid_tells_a_retry_from_another_vm_under_the_same_id(client: TestClient) -> None:
    """A pod recreated under its old name before the old pod's DELETE arrived was answered as the old one's retry,
    and the late DELETE then freed what the new pod used. With a uid: the same uid is a retry, another is a 409
    until the old VM is released, and a DELETE naming the old uid frees only the old VM. A VM placed without a uid
    (before uids, or by a client that sends none) matches any uid, as before."""
    vm = {"id": "ns/p", "cpu": 4, "mem": 8}
    first = client.post("/vms", json={**vm, "uid": "uid-1"})
    assert first.status_code == 201 and client.get("/vms/ns/p").json()["uid"] == "uid-1"
    assert client.post("/vms", json={**vm, "uid": "uid-1"}).json()["replayed"] is True  # a retry
    assert client.post("/vms", json=vm).json()["replayed"] is True  # no uid: judged by its size, as before
    new = client.post("/vms", json={**vm, "uid": "uid-2"})  # the recreated pod
    assert new.status_code == 409 and "was placed with uid 'uid-1', not uid 'uid-2'" in one_sentence(new)
    batch = client.post("/vms/batch", json={"vms": [{"id": "q", "cpu": 1, "mem": 1}, {**vm, "uid": "uid-2"}]})
    assert batch.status_code == 409 and client.get("/vms/q").status_code == 404  # all or nothing
    late = client.delete("/vms/ns/p?uid=uid-2")  # a DELETE for an incarnation that is not the one recorded
    assert late.status_code == 409 and "nothing was freed" in one_sentence(late)
    assert client.get("/vms/ns/p").status_code == 200
    bad = client.delete("/vms/ns/p?uid=")
    assert bad.status_code == 422 and "uid" in one_sentence(bad)
    for typo in ("UID=uid-2", "uid=uid-1&force=1", ";uid=uid-2"):  # a misspelled check must not free the VM
        r = client.delete(f"/vms/ns/p?{typo}")
        said = one_sentence(r)
        assert r.status_code == 422 and "is not a query parameter of DELETE /vms/{vm_id}, which takes uid" in said, typo
    gone = client.delete("/vms/ns/p?uid=uid-1")  # the old pod's DELETE: what it held, its uid included
    assert gone.status_code == 200 and gone.json()["uid"] == "uid-1" and gone.json()["pinned"] is False
    pinned = client.post("/vms", json={"id": "pin-me", "cpu": 1, "mem": 1, "pinned": True, "uid": "u-p"})
    assert pinned.status_code == 201
    assert client.delete("/vms/pin-me").json() | {"machine": None} == {
        "id": "pin-me",
        "machine": None,
        "node": 0,
        "cpu": 1.0,
        "mem": 1.0,
        "multi": False,
        "pinned": True,
        "uid": "u-p",
    }
    again = client.post("/vms", json={**vm, "uid": "uid-2"})
    assert again.status_code == 201 and not again.json()["replayed"]
    assert [x["uid"] for x in client.get("/vms").json()] == ["uid-2"]
    assert client.post("/vms", json={"id": "legacy", "cpu": 1, "mem": 1}).status_code == 201
    assert client.post("/vms", json={"id": "legacy", "cpu": 1, "mem": 1, "uid": "any"}).json()["replayed"] is True
    assert client.delete("/vms/legacy?uid=any").status_code == 200  # nothing to check it against: freed
    assert client.get("/allocations").json()[0]["uid"] == "uid-2"
    clash = [{"vm": "ns/p", "machine": again.json()["machine"], "node": again.json()["node"], "cpu": 4, "mem": 8,
              "uid": "uid-3"}]  # fmt: skip
    assert client.post("/allocations", json=clash).status_code == 409
    assert client.post("/allocations", json=[{**clash[0], "uid": "uid-2"}]).json()["imported"] == 0  # recorded


def test_duplicate_vm_and_non_empty_machine_are_409(client: TestClient) -> None:
    assert client.post("/vms", json={"id": "a", "cpu": 1, "mem": 1}).status_code == 201
    assert "already placed" in one_sentence(client.post("/vms", json={"id": "a", "cpu": 2, "mem": 1}))
    r = client.delete("/machines/pm0")
    assert r.status_code == 409 and "still hosts 1 VMs" in one_sentence(r)
    fail = client.post("/machines/pm0/fail").json()
    assert fail["replaced"][0]["machine"] == "pm1"
    assert client.delete("/machines/pm0").status_code == 204


def test_a_machine_id_with_a_slash_is_reachable(client: TestClient) -> None:
    """A machine registered as ``rack1/m0`` took VMs but every /machines/{id} route answered a bare 404."""
    assert client.post("/machines", json={"id": "rack1/m0", "cpu": 8, "mem": 8}).status_code == 201
    assert client.get("/machines/rack1/m0").json()["id"] == "rack1/m0"
    assert client.post("/machines/rack1/m0/drain").json()["status"] == "drained"
    assert client.post("/machines/rack1/m0/activate").json()["status"] == "active"
    assert client.post("/machines/rack1/m0/fail").status_code == 200
    assert client.delete("/machines/rack1/m0").status_code == 204
    assert "no machine 'rack1/m0'" in one_sentence(client.get("/machines/rack1/m0"))


@pytest.mark.parametrize("fast_path", [True, False])
def test_a_body_over_the_limit_is_413_with_one_sentence(tmp_path, fast_path: bool) -> None:
    """A 150 MB body was read in full before its 422, and a 20 MB one padded with spaces was placed."""
    limit = 2**20  # serve --max-body-mb 1
    engine = PlacementEngine.open(tmp_path / "c.db")
    with TestClient(create_app(engine, fast_path=fast_path, max_body=limit), raise_server_exceptions=False) as c:
        assert c.post("/machines", json={"id": "pm0", "cpu": 40, "mem": 90}).status_code == 201
        padded = b'{"id": "big", "cpu": 1, "mem": 1' + b" " * limit + b"}"  # valid JSON, 1 MiB of spaces
        for path in ("/vms", "/vms/batch", "/allocations"):
            r = c.post(path, content=padded, headers={"content-type": "application/json"})
            said = "at most 65,536 bytes" if path == "/vms" else "over 1,048,576 bytes"  # one VM: 64 KiB at most
            assert r.status_code == 413 and said in one_sentence(r), path

        def chunks():  # no Content-Length: refused as the body passes the limit
            yield b'{"id": "big2", "cpu": 1, "mem": 1'
            for _ in range(3):
                yield b" " * (limit // 2)
            yield b"}"

        r = c.post("/vms", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and "at most 65,536 bytes" in one_sentence(r)
        r = c.post("/vms/batch", content=chunks(), headers={"content-type": "application/json"})
        assert r.status_code == 413 and "over 1,048,576 bytes" in one_sentence(r)
        assert c.get("/vms").json() == []
        assert c.post("/vms", json={"id": "ok", "cpu": 1, "mem": 1}).status_code == 201  # under it: placed
    engine.close()


def test_a_bug_is_500_not_a_leak(client: TestClient) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]
    engine.stats = lambda: 1 / 0
    r = client.get("/state")
    assert r.status_code == 500


def test_a_bug_on_the_hot_calls_is_500(client: TestClient) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]

    async def broken(*args, **kwargs):
        raise ZeroDivisionError

    engine.place_async = engine.release_held_async = broken
    assert client.post("/vms", json={"id": "v", "cpu": 1, "mem": 1}).status_code == 500
    assert client.delete("/vms/v").status_code == 500


def test_malformed_json_is_422_with_one_sentence(client: TestClient) -> None:
    r = client.post("/vms", content=b'{"id": "v", "cpu": ', headers={"content-type": "application/json"})
    assert (
        r.status_code == 422
        and one_sentence(r) == "the request body is not valid JSON: Expecting value (at character 19)"
    )


@pytest.mark.parametrize(
    ("raw", "said"),
    [
        # NaN and Infinity (Python's JSON reader takes them) were told "should be greater than 0" or a range
        (b'{"id": "v", "cpu": NaN, "mem": 1}', "field 'cpu': Input should be a finite number"),
        (b'{"id": "v", "cpu": 1, "mem": -Infinity}', "field 'mem': Input should be a finite number"),
        # a number of 5,000 digits was "not valid JSON (at character 0)"
        (b'{"id": "v", "cpu": ' + b"9" * 5000 + b', "mem": 1}',
         "the request body is not valid JSON: a number has over 4300 digits"),
    ],
)  # fmt: skip
def test_numbers_json_cannot_carry_are_named(client: TestClient, raw: bytes, said: str) -> None:
    for path in ("/vms", "/vms/batch", "/machines"):
        body = raw if path != "/vms/batch" else b'{"vms": [' + raw + b"]}"
        r = client.post(path, content=body, headers={"content-type": "application/json"})
        want = said.replace("field '", "field 'vms.0.") if path == "/vms/batch" else said
        assert r.status_code == 422 and one_sentence(r).startswith(want), (path, r.text)


def test_health_metrics_openapi_and_allocations(client: TestClient) -> None:
    assert client.get("/healthz").json()["status"] == "ok"
    client.post("/vms", json={"id": "a", "cpu": 2, "mem": 4})
    client.post("/vms", json={"id": "b", "cpu": 200, "mem": 4})
    text = client.get("/metrics").text
    assert 'dcplace_decisions_total{result="placed"} 1.0' in text
    assert 'dcplace_decisions_total{result="rejected"} 1.0' in text
    assert 'dcplace_machines{status="active"} 3.0' in text and "dcplace_request_seconds_bucket" in text
    assert "dcplace_store_commits_total" in text
    assert "/vms" in client.get("/openapi.json").json()["paths"]
    alloc = client.get("/allocations").json()
    assert alloc == [{"vm": "a", "machine": "pm0", "node": 0, "cpu": 2.0, "mem": 4.0, "pinned": False, "uid": None}]
    rows = [{"vm": "c", "machine": "pm2", "node": None, "cpu": 2, "mem": 4}]
    r = client.post("/allocations", json=rows)
    assert r.json() == {"imported": 1, "already_recorded": 0} and client.get("/vms/c").json()["multi"] is True
    # the same request again (a retry) changes nothing; the same VM elsewhere is a conflict naming both places
    assert client.post("/allocations", json=rows).json() == {"imported": 0, "already_recorded": 1}
    pinned = client.post("/allocations", json=[{**rows[0], "pinned": True}])  # the pin was silently dropped
    assert pinned.status_code == 409 and "already recorded unpinned" in one_sentence(pinned)
    moved = client.post("/allocations", json=[{**rows[0], "machine": "pm1"}])
    assert moved.status_code == 409 and "already placed on machine 'pm2' node all" in one_sentence(moved)
    twice = client.post("/allocations", json=[{**rows[0], "vm": "d"}, {**rows[0], "vm": "d"}])
    assert twice.status_code == 422 and "names VM 'd' a second time (first at [0])" in one_sentence(twice)
    assert "d" not in {v["id"] for v in client.get("/vms").json()}


def test_kube_scheduler_extender(client: TestClient) -> None:
    client.post("/machines/pm2/drain")
    pod = {
        "metadata": {"name": "web", "namespace": "prod"},
        "spec": {"containers": [{"resources": {"requests": {"cpu": "1500m", "memory": "4Gi"}}}]},
    }
    names = ["pm0", "pm1", "pm2", "ghost"]
    f = client.post("/extender/filter", json={"Pod": pod, "NodeNames": names}).json()
    assert f["NodeNames"] == ["pm0", "pm1"] and f["Error"] == ""
    # Neither a drained nor an unknown node is cured by preemption: FailedAndUnresolvableNodes (it was FailedNodes)
    assert f["FailedAndUnresolvableNodes"] == {"pm2": "dcplace: drained",
                                               "ghost": "dcplace: not registered with dcplace"}  # fmt: skip
    items = [{"metadata": {"name": n}} for n in names]  # nodeCacheCapable false: kube-scheduler reads only Nodes
    f = client.post("/extender/filter", json={"Pod": pod, "Nodes": {"items": items}}).json()
    assert f["Nodes"] == {"items": items[:2]} and f["Error"] == ""
    p = client.post("/extender/prioritize", json={"Pod": pod, "NodeNames": names}).json()
    scores = {h["Host"]: h["Score"] for h in p}
    assert scores["pm0"] == 10 and 0 < scores["pm1"] < 10 and scores["pm2"] == scores["ghost"] == 0
    bind = {"PodName": "web", "PodNamespace": "prod", "Node": "pm1"}
    assert client.post("/extender/bind", json=bind).json() == {"Error": ""}
    assert client.post("/extender/bind", json=bind).json() == {"Error": ""}  # a retry after a timeout: idempotent
    other = client.post("/extender/bind", json={**bind, "Node": "pm0"}).json()
    assert other["Error"] == "dcplace: VM 'prod/web' is already placed on machine 'pm1'"
    vms = client.get("/vms").json()
    assert [(v["id"], v["machine"], v["cpu"]) for v in vms] == [("prod/web", "pm1", 1.5)]


def test_a_pod_recreated_under_its_old_name_is_not_taken_for_its_retry(client: TestClient) -> None:
    """The bind records the pod's UID. A new pod under the name of one still recorded (its DELETE not yet come)
    was answered as the old one's retry: both ran on 1.5 cores counted once, and the late DELETE freed the new
    pod's. Now its bind is refused until the old pod is released, and a DELETE naming the old UID frees only it."""

    def pod(uid: str) -> dict:
        return {"metadata": {"name": "web", "namespace": "prod", "uid": uid},
                "spec": {"containers": [{"resources": {"requests": {"cpu": "1500m", "memory": "4Gi"}}}]}}  # fmt: skip

    def bind(uid: str) -> str:
        f = client.post("/extender/filter", json={"Pod": pod(uid), "NodeNames": ["pm0"]}).json()
        assert f["NodeNames"] == ["pm0"], f
        out = client.post("/extender/bind", json={"PodName": "web", "PodNamespace": "prod", "PodUID": uid,
                                                   "Node": "pm0"}).json()  # fmt: skip
        return str(out["Error"])

    assert bind("old") == "" and bind("old") == ""  # placed, then a retry
    assert client.get("/vms/prod/web").json()["uid"] == "old"
    refused = bind("new")
    assert "was placed with uid 'old', not uid 'new'" in refused and client.get("/state").json()["vms"] == 1
    assert client.delete("/vms/prod/web?uid=new").status_code == 409  # not the one recorded: nothing freed
    assert client.delete("/vms/prod/web?uid=old").status_code == 200  # the old pod's DELETE
    assert bind("new") == "" and client.get("/vms/prod/web").json()["uid"] == "new"
    assert client.delete("/vms/prod/web?uid=old").status_code == 409  # a duplicate of the old pod's DELETE
    assert client.get("/vms/prod/web").status_code == 200


def test_a_pods_request_is_kube_schedulers():
    """The sum of containers only: init containers, sidecars, overhead, pod-level requests and limits-only
    containers were ignored (a NUMA node could be over-committed); exponent quantities were refused."""
    from dcplace.service.extender import pod_requests, quantity

    def gi(x: float) -> float:
        return x * 2.0**30

    for text, cores in (("500m", 0.5), ("1e3", 1000.0), ("129e6", 129e6), (".5", 0.5), ("1.", 1.0), ("+1", 1.0),
                        ("100u", 1e-4), ("500000n", 5e-4), ("1P", 1e15)):  # fmt: skip
        assert quantity(text, "cpu") == pytest.approx(cores), text
    assert quantity("1Ei", "memory") == pytest.approx(2.0**30) and quantity("1e9", "memory") == pytest.approx(
        1e9 / gi(1)
    )

    def c(cpu: str, mem: str, **kw: str) -> dict:
        return {"resources": {"requests": {"cpu": cpu, "memory": mem}}, **kw}

    app = c("1", "1Gi")
    assert pod_requests({"spec": {"containers": [app], "initContainers": [c("4", "6Gi")]}}) == (4.0, 6.0)
    side = c("500m", "256Mi", restartPolicy="Always")
    assert pod_requests({"spec": {"containers": [app], "initContainers": [side]}}) == (1.5, 1.25)
    over = {"spec": {"containers": [app], "overhead": {"cpu": "250m", "memory": "512Mi"}}}
    assert pod_requests(over) == (1.25, 1.5)
    level = {"spec": {"containers": [app], "resources": {"requests": {"cpu": "3", "memory": "3Gi"}}}}
    assert pod_requests(level) == (3.0, 3.0)
    limits = {"spec": {"containers": [{"resources": {"limits": {"cpu": "2", "memory": "2Gi"}}}]}}
    assert pod_requests(limits) == (2.0, 2.0)


def test_a_failed_database_is_503_and_healthz_says_so(client: TestClient) -> None:
    engine = client.app.state.engine  # type: ignore[attr-defined]

    def broken(c: object, at: float) -> None:
        raise OSError("disk full")

    engine.store._write = broken
    r = client.post("/vms", json={"id": "a", "cpu": 1, "mem": 1})
    assert r.status_code == 503 and "disk full" in one_sentence(r)
    assert client.get("/healthz").status_code == 503
    assert client.post("/vms", json={"id": "b", "cpu": 1, "mem": 1}).status_code == 503
    # reads too: the memory holds VM "a", whose write failed (GET /vms listed it with 200)
    for path in ("/state", "/vms", "/vms/a", "/machines", "/machines/pm0", "/allocations", "/state/snapshot"):
        r = client.get(path)
        assert r.status_code == 503 and "disk full" in one_sentence(r), path
    assert client.get("/metrics").status_code == 200  # what a monitor reads to see it


def test_batch_placement_decides_as_single_calls(client: TestClient) -> None:
    vms = [{"id": f"b{i}", "cpu": 8 + i % 3, "mem": 16, "multi_numa": i % 5 == 0} for i in range(40)]
    r = client.post("/vms/batch", json={"vms": vms})
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["placed"] + body["rejected"] == 40 and body["rejected"] > 0  # 3 machines cannot hold 40
    first_reject = next(x for x in body["results"] if not x["accepted"])
    assert first_reject["code"] == "no-fit" and first_reject["explanation"]["feasible"] == 0
    assert len(client.get("/vms").json()) == body["placed"]
    dup = client.post("/vms/batch", json={"vms": [{"id": "new", "cpu": 1, "mem": 1}, {"id": "b0", "cpu": 1, "mem": 1}]})
    assert dup.status_code == 409 and "already placed" in one_sentence(dup)
    assert client.get("/vms/new").status_code == 404
    assert client.post("/vms/batch", json={"vms": []}).status_code == 422


def test_listings_page_with_a_link_header_and_filter_by_machine(client: TestClient) -> None:
    """At a million VMs `GET /vms` built every record under the engine's lock (25 s, every placement waiting) and
    could only come whole: `limit` and the `Link` header page it, `machine` filters it, and an unpaged listing
    still returns everything."""
    assert (
        client.post("/vms/batch", json={"vms": [{"id": f"v{i}", "cpu": 1, "mem": 1} for i in range(25)]}).json()[
            "placed"
        ]
        == 25
    )
    client.put("/vms/v3/pinned", json={"pinned": True})
    client.delete("/vms/v5")
    whole = client.get("/vms").json()
    assert len(whole) == 24 and "link" not in client.get("/vms").headers
    for path, key in (("/vms", "id"), ("/allocations", "vm")):
        seen, url = [], f"{path}?limit=7"
        while url:
            r = client.get(url)
            assert r.status_code == 200 and len(r.json()) <= 7
            seen += r.json()
            link = r.headers.get("link")
            url = link[1 : link.index(">")] if link else None
            assert link is None or (link.endswith('; rel="next"') and "limit=7" in link)
        assert [x[key] for x in seen] == [x["id"] for x in whole]
        assert [x["pinned"] for x in seen] == [x["id"] == "v3" for x in whole]
    assert client.get("/allocations").json() == [
        {"vm": x["id"], "machine": x["machine"], "node": x["node"], "cpu": x["cpu"], "mem": x["mem"],
         "pinned": x["pinned"], "uid": x["uid"]} for x in whole
    ]  # fmt: skip
    on_pm0 = client.get("/vms?machine=pm0").json()
    assert on_pm0 and on_pm0 == [x for x in whole if x["machine"] == "pm0"]
    assert client.get("/vms?machine=pm9").status_code == 404
    for bad in ("limit=0", "limit=x", "after=-2"):
        r = client.get(f"/vms?{bad}")
        assert r.status_code == 422 and one_sentence(r), bad


@pytest.mark.parametrize("n", [0, 999, 1000, 1001, 2000, 2601])
def test_a_long_listing_sent_in_chunks_is_the_same_json(tmp_path, n: int) -> None:
    """Past ``LISTING_CHUNK`` VMs a listing is built and sent a chunk at a time on the event loop: byte for byte
    what ``json.dumps`` makes of the whole list, each row what ``GET /vms/{id}`` answers for its VM, at and around
    the chunk edges, paged or not, for both listings."""
    import json

    import numpy as np

    from dcplace.engine import MachineSpec, VmRequest, allocation_rows
    from dcplace.service.answers import vm_json

    def vm_rows(page):  # type: ignore[no-untyped-def]  # each VM as GET /vms/{id} answers it alone
        return [vm_json(r, p, u) for r, p, u in zip(page.vms, page.pinned, page.uids, strict=True)]

    engine = PlacementEngine.open(tmp_path / "c.db")
    engine.add_machines([MachineSpec(f"pm{i}", 64, 256) for i in range(60)])
    ids = [f"v{i}" for i in range(n + 3)]
    engine.place_arrays(ids, np.ones(n + 3), np.ones(n + 3), np.arange(n + 3) % 7 == 3)  # some on every node
    if n:
        engine.release("v1")
        engine.place(VmRequest("v1", 2, 2, uid="pod-1"))  # a uid among VMs without one
    for gone in ("v0", f"v{(n + 3) // 2}", f"v{n + 2}"):  # holes in the ledger: first, middle, last
        engine.release(gone)
    if n:
        engine.pin("v1")
    with TestClient(create_app(engine)) as c:
        for path, rows in (("/vms", vm_rows), ("/allocations", allocation_rows)):
            whole = c.get(path)
            assert whole.content == json.dumps(rows(engine.vm_page())).encode(), path
            assert len(whole.json()) == n and "link" not in whole.headers
            if n > 1500:
                first = c.get(f"{path}?limit=1500")
                page = engine.vm_page(1500)
                assert first.content == json.dumps(rows(page)).encode()
                assert first.headers["link"] == f'<{path}?limit=1500&after={page.next}>; rel="next"'
    engine.close()


def test_an_import_is_at_most_ten_thousand_rows(client: TestClient) -> None:
    """300,000 rows were parsed and validated on the event loop for 24 s, every request waiting."""
    rows = [{"vm": f"v{i}", "machine": "pm0", "node": 0, "cpu": 0.001, "mem": 0.001} for i in range(10_001)]
    r = client.post("/allocations", json=rows)
    assert r.status_code == 422 and "10000" in one_sentence(r).replace(",", "")
    assert client.get("/state").json()["vms"] == 0
    assert client.post("/allocations", json=rows[:10_000]).json() == {"imported": 10_000, "already_recorded": 0}


def test_a_cursor_past_the_ledger_is_an_empty_page_or_a_422(client: TestClient) -> None:
    """`after=9223372036854775807` overflowed numpy's int64 in the slice: a 500."""
    client.post("/vms", json={"id": "v", "cpu": 1, "mem": 1})
    assert client.get("/vms?after=1000000").json() == []
    for huge in (2**63 - 1, 10**20):
        r = client.get(f"/vms?after={huge}")
        assert r.status_code == 422 and one_sentence(r)


def test_every_request_is_counted_timed_and_given_an_id(client: TestClient) -> None:
    """An observability review: only successful places and releases were timed, nothing counted requests by status
    (a 503 storm was invisible), and nothing tied a client's error to the log. Every answer now carries an
    X-Request-ID (the client's when well-formed) and is counted by route, method and code."""
    ok = client.post("/vms", json={"id": "a", "cpu": 1, "mem": 1}, headers={"x-request-id": "job-42.retry:1"})
    assert ok.status_code == 201 and ok.headers["x-request-id"] == "job-42.retry:1"
    dup = client.post("/vms", json={"id": "a", "cpu": 2, "mem": 1}, headers={"x-request-id": "bad id\twith space"})
    assert dup.status_code == 409 and len(dup.headers["x-request-id"]) == 32  # not the client's: a new one
    assert client.get("/no/such/route").status_code == 404
    assert client.get(f"/{'x' * 300}").status_code == 404
    text = client.get("/metrics").text
    assert 'dcplace_http_requests_total{code="201",method="POST",route="/vms"} 1.0' in text
    assert 'dcplace_http_requests_total{code="409",method="POST",route="/vms"} 1.0' in text
    assert 'dcplace_http_requests_total{code="404",method="GET",route="other"} 2.0' in text  # paths stay few labels
    assert 'dcplace_http_request_duration_seconds_count{method="POST",route="/vms"} 2.0' in text


def test_metrics_say_why_requests_fail_what_units_and_how_long_commits_take(client: TestClient, caplog) -> None:
    """An observability review: rejections were one number (a full cluster and a policy that declines alike),
    capacity mixed cores and GB in one family, commits were not timed, nothing named the process or the version,
    and no log line per request carried its id and time."""
    big = client.post("/vms", json={"id": "big", "cpu": 400, "mem": 1})
    assert big.status_code == 409 and big.json()["code"] == "no-fit"
    with caplog.at_level("INFO", logger="dcplace.service.access"):
        ok = client.post("/vms", json={"id": "a", "cpu": 1, "mem": 2}, headers={"x-request-id": "r-7"})
        assert ok.status_code == 201
        assert client.get("/x%0Aforged").status_code == 404
    lines = [r.getMessage() for r in caplog.records if r.name == "dcplace.service.access"]
    assert len(lines) == 2 and lines[0].startswith("POST /vms 201 ") and lines[0].endswith(" ms request r-7")
    assert lines[1].startswith("GET '/x\\nforged' 404")  # the client's newline cannot forge a log line
    text = client.get("/metrics").text
    assert 'dcplace_rejections_total{code="no-fit"} 1.0' in text
    assert 'dcplace_rejections_total{code="declined"} 0.0' in text
    assert 'dcplace_capacity{resource="cpu",unit="core"} 240.0' in text  # 3 machines x 2 nodes x 40 cores
    assert 'dcplace_capacity{resource="mem",unit="GB"} 540.0' in text
    assert 'dcplace_allocated{resource="mem",unit="GB"} 2.0' in text
    values = dict(line.rsplit(" ", 1) for line in text.splitlines() if line and not line.startswith("#"))
    commits = float(values["dcplace_store_commits_total"])
    assert commits >= 4  # three machines and a VM
    assert float(values['dcplace_store_commit_seconds_bucket{le="+Inf"}']) == commits
    assert float(values["dcplace_store_commit_seconds_count"]) == commits
    assert 0 < float(values["dcplace_store_commit_seconds_sum"]) < commits * 5
    assert 'dcplace_build_info{version="' in text and "process_open_fds" in text and "python_info{" in text


def test_allow_names_every_method_a_path_takes(client: TestClient, caplog) -> None:
    """A conformance review: ``OPTIONS /vms`` answered 405 with ``Allow: POST`` (GET exists too), and
    ``/machines/m1/drain`` named only GET (``GET /machines/{id}`` matched first: ids may hold "/"). OPTIONS now
    answers 204 with every method the path takes, and a 405 names them all."""
    r = client.options("/vms")
    assert r.status_code == 204 and r.headers["allow"] == "GET, HEAD, OPTIONS, POST"
    assert client.options("/machines/pm0/drain").headers["allow"] == "DELETE, GET, HEAD, OPTIONS, PATCH, POST"
    assert client.options("/vms/a").headers["allow"] == "DELETE, GET, HEAD, OPTIONS, PATCH"
    r = client.put("/machines")
    assert r.status_code == 405 and r.headers["allow"] == "GET, HEAD, OPTIONS, POST" and one_sentence(r)
    with caplog.at_level("INFO", logger="dcplace.service.access"):
        client.options("/vms")
    assert caplog.records[-1].getMessage().startswith("OPTIONS /vms 204 ")  # the method as sent ("other" is a label)
    for method in ("OPTIONS", "POST"):  # the docs' files: Starlette's StaticFiles answers for itself
        assert client.request(method, "/docs-static/swagger-ui.css").headers["allow"] == "GET, HEAD"
    assert client.options("/nope").status_code == 404  # no such resource: no methods to name


def _columns_strategy():  # type: ignore[no-untyped-def]
    from hypothesis import strategies as st

    from dcplace.engine import VmColumns

    text = st.text(min_size=1, max_size=12)  # any characters: quotes, backslashes, controls, astral planes
    amount = st.floats(min_value=1e-9, max_value=1e12, allow_nan=False) | st.sampled_from([1.0, 0.1, 1 / 3, 5e-324])
    row = st.tuples(text, text, st.none() | st.integers(0, 7), amount, amount, st.booleans(), st.booleans(),
                    st.none() | text)  # fmt: skip
    return st.lists(row, max_size=20).map(lambda rows: VmColumns(*(list(c) for c in zip(*rows, strict=True)))
                                          if rows else VmColumns([], [], [], [], [], [], [], []))  # fmt: skip


def test_listing_rows_written_as_text_are_what_json_dumps_writes() -> None:
    """The listings write their rows as JSON text directly (1.7x faster than dictionaries and ``json.dumps``): the
    same bytes as ``json.dumps`` of the rows, for any ids, uids and amounts."""
    import json

    from hypothesis import given, settings

    from dcplace.engine import allocation_rows
    from dcplace.service.answers import allocation_rows_json, vm_rows_json

    @settings(max_examples=300, deadline=None)
    @given(_columns_strategy())
    def check(c) -> None:  # type: ignore[no-untyped-def]
        vms = [{"id": i, "machine": m, "node": k, "cpu": x, "mem": g, "multi": z, "pinned": p, "uid": u}
               for i, m, k, x, g, z, p, u in zip(*c, strict=True)]  # fmt: skip
        assert f"[{vm_rows_json(c)}]" == json.dumps(vms)
        assert f"[{allocation_rows_json(c)}]" == json.dumps(allocation_rows(c))
        assert json.loads(f"[{vm_rows_json(c)}]") == vms

    check()
