"""The network-aware setting over HTTP (``dcplace serve --network``): jobs placed, listed, released, durable across a
restart of the real server process, bad input a 4xx with one sentence, the OpenAPI document validated."""

from __future__ import annotations

import json
import signal
import sqlite3
from pathlib import Path

import httpx
import jsonschema
from typer.testing import CliRunner

from dcplace.cli.main import app
from dcplace.engine import NetworkEngine, PlacementEngine
from dcplace.engine.network import read_network_journal
from dcplace.service import create_app

from .conftest import free_port, server_thread, start_serve


def test_jobs_over_http_answer_as_documented(tmp_path: Path) -> None:
    net = NetworkEngine.open(tmp_path / "n.db", "alpha", "tetris")
    engine = PlacementEngine()
    with server_thread(engine, create_app(engine, network=net)) as url, httpx.Client(base_url=url) as c:
        doc = c.get("/openapi.json").json()
        schema = {**doc, "$ref": "#/components/schemas/JobOut"}
        r = c.post("/jobs", json={"id": "j1", "cpu": 15, "mem": 12, "bw": 0.1})
        assert r.status_code == 201, r.text
        jsonschema.validate(r.json(), schema)
        assert len(r.json()["servers"]) == 2 and r.json()["locality"] == "one rack"
        assert c.get("/jobs/j1").json() == r.json() and [j["id"] for j in c.get("/jobs").json()] == ["j1"]
        full = c.post("/jobs", json={"id": "big", "cpu": 10_000, "mem": 1, "bw": 0.1})
        assert full.status_code == 409 and full.json() == {"id": "big", "accepted": False, "reason": "capacity"}
        jsonschema.validate(full.json(), {**doc, "$ref": "#/components/schemas/JobRejectionOut"})
        again = c.post("/jobs", json={"id": "j1", "cpu": 1, "mem": 1, "bw": 0.1})
        assert again.status_code == 409 and "running already" in again.json()["detail"]
        stats = c.get("/network").json()
        jsonschema.validate(stats, {**doc, "$ref": "#/components/schemas/NetworkOut"})
        assert stats["jobs"] == 1 and stats["cpu_used"] == 15 and stats["counters"]["rejected"] == 1
        scraped = c.get("/metrics").text
        for line in ("dcplace_network_jobs 1.0", 'dcplace_network_decisions_total{result="placed"} 1.0',
                     'dcplace_network_rejections_total{reason="capacity"} 1.0',
                     'dcplace_network_allocated{resource="cpu"} 15.0'):  # fmt: skip
            assert line in scraped, line
        for body, field in (({"id": "x", "cpu": -1, "mem": 1, "bw": 0.1}, "cpu"),
                            ({"id": "x", "cpu": 1, "mem": 1, "bw": 0}, "bw"),
                            ({"id": "x", "cpu": 1, "mem": 1, "bw": 0.1, "gpu": 1}, "gpu"),
                            ({"id": "x", "cpu": 0, "mem": 0, "bw": 0.1}, "cpu")):  # fmt: skip
            bad = c.post("/jobs", json=body)
            assert bad.status_code == 422 and field in bad.json()["detail"], (body, bad.text)
        assert c.get("/jobs?all=1").status_code == 422  # a query parameter it does not take
        assert c.delete("/jobs/j1").json()["servers"] == r.json()["servers"]
        assert c.delete("/jobs/j1").status_code == 404 and c.get("/jobs/j1").status_code == 404
        assert c.get("/network").json()["cpu_used"] == 0
        assert c.get("/healthz").json() == {"status": "ok", "machines": 0, "vms": 0, "jobs": 0}
        said = c.post("/network/explain", json={"id": "j9", "cpu": 15, "mem": 12, "bw": 0.1})
        assert said.status_code == 200, said.text
        jsonschema.validate(said.json(), {**doc, "$ref": "#/components/schemas/NetExplanationOut"})
        assert said.json()["accepted"] and said.json()["placement"]["locality"] == "one rack"
        full = c.post("/network/explain", json={"id": "j9", "cpu": 10_000, "mem": 1, "bw": 0.1}).json()
        jsonschema.validate(full, {**doc, "$ref": "#/components/schemas/NetExplanationOut"})
        assert full["reason"] == "capacity" and full["summary"].startswith("the cluster has 400 CPU")
        assert c.post("/network/explain", json={"id": "j9", "cpu": 1, "mem": 1, "bw": 0}).status_code == 422
        assert c.get("/jobs/j9").status_code == 404 and c.get("/network").json()["counters"]["placed"] == 1
        drained = c.post("/network/servers/s5/drain")
        assert drained.status_code == 200 and drained.json()["drained"] and drained.json()["cpu_capacity"] == 10
        jsonschema.validate(drained.json(), {**doc, "$ref": "#/components/schemas/ServerOut"})
        servers = c.get("/network/servers").json()
        assert len(servers) == 40 and [x["name"] for x in servers if x["drained"]] == ["s5"]
        assert c.get("/network/servers/s5").json() == drained.json()
        assert c.get("/network").json()["drained"] == ["s5"] and c.get("/network").json()["cpu_drained"] == 10
        assert "dcplace_network_servers_drained 1.0" in c.get("/metrics").text
        assert c.post("/network/servers/s5/activate").json()["drained"] is False
        for bad in (c.post("/network/servers/r0/drain"), c.get("/network/servers/nope")):
            assert bad.status_code == 404 and "no server" in bad.json()["detail"], bad.text
        journal = c.get("/network/journal")
        jsonschema.validate(journal.json(), {**doc, "$ref": "#/components/schemas/NetJournalOut"})
        assert [(x["event"], x["job"] or x["server"]) for x in journal.json()["entries"]] == [
            ("started", None), ("placed", "j1"), ("rejected", "big"), ("released", "j1"), ("drained", "s5"),
            ("activated", "s5")]  # fmt: skip
        assert journal.json()["entries"][2]["reason"] == "capacity" and journal.json()["next"] is None
        page = c.get("/network/journal", params={"limit": 2}).json()
        rest = c.get("/network/journal", params={"after": page["next"]}).json()
        assert page["entries"] + rest["entries"] == journal.json()["entries"] and rest["next"] is None
        assert c.get("/network/journal", params={"job": "j1", "tail": 1}).json()["entries"][0]["event"] == "released"
        for query, field in (({"event": "migrated"}, "event"), ({"limit": 0}, "limit"), ({"after": -1}, "after"),
                             ({"job": ""}, "job"), ({"vm": "x"}, "vm")):  # fmt: skip
            bad = c.get("/network/journal", params=query)
            assert bad.status_code == 422 and field in bad.json()["detail"], (query, bad.text)
        net._conn.execute("PRAGMA query_only = ON")  # type: ignore[union-attr]  # the network database fails
        failed = c.post("/jobs", json={"id": "j2", "cpu": 1, "mem": 1, "bw": 0.1})
        assert failed.status_code == 503 and "refused a change" in failed.json()["detail"]
        assert c.get("/healthz").status_code == 503  # a probe sees it: the supervisor restarts the service
        assert c.get("/jobs").status_code == c.get("/network").status_code == 503  # reads too, as the VM ones
        assert c.get("/network/journal").status_code == 503
        assert c.post("/network/explain", json={"id": "j9", "cpu": 1, "mem": 1, "bw": 0.1}).status_code == 503
    net.check_invariants()
    net.close()


def test_serve_network_keeps_its_jobs_across_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "c.db"
    port = free_port()
    proc = start_serve(db, port, "--network", "alpha", "--network-policy", "nalb-strict")
    try:
        url = f"http://127.0.0.1:{port}"
        placed = [httpx.post(f"{url}/jobs", json={"id": f"j{i}", "cpu": 12, "mem": 8, "bw": 0.2}) for i in range(6)]
        assert all(p.status_code == 201 for p in placed), [p.text for p in placed]
        assert httpx.delete(f"{url}/jobs/j2").status_code == 200
        before = httpx.get(f"{url}/jobs").json()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0 and "network alpha, 0 jobs from" in err.decode(), err.decode()
    assert (tmp_path / "c.network.db").is_file()
    proc = start_serve(db, port, "--network", "alpha", "--journal-keep", "0")
    try:
        assert httpx.get(f"http://127.0.0.1:{port}/jobs").json() == before  # reloaded exactly, not decided again
        assert httpx.post(f"http://127.0.0.1:{port}/jobs", json={"id": "k", "cpu": 1, "mem": 1, "bw": 0.1}).is_success
        journal = httpx.get(f"http://127.0.0.1:{port}/network/journal").json()["entries"]
        assert [x["event"] for x in journal] == ["started"] + ["placed"] * 6 + ["released"]  # --journal-keep 0: off
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert "network alpha, 5 jobs from" in err.decode() and "durable in" in err.decode(), err.decode()
    with sqlite3.connect(tmp_path / "c.network.db") as conn:
        assert dict(conn.execute("SELECT key, value FROM meta"))["journal_keep"] == "0"
    assert f"{db} and {tmp_path / 'c.network.db'}" in err.decode(), err.decode()


def test_serve_network_flags_are_checked_before_anything_starts(tmp_path: Path) -> None:
    runner = CliRunner()
    db = tmp_path / "c.db"
    nowhere = str(tmp_path / "no" / "n")
    for args, said in ((["--network", "omega"], "--network"), (["--network-policy", "tetris"], "--network"),
                       (["--network-policy", "tetris-bw"], "--network"),  # the default's name too (a review)
                       (["--network", "alpha", "--network-policy", "best-fit"], "--network-policy"),
                       (["--network", "alpha", "--network-db", str(db)], "another file than --db"),
                       (["--network", "alpha", "--network-db", nowhere], "--network-db")):  # fmt: skip
        res = runner.invoke(app, ["serve", "--db", str(db), "--port", str(free_port()), *args])
        assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output, (args, res.output)
        assert not db.exists(), args  # nothing left behind
    bad = tmp_path / "bad.json"
    bad.write_text("[]", encoding="utf-8")
    res = runner.invoke(app, ["serve", "--db", str(db), "--port", str(free_port()), "--network", str(bad)])
    assert res.exit_code == 2 and f"--network {bad}" in res.output, res.output
    typo = tmp_path / "typo.json"  # a review: the field was dropped ("--network: typo.json: missing")
    typo.write_text(
        '{"nodes": [{"name": "a", "cpu": 10, "mem": 10}, {"name": "b", "cpu": 10, "mem": 10}, '
        '{"name": "s"}], "links": [{"source": "a", "target": "s", "capacity": 1}, '
        '{"source": "b", "target": "s", "capacity": "x"}]}'
    )
    res = runner.invoke(app, ["serve", "--db", str(db), "--port", str(free_port()), "--network", str(typo)])
    assert res.exit_code == 2 and f"--network {typo}, field 'links[1].capacity': " in res.output, res.output
    res = runner.invoke(app, ["serve", "--db", str(db), "--port", str(free_port()), "--network", "alpha",
                              "--network-policy", f"nara={tmp_path / 'none.pt'}"])  # fmt: skip
    assert res.exit_code == 2 and "--network-policy" in res.output and "none.pt" in res.output, res.output
    NetworkEngine.open(tmp_path / "n.db", "alpha").close()
    res = runner.invoke(app, ["serve", "--db", str(db), "--port", str(free_port()), "--network", "beta",
                              "--network-db", str(tmp_path / "n.db")])  # fmt: skip
    assert res.exit_code == 2 and "written for another topology (alpha)" in res.output, res.output


def test_a_failed_network_database_stops_serve_with_exit_3(tmp_path: Path) -> None:
    """A review: the network database deleted under the service left /healthz at 200 and the exit status at 0."""
    db = tmp_path / "c.db"
    port = free_port()
    proc = start_serve(db, port, "--network", "alpha", "--exit-on-failure")
    try:
        url = f"http://127.0.0.1:{port}"
        assert httpx.post(f"{url}/jobs", json={"id": "a", "cpu": 5, "mem": 5, "bw": 0.1}).status_code == 201
        flags = ["--network", "alpha", "--network-db", str(tmp_path / "c.network.db")]
        second = CliRunner().invoke(app, ["serve", "--db", str(tmp_path / "d.db"), "--port", str(free_port()), *flags])
        assert second.exit_code == 2 and "is open in another dcplace engine" in second.output, second.output
        (tmp_path / "c.network.db").unlink()
        _, err = proc.communicate(timeout=30)  # --exit-on-failure: the watch notices within 2 s
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
            proc.communicate(timeout=30)
    said = err.decode()
    assert proc.returncode == 3 and "was deleted or replaced" in said, said
    assert list(tmp_path.glob("c.network.db.recovered-*")), said


def test_a_stop_right_after_the_network_database_was_deleted_exits_3(tmp_path: Path) -> None:
    """A review of the fixes: with no request or health check in between, the stop said every acknowledged change
    was durable, exit 0, and no copy was saved."""
    db = tmp_path / "c.db"
    port = free_port()
    proc = start_serve(db, port, "--network", "alpha")
    try:
        assert httpx.post(f"http://127.0.0.1:{port}/jobs", json={"id": "a", "cpu": 5, "mem": 5, "bw": 0.1}).is_success
        (tmp_path / "c.network.db").unlink()
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    said = err.decode()
    assert proc.returncode == 3 and f"stopped after its database {tmp_path / 'c.network.db'} failed" in said, said
    assert "every acknowledged change is durable" not in said and list(tmp_path.glob("c.network.db.recovered-*"))


def test_an_id_out_of_rule_is_said_in_words() -> None:
    """A review: an id with a control character was answered with the regular expression it failed."""
    with server_thread(PlacementEngine(2), create_app(PlacementEngine(2), network=NetworkEngine("alpha"))) as url:
        for path, body in (("/jobs", {"id": "a\u0001b", "cpu": 1, "mem": 1, "bw": 0.1}),
                           ("/vms", {"id": " v", "cpu": 1, "mem": 1})):  # fmt: skip
            r = httpx.post(f"{url}{path}", json=body, timeout=10)
            assert r.status_code == 422 and r.json()["detail"].startswith("field 'id': must be an id of 1-256 "), r.text
            assert "pattern" not in r.text


def test_reconcile_over_http_and_from_the_command_line(tmp_path: Path) -> None:
    """`GET /jobs` is an inventory `POST /network/reconcile` takes back: a dry run changes nothing, a job moved or
    new is recorded where the inventory says, one missing released; bad rows a 422 naming the row, half released a
    409. `cluster reconcile` does the same on the file with the service stopped."""
    db = tmp_path / "n.db"
    net = NetworkEngine.open(db, "alpha", "tetris")
    engine = PlacementEngine()
    with server_thread(engine, create_app(engine, network=net)) as url, httpx.Client(base_url=url) as c:
        doc = c.get("/openapi.json").json()
        for i in range(3):
            assert c.post("/jobs", json={"id": f"j{i}", "cpu": 12, "mem": 8, "bw": 0.2}).status_code == 201
        inventory = c.get("/jobs").json()
        same = c.post("/network/reconcile", json=inventory)
        assert same.status_code == 200 and same.json()["kept"] == 3, same.text
        jsonschema.validate(same.json(), {**doc, "$ref": "#/components/schemas/NetReconcileOut"})
        moved = {"id": "j1", "servers": ["s30", "s31"], "cpu": [10, 2], "mem": [4, 4], "bw": 0.2}
        new = {"id": "n", "servers": ["s25"], "cpu": [3], "mem": [3], "bw": 0.1}
        rows = [inventory[0], moved, inventory[2], new]
        dry = c.post("/network/reconcile", params={"dry_run": "true"}, json=rows).json()
        assert dry == {"released": [], "recorded": ["n"], "changed": ["j1"], "kept": 2, "executed": False, "newer": []}
        assert c.get("/jobs").json() == inventory
        done = c.post("/network/reconcile", json=rows[1:]).json()
        assert done == {
            "released": ["j0"],
            "recorded": ["n"],
            "changed": ["j1"],
            "kept": 1,
            "executed": True,
            "newer": [],
        }
        assert c.get("/jobs/j1").json()["servers"] == ["s30", "s31"] and c.get("/jobs/j0").status_code == 404
        entries = c.get("/network/journal", params={"tail": 4}).json()["entries"]
        assert [(x["event"], x["job"], x["by"]) for x in entries] == [
            ("released", "j0", "reconcile"), ("released", "j1", "reconcile"), ("placed", "j1", "reconcile"),
            ("placed", "n", "reconcile")]  # fmt: skip
        for body, status, words in (([{**new, "servers": ["zz"]}], 422, "field 'jobs[0].servers'"),
                                    ([new, {**new, "cpu": ["3"]}], 422, "field 'jobs[1].cpu.0'"),
                                    ({"jobs": []}, 422, "field 'jobs': Input should be a valid array"),
                                    ([new], 409, "would release 2 of the 3")):  # fmt: skip
            bad = c.post("/network/reconcile", json=body)
            assert bad.status_code == status and words in bad.json()["detail"], (body, bad.text)
        assert len(c.get("/jobs").json()) == 3
        room = c.post("/network/make-room", json={"id": "m", "cpu": 3, "mem": 3, "bw": 0.1})
        assert room.status_code == 200 and room.json()["accepted"] and room.json()["moves"] == [], room.text
        jsonschema.validate(room.json(), {**doc, "$ref": "#/components/schemas/NetRoomOut"})
        assert [j["id"] for j in room.json()["inventory"]] == [j["id"] for j in c.get("/jobs").json()] + ["m"]
        full = c.post("/network/make-room", json={"id": "m", "cpu": 10_000, "mem": 3, "bw": 0.1}).json()
        assert (full["accepted"], full["reason"], full["inventory"]) == (False, "capacity", [])
        assert c.post("/network/make-room", json={"id": "j1", "cpu": 1, "mem": 1, "bw": 0.1}).status_code == 409
        assert c.get("/jobs/m").status_code == 404  # nothing placed
        assert doc["paths"]["/network/reconcile"]["post"]["requestBody"]["content"]["application/json"]["schema"][
            "items"] == {"$ref": "#/components/schemas/NetInventoryJobIn"} and "NetInventoryJobIn" in doc[
            "components"]["schemas"]  # fmt: skip
    net.close()
    inv = tmp_path / "inventory.json"
    inv.write_text(json.dumps({"jobs": [moved]}), encoding="utf-8")
    entries = len(read_network_journal(db, limit=None))
    run = CliRunner().invoke(app, ["cluster", "reconcile", str(inv), "--db", str(db), "--dry-run"])
    assert run.exit_code == 2 and "would release 2 of the 3" in run.stderr, run.output
    for flags in (["--dry-run", "--force"], []):  # a dry run, and a refused run: nothing written, no start either
        run = CliRunner().invoke(app, ["cluster", "reconcile", str(inv), "--db", str(db), *flags])
        assert run.exit_code == (0 if flags else 2), run.output
    assert len(read_network_journal(db, limit=None)) == entries
    run = CliRunner().invoke(app, ["cluster", "reconcile", str(inv), "--db", str(db), "--force"])
    assert run.exit_code == 0 and "2 released, 0 recorded anew; 1 unchanged" in run.stdout, run.output
    inv.write_text(json.dumps([{**moved, "servers": ["s30", "x"], "cpu": [1, 1], "mem": [1, 1]}]), encoding="utf-8")
    run = CliRunner().invoke(app, ["cluster", "reconcile", str(inv), "--db", str(db)])
    assert run.exit_code == 2 and run.stderr.startswith(f"error: {inv}, field 'jobs[0].servers'"), run.output
    for flags, words in ((["--as-of", "2999-01-01"], "--as-of"), (["--topology", "beta"], "beta")):
        run = CliRunner().invoke(app, ["cluster", "reconcile", str(inv), "--db", str(db), *flags])
        assert run.exit_code == 2 and words in run.stderr and len(run.stderr.splitlines()) == 1, run.output
    assert [x.event for x in read_network_journal(db, event="started")] == ["started"]  # the service's only
    said = CliRunner().invoke(app, ["cluster", "journal", "--db", str(db), "--tail", "1"])
    assert said.exit_code == 0 and "by reconcile" in said.stdout, said.output
    run = CliRunner().invoke(app, ["cluster", "reconcile", str(inv), "--db", str(tmp_path / "none.db"), "--topology",
                                   "alpha"])  # fmt: skip
    assert run.exit_code == 2 and "does not exist" in run.stderr, run.output
    again = NetworkEngine.open(db, "alpha")
    assert [j.id for j in again.jobs()] == ["j1"]
    again.check_invariants()
    again.close()


def test_moves_over_http_record_a_plan_carried_out(tmp_path: Path) -> None:
    """`POST /jobs/{id}/move` and `POST /network/moves` record jobs moved (journalled, durable, listed with their
    hold); `POST /network/make-room?execute=true` records a plan at once; bad bodies are a 4xx with one sentence."""
    net = NetworkEngine.open(tmp_path / "n.db", "alpha", "tetris")
    engine = PlacementEngine()
    with server_thread(engine, create_app(engine, network=net)) as url, httpx.Client(base_url=url) as c:
        doc = c.get("/openapi.json").json()
        a = c.post("/jobs", json={"id": "a", "cpu": 10, "mem": 6, "bw": 0.1, "hold": 4}).json()
        b = c.post("/jobs", json={"id": "b", "cpu": 10, "mem": 6, "bw": 0.1}).json()
        assert (a["hold"], b["hold"]) == (4, None) and c.get("/jobs/a").json()["hold"] == 4
        swap = [{"id": "a", "from": a["servers"], "servers": b["servers"], "cpu": [10], "mem": [6], "links": [],
                 "step": 0},
                {"id": "b", "from": b["servers"], "servers": a["servers"], "cpu": [10], "mem": [6], "links": [],
                 "step": 0}]  # fmt: skip  # as a plan lists its moves
        alone = c.post("/jobs/a/move", json={k: v for k, v in swap[0].items() if k != "id"})
        assert alone.status_code == 422 and "cannot run" in alone.json()["detail"], alone.text
        r = c.post("/network/moves", json=swap)
        assert r.status_code == 200, r.text
        stale = c.post("/network/moves", json=swap[:1])  # told twice: `from` is no longer where a runs
        assert stale.status_code == 409 and "the plan is older" in stale.json()["detail"], stale.text
        jsonschema.validate(r.json(), {**doc, "type": "array", "items": {"$ref": "#/components/schemas/JobOut"}})
        assert [(j["id"], j["servers"], j["hold"]) for j in r.json()] == [("a", b["servers"], 4),
                                                                          ("b", a["servers"], None)]  # fmt: skip
        back = c.post("/jobs/a/move", json={"servers": a["servers"] + ["s9"], "cpu": [5, 5], "mem": [3, 3]})
        assert back.status_code == 422 and "cannot run" in back.json()["detail"]  # b is on a's server now
        for path, body, status, words in (
            ("/jobs/zz/move", {"servers": ["s1"], "cpu": [10], "mem": [6]}, 404, "no job"),
            ("/jobs/a/move", {"servers": ["s1"], "cpu": [10]}, 422, "mem"),
            ("/jobs/a/move", {"servers": ["s1"], "cpu": [9], "mem": [6]}, 422, "keeps its size"),
            ("/jobs/a/move", {"servers": ["s1"], "cpu": [10], "mem": [6], "bw": 2}, 422, "bw"),
            ("/network/moves", [], 422, "moves"),
            ("/network/moves", [{"id": "a", "servers": ["s1"], "cpu": ["x"], "mem": [6]}], 422, "moves[0].cpu"),
            ("/network/moves", [{"id": "zz", "servers": ["s1"], "cpu": [1], "mem": [6]}], 404, "no job"),
        ):
            bad = c.post(path, json=body)
            assert bad.status_code == status and words in bad.json()["detail"], (path, body, bad.text)
            assert len(bad.json()["detail"].splitlines()) == 1
        assert c.post("/network/moves", content=b"").status_code == 422
        zero = c.post("/network/make-room", params={"max_together": 0}, json={"id": "m", "cpu": 3, "mem": 3, "bw": 0.1})
        assert zero.status_code == 422 and "max_together" in zero.json()["detail"], zero.text
        zero = c.post("/network/make-room", params={"time_limit": 0}, json={"id": "m", "cpu": 3, "mem": 3, "bw": 0.1})
        assert zero.status_code == 422 and "time_limit" in zero.json()["detail"], zero.text
        room = c.post("/network/make-room", params={"execute": "true"}, json={"id": "m", "cpu": 3, "mem": 3, "bw": 0.1})
        assert room.status_code == 200 and room.json()["executed"] and room.json()["moves"] == [], room.text
        assert c.get("/jobs/m").json()["servers"] == room.json()["placement"]["servers"]
        assert c.get("/network").json()["counters"]["moved"] == 2
        assert "dcplace_network_moves_total 2.0" in c.get("/metrics").text
        journal = c.get("/network/journal").json()  # moved and placed-by-make-room entries as the schema says
        assert {x["by"] for x in journal["entries"]} >= {"move"}
        jsonschema.validate(journal, {**doc, "$ref": "#/components/schemas/NetJournalOut"})
    net.close()
    entries = read_network_journal(tmp_path / "n.db", event="moved", limit=None)
    assert [(x.job, x.by) for x in entries] == [("a", "move"), ("b", "move")]
    again = NetworkEngine.open(tmp_path / "n.db", "alpha", "tetris")
    assert again.job("a").servers == tuple(b["servers"]) and again.job("a").hold == 4
    again.close()
