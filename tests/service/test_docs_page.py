"""The service's API pages (/docs, /redoc) load nothing from outside: their scripts come from the installed
``fastapi-offline`` package, so an operator on a cluster network without internet access sees them. Checked in the
HTML, over HTTP, and in a real headless browser (Debian's chromium; skipped where absent) that may reach only the
service itself."""

from __future__ import annotations

import re
import shutil
import subprocess

import pytest
from fastapi.testclient import TestClient

from dcplace.engine import PlacementEngine
from dcplace.service import create_app

from .conftest import server_thread

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_the_api_pages_name_only_the_services_own_files(tmp_path, page):
    engine = PlacementEngine.open(tmp_path / "c.db")
    with TestClient(create_app(engine)) as c:
        html = c.get(page)
        assert html.status_code == 200
        urls = re.findall(r"""(?:src|href|url|spec-url)\s*[=:]\s*['"]([^'"]+)['"]""", html.text)
        assert urls, html.text
        assert not [u for u in urls if "//" in u], urls  # no CDN, no other host
        for u in urls:
            got = c.get(u)
            assert got.status_code == 200, u
            if u.endswith(".js"):
                assert len(got.content) > 100_000, u  # the real bundle, not a placeholder
    engine.close()


@pytest.mark.skipif(CHROMIUM is None, reason="no chromium here (apt-get install chromium)")
def test_swagger_ui_renders_every_route_offline(tmp_path):
    """Chromium, forbidden to resolve any host but the service's, renders one operation block per route of the
    OpenAPI document."""
    engine = PlacementEngine.open(tmp_path / "c.db")
    app = create_app(engine)
    operations = sum(len(methods) for methods in app.openapi()["paths"].values())
    with server_thread(engine, app) as url:
        cmd = [str(CHROMIUM), "--headless", "--no-sandbox", "--disable-gpu", "--virtual-time-budget=20000",
               "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1", "--dump-dom", f"{url}/docs"]  # fmt: skip
        dom = subprocess.run(cmd, capture_output=True, text=True, timeout=120).stdout
    engine.close()
    blocks = re.findall(r'class="opblock opblock-', dom)
    assert len(blocks) == operations > 20, dom[:2000]
    assert "/vms/batch" in dom
