"""Who may call the service: bearer tokens (``serve --token-file``) and TLS with client certificates (``--tls-cert``,
``--tls-key``, ``--tls-client-ca``), through FastAPI's test client and through a real ``dcplace serve`` over HTTPS."""

from __future__ import annotations

import asyncio
import os
import shutil
import signal
import ssl
import subprocess
import time
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from dcplace.cli.main import app as cli
from dcplace.engine import PlacementEngine
from dcplace.errors import InputError
from dcplace.service import create_app
from dcplace.service.auth import BearerAuth, Tokens, read_tokens, tls_context

from .conftest import free_port, start_serve

TOKEN = "t0ken-for-the-tests-0123456789abcdef"
OTHER = "another-token-of-the-operators-0001"


def secret(path: Path, text: str, mode: int = 0o600) -> Path:
    path.write_text(text, encoding="utf-8")
    path.chmod(mode)
    return path


@pytest.fixture(params=[True, False], ids=["fast-path", "fastapi-routes"])
def client(tmp_path, request):
    engine = PlacementEngine.open(tmp_path / "c.db")
    engine.add_machine("pm0", 16, 64)
    with TestClient(create_app(engine, fast_path=request.param, tokens=(TOKEN, OTHER)),
                    raise_server_exceptions=False) as c:  # fmt: skip
        yield c
    engine.close()


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def test_without_the_token_nothing_is_read_or_changed(client: TestClient) -> None:
    vm = {"id": "a", "cpu": 1, "mem": 1}
    for headers, said in (({}, "this service needs a token"), (bearer("not-the-token-at-all-0000"), "not one this"),
                          ({"Authorization": f"Basic {TOKEN}"}, "must be Bearer <token>"),
                          ({"Authorization": "Bearer "}, "must be Bearer <token>")):  # fmt: skip
        for method, path, body in (("post", "/vms", vm), ("delete", "/vms/a", None), ("get", "/vms", None),
                                   ("get", "/state/snapshot", None), ("get", "/metrics", None),
                                   ("get", "/journal", None), ("post", "/extender/filter", {}),
                                   ("post", "/machines/pm0/fail", None)):  # fmt: skip
            r = client.request(method.upper(), path, headers=headers, **({} if body is None else {"json": body}))
            assert r.status_code == 401, (headers, path, r.text)
            assert said in r.json()["detail"] and r.headers["www-authenticate"].startswith("Bearer")
    assert client.get("/vms", headers=bearer(TOKEN)).json() == []  # nothing was placed
    assert client.get("/machines/pm0", headers=bearer(TOKEN)).json()["status"] == "active"  # nor failed
    assert client.post("/vms", json=vm, headers=bearer(TOKEN)).status_code == 201
    assert client.delete("/vms/a", headers=bearer(OTHER)).status_code == 200  # either token of the file


def test_the_probe_and_the_docs_page_need_no_token(client: TestClient) -> None:
    assert client.get("/healthz").status_code == 200  # a kubelet's probe sends no header
    assert client.get("/docs").status_code == 200
    doc = client.get("/openapi.json").json()
    assert doc["components"]["securitySchemes"] == {"bearer": {"type": "http", "scheme": "bearer"}}
    assert (
        doc["paths"]["/vms"]["post"]["security"] == [{"bearer": []}]
        and "401" in doc["paths"]["/vms"]["post"]["responses"]
    )
    assert "security" not in doc["paths"]["/healthz"]["get"]


def test_a_token_file_is_checked_like_a_secret(tmp_path: Path) -> None:
    good = secret(tmp_path / "t", f"\ufeff# the operators'\r\n\n{TOKEN}\r\n  {OTHER}  \n")  # a BOM, CRLF
    assert read_tokens(good) == (TOKEN, OTHER)
    assert read_tokens(secret(tmp_path / "g", TOKEN, 0o440)) == (TOKEN,)  # a Secret under fsGroup: group-readable
    for text, mode, said in (
        (TOKEN, 0o644, "is open to every user on this machine (mode 0644)"),
        (TOKEN, 0o602, "is open to every user on this machine (mode 0602)"),
        (TOKEN, 0o620, "is writable by its group (mode 0620)"),  # a group member could add a token
        ("# none\n\n", 0o600, "holds no token"),
        (f"{TOKEN}\nshort\n", 0o600, "line 2, field 'token_file': a token of 5 characters is too short"),
        ("a token with spaces in it!!\n", 0o600, "line 1, field 'token_file': a token may hold letters"),
        ("A" * 40, 0o600, "a token of 1 distinct characters is easy to guess"),
        ("x" * (64 * 1024 + 1), 0o600, "is over 65,536 bytes"),
    ):
        with pytest.raises(InputError, match=said.replace("(", r"\(").replace(")", r"\)")):
            read_tokens(secret(tmp_path / "bad", text, mode))
    with pytest.raises(InputError, match="does not exist"):
        read_tokens(tmp_path / "nope")
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo, 0o600)  # no writer: reading it held the start forever
    with pytest.raises(InputError, match="is not a regular file"):
        read_tokens(fifo)
    with pytest.raises(InputError, match="is not a regular file"):
        read_tokens(Path("/dev/zero"))  # it grew the process to 2.5 GB in 4 s
    with pytest.raises(InputError, match="is not a regular file"):
        read_tokens(tmp_path)  # a directory was a traceback (IsADirectoryError)
    with pytest.raises(TypeError, match="not one string"):
        Tokens(TOKEN)  # each character would have been a token: "Bearer 7" was let in


def test_a_websocket_is_not_let_past_without_a_token() -> None:
    async def app(scope: dict, receive: object, send: object) -> None:
        raise AssertionError("reached the application")

    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    asyncio.run(BearerAuth(app, (TOKEN,))({"type": "websocket", "path": "/vms", "headers": []}, None, send))
    assert sent == [{"type": "websocket.close", "code": 1008}]


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--token-file", "WIDE"], "error: --token-file /"),
        (["--tls-cert", "CERT", "--tls-key", "WIDEKEY"], "wk.pem: is open to every user"),
        (["--probe-port", "PORT"], "--probe-port: must be a TCP port from 1 to 65535 other than --port"),
        (["--token-file", "MISSING"], "does not exist"),
        (["--tls-key", "KEY"], "--tls-cert: is needed with --tls-cert and --tls-key together"),
        (["--tls-cert", "KEY", "--tls-key", "KEY"], "--tls-cert: "),
        (["--tls-client-ca", "KEY"], "--tls-client-ca: needs --tls-cert and --tls-key"),
    ],
)
def test_serve_refuses_a_bad_secret_before_the_database(tmp_path: Path, flags: list[str], said: str) -> None:
    files = {"WIDE": secret(tmp_path / "wide", TOKEN, 0o644), "MISSING": tmp_path / "missing",
             "KEY": secret(tmp_path / "k.pem", "not a key\n"), "CERT": secret(tmp_path / "c.pem", "x\n"),
             "WIDEKEY": secret(tmp_path / "wk.pem", "x\n", 0o644), "PORT": "8000"}  # fmt: skip
    db = tmp_path / "c.db"
    r = CliRunner().invoke(cli, ["serve", "--db", str(db), *[str(files.get(f, f)) for f in flags]])
    assert r.exit_code == 2 and said in " ".join(r.output.split()), r.output
    assert not db.exists()


def openssl(*args: str, cwd: Path) -> None:
    subprocess.run(["openssl", *args], cwd=cwd, check=True, capture_output=True)


def make_pki(d: Path) -> None:
    """A CA, a server certificate for 127.0.0.1 and a client certificate, both signed by it (EC keys: fast)."""
    key = ["-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes"]
    openssl("req", "-x509", *key, "-keyout", "ca.key", "-out", "ca.pem", "-days", "2", "-subj", "/CN=dcplace-test-ca",
            cwd=d)  # fmt: skip
    (d / "server.ext").write_text("subjectAltName=IP:127.0.0.1,DNS:localhost\n", encoding="utf-8")
    for name, ext in (("server", ["-extfile", "server.ext"]), ("client", [])):
        openssl("req", *key, "-keyout", f"{name}.key", "-out", f"{name}.csr", "-subj", f"/CN={name}", cwd=d)
        openssl("x509", "-req", "-in", f"{name}.csr", "-CA", "ca.pem", "-CAkey", "ca.key", "-CAcreateserial",
                "-out", f"{name}.pem", "-days", "2", *ext, cwd=d)  # fmt: skip
    for name in ("ca.key", "server.key", "client.key"):
        (d / name).chmod(0o600)


@pytest.mark.skipif(shutil.which("openssl") is None, reason="needs the openssl command to make certificates")
def test_a_real_server_over_mutual_tls_with_a_token(tmp_path: Path) -> None:
    """``dcplace serve`` over HTTPS that requires a client certificate (what kube-scheduler's ``tlsConfig`` sends)
    and a token: a client without the certificate does not get past the handshake, one without the token gets a
    401, one with both is served; plain HTTP is not answered."""
    make_pki(tmp_path)
    assert tls_context(tmp_path / "server.pem", tmp_path / "server.key", tmp_path / "ca.pem") is not None
    openssl("pkey", "-in", "server.key", "-aes256", "-passout", "pass:pw", "-out", "locked.key", cwd=tmp_path)
    (tmp_path / "locked.key").chmod(0o600)
    with pytest.raises(InputError, match="is encrypted"):  # it asked for the passphrase twice, then a traceback
        tls_context(tmp_path / "server.pem", tmp_path / "locked.key", None)
    probe_port = free_port()
    tokens = secret(tmp_path / "tokens", f"{TOKEN}\n")
    port = free_port()
    base = f"https://127.0.0.1:{port}"
    trusting = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))  # trusts the test CA, shows no certificate
    with_cert = ssl.create_default_context(cafile=str(tmp_path / "ca.pem"))
    with_cert.load_cert_chain(str(tmp_path / "client.pem"), str(tmp_path / "client.key"))
    pki = {f: str(tmp_path / n) for f, n in (("--tls-cert", "server.pem"), ("--tls-key", "server.key"),
                                              ("--tls-client-ca", "ca.pem"))}  # fmt: skip
    flags = [x for kv in pki.items() for x in kv]
    probe = httpx.Client(base_url=base, verify=with_cert)  # kept open: kube-scheduler keeps its connections
    proc = start_serve(tmp_path / "c.db", port, "--token-file", str(tokens), "--probe-port", str(probe_port), *flags,
                       probe=probe)  # fmt: skip
    try:
        with httpx.Client(base_url=base, verify=with_cert, timeout=10) as ok:
            assert ok.post("/machines", json={"id": "pm0", "cpu": 8, "mem": 16}).status_code == 401
            r = ok.post("/machines", json={"id": "pm0", "cpu": 8, "mem": 16}, headers=bearer(TOKEN))
            assert r.status_code == 201, r.text
            assert ok.get("/machines", headers=bearer(TOKEN)).json()[0]["id"] == "pm0"
            # kube-scheduler shows its certificate and sends no token: the extender's routes take the certificate
            f = ok.post("/extender/filter", json={"Pod": {"metadata": {"name": "p"}}, "NodeNames": ["pm0"]})
            assert f.status_code == 200 and f.json()["NodeNames"] == ["pm0"], f.text
        # a kubelet's probe shows no certificate: the probe port answers /healthz in plain HTTP, and nothing else
        assert httpx.get(f"http://127.0.0.1:{probe_port}/healthz", timeout=5).json()["machines"] == 1
        assert httpx.get(f"http://127.0.0.1:{probe_port}/vms", timeout=5).status_code == 404
        assert httpx.head(f"http://127.0.0.1:{probe_port}/healthz", timeout=5).status_code == 200
        with httpx.Client(base_url=base, verify=trusting, timeout=10) as no_cert:
            with pytest.raises(httpx.TransportError):  # the handshake (or the first read) fails: no certificate
                no_cert.get("/machines", headers=bearer(TOKEN))
        with pytest.raises(httpx.TransportError):
            httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=5)
    finally:
        proc.send_signal(signal.SIGTERM)  # an idle TLS connection held the stop 30 s; --stop-timeout is 10 s
        try:
            proc.wait(25)
        finally:
            probe.close()
            proc.kill()


def test_sighup_replaces_the_tokens_without_a_restart(tmp_path: Path) -> None:
    """Rotation without a gap or a restart: the new token is taken on SIGHUP and the old one refused; a file refused
    on a later SIGHUP (other users can read it) keeps the tokens in use and says why."""
    tokens = secret(tmp_path / "tokens", f"{TOKEN}\n")
    port = free_port()
    proc = start_serve(tmp_path / "c.db", port, "--token-file", str(tokens))
    base = f"http://127.0.0.1:{port}"

    def status(token: str) -> int:
        return httpx.get(f"{base}/state", headers=bearer(token), timeout=5).status_code

    def after_sighup(want: tuple[int, int]) -> tuple[int, int]:
        proc.send_signal(signal.SIGHUP)
        got = (0, 0)
        for _ in range(100):  # the handler runs when the server's loop next wakes: poll, at most 10 s
            got = (status(TOKEN), status(OTHER))
            if got == want:
                break
            time.sleep(0.1)
        return got

    try:
        assert (status(TOKEN), status(OTHER)) == (200, 401)
        secret(tokens, f"{TOKEN}\n{OTHER}\n")  # add the new one
        assert after_sighup((200, 200)) == (200, 200)
        secret(tokens, f"{OTHER}\n")  # clients moved: remove the old one
        assert after_sighup((401, 200)) == (401, 200)
        for bad in ("WORLD", "DIR"):  # refused: the tokens in use stay
            tokens.unlink() if tokens.is_file() else tokens.rmdir()
            if bad == "WORLD":
                secret(tokens, f"{TOKEN}\n", 0o644)
            else:
                tokens.mkdir()  # a directory escaped the handler as IsADirectoryError
            proc.send_signal(signal.SIGHUP)
            time.sleep(0.5)
            assert (status(TOKEN), status(OTHER)) == (401, 200)
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    said = err.decode()
    assert "SIGHUP: kept the 1 token(s) in use" in said and "is open to every user" in said, said
    assert "is not a regular file" in said and "Traceback" not in said and proc.returncode == 0, said
    assert said.rstrip().splitlines()[-1].startswith("dcplace serve: stopped;")


def test_sighup_without_a_token_file_keeps_the_service(tmp_path: Path) -> None:
    """A SIGHUP (what `systemctl reload` sends) to a service with no --token-file says there is nothing to re-read
    and changes nothing; its default action had killed the service mid-request."""
    port = free_port()
    proc = start_serve(tmp_path / "c.db", port)
    base = f"http://127.0.0.1:{port}"
    try:
        assert httpx.post(f"{base}/machines", json={"id": "pm0", "cpu": 8, "mem": 16}, timeout=5).status_code == 201
        proc.send_signal(signal.SIGHUP)
        time.sleep(0.5)
        assert proc.poll() is None
        assert [m["id"] for m in httpx.get(f"{base}/machines", timeout=5).json()] == ["pm0"]
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    said = err.decode()
    assert "SIGHUP: no --token-file to re-read; nothing changed" in said and proc.returncode == 0, said
