"""What a web page, a shared folder or a settings file could do (a security review, 2026-11-28): a page in the
operator's browser cannot change the cluster (cross-site requests, DNS rebinding), writes never follow a link
planted at a predictable name, the database is its owner's alone, and naming a built-in policy does not put the
current folder on sys.path."""

from __future__ import annotations

import os
import stat
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dcplace.atomic import atomic_dir, write_text
from dcplace.cli.main import app
from dcplace.cli.serve import _allowed_hosts
from dcplace.engine import PlacementEngine
from dcplace.service import create_app

from .conftest import lock_held, server_thread


@pytest.fixture
def engine(tmp_path):
    e = PlacementEngine.open(tmp_path / "c.db")
    e.add_machine("pm0", [8, 8], [16, 16])
    e.add_machine("pm1", [8, 8], [16, 16])
    yield e
    e.close()


def test_a_web_page_cannot_change_the_cluster(engine) -> None:
    """A page on any site could drain, fail or evacuate machines with a body-less fetch (no preflight): a change
    carrying another Origin is refused; the service's own page (/docs) and clients without an Origin are not."""
    with TestClient(create_app(engine), raise_server_exceptions=False) as c:
        evil = {"origin": "https://evil.example", "content-type": "text/plain"}
        for path in ("/machines/pm0/drain", "/machines/pm0/fail", "/reoptimise", "/machines/pm0/evacuate"):
            r = c.post(path, headers=evil)
            assert r.status_code == 403 and "web page at https://evil.example" in r.json()["detail"], path
        assert c.delete("/machines/pm1", headers=evil).status_code == 403
        assert c.get("/state", headers=evil).status_code == 200  # reading is the browser's same-origin rule's job
        assert engine.machine("pm0").status == "active" and engine.machine("pm1").status == "active"
        assert c.post("/machines/pm0/drain", headers={"origin": "http://testserver"}).status_code == 200
        assert c.post("/machines/pm0/activate").status_code == 200  # curl, scripts: no Origin


def test_dns_rebinding_is_refused_on_a_loopback_service(engine) -> None:
    hosts = _allowed_hosts("127.0.0.1", [])
    with server_thread(engine, create_app(engine, allowed_hosts=hosts)) as url:
        assert httpx.get(f"{url}/state").status_code == 200
        r = httpx.post(f"{url}/vms", json={"id": "v", "cpu": 1, "mem": 1}, headers={"host": "attacker.example"})
        assert r.status_code == 421 and "not to host 'attacker.example'" in r.json()["detail"]
        assert httpx.get(f"{url}/allocations", headers={"host": "attacker.example:80"}).status_code == 421
        assert httpx.get(f"{url}/state", headers={"host": "localhost:8000"}).status_code == 200
    assert _allowed_hosts("0.0.0.0", []) is None  # exposed anyway; kube-scheduler calls it by its Service name
    assert _allowed_hosts("0.0.0.0", ["dcplace.kube-system.svc"]) == ("dcplace.kube-system.svc",)
    assert "dcplace.example" in (_allowed_hosts("localhost", ["dcplace.example"]) or ())
    assert "127.0.0.2" in (_allowed_hosts("127.0.0.2", []) or ())  # every loopback address is checked


def test_probes_and_scrapes_by_pod_ip_are_answered_on_a_guarded_service(engine) -> None:
    """An observability review: with --allowed-host naming the service, a kubelet's probe and a Prometheus scrape,
    which address the pod by its (changing) IP, got 421, and the pod restarted in a loop. GET and HEAD of /healthz
    and /metrics are answered whatever the Host; everything else keeps the check."""
    guarded = create_app(engine, allowed_hosts=("sched.example",))
    with TestClient(guarded, raise_server_exceptions=False, base_url="http://10.0.0.7:8000") as c:
        pod_ip = {"host": "10.0.0.7:8000"}
        assert c.get("/healthz", headers=pod_ip).status_code == 200
        assert c.head("/healthz", headers=pod_ip).status_code == 200
        assert c.get("/metrics", headers=pod_ip).status_code == 200
        assert c.get("/state", headers=pod_ip).status_code == 421
        assert c.post("/healthz", headers=pod_ip).status_code == 421  # only reads are exempt


def test_a_proxy_in_front_keeps_working_when_named(engine) -> None:
    """A proxy that passes its public name as Host, or rewrites Host to the service's and keeps the browser's
    Origin: refused (421, 403) until the operator names it with serve --allowed-host, then served."""
    guarded = create_app(engine, allowed_hosts=_allowed_hosts("127.0.0.1", []))
    with TestClient(guarded, raise_server_exceptions=False, base_url="http://127.0.0.1:8000") as c:
        public = {"host": "dcplace.example.com"}
        assert c.get("/state", headers=public).status_code == 421
        rewritten = {"origin": "https://dcplace.example.com"}  # nginx's default: Host is the upstream's
        assert c.post("/machines/pm0/drain", headers=rewritten).status_code == 403
        assert c.get("/state", headers={"host": "localhost.:8000"}).status_code == 200  # a trailing dot
    named = create_app(engine, allowed_hosts=_allowed_hosts("127.0.0.1", ["dcplace.example.com"]),
                       allowed_origins=("dcplace.example.com",))  # fmt: skip
    with TestClient(named, raise_server_exceptions=False, base_url="http://127.0.0.1:8000") as c:
        assert c.get("/state", headers={"host": "dcplace.example.com"}).status_code == 200
        assert c.post("/machines/pm0/drain", headers={"origin": "https://dcplace.example.com"}).status_code == 200
        assert c.post("/machines/pm0/activate", headers={"origin": "https://evil.example"}).status_code == 403


def test_writes_never_follow_a_link_planted_at_the_temporary_name(tmp_path) -> None:
    """The temporary sibling has a predictable name (``.<name>.tmp-<pid>``): someone who can write the folder could
    plant a link there, and the write went through it into another file."""
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / f".result.json.tmp-{os.getpid()}").symlink_to(victim)
    write_text(shared / "result.json", "{}")
    assert victim.read_text() == "precious\n" and (shared / "result.json").read_text() == "{}"
    assert not (shared / "result.json").is_symlink()
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (shared / f".run.tmp-{os.getpid()}").symlink_to(elsewhere, target_is_directory=True)
    with atomic_dir(shared / "run") as tmp:
        (tmp / "a.txt").write_text("a")
    assert list(elsewhere.iterdir()) == [] and (shared / "run" / "a.txt").read_text() == "a"


def test_a_backup_never_writes_through_a_planted_link(tmp_path, engine) -> None:
    prod = tmp_path / "prod.db"
    other = PlacementEngine.open(prod)
    other.add_machine("prod-machine", [8, 8], [16, 16])
    other.close()
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / ".copy.db.partial").symlink_to(prod)  # the old fixed name
    res = CliRunner().invoke(app, ["cluster", "backup", str(shared / "copy.db"), "--db", str(engine.store.path)])  # type: ignore[union-attr]
    assert res.exit_code == 0, res.output
    again = PlacementEngine.open(prod)
    assert [m.id for m in again.machines()] == ["prod-machine"]
    again.close()
    assert not (shared / "copy.db").is_symlink()


def test_a_new_database_is_its_owners_alone(tmp_path) -> None:
    e = PlacementEngine.open(tmp_path / "new.db")
    e.add_machine("m0", [8, 8], [16, 16])
    for f in (tmp_path / "new.db", tmp_path / "new.db-wal"):
        assert stat.S_IMODE(f.stat().st_mode) & 0o077 == 0, f  # SQLite gives the -wal the database's mode
    e.close()


def test_naming_a_built_in_policy_does_not_put_the_current_folder_on_sys_path(tmp_path, monkeypatch) -> None:
    """``cvd-rl`` is ``dcplace....:CvdPolicy``: resolving it appended the current folder to sys.path for good, and a
    ``pyarrow.py`` there then ran at the next ``import pyarrow``."""
    from dcplace.inputs import user_callable

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", str(tmp_path))])
    user_callable("dcplace.policies.registry:get_policy", "policy")
    assert str(tmp_path) not in sys.path
    (tmp_path / "mine_for_test.py").write_text("def f():\n    return 1\n")
    assert user_callable("mine_for_test:f", "policy")() == 1  # a user's module beside them is still found
    assert str(Path(tmp_path)) in sys.path


def test_one_reoptimisation_asked_for_over_http_at_a_time(engine) -> None:
    """Each event holds the engine's lock while it solves, for up to an hour: requests queued without limit."""
    with server_thread(engine) as url, lock_held(engine) as done:
        with ThreadPoolExecutor(1) as pool:
            first = pool.submit(httpx.post, f"{url}/reoptimise", json={"execute": False}, timeout=30)
            time.sleep(0.5)  # the first waits for the engine's lock
            second = httpx.post(f"{url}/reoptimise", json={"execute": False}, timeout=10)
            assert second.status_code == 409 and "already running" in second.json()["detail"]
            done.set()
            assert first.result().status_code == 200
        assert httpx.post(f"{url}/reoptimise", json={"execute": False}, timeout=30).status_code == 200
