"""The cluster page (``/ui/``): its files over HTTP (answered without a token, with a policy that lets the page load
its own files only), and the page itself in a real headless chromium (skipped where absent) against a live service:
what it shows is what the API says, it finds machines and VMs, asks for a token where one is needed, says when the
database failed, and puts the clients' ids in the page as text, never as markup."""

from __future__ import annotations

import json
import re
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from dcplace.engine import MachineSpec, PlacementEngine, VmRequest
from dcplace.engine.store import StoreError
from dcplace.service import create_app

from .browser import CHROMIUM, Browser
from .conftest import server_thread

TOKEN = "page-test-token-0123456789abcdef"
EVIL = '<img src=x onerror="window.pwned=1">'


def test_the_pages_files_are_open_and_load_only_themselves(tmp_path: Path) -> None:
    engine = PlacementEngine.open(tmp_path / "c.db")
    with TestClient(create_app(engine, tokens=[TOKEN]), follow_redirects=False) as c:
        for path in ("/", "/ui"):
            r = c.get(path)
            assert r.status_code == 307 and r.headers["location"] == "ui/", path  # relative: under a proxy's prefix
            # a proxy serving it at /dcp (no trailing slash) says so: the relative one pointed at /ui/, outside it
            for said, where in (("/dcp", "/dcp/ui/"), ("/a/b/", "/a/b/ui/"), ("//evil.example", "ui/"),
                                ("https://evil.example", "ui/"), ("/dcp/../x", "ui/"), ("", "ui/")):  # fmt: skip
                r = c.get(path, headers={"X-Forwarded-Prefix": said})
                assert r.status_code == 307 and r.headers["location"] == where, (path, said)
        page = c.get("/ui/")
        assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
        policy = page.headers["content-security-policy"]
        assert "default-src 'none'" in policy and "script-src 'self'" in policy and "frame-ancestors 'none'" in policy
        assert page.headers["x-content-type-options"] == "nosniff"
        urls = re.findall(r"""(?:src|href)\s*=\s*['"]([^'"]+)['"]""", page.text)
        assert sorted(urls) == ["cluster.css", "cluster.js"]  # nothing from another host
        for name, media in (("cluster.js", "text/javascript"), ("cluster.css", "text/css")):
            got = c.get(f"/ui/{name}")
            assert got.status_code == 200 and got.headers["content-type"].startswith(media), name
        assert c.get("/state").status_code == 401  # the data still needs the token
        assert c.get("/favicon.ico").status_code == 204
        assert c.get("/ui/nothing").status_code == 404
        assert "/ui/" not in c.get("/openapi.json").json()["paths"]
    with server_thread(engine, create_app(engine, tokens=[TOKEN])) as url:
        port = int(url.rsplit(":", 1)[1])
        for raw in ("/ui/../state", "/ui/%2e%2e/state", "/ui/..%2fstate"):  # as sent: a client would tidy them
            with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
                conn.sendall(f"GET {raw} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n".encode())
                status = conn.recv(64).split(b" ")[1]
            assert status == b"404", raw  # a file under /ui/ or nothing: never the API without a token
    engine.close()


def _cluster(path: Path) -> PlacementEngine:
    """Two racks of three double-NUMA machines and one without a rack; VMs on three of them; one drained, one
    failed; a machine and a VM whose ids are markup."""
    engine = PlacementEngine.open(path)
    engine.add_machines([MachineSpec(f"m{i}", 40, 90, f"r{i // 3}") for i in range(6)] + [MachineSpec(EVIL, 8, 16)])
    for i in range(12):
        engine.place(VmRequest(f"vm{i}", 1 + i % 4, 2 + i % 8))
    engine.place(VmRequest("<script>window.pwned=2</script>", 1, 1))
    engine.drain("m4")
    engine.fail("m5")
    return engine


@pytest.fixture
def browser() -> Iterator[Browser]:
    if CHROMIUM is None:
        pytest.skip("no chromium here (apt-get install chromium)")
    with Browser() as b:
        yield b


def _text(b: Browser, element_id: str) -> str:
    return str(b.js(f"document.getElementById({element_id!r}).textContent"))


def test_the_page_shows_what_the_api_says(tmp_path: Path, browser: Browser) -> None:
    engine = _cluster(tmp_path / "c.db")
    with server_thread(engine) as url:
        browser.open(f"{url}/")  # the redirect, as a person types the address
        browser.wait_for("document.body.dataset.loaded === 'yes'")
        assert browser.js("location.pathname") == "/ui/"
        state = engine.stats()
        machines = engine.machines()
        tiles = browser.js("[...document.querySelectorAll('#map .m')].map(t => t.dataset.id)")
        assert sorted(tiles) == sorted(m.id for m in machines)
        totals = _text(browser, "totals")
        assert f"{state['machines']['active']} / 1 / 1" in totals
        assert f"VMs{state['vms']}" in totals
        heads = browser.js("[...document.querySelectorAll('.rack h3')].map(h => h.textContent)")
        in_use = {r: sum(1 for m in machines if m.rack == r and m.vms) for r in ("r0", "r1", None)}
        assert heads == [f"rack r0: 3 machines, {in_use['r0']} in use", f"rack r1: 3 machines, {in_use['r1']} in use",
                         f"no rack: 1 machine, {in_use[None]} in use"]  # fmt: skip
        assert in_use["r0"] >= 1 and in_use[None] == 1  # the markup VM went to the machine of markup
        assert browser.js("document.querySelector('[data-id=m4]').classList.contains('drained')")
        assert browser.js("document.querySelector('[data-id=m5]').classList.contains('failed')")
        # the bars are the ledger's: machine m0's first node, cores used over cores
        m0 = next(m for m in machines if m.id == "m0")
        height = browser.js("document.querySelector('[data-id=m0] .cpu i').style.height")
        assert float(height.rstrip("%")) == pytest.approx(100 * (m0.cpu[0] - m0.free_cpu[0]) / m0.cpu[0], abs=0.05)

        # a click shows the machine and its VMs
        browser.js("document.querySelector('[data-id=m0]').click()")
        browser.wait_for("document.querySelectorAll('#vms tbody tr').length > 0")
        listed = browser.js("[...document.querySelectorAll('#vms tbody tr')].map(r => r.cells[0].textContent)")
        assert sorted(listed) == sorted(r.id for r in engine.vm_page(None, -1, "m0").vms)
        assert _text(browser, "detail-title").startswith("m0, active, rack r0")
        # and its newest journal entries, newest first, as the journal has them
        journal = engine.journal(machine="m0", tail=20)[::-1]
        rows = "[...document.querySelectorAll('#events tbody tr')].map(r => [...r.cells].map(c => c.textContent))"
        shown = browser.wait_for(f"{rows}.length === {len(journal)} && {rows}")
        assert [r[1] for r in shown] == [e.vm or "" for e in journal]
        assert shown[-1][2] == "machine added" and shown[0][2].startswith("placed on m0 node ")
        assert (
            shown[0][0].endswith(" UTC") and _text(browser, "events-note") == f"the newest {len(journal)}, newest first"
        )
        # a migration reported by the operator's tooling says so (the journal's "by")
        elsewhere = next(v for v in engine.vms() if v.machine not in ("m0", "m4", "m5") and not v.multi)
        engine.move(elsewhere.id, "m0", 1)
        newest = "document.querySelector('#events tbody tr').cells[2].textContent"
        said = browser.wait_for(f"{newest}.startsWith('moved from') && {newest}")
        assert said == f"moved from {elsewhere.machine} to m0 node 1 (reported)", said

        # a VM found by its id selects its machine
        where = engine.vm("vm7")
        browser.js("const f = document.getElementById('find'); f.value = 'vm7'; f.dispatchEvent(new Event('input'));"
                   "f.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'}))")  # fmt: skip
        found = browser.wait_for("document.getElementById('found').textContent.startsWith('VM ') && "
                                 "document.getElementById('found').textContent")  # fmt: skip
        assert f"is on machine {where.machine}" in found
        history = browser.wait_for("document.getElementById('found').textContent.includes('Its history') && "
                                   "document.getElementById('found').textContent")  # fmt: skip
        assert history.endswith(" UTC") and f"Its history: placed on {where.machine} node {where.node} at " in history
        # a VM released since is not found, but the journal remembers it
        engine.release("vm3")
        browser.js("const h = document.getElementById('find'); h.value = 'vm3'; h.dispatchEvent(new Event('input'));"
                   "h.dispatchEvent(new KeyboardEvent('keydown', {key: 'Enter'}))")  # fmt: skip
        gone = browser.wait_for("document.getElementById('found').textContent.includes('the journal has') && "
                                "document.getElementById('found').textContent")  # fmt: skip
        assert (
            gone.startswith("no machine and no VM is called vm3; the journal has: placed on ")
            and "; released from " in gone
        )
        assert browser.js("document.querySelector('.m.selected').dataset.id") == where.machine
        browser.js("const g = document.getElementById('find'); g.value = 'zz'; g.dispatchEvent(new Event('input'))")
        assert _text(browser, "found") == "no machine matches; Enter looks for a VM of that id"

        # ids are text: the markup is shown, not run
        evil = "[...document.querySelectorAll('#map .m')].find(t => t.dataset.id.startsWith('<img'))"
        assert browser.js(f"{evil}.dataset.id") == EVIL
        browser.js(f"{evil}.click()")
        browser.wait_for("document.getElementById('detail-title').textContent.startsWith('<img')")
        cells = "[...document.querySelectorAll('#vms tbody tr')].map(r => r.cells[0].textContent)"
        browser.wait_for(f"{cells}.includes('<script>window.pwned=2</script>')")
        events = "[...document.querySelectorAll('#events tbody tr')].map(r => r.cells[1].textContent)"
        browser.wait_for(f"{events}.includes('<script>window.pwned=2</script>')")  # its journal entry, as text
        assert sorted(browser.js(cells)) == sorted(r.id for r in engine.vm_page(None, -1, EVIL).vms)
        assert browser.js("document.querySelectorAll('main img, main script').length") == 0
        assert browser.js("window.pwned === undefined")
    engine.close()
    assert not [line for line in browser.console if line.startswith("exception")], browser.console


def test_the_page_follows_the_cluster_and_says_when_the_database_failed(tmp_path: Path, browser: Browser) -> None:
    engine = _cluster(tmp_path / "c.db")
    with server_thread(engine) as url:
        browser.open(f"{url}/ui/?every=1")
        browser.wait_for("document.body.dataset.loaded === 'yes'")
        # rack r1's machines loaded least first in slot order (m3 < m4 < m5 is the policies' order)
        engine.activate("m4")
        engine.import_allocations([{"vm": "x3", "machine": "m3", "node": 0, "cpu": 1, "mem": 1},
                                   {"vm": "x4", "machine": "m4", "node": 0, "cpu": 30, "mem": 60}], "test")  # fmt: skip
        expected = {"policy": ["m3", "m4", "m5"], "most": ["m4", "m3", "m5"], "least": ["m5", "m3", "m4"]}
        for order, ids in expected.items():
            browser.js(f"document.getElementById('order').value = '{order}';"
                       "document.getElementById('order').dispatchEvent(new Event('change'))")  # fmt: skip
            shown = "[...document.querySelectorAll('.rack')[1].querySelectorAll('.m')].map(t => t.dataset.id)"
            want = json.dumps(ids, separators=(",", ":"))  # as JSON.stringify writes it
            assert browser.wait_for(f"JSON.stringify({shown}) === '{want}' && {shown}"), order
        engine.place(VmRequest("late", 2, 2))  # the next refresh shows it
        browser.wait_for(f"document.getElementById('totals').textContent.includes('VMs{engine.stats()['vms']}')")

        def broken(c: object, at: float) -> None:
            raise OSError("disk full")

        engine.store._write = broken  # type: ignore[method-assign]
        with pytest.raises(StoreError):
            engine.place(VmRequest("lost", 1, 1))
        said = browser.wait_for("!document.getElementById('problem').hidden && "
                                "document.getElementById('problem').textContent")  # fmt: skip
        assert said.startswith("Not updated:") and "disk full" in said
    engine.close()


def test_the_page_asks_for_a_token_and_keeps_it_in_the_tab(tmp_path: Path, browser: Browser) -> None:
    engine = _cluster(tmp_path / "c.db")
    with server_thread(engine, create_app(engine, tokens=[TOKEN])) as url:
        browser.open(f"{url}/ui/?every=1")
        browser.wait_for("!document.getElementById('login').hidden")
        assert browser.js("document.querySelectorAll('#map .m').length") == 0  # nothing shown without it

        def refused() -> str:
            scrape = httpx.get(f"{url}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10).text
            return "".join(x for x in scrape.splitlines() if 'code="401"' in x and "requests_total" in x)

        before = refused()
        time.sleep(2.5)  # no polling without a token: two refreshes' worth at ?every=1
        assert refused() == before
        browser.js("document.getElementById('token').value = 'bad token \u20ac';"
                   "document.getElementById('login').requestSubmit()")  # fmt: skip
        assert browser.js("document.getElementById('problem').textContent").startswith("That is not a token")
        assert browser.js("sessionStorage.getItem('dcplace-token')") is None
        browser.js("document.getElementById('token').value = 'not-the-token-0123456789';"
                   "document.getElementById('login').requestSubmit()")  # fmt: skip
        browser.wait_for("document.getElementById('problem').textContent.includes('refused')")
        browser.js(f"document.getElementById('token').value = '{TOKEN}';"
                   "document.getElementById('login').requestSubmit()")  # fmt: skip
        browser.wait_for("document.body.dataset.loaded === 'yes'")
        assert browser.js("document.getElementById('login').hidden")
        assert browser.js("document.getElementById('token').value") == ""  # not left in the form

    engine.close()


def test_machines_of_many_numa_nodes_are_drawn_machine_wide(tmp_path: Path, browser: Browser) -> None:
    """Past four NUMA nodes a tile's bars are one machine-wide pair (at eight a bar was 0.6 px wide); up to four,
    one pair per node. The detail still lists every node."""
    engine = PlacementEngine.open(tmp_path / "c.db", numa=8)
    engine.add_machines([MachineSpec("wide", 10, 20)])
    engine.place(VmRequest("v", 5, 4))  # half of one node
    with server_thread(engine) as url:
        browser.open(f"{url}/ui/")
        browser.wait_for("document.body.dataset.loaded === 'yes'")
        assert browser.js("document.querySelectorAll('[data-id=wide] .node').length") == 1
        cores = browser.js("document.querySelector('[data-id=wide] .cpu i').style.height")
        memory = browser.js("document.querySelector('[data-id=wide] .mem i').style.height")
        assert (cores, memory) == ("6.3%", "2.5%")  # of all eight nodes: 5 of 80 cores, 4 of 160 GB
        browser.js("document.querySelector('[data-id=wide]').click()")
        browser.wait_for("document.querySelectorAll('#nodes tbody tr').length === 8")
    engine.close()


def test_the_page_shows_the_network_jobs_where_the_service_has_them(tmp_path: Path, browser: Browser) -> None:
    """``serve --network``'s jobs had no place on the page: an operator saw its VMs and nothing of the jobs spanning
    servers. Now a section says what ``GET /network`` says and follows it; a service without network jobs shows none
    and asks for it once (its 404), not at every refresh."""
    from dcplace.engine import NetJob, NetworkEngine

    engine = _cluster(tmp_path / "c.db")
    net = NetworkEngine.open(tmp_path / "n.db", "alpha", "tetris")
    assert net.place(NetJob("j0", 30, 20, 0.3)).accepted
    with server_thread(engine, create_app(engine, network=net)) as url:
        browser.open(f"{url}/ui/?every=1")
        browser.wait_for("document.body.dataset.loaded === 'yes'")
        assert not browser.js("document.getElementById('network-section').hidden")
        stats = net.stats()
        assert _text(browser, "network-where") == "on alpha, placed by tetris"
        shown = _text(browser, "network")
        assert "jobs running1" in shown and f"servers / links{stats['servers']} / {stats['links']}" in shown
        assert f"CPU units in use{stats['cpu_used']} of {stats['cpu_capacity']}" in shown
        rows = "[...document.querySelectorAll('#tiers tbody tr')].map(r => [r.cells[0].textContent, r.cells[2]" \
               ".querySelector('meter').value])"  # fmt: skip
        assert {t: v for t, v in browser.js(rows)} == pytest.approx(stats["bw_share_by_tier"])
        assert max(stats["bw_share_by_tier"].values()) > 0
        assert net.place(NetJob("j1", 10, 10, 0.1)).accepted  # the next refresh shows it
        browser.wait_for("document.getElementById('network').textContent.includes('jobs running2')")
        net.release("j0")
        browser.wait_for("document.getElementById('network').textContent.includes('2 / 0 / 1')")
        assert "servers drained" not in _text(browser, "network")
        net.drain_server("s30")
        browser.wait_for("document.getElementById('network').textContent.includes('servers drained')")
        assert "servers draineds30 (10 CPU, 10 memory units held apart)" in _text(browser, "network")
        # a failed network database is said in its section; the VMs (another database) are still followed
        net._conn.execute("PRAGMA query_only = ON")  # type: ignore[union-attr]
        with pytest.raises(StoreError):
            net.place(NetJob("j2", 5, 5, 0.1))
        said = browser.wait_for("document.getElementById('network').textContent.startsWith('network jobs not read') "
                                "&& document.getElementById('network').textContent")  # fmt: skip
        assert "refused a change" in said, said
        engine.place(VmRequest("after", 1, 1))
        browser.wait_for(f"document.getElementById('totals').textContent.includes('VMs{engine.stats()['vms']}')")
        assert browser.js("document.getElementById('problem').hidden")
    net.close()
    asked: list[str] = []
    with server_thread(engine) as url:
        browser.open(f"{url}/ui/?every=1")
        browser.wait_for("document.body.dataset.loaded === 'yes'")
        time.sleep(2.5)  # two more refreshes
        assert browser.js("document.getElementById('network-section').hidden")
        scrape = httpx.get(f"{url}/metrics", timeout=10).text
        asked = [x for x in scrape.splitlines() if x.startswith('dcplace_http_requests_total{code="404"')]
    assert asked == ['dcplace_http_requests_total{code="404",method="GET",route="other"} 1.0'], asked  # GET /network
    engine.close()
    assert not [line for line in browser.console if line.startswith("exception")], browser.console
