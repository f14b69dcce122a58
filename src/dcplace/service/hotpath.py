"""The two calls a scheduler makes all the time, ``POST /vms`` and ``DELETE /vms/{id}``, answered as plain ASGI.

Why: a profile of the server under load, taken by hand on 2026-11-23 before this path existed (docs/benchmarks.md,
the history note under "Over HTTP"; no command in the repo reruns it), put FastAPI's request pipeline (routing,
dependency solving, body reading and validation, the response object) at about 60 % of the server's CPU per
placement, the engine's decision and the group commit a small share. The fast path's own effect was measured with
``benchmarks/bench_service.py`` (docs/benchmarks.md, "The fast path, 2026-11-23").

:class:`HotPaths` is an ASGI middleware that answers exactly these two calls itself (one read of the body, the same
pydantic model, the same handler functions) and hands every other request to the application. FastAPI's routes for the
two calls stay: they are what ``/docs`` documents, and with ``create_app(..., fast_path=False)`` they serve the calls.
Both paths call :func:`~dcplace.service.answers.place_vm` and :func:`~dcplace.service.answers.release_vm` and turn
errors into the same status codes and sentences (:func:`~dcplace.service.answers.error_answer`);
``tests/service/test_app.py`` runs its API tests through both.
"""

from __future__ import annotations

import json
from typing import Any
from urllib.parse import parse_qsl

from pydantic import ValidationError

from dcplace.engine import PlacementEngine
from dcplace.errors import InputError
from dcplace.service.answers import (
    NOT_JSON_TYPE,
    error_answer,
    is_json_type,
    place_vm,
    refuse_query,
    release_uid,
    release_vm,
    unparsed,
    validation_sentence,
)
from dcplace.service.metrics import ServiceMetrics
from dcplace.service.models import VmIn

Scope = dict[str, Any]


class HotPaths:
    """ASGI middleware: ``POST /vms`` and ``DELETE /vms/{id}`` answered here, everything else passed to ``app``.

    Validation as FastAPI does it for the route (the body parsed as JSON, then :class:`VmIn`), errors as the
    application's exception handlers answer them; a bug propagates (the server's error middleware makes it a 500).
    """

    def __init__(self, app: Any, engine: PlacementEngine, metrics: ServiceMetrics) -> None:
        self.app = app
        self.engine = engine
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] == "http":
            method, path = scope["method"], scope["path"]
            if method == "POST" and path == "/vms":
                if scope.get("query_string"):  # as the route would answer it (it takes none)
                    names = [k for k, _ in parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)]
                    try:
                        refuse_query("POST", "/vms", (), names)
                    except InputError as exc:
                        await send_json(send, (422, {"detail": str(exc)}))
                        return
                raw = await _body(receive)
                ctype = next((v.decode("latin-1") for k, v in scope["headers"] if k == b"content-type"), "")
                # a body not sent as JSON: answered as FastAPI's routes answer it (they do not read it as JSON)
                answer = await self._place(raw) if not raw or is_json_type(ctype) else (422, {"detail": NOT_JSON_TYPE})
                await send_json(send, answer)
                return
            if method == "DELETE" and path.startswith("/vms/") and len(path) > 5:  # an id may hold "/" (namespace/name)
                query = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
                await send_json(send, await self._guard(self._release(path[5:], query)))
                return
        await self.app(scope, receive, send)

    async def _place(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        try:
            data = json.loads(raw) if raw else None
        except json.JSONDecodeError as e:  # as FastAPI words it
            error = {"loc": ("body", e.pos), "msg": "JSON decode error", "ctx": {"error": e.msg}}
            return 422, {"detail": validation_sentence([error])}
        except (ValueError, RecursionError) as e:  # a number over 4,300 digits; arrays nested 200,000 deep (a 500)
            return 422, {"detail": unparsed(e)}
        if data is None:
            return 422, {"detail": validation_sentence([{"loc": ("body",), "msg": "Field required"}])}
        try:
            body = VmIn.model_validate(data)
        except ValidationError as e:
            return 422, {"detail": validation_sentence(e.errors())}
        return await self._guard(place_vm(self.engine, self.metrics, body))

    async def _release(self, vm_id: str, query: list[tuple[str, str]]) -> tuple[int, dict[str, Any]]:
        return await release_vm(self.engine, self.metrics, vm_id, release_uid(query))

    @staticmethod
    async def _guard(call: Any) -> tuple[int, dict[str, Any]]:
        try:
            return await call  # type: ignore[no-any-return]
        except Exception as exc:
            answer = error_answer(exc)
            if answer is None:
                raise
            return answer


async def send_json(
    send: Any, answer: tuple[int, dict[str, Any]], extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    """Send ``(status, payload)`` as a JSON response (ASGI: for middleware answering before the application), with
    ``extra`` headers."""
    status, payload = answer
    body = json.dumps(payload).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _body(receive: Any) -> bytes:
    chunks = []
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away
            break
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


ONE_VM_BODY = 64 * 2**10
"""The largest ``POST /vms`` body the service reads (bytes; :class:`BodyLimit`, on the fast path and FastAPI's route
alike): one VM takes about 100, and a body is parsed on the event loop (57 MB of junk held every request 7 s)."""

MAX_BODY = 64 * 2**20
"""The largest request body the service reads by default (bytes; ``serve --max-body-mb``): a ``POST /vms/batch`` of
its 10,000-VM cap takes about 1 MB, ``POST /allocations`` about 110 bytes a VM (600,000 VMs), the extender's
``Nodes`` mode 5-15 KB a node (4,000 nodes or more)."""


class BodyLimit:
    """ASGI middleware, outermost: a request body over ``limit`` bytes is answered 413 with one sentence, from its
    ``Content-Length`` before reading any of it (the HTTP server holds a client to the length it declared), or, for
    a body sent in chunks without one, once what arrived passes the limit (read here, then handed on): a 150 MB
    body was read in full before its 422, and a 20 MB one padded with spaces was placed."""

    def __init__(self, app: Any, limit: int = MAX_BODY) -> None:
        self.app = app
        self.limit = limit

    async def __call__(self, scope: Scope, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        one_vm = scope["method"] == "POST" and scope["path"] == "/vms"
        limit = min(self.limit, ONE_VM_BODY) if one_vm else self.limit
        length = next((v for k, v in scope["headers"] if k == b"content-length"), None)
        if length is not None:
            if length.isdigit() and int(length) > limit:
                await send_json(send, self._refusal(one_vm, int(length)))
                return
            await self.app(scope, receive, send)
            return
        messages, seen = [], 0
        while True:
            message = await receive()
            messages.append(message)
            if message["type"] != "http.request":
                break
            seen += len(message.get("body", b""))
            if seen > limit:
                await send_json(send, self._refusal(one_vm, seen))
                return
            if not message.get("more_body", False):
                break

        async def replay() -> Any:
            return messages.pop(0) if messages else await receive()

        await self.app(scope, replay, send)

    def _refusal(self, one_vm: bool, size: int) -> tuple[int, dict[str, Any]]:
        if one_vm and size > ONE_VM_BODY and self.limit > ONE_VM_BODY:
            return 413, {"detail": f"a POST /vms body is one VM, at most {ONE_VM_BODY:,} bytes, got {size:,} or more; "
                                   "send many with POST /vms/batch"}  # fmt: skip
        return 413, {"detail": f"the request body is over {self.limit:,} bytes, the most this service reads"}
