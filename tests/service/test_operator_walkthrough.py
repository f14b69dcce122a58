"""What an operator's walkthrough found (2026-11-27), each kept from coming back: a request cannot name code to run,
ids with "/" work on every VM route, one engine per database, a drain that cannot empty its machine says so,
amounts stay within the ledger's exact range, POST /reoptimise needs no body, and a batch keeps what its items
say."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
from fastapi.testclient import TestClient

from dcplace.engine import PlacementEngine, VmRequest
from dcplace.errors import InputError
from dcplace.service import create_app


@pytest.fixture(params=[True, False], ids=["fast-path", "fastapi-routes"])
def client(tmp_path, request):
    engine = PlacementEngine.open(tmp_path / "c.db")
    with TestClient(create_app(engine, fast_path=request.param), raise_server_exceptions=False) as c:
        for i in range(2):
            assert c.post("/machines", json={"id": f"pm{i}", "cpu": 16, "mem": 64}).status_code == 201
        yield c
    engine.close()


@pytest.mark.parametrize(
    ("method", "path", "body"),
    [
        ("post", "/vms", {"id": "v", "cpu": 1, "mem": 1, "policy": "os:getcwd"}),
        ("post", "/vms/batch", {"vms": [{"id": "v", "cpu": 1, "mem": 1}], "policy": "os:getcwd"}),
        ("post", "/explain", {"cpu": 1, "mem": 1, "policy": "os:getcwd"}),
        ("post", "/machines/pm0/fail?policy=os:getcwd", None),
    ],
)
def test_a_request_names_registered_policies_only(client, method, path, body):
    r = getattr(client, method)(path, **({} if body is None else {"json": body}))
    assert r.status_code == 422 and "must be a registered policy" in r.json()["detail"], r.text
    assert "built a str" not in r.text  # the function was not called
    assert client.get("/machines/pm0").json()["status"] == "active"
    ok = client.post("/vms", json={"id": "w", "cpu": 1, "mem": 1, "policy": "first-fit"})
    assert ok.status_code == 201


def test_ids_with_a_slash_work_on_every_vm_route(client):
    r = client.post("/vms", json={"id": "default/p1", "cpu": 2, "mem": 4})
    assert r.status_code == 201, r.text
    assert client.get("/vms/default/p1").json()["id"] == "default/p1"
    assert client.get("/vms/default/p1/explanation").status_code == 200
    assert client.put("/vms/default/p1/pinned", json={"pinned": True}).status_code == 200
    assert client.put("/vms/default/p1/pinned", json={"pinned": False}).status_code == 200
    gone = client.delete("/vms/default/p1")
    assert gone.status_code == 200 and gone.json()["cpu"] == 2.0
    assert client.get("/state").json()["vms"] == 0
    assert client.delete("/vms/").status_code == 405  # still no empty id


def test_reoptimise_without_a_body_takes_the_defaults(client):
    client.post("/vms", json={"id": "a", "cpu": 2, "mem": 4})
    r = client.post("/reoptimise")
    assert r.status_code == 200, r.text
    assert r.json()["verified"]


def test_amounts_beyond_the_ledgers_exact_range_are_refused(client):
    r = client.post("/machines", json={"id": "huge", "cpu": 1e308, "mem": 1e308})
    assert r.status_code == 422 and "at most 2147483647" in r.json()["detail"]
    assert client.get("/state").status_code == 200


def test_a_drain_that_cannot_empty_its_machine_says_which_vms_stay(tmp_path):
    e = PlacementEngine.open(tmp_path / "c.db", policy="first-fit")
    e.add_machine("a", cpu=8, mem=32)
    e.add_machine("b", cpu=8, mem=32)
    for i in range(4):
        e.place(VmRequest(f"v{i}", cpu=8, mem=8))  # a's and b's nodes full: no room anywhere else
    rep = e.evacuate("a")
    assert not rep.complete and rep.applied == 0
    assert "2 VM(s) fit nowhere else and stay on the drained machine 'a': v0, v1" in rep.reason
    assert e.machine("a").status == "drained" and e.machine("a").vms == 2
    e.check_invariants()
    e.close()


def test_one_engine_per_database(tmp_path):
    db = tmp_path / "c.db"
    first = PlacementEngine.open(db)
    with pytest.raises(InputError, match="is open in another dcplace engine"):
        PlacementEngine.open(db)
    # the CLI on a live service's database: one sentence, exit 2, nothing changed
    env = dict(os.environ, OMP_NUM_THREADS="1")
    p = subprocess.run([sys.executable, "-m", "dcplace.cli.main", "cluster", "reoptimise", "--db", str(db)],
                       capture_output=True, text=True, timeout=120, env=env)  # fmt: skip
    assert p.returncode == 2 and "--db" in p.stderr and "is open in another dcplace engine" in p.stderr, p.stderr
    first.close()
    PlacementEngine.open(db).close()  # released on close


def test_a_killed_engine_releases_its_database(tmp_path):
    db = tmp_path / "c.db"
    code = "import sys, time; from dcplace.engine import PlacementEngine; PlacementEngine.open(sys.argv[1]); " \
           "print('open', flush=True); time.sleep(60)"  # fmt: skip
    proc = subprocess.Popen([sys.executable, "-c", code, str(db)], stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None and proc.stdout.readline().strip() == "open"
    with pytest.raises(InputError, match="is open in another dcplace engine"):
        PlacementEngine.open(db)
    proc.kill()
    proc.wait()
    PlacementEngine.open(db).close()  # the kernel dropped the lock with the process


@pytest.mark.parametrize(
    ("path", "raw", "said"),
    [
        (
            "/vms",
            b'{"id": "v", "cpu": 1,, }',
            "the request body is not valid JSON: Expecting property name enclosed in double quotes (at character 21)",
        ),
        ("/vms", b"", "the request needs a JSON body"),
        ("/machines", b'{"id": 1', "the request body is not valid JSON: Expecting ',' delimiter (at character 8)"),
        ("/machines", b"null", "Input should be a valid dictionary or object to extract fields from"),
    ],
)
def test_a_body_that_is_not_json_is_said_so(client, path, raw, said):
    r = client.post(path, content=raw, headers={"content-type": "application/json"})
    assert r.status_code == 422 and r.json()["detail"] == said


def test_a_constraint_is_named_by_its_field_not_pydantics_tag(client):
    r = client.post("/machines", json={"id": "m", "cpu": -1, "mem": 4})
    assert r.json()["detail"].startswith("field 'cpu': Input should be greater than 0 (and 1 more problem)")


def test_a_vm_says_whether_it_is_pinned_and_health_answers_head(client):
    client.post("/vms", json={"id": "p", "cpu": 1, "mem": 1, "pinned": True})
    client.post("/vms", json={"id": "q", "cpu": 1, "mem": 1})
    assert client.get("/vms/p").json()["pinned"] is True and client.get("/vms/q").json()["pinned"] is False
    assert {v["id"]: v["pinned"] for v in client.get("/vms").json()} == {"p": True, "q": False}
    assert client.put("/vms/p/pinned", json={"pinned": False}).json()["pinned"] is False
    assert client.head("/healthz").status_code == 200


def test_a_batch_keeps_its_items_pinned_and_refuses_what_it_would_ignore(client):
    """A batch item's ``pinned`` is kept (it was dropped: the VM could be migrated); ``policy`` and ``explain`` on an
    item, which a batch cannot honour (one policy, no explanations), are a 422 naming the field."""
    vms = [{"id": "p", "cpu": 1, "mem": 1, "pinned": True}, {"id": "q", "cpu": 1, "mem": 1}]
    assert client.post("/vms/batch", json={"vms": vms}).json()["placed"] == 2
    assert {v["id"]: v["pinned"] for v in client.get("/vms").json()} == {"p": True, "q": False}
    for field, value in (("policy", "os:getcwd"), ("explain", False)):
        r = client.post("/vms/batch", json={"vms": [{"id": "r", "cpu": 1, "mem": 1, field: value}]})
        assert r.status_code == 422 and r.json()["detail"].startswith(f"field 'vms.0.{field}': Extra inputs")
    assert client.get("/vms/r").status_code == 404


def test_the_openapi_409_of_a_placement_names_both_answers(client):
    """A 409 of ``POST /vms`` is a rejection (reason, code, explanation) or another request under a placed id (the
    sentence only); the OpenAPI document named only the first."""
    from dcplace.service.models import ErrorOut, RejectionOut

    schema = client.get("/openapi.json").json()["paths"]["/vms"]["post"]["responses"]["409"]
    refs = {x["$ref"].rsplit("/", 1)[1] for x in schema["content"]["application/json"]["schema"]["anyOf"]}
    assert refs == {"RejectionOut", "ErrorOut"}
    client.post("/vms", json={"id": "d", "cpu": 1, "mem": 1})
    dup = client.post("/vms", json={"id": "d", "cpu": 1, "mem": 2})
    big = client.post("/vms", json={"id": "e", "cpu": 1000, "mem": 1})
    assert dup.status_code == big.status_code == 409
    assert ErrorOut.model_validate(dup.json()).detail == (
        "field 'id': a VM 'd' is already placed with 1 cores and 1 GB; a retry asks for the same, another VM needs "
        "another id"
    )
    assert RejectionOut.model_validate(big.json()).code


def test_a_database_whose_rows_do_not_fit_is_named_as_such(tmp_path):
    import sqlite3

    db = tmp_path / "c.db"
    e = PlacementEngine.open(db)
    e.add_machine("c", cpu=8, mem=32)
    e.place(VmRequest("a", cpu=6, mem=4))
    e.close()
    with sqlite3.connect(db) as con:  # a second writer's row: machine c's node 0 now holds 12 of 8 cores
        con.execute("INSERT INTO vms (id, machine, node, cpu, mem, multi, pinned) VALUES ('b', 'c', 0, 6, 4, 0, 0)")
    for _ in range(2):  # a failed open gives its lock back: the same sentence again, not "open in another engine"
        with pytest.raises(InputError) as err:
            PlacementEngine.open(db)
        assert err.value.field == "db"
        assert f"{db} does not hold a consistent cluster: VM 'b' (6 cores, 4 GB) does not fit" in str(err.value)
