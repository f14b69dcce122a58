"""The cluster page (``GET /ui/``; ``/`` leads there): what the service holds, for a person, read from the service's
own HTTP API every few seconds by a script in the page (``ui/cluster.js``). Three files shipped with the package,
answered without a token (they hold no cluster data; the page asks for a token when the API needs one, keeps it in
the tab's ``sessionStorage`` and sends it as the API's other clients do) and with a Content-Security-Policy that
lets the page load its own two files and talk to this service only: machine and VM ids are the clients' strings,
and the script puts them in the page as text. Nothing on the page changes the cluster."""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from importlib import resources

from fastapi import FastAPI, Request
from fastapi.responses import RedirectResponse, Response

FILES = {"": ("index.html", "text/html; charset=utf-8"),
         "cluster.js": ("cluster.js", "text/javascript; charset=utf-8"),
         "cluster.css": ("cluster.css", "text/css; charset=utf-8")}  # fmt: skip
"""``/ui/<key>`` -> the shipped file and its media type."""

HEADERS = {
    "Content-Security-Policy": "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
    "img-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'",
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "Cache-Control": "no-cache",  # revalidated: a newer dcplace's page is the one shown after an upgrade
}


PREFIX = re.compile(r"(/(?!\.+(/|$))[A-Za-z0-9._~-]+)+/?")
"""An ``X-Forwarded-Prefix`` the redirects follow: a path of plain segments (no ``//``, no scheme, no ``.`` or
``..``: never another site, never above the proxy's path)."""


def _to_page(request: Request) -> Response:
    """To ``ui/``, relative (right under a proxy's prefix that ends in ``/``), or to ``PREFIX/ui/`` where the proxy
    says its prefix (``X-Forwarded-Prefix``): a prefix without a trailing slash, ``/dcp``, made the relative one
    ``/ui/``, outside the proxy's path."""
    prefix = request.headers.get("x-forwarded-prefix", "")
    if PREFIX.fullmatch(prefix):
        return RedirectResponse(prefix.rstrip("/") + "/ui/", status_code=307)
    return RedirectResponse("ui/", status_code=307)


def read(name: str) -> bytes:
    """A shipped file of the page."""
    return (resources.files("dcplace.service") / "ui" / name).read_bytes()


def add_ui_routes(app: FastAPI) -> None:
    """``GET /`` and ``/ui`` lead to ``/ui/`` (relative redirects, or under the proxy's ``X-Forwarded-Prefix``);
    ``/ui/`` is the page,
    ``/ui/cluster.js`` and ``/ui/cluster.css`` its script and style; ``/favicon.ico`` is empty (204). Not in the
    OpenAPI document: not API."""
    answers = {key: (read(name), media) for key, (name, media) in FILES.items()}

    @app.get("/", include_in_schema=False)
    async def root(request: Request) -> Response:
        return _to_page(request)

    @app.get("/ui", include_in_schema=False)
    async def ui(request: Request) -> Response:
        return _to_page(request)

    @app.get("/favicon.ico", include_in_schema=False)
    async def favicon() -> Response:  # every page load asked for it, and got a 401 or a 404
        return Response(status_code=204)

    for key, (body, media) in answers.items():
        app.add_api_route(f"/ui/{key}", _file(body, media), methods=["GET"], include_in_schema=False)


def _file(body: bytes, media: str) -> Callable[[], Awaitable[Response]]:
    async def answer() -> Response:
        return Response(body, media_type=media, headers=HEADERS)

    return answer
