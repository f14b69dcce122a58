"""Who may call the service: bearer tokens (``dcplace serve --token-file``) and TLS, with client certificates where
the caller cannot send a header (``--tls-cert``, ``--tls-key``, ``--tls-client-ca``; docs/engine.md, "Security").

Without either, anyone who reaches the port can change the cluster (the default, on 127.0.0.1). With tokens, every
request but the open paths (:data:`OPEN_PATHS`: the liveness probe and the API's documentation page, which hold no
cluster data) must carry ``Authorization: Bearer <token>`` naming one of the file's tokens, or it is answered 401
with one sentence and ``WWW-Authenticate: Bearer``, before its body is read. kube-scheduler's extender client sends
no such header; it authenticates with a client certificate (``tlsConfig`` in its configuration), which uvicorn
checks during the TLS handshake when ``--tls-client-ca`` is given, so with client certificates the extender's
routes need no token (:data:`CERT_ONLY`). A kubelet's probe shows no certificate either: ``--probe-port`` answers
``/healthz`` in plain HTTP on a port of its own (:mod:`dcplace.service.probe`).
"""

from __future__ import annotations

import hmac
import os
import ssl
import stat
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from dcplace.errors import InputError
from dcplace.service.hotpath import send_json

OPEN_PATHS = ("/healthz", "/docs", "/docs/oauth2-redirect", "/openapi.json", "/redoc", "/", "/ui", "/favicon.ico")
"""Answered without a token: the kubelet's probe (it sends no header), the documentation page and the cluster page's
files (no cluster data: the page asks for a token and sends it with its API calls)."""
OPEN_PREFIXES = ("/docs-static/", "/ui/")
CERT_ONLY = ("/extender/",)
"""Paths that need no token when every client shows a certificate (``--tls-client-ca``): kube-scheduler's extender
client can send a certificate but no header."""
MIN_TOKEN = 16
"""The shortest token taken (characters): `openssl rand -hex 32` makes one of 64."""
MIN_DISTINCT = 8
"""The fewest distinct characters a token may have (16 times the same letter is not a secret)."""
MAX_TOKEN_FILE = 64 * 2**10
"""The most of a token file read (bytes): /dev/zero grew the process to 2.5 GB in 4 s."""
_TOKEN_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-._~+/=")
"""RFC 6750's b64token characters: what may follow ``Bearer`` in the header."""


def check_secret_file(path: Path, flag: str, size: int | None = None) -> bytes:
    """The bytes of a file holding secrets (a token file, a TLS key), read without blocking (a FIFO with no writer
    held the start forever) and only if it is a regular file that no other user can read or write and its group
    cannot write (a group may read it: Kubernetes mounts a Secret 0440 under ``fsGroup``). ``size``: the most read.
    One sentence naming ``flag`` otherwise, whatever the file is (a directory was a traceback)."""
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
    except FileNotFoundError:
        raise InputError("does not exist", path=path, field=flag) from None
    except OSError as e:
        raise InputError(f"cannot be read ({e.strerror or e})", path=path, field=flag) from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise InputError("is not a regular file", path=path, field=flag)
        mode = stat.S_IMODE(st.st_mode)
        if os.name == "posix" and mode & 0o027:
            who = "open to every user on this machine" if mode & 0o007 else "writable by its group"
            raise InputError(f"is {who} (mode {mode:04o}): it holds secrets, so chmod go-w,o-rwx {path} (600 or "
                             "400; a Kubernetes Secret: defaultMode 0400)", path=path, field=flag)  # fmt: skip
        with os.fdopen(os.dup(fd), "rb") as fh:
            return fh.read(size if size is not None else -1)
    except OSError as e:  # a read error (EIO), a file that cannot be read after all
        raise InputError(f"cannot be read ({e.strerror or e})", path=path, field=flag) from None
    finally:
        os.close(fd)


def read_tokens(path: Path) -> tuple[str, ...]:
    """The tokens in ``path``: one per line, blank lines and lines starting with ``#`` skipped (a UTF-8 byte order
    mark too). Refused (one sentence naming the file, and the line where there is one): a file others can read or
    change (:func:`check_secret_file`), one over :data:`MAX_TOKEN_FILE`, no token, a token shorter than
    :data:`MIN_TOKEN`, with fewer than :data:`MIN_DISTINCT` distinct characters or with characters a header cannot
    carry. Several tokens let one be replaced without a moment when neither works (add the new, SIGHUP, move the
    clients, remove the old, SIGHUP: ``dcplace serve`` reads the file again on SIGHUP)."""
    data = check_secret_file(path, "token_file", MAX_TOKEN_FILE + 1)
    if len(data) > MAX_TOKEN_FILE:
        raise InputError(f"is over {MAX_TOKEN_FILE:,} bytes: not a token file", path=path, field="token_file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as e:
        raise InputError(f"is not UTF-8 text ({e.reason})", path=path, field="token_file") from None
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
        if len(set(token)) < MIN_DISTINCT:
            raise InputError(f"a token of {len(set(token))} distinct characters is easy to guess (at least "
                             f"{MIN_DISTINCT}; openssl rand -hex 32 makes one)", path=path, line=line,
                             field="token_file")  # fmt: skip
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
    pem = check_secret_file(key, "tls_key", 1 << 20)
    if b"ENCRYPTED" in pem:  # OpenSSL would ask for its passphrase on the terminal, then uvicorn again
        raise InputError("is encrypted: dcplace serve needs the key without a passphrase (openssl pkey -in KEY "
                         "-out PLAIN)", path=key, field="tls_key")  # fmt: skip
    try:
        ctx.load_cert_chain(str(cert), str(key), password=lambda: b"")
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


class Tokens:
    """The tokens a service takes, replaceable while it runs (``dcplace serve`` re-reads its ``--token-file`` on
    SIGHUP): a request is checked against the set before or the set after a change, never a mix."""

    def __init__(self, tokens: Iterable[str]) -> None:
        self.replace(tokens)

    def replace(self, tokens: Iterable[str]) -> None:
        if isinstance(tokens, str | bytes):  # a string is an iterable of one-character "tokens"
            raise TypeError("tokens must be a collection of strings, not one string")
        encoded = tuple(t.encode() for t in tokens)
        if not encoded:
            raise ValueError("a service that checks tokens needs at least one")
        self._tokens = encoded  # one assignment: what a request reads is one whole set

    def __len__(self) -> int:
        return len(self._tokens)

    def match(self, given: bytes) -> bool:
        """Whether ``given`` is one of the tokens, compared in constant time with every one of them (the time says
        nothing about which matched, or how much of one)."""
        ok = False
        for token in self._tokens:
            ok |= hmac.compare_digest(given, token)
        return ok


class BearerAuth:
    """ASGI middleware, outside all but the request counter: a request to any path but the open ones without
    ``Authorization: Bearer <one of tokens>`` is answered 401 (module docstring), before anything reads its body."""

    def __init__(self, app: Any, tokens: Tokens, open_prefixes: tuple[str, ...] = ()) -> None:
        """``open_prefixes``: paths answered without a token besides :data:`OPEN_PATHS` (:data:`CERT_ONLY` where
        every client shows a certificate)."""
        self.app = app
        self.tokens = tokens
        self.prefixes = OPEN_PREFIXES + tuple(open_prefixes)

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "websocket":  # none is served; a socket is not let past without a token either
            await send({"type": "websocket.close", "code": 1008})
            return
        if scope["type"] != "http" or self._open(scope["path"]):  # lifespan: the application's start and stop
            await self.app(scope, receive, send)
            return
        header = next((v for k, v in scope["headers"] if k == b"authorization"), None)
        why = self._refusal(header)
        if why is None:
            await self.app(scope, receive, send)
            return
        await send_json(send, (401, {"detail": why}), [(b"www-authenticate", b'Bearer realm="dcplace"')])

    def _open(self, path: str) -> bool:
        return path in OPEN_PATHS or path.startswith(self.prefixes)

    def _refusal(self, header: bytes | None) -> str | None:
        """None for a header naming a token, else why not (one sentence; it never says which part was wrong)."""
        if header is None:
            return "this service needs a token: send the header Authorization: Bearer <token>"
        scheme, _, given = header.partition(b" ")
        if scheme.lower() != b"bearer" or not given.strip():
            return "the Authorization header must be Bearer <token>"
        return None if self.tokens.match(given.strip()) else "the token is not one this service takes"
