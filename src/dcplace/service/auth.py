"""Who may call the service: bearer tokens (``dcplace serve --token-file``) and TLS, with client certificates where
the caller cannot send a header (``--tls-cert``, ``--tls-key``, ``--tls-client-ca``; docs/engine.md, "Security").

Without either, anyone who reaches the port can change the cluster (the default, on 127.0.0.1). With tokens, every
request but the open paths (:data:`OPEN_PATHS`: the liveness probe and the API's documentation page, which hold no
cluster data) must carry ``Authorization: Bearer <token>`` naming one of the file's tokens, or it is answered 401
with one sentence and ``WWW-Authenticate: Bearer``, before its body is read. kube-scheduler's extender client sends
no such header; it authenticates with a client certificate (``tlsConfig`` in its configuration), which uvicorn
checks during the TLS handshake when ``--tls-client-ca`` is given.
"""

from __future__ import annotations

import hmac
import os
import ssl
import stat
from pathlib import Path
from typing import Any

from dcplace.errors import InputError
from dcplace.service.hotpath import send_json

OPEN_PATHS = ("/healthz", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc")
"""Answered without a token: the kubelet's probe (it sends no header) and the documentation page (no cluster data)."""
OPEN_PREFIXES = ("/docs-static/",)
MIN_TOKEN = 16
"""The shortest token taken (characters): `openssl rand -hex 32` makes one of 64."""
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")
"""RFC 6750's b64token characters: what may follow ``Bearer`` in the header."""


def read_tokens(path: Path) -> tuple[str, ...]:
    """The tokens in ``path``: one per line, blank lines and lines starting with ``#`` skipped. Refused (one
    sentence naming the file, and the line where there is one): a file other users can read (it holds secrets:
    ``chmod 600``), no token, a token shorter than :data:`MIN_TOKEN` or with characters a header cannot carry.
    Several tokens let one be replaced without a moment when neither works (add the new, move the clients, remove
    the old, restart)."""
    try:
        st = path.stat()
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        raise InputError("does not exist", path=path, field="token_file") from None
    except (OSError, UnicodeDecodeError) as e:
        raise InputError(f"cannot be read ({e})", path=path, field="token_file") from None
    if not stat.S_ISREG(st.st_mode):
        raise InputError("is not a regular file", path=path, field="token_file")
    if os.name == "posix" and st.st_mode & 0o077:
        raise InputError(f"can be read by other users (mode {stat.S_IMODE(st.st_mode):04o}): it holds secrets, "
                         f"so chmod 600 {path}", path=path, field="token_file")  # fmt: skip
    tokens: list[str] = []
    for line, raw in enumerate(text.splitlines(), 1):
        token = raw.strip()
        if not token or token.startswith("#"):
            continue
        if len(token) < MIN_TOKEN:
            raise InputError(f"a token of {len(token)} characters is too short to guess hard (at least {MIN_TOKEN}; "
                             "openssl rand -hex 32 makes one)", path=path, line=line, field="token_file")  # fmt: skip
        if not set(token) <= _TOKEN_CHARS:
            raise InputError("a token may hold letters, digits and - . _ ~ + / = only (what a Bearer header "
                             "carries)", path=path, line=line, field="token_file")  # fmt: skip
        tokens.append(token)
    if not tokens:
        raise InputError("holds no token (one per line)", path=path, field="token_file")
    return tuple(tokens)


def tls_context(cert: Path | None, key: Path | None, client_ca: Path | None) -> ssl.SSLContext | None:
    """Check the TLS files before the service starts (uvicorn would stop with a traceback after the database was
    opened): the certificate and key load and match, the client CA loads. None without ``cert``. Each refusal is one
    sentence naming the flag."""
    if cert is None and key is None:
        if client_ca is not None:
            raise InputError("needs --tls-cert and --tls-key: client certificates are checked over TLS only",
                             field="tls_client_ca")  # fmt: skip
        return None
    if cert is None or key is None:
        missing = "tls_cert" if cert is None else "tls_key"
        raise InputError("is needed with --tls-cert and --tls-key together", field=missing)
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    for flag, f in (("tls_cert", cert), ("tls_key", key), ("tls_client_ca", client_ca)):
        if f is not None and not f.is_file():
            raise InputError(f"{f} does not exist or is not a file", field=flag)
    try:
        ctx.load_cert_chain(str(cert), str(key))
    except (ssl.SSLError, OSError) as e:
        raise InputError(f"{cert} and {key} are not a PEM certificate and its private key ({_why(e)})",
                         field="tls_cert") from None  # fmt: skip
    if client_ca is not None:
        try:
            ctx.load_verify_locations(str(client_ca))
        except (ssl.SSLError, OSError) as e:
            raise InputError(f"{client_ca} holds no PEM CA certificate ({_why(e)})", field="tls_client_ca") from None
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def _why(e: BaseException) -> str:
    return str(getattr(e, "reason", None) or e).strip() or type(e).__name__


class BearerAuth:
    """ASGI middleware, outermost: a request to any path but the open ones without ``Authorization: Bearer <one of
    tokens>`` is answered 401 (module docstring). Tokens are compared in constant time, every one of them."""

    def __init__(self, app: Any, tokens: tuple[str, ...]) -> None:
        self.app = app
        self.tokens = tuple(t.encode() for t in tokens)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self._open(scope["path"]):
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        why = self._refusal(header)
        if why is None:
            await self.app(scope, receive, send)
            return
        await send_json(send, (401, {"detail": why}), [(b"www-authenticate", b'Bearer realm="dcplace"')])

    @staticmethod
    def _open(path: str) -> bool:
        return path in OPEN_PATHS or path.startswith(OPEN_PREFIXES)

    def _refusal(self, header: bytes | None) -> str | None:
        """None for a header naming a token, else why not (one sentence; it never says which part was wrong)."""
        if header is None:
            return "this service needs a token: send the header Authorization: Bearer <token>"
        scheme, _, given = header.partition(b" ")
        if scheme.lower() != b"bearer" or not given.strip():
            return "the Authorization header must be Bearer <token>"
        given = given.strip()
        ok = False
        for token in self.tokens:  # all of them, whatever matched: the time says nothing about which
            ok |= hmac.compare_digest(given, token)
        return None if ok else "the token is not one this service takes"
