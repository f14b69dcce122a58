"""Re-optimisation, evacuation and pins over HTTP (a real uvicorn server), and the background re-optimiser."""

from __future__ import annotations

import time

import httpx

from dcplace.engine import PlacementEngine, ReoptPolicy, VmRequest
from dcplace.service import create_app

from .conftest import server_thread


def _fill(c: httpx.Client) -> None:
    for m in range(6):
        assert c.post("/machines", json={"id": f"pm{m}", "cpu": 16, "mem": 32}).status_code == 201
    for i in range(40):
        body = {"id": f"v{i}", "cpu": 2, "mem": 4, "pinned": i == 0, "explain": False}
        assert c.post("/vms", json=body).status_code == 201
    for i in range(1, 40, 2):  # every other VM leaves: half-empty machines
        assert c.delete(f"/vms/v{i}").status_code == 200


def _half_empty(engine: PlacementEngine) -> PlacementEngine:
    """Six machines, every other VM gone: one event, due at once, has moves to make."""
    for m in range(6):
        engine.add_machine(f"pm{m}", 16, 32)
    for i in range(40):
        engine.place(VmRequest(f"v{i}", 2, 4), explain=False)
    for i in range(1, 40, 2):
        engine.release(f"v{i}")
    return engine


def test_reoptimise_evacuate_and_pin_over_http() -> None:
    engine = PlacementEngine(2, "first-fit")
    with server_thread(engine) as url, httpx.Client(base_url=url, timeout=30) as c:
        _fill(c)
        pinned_at = c.get("/vms/v0").json()["machine"]
        dry = c.post("/reoptimise", json={"migration_weight": 0, "execute": False}).json()
        assert dry["planned"] > 0 and dry["applied"] == 0
        rep = c.post("/reoptimise", json={"migration_weight": 0}).json()
        assert rep["verified"] and rep["applied"] == rep["planned"] == len(rep["moves"]) > 0
        assert rep["machines_after"] < rep["machines_before"]
        assert c.get("/vms/v0").json()["machine"] == pinned_at
        target = c.get("/vms/v2").json()["machine"]
        assert c.post(f"/machines/{pinned_at}/evacuate").status_code == 409  # a pinned VM on it
        assert c.put("/vms/v0/pinned", json={"pinned": False}).status_code == 200
        ev = c.post(f"/machines/{target}/evacuate", params={"failed": "true"}).json()
        assert ev["trigger"] == "failure" and ev["verified"] and c.get(f"/machines/{target}").json()["vms"] == 0
        bad = c.post("/reoptimise", json={"migration_weight": -1})
        assert bad.status_code == 422 and "migration_weight" in bad.json()["detail"]
        assert c.post("/machines/nope/evacuate").status_code == 404
    engine.check_invariants()


def test_background_reoptimiser_runs_when_due() -> None:
    engine = PlacementEngine(2, "first-fit")
    app = create_app(engine, ReoptPolicy(every_s=0.05, migration_weight=0.0), check_every_s=0.05)
    with server_thread(engine, app) as url, httpx.Client(base_url=url, timeout=30) as c:
        _fill(c)
        deadline = time.time() + 20
        while not c.get("/reoptimise/last").json() and time.time() < deadline:
            time.sleep(0.05)
        last = c.get("/reoptimise/last").json()
        assert last["trigger"] == "timer" and last["verified"]
        assert isinstance(last["moves"], list) and len(last["moves"]) == last["applied"]  # listed, as POST's
    engine.check_invariants()


def test_the_last_event_without_its_moves() -> None:
    """``GET /reoptimise/last?moves=false``, what the cluster page asks for every 5 s: the report with its moves list
    left empty (an event of 10,000 moves is about a megabyte), the counts as they are."""
    engine = _half_empty(PlacementEngine(2, "first-fit"))
    app = create_app(engine, ReoptPolicy(every_s=3600, migration_weight=0.0), check_every_s=0.05)
    with server_thread(engine, app) as url, httpx.Client(base_url=url, timeout=30) as c:
        deadline = time.time() + 20
        while not c.get("/reoptimise/last").json() and time.time() < deadline:
            time.sleep(0.05)
        whole, brief = c.get("/reoptimise/last").json(), c.get("/reoptimise/last?moves=false").json()
    assert whole["applied"] > 0 and len(whole["moves"]) == whole["applied"]
    assert brief == {**whole, "moves": []}
    engine.check_invariants()


def test_the_last_event_outlives_a_restart(tmp_path) -> None:
    """A deploy or a crash emptied ``GET /reoptimise/last`` (and the cluster page's "last event") until the next
    event, up to the timer's period later; the report is now committed with the event's moves. An event asked for
    over HTTP is not a background one and leaves it as it is."""
    db = tmp_path / "c.db"
    engine = _half_empty(PlacementEngine.open(db, policy="first-fit"))
    app = create_app(engine, ReoptPolicy(every_s=3600, migration_weight=0.0), check_every_s=0.05)
    with server_thread(engine, app) as url, httpx.Client(base_url=url, timeout=30) as c:
        deadline = time.time() + 20
        while not c.get("/reoptimise/last").json() and time.time() < deadline:
            time.sleep(0.05)
        before = c.get("/reoptimise/last").json()
        assert c.post("/reoptimise", json={"migration_weight": 0}).status_code == 200
    engine.close()
    assert before["trigger"] == "timer" and before["applied"] > 0
    again = PlacementEngine.open(db)
    with server_thread(again) as url, httpx.Client(base_url=url, timeout=30) as c:
        assert c.get("/reoptimise/last").json() == before
    again.close()
