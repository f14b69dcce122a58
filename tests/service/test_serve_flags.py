"""``dcplace serve``'s address flags are checked before the database is opened: one sentence naming the flag,
exit 2, no database file created (uvicorn would wrap a port above 65535 round, or exit 3 with its own message)."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from typer.testing import CliRunner

from dcplace.cli.main import app

runner = CliRunner()
PADRL = Path(__file__).resolve().parents[2] / "src" / "dcplace" / "data" / "cvd" / "padrl-50pm-paper.pt"


@pytest.mark.parametrize(
    ("flags", "said"),
    [
        (["--port", "99999"], "--port: must be a TCP port from 1 to 65535, not 99999"),
        (["--port", "0"], "--port: must be a TCP port from 1 to 65535, not 0"),
        (["--log-level", "loud"], "--log-level: must be one of critical, error, warning, info, debug, trace"),
        (["--host", "no-such-host.invalid"], "--host: cannot resolve 'no-such-host.invalid'"),
        (["--policy", "nope"], "--policy: must be one of best-fit"),  # it created the database first
        (["--policy", "best-fit", "--checkpoint", "x.pt"], "--checkpoint: applies to learned policies only"),
        (["--policy", "cvd-rl", "--checkpoint", str(PADRL)], "a PADRL checkpoint, not one for policy cvd-rl"),
        # 100000 hung at start-up (the warm-up), and a new database kept numa = 0 or 100000 for good
        (["--numa", "100000"], "--numa: must be a whole number from 1 to 256, got 100000"),
        (["--numa", "0"], "--numa: must be a whole number from 1 to 256, got 0"),
        # inf passed the check and was an OverflowError traceback after the database was made
        (["--max-body-mb", "inf"], "--max-body-mb: must be above 0 and at most 1048576 MiB, not inf"),
        (["--max-body-mb", "nan"], "--max-body-mb: must be above 0 and at most 1048576 MiB, not nan"),
        (["--stop-timeout", "0"], "--stop-timeout: must be from 1 to 86400 seconds, not 0"),
        (["--stop-timeout", "1.5"], "Invalid value for '--stop-timeout'"),
        # started, then every background event reported an error, for good
        (["--numa", "4", "--reoptimise-every", "60"], "--reoptimise-every: re-optimises double-NUMA machines only"),
        # they tune background events: given without a trigger they were silently dropped
        (["--migration-weight", "2"], "--migration-weight: applies to background re-optimisation only"),
        (["--max-moves", "5"], "--max-moves: applies to background re-optimisation only"),
        (["--cooldown", "600"], "--cooldown: applies to background re-optimisation only"),
        (["--reoptimise-every", "60", "--cooldown", "-1"], "--cooldown: "),
        # a refused --import file left an empty new database behind
        (["--import", "IMPORT"], "line 2, field 'machine': no machine 'nosuch' is registered"),
        # --machines: a refused file names its line and field, and leaves no database
        (["--machines", "BAD_CPU"], "m.csv, line 3, field 'cpu': must be a number or numbers separated by ';'"),
        (["--machines", "BAD_NODES"], "m.csv, line 2, field 'mem': must give one value per NUMA node (2), got 3"),
        (["--machines", "TWICE"], "m.csv, line 3, field 'id': the batch names machine 'pm0' twice"),
        (["--machines", "JSON"], "m.json, field '[1].cpu': must be a number at least 1e-06"),
        # a misspelt column dropped every rack without a word
        (["--machines", "RACK_ID"], "m.csv, line 1, field 'rack_id': unknown column"),
        (["--machines", "GOOD", "--import", "IMPORT"], "line 2, field 'machine': no machine 'nosuch' is registered"),
    ],
)
def test_bad_address_flags_are_refused_before_the_database(tmp_path, flags, said):
    db = tmp_path / "c.db"
    files = {"IMPORT": ("a.csv", "vm,machine,cpu,mem\nv1,nosuch,1,1\n"),
             "BAD_CPU": ("m.csv", "id,cpu,mem\npm0,8,16\npm1,eight,16\n"),
             "BAD_NODES": ("m.csv", "id,cpu,mem,rack\npm0,8,16;16;16,r1\n"),
             "TWICE": ("m.csv", "id,cpu,mem\npm0,8,16\npm0,8,16\n"),
             "RACK_ID": ("m.csv", "id,cpu,mem,rack_id\npm0,8,16,r1\n"),
             "JSON": ("m.json", '[{"id": "pm0", "cpu": 8, "mem": 16}, {"id": "pm1", "cpu": 0, "mem": 16}]'),
             "GOOD": ("g.csv", "id,cpu,mem\npm0,8,16\n")}  # fmt: skip
    for f in flags:
        if f in files:
            (tmp_path / files[f][0]).write_text(files[f][1])
    given = {tmp_path / files[f][0] for f in flags if f in files}
    flags = [str(tmp_path / files[f][0]) if f in files else f for f in flags]
    res = runner.invoke(app, ["serve", "--db", str(db), *flags])
    assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output, res.output
    assert not db.exists() and set(tmp_path.iterdir()) == given


def test_a_port_in_use_is_refused(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        db = tmp_path / "c.db"
        res = runner.invoke(app, ["serve", "--db", str(db), "--port", str(port)])
    assert res.exit_code == 2 and f"--port: cannot listen on 127.0.0.1:{port}" in res.output
    assert not db.exists()
    with socket.socket() as busy:  # the probe port too, and it is held from then on (no race with the start)
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        taken = busy.getsockname()[1]
        res = runner.invoke(app, ["serve", "--db", str(db), "--probe-port", str(taken)])
    assert res.exit_code == 2 and f"--probe-port: cannot listen on 127.0.0.1:{taken}" in res.output
    assert not db.exists()


@pytest.mark.parametrize("flag", ["--port", "--probe-port"])
def test_a_port_taken_while_the_database_opens_is_refused_before_the_start(tmp_path, monkeypatch, flag):
    """The ports are bound before the database opens, which keeps out programs that bind without SO_REUSEADDR; one
    that sets it (as servers do) can bind and listen meanwhile. Here one does so during the open: the start is
    refused naming the flag (uvicorn's traceback, or its own error and exit 3), the new database removed."""
    from dcplace.engine import PlacementEngine

    ports = []
    for _ in range(2):
        with socket.socket() as free:
            free.bind(("127.0.0.1", 0))
            ports.append(free.getsockname()[1])
    target = ports[0] if flag == "--port" else ports[1]
    thief = socket.socket()
    thief.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    opened = PlacementEngine.open.__func__  # type: ignore[attr-defined]

    def open_and_be_robbed(cls, *args, **kwargs):
        thief.bind(("127.0.0.1", target))
        thief.listen()
        return opened(cls, *args, **kwargs)

    monkeypatch.setattr(PlacementEngine, "open", classmethod(open_and_be_robbed))
    db = tmp_path / "c.db"
    try:
        res = runner.invoke(app, ["serve", "--db", str(db), "--port", str(ports[0]), "--probe-port", str(ports[1])])
    finally:
        thief.close()
    said = f"{flag}: cannot listen on 127.0.0.1:{target}: Address already in use (taken while the database opened)"
    assert res.exit_code == 2 and said in res.output and "Traceback" not in res.output, res.output
    assert not db.exists()


def test_an_empty_host_means_every_interface_not_an_error():
    from dcplace.cli.serve import _bound

    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    for sock in _bound("", port):  # free again: no exception
        sock.close()


def test_an_address_family_the_kernel_lacks_is_skipped(monkeypatch):
    """On a kernel without IPv6, ``""`` still resolves to ``::`` too: making that socket raised an uncaught OSError
    (a traceback, the IPv4 socket left open). It is skipped, as asyncio skips it; with no address left, a refusal."""
    import errno

    from dcplace.cli import serve

    real = socket.socket

    def no_ipv6(family=socket.AF_INET, *args, **kwargs):  # type: ignore[no-untyped-def]
        if family == socket.AF_INET6:
            raise OSError(errno.EAFNOSUPPORT, "Address family not supported by protocol")
        return real(family, *args, **kwargs)

    with socket.socket() as probe:
        probe.bind(("", 0))
        port = probe.getsockname()[1]
    monkeypatch.setattr(socket, "socket", no_ipv6)
    socks = serve._bound("", port)
    assert [s.family for s in socks] == [socket.AF_INET]
    serve._close(socks)
    res = runner.invoke(app, ["serve", "--db", "unused.db", "--host", "::1", "--port", str(port)])
    assert res.exit_code == 2 and "--port: cannot listen on ::1" in res.output and "Traceback" not in res.output


def test_every_interface_is_ipv4_and_ipv6(tmp_path):
    """``--host ""`` is every interface: the service answers on IPv4 and IPv6 (taking only getaddrinfo's first
    address, it served IPv4 alone)."""
    import signal

    import httpx

    from .conftest import free_port, start_serve

    try:
        with socket.socket(socket.AF_INET6) as six:
            six.bind(("::1", 0))
    except OSError:
        pytest.skip("no IPv6 loopback here")
    port = free_port()
    proc = start_serve(tmp_path / "c.db", port, "--host", "")
    try:
        for url in (f"http://127.0.0.1:{port}/healthz", f"http://[::1]:{port}/healthz"):
            assert httpx.get(url, timeout=10).status_code == 200, url
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=30)


def test_machines_file_is_registered_once_per_content(tmp_path):
    """``--machines`` registered the file at every start, so a machine removed since came back, active (a review
    of the change). The file is marked by its hash in the same commit; the same file is skipped, a changed one
    registers what it adds."""
    from dcplace.cli.serve import _register
    from dcplace.engine import PlacementEngine

    f = tmp_path / "m.csv"
    f.write_text("id,cpu,mem\npm0,8,16\npm1,8,16\n")
    e = PlacementEngine.open(tmp_path / "c.db")
    _register(e, f)
    e.remove_machine("pm1")  # decommissioned
    e.close()
    e = PlacementEngine.open(tmp_path / "c.db")
    _register(e, f)  # the next start, same flag
    assert [m.id for m in e.machines()] == ["pm0"]
    f.write_text("id,cpu,mem\npm0,8,16\npm2,4,8\n")  # the operator's file, edited
    _register(e, f)
    assert [m.id for m in e.machines()] == ["pm0", "pm2"]
    # an edited file that still lists the removed machine (an operator's walkthrough: it came back, empty, active)
    f.write_text("id,cpu,mem\npm0,8,16\npm1,8,16\npm2,4,8\npm3,4,8\n")
    _register(e, f)
    assert [m.id for m in e.machines()] == ["pm0", "pm2", "pm3"]
    e.add_machine("pm1", 8, 16)  # registered again on purpose
    e.remove_machine("pm3")
    f.write_text("id,cpu,mem\npm0,8,16\npm1,8,16\npm2,4,8\n")
    _register(e, f)
    assert [m.id for m in e.machines()] == ["pm0", "pm2", "pm1"]
    # a machine changed by PATCH since, the file not edited for it but for another machine: the start went on
    e.change_machine("pm0", 16, 32)  # (it was refused: the same id with another shape, a restart loop)
    f.write_text("id,cpu,mem\npm0,8,16\npm1,8,16\npm2,4,8\npm4,4,8\n")
    _register(e, f)
    assert {m.id: m.cpu[0] for m in e.machines()} == {"pm0": 16.0, "pm1": 8.0, "pm2": 4.0, "pm4": 4.0}
    e.close()
