"""Run the placement service over HTTP: machines, VMs, explanations, metrics; durable in a SQLite database.

Also home of ``simulate stream``'s work (a trace through the live engine, rejections counted and the stream
continued).
"""

from __future__ import annotations

import contextlib
import json
import logging
import logging.handlers
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, NoReturn

import typer

from dcplace.cli.common import StderrHandler, unwritten
from dcplace.errors import InputError, Terminated

if TYPE_CHECKING:
    from dcplace.engine import PlacementEngine
    from dcplace.engine.network import NetworkEngine


_SECRET_FLAGS = ("token_file", "tls_cert", "tls_key", "tls_client_ca")
"""Flags naming a file whose refusal names the flag, the file and the line (not a CSV's "field")."""


def _fail(exc: InputError) -> NoReturn:
    if exc.path is None and exc.field is not None:
        typer.echo(f"error: --{exc.field.replace('_', '-')}: {exc.detail}", err=True)
    elif exc.field in _SECRET_FLAGS:
        line = f", line {exc.line}" if exc.line is not None else ""
        typer.echo(f"error: --{exc.field.replace('_', '-')} {exc.path}{line}: {exc.detail}", err=True)
    else:
        typer.echo(f"error: {exc}", err=True)
    raise typer.Exit(2)


def _raise_open_file_limit() -> None:
    """The soft limit on open files raised to the hard one (as Go's runtime does for every program): each client
    connection is a file, and at a soft limit of 256 an overload review saw numba's cache files fail to open with
    "Too many open files", 134 placements and releases answered 500 and the health check reset. The hard limit is
    the operator's (``ulimit -Hn``, systemd's ``LimitNOFILE``); ``/metrics`` shows it as ``process_max_fds``."""
    try:
        import resource
    except ImportError:  # not POSIX
        return
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft != resource.RLIM_INFINITY and soft < want:
        with contextlib.suppress(ValueError, OSError):
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))


def _bound(host: str, port: int, flag: str = "port") -> list[Any]:
    """Sockets bound to ``host:port``, one per address the host resolves to (``""``: every interface, IPv4 and IPv6,
    as uvicorn binds them; taking only the first address served IPv4 alone, a review found), or a refusal naming
    ``flag``, before the database is opened (an address in use, not this machine's, a privileged port: uvicorn
    printed its own error and exited 3 after the engine was opened). They are held until the server listens on them:
    a port checked and let go was taken by another process while the database opened (the probe's: a traceback
    after the start; the main one's: uvicorn's own error and exit 3, with the engine loaded). A bound socket keeps
    out programs that bind without ``SO_REUSEADDR``; one that sets it may still bind and listen first (Linux lets two
    such sockets bind one port while neither listens), so ``serve`` listens on them before it says it is ready, and
    refuses the start, naming the flag, if it cannot."""
    import socket

    try:  # "" is every interface to uvicorn (asyncio), as None is to getaddrinfo
        infos = socket.getaddrinfo(host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except OSError as exc:
        _fail(InputError(f"cannot resolve {host!r}: {exc.strerror or exc}", field="host"))
    import errno

    socks: list[Any] = []
    skipped: OSError | None = None
    for family, kind, proto, _name, addr in dict.fromkeys(infos):  # each address once, in getaddrinfo's order
        try:
            sock = socket.socket(family, kind, proto)
        except OSError as exc:  # a family this kernel lacks (IPv6 switched off): skipped, as asyncio does
            skipped = skipped or exc
            continue
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: one in TIME_WAIT is fine
            if family == socket.AF_INET6:  # as asyncio does: the IPv4 socket takes IPv4, this one IPv6 only
                sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            sock.bind(addr)
        except OSError as exc:
            sock.close()
            if exc.errno == errno.EADDRNOTAVAIL:  # a name's address this machine lacks (localhost's ::1 without IPv6)
                skipped = skipped or exc
                continue
            _close(socks)
            _fail(InputError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", field=flag))
        socks.append(sock)
    if not socks:
        why = skipped.strerror if skipped is not None and skipped.strerror else skipped
        _fail(InputError(f"cannot listen on {host}:{port}: {why}", field=flag))
    return socks


def _netloc(host: str, port: int | None) -> str:
    """``host:port`` as a URL writes it: an IPv6 address in brackets, every interface as ``*`` (it printed
    ``http://:8000`` and ``http://::1:8000``)."""
    return f"{'*' if not host else f'[{host}]' if ':' in host else host}:{port}"


def _close(socks: list[Any]) -> None:
    for sock in socks:
        sock.close()


def serve(
    db: Annotated[Path, typer.Option(help="SQLite database holding the cluster (created if new)")],
    policy: Annotated[str, typer.Option(help="default placement policy (see `dcplace policies`)")] = "best-fit",
    checkpoint: Annotated[
        Path | None, typer.Option(help="a learned policy's weights (from `dcplace train`); default: the shipped ones")
    ] = None,
    host: Annotated[
        str,
        typer.Option(
            help="address to listen on (without --token-file or --tls-client-ca, anyone who reaches it can change "
            "the cluster; docs/engine.md, Security)"
        ),
    ] = "127.0.0.1",
    allowed_host: Annotated[
        list[str] | None,
        typer.Option(
            help="a name the service answers to and whose web pages may change it (a proxy's public name), "
            "besides localhost's on a loopback address; on any other address these names only (any name without "
            "the flag); repeat for several"
        ),
    ] = None,
    token_file: Annotated[
        Path | None,
        typer.Option(
            help="bearer tokens, one per line (mode 600): every request but /healthz and the docs page must send "
            "Authorization: Bearer <one of them>, else 401; re-read on SIGHUP"
        ),
    ] = None,
    tls_cert: Annotated[Path | None, typer.Option(help="serve HTTPS with this PEM certificate (chain)")] = None,
    tls_key: Annotated[Path | None, typer.Option(help="the PEM private key of --tls-cert")] = None,
    tls_client_ca: Annotated[
        Path | None,
        typer.Option(
            help="require a client certificate signed by this PEM CA (mutual TLS: how kube-scheduler's extender "
            "client authenticates)"
        ),
    ] = None,
    port: Annotated[int, typer.Option(help="TCP port")] = 8000,
    probe_port: Annotated[
        int | None,
        typer.Option(
            help="also answer GET and HEAD /healthz, and nothing else, in plain HTTP on this port: for probes that "
            "show no client certificate (a kubelet's, with --tls-client-ca)"
        ),
    ] = None,
    numa: Annotated[int, typer.Option(help="NUMA nodes per machine (fixed per database)")] = 2,
    machines: Annotated[
        Path | None,
        typer.Option(
            help="register the machines in this CSV (id,cpu,mem[,rack]; per-node values ';'-separated) or JSON file "
            "first, with one commit; those already registered so are skipped"
        ),
    ] = None,
    import_allocations: Annotated[
        Path | None, typer.Option("--import", help="record the allocations in this CSV/JSON file first")
    ] = None,
    log_level: Annotated[
        str,
        typer.Option(
            help="log level of uvicorn and of dcplace's own log on stderr: critical, error, warning, info (a line "
            "per request, with its time and X-Request-ID, and per machine change and re-optimisation), debug or trace"
        ),
    ] = "warning",
    http: Annotated[
        str, typer.Option(help="HTTP/1.1 parser: auto (httptools, compiled, when installed), httptools or h11")
    ] = "auto",
    reoptimise_every: Annotated[
        float | None, typer.Option(help="re-optimise in the background every this many seconds (double-NUMA clusters)")
    ] = None,
    reoptimise_below: Annotated[
        float | None, typer.Option(help="re-optimise when the efficiency of the machines in use drops below this")
    ] = None,
    migration_weight: Annotated[
        float, typer.Option(help="background re-optimisation: a move costs this x its VM's memory / its machine's")
    ] = 1.0,
    max_moves: Annotated[int | None, typer.Option(help="background re-optimisation: moves per event")] = None,
    cooldown: Annotated[
        float,
        typer.Option(
            help="background re-optimisation: a VM moved less than this many seconds ago is not moved "
            "again (kept across restarts)"
        ),
    ] = 0.0,
    stop_timeout: Annotated[
        int,
        typer.Option(
            help="on SIGTERM, wait at most this many seconds for requests in flight and open connections, then "
            "close them (every acknowledged change is durable already); an idle TLS connection held a stop 30 s"
        ),
    ] = 10,
    exit_on_failure: Annotated[
        bool,
        typer.Option(
            help="stop (exit 3) once the database fails, instead of answering 503 until stopped: for a supervisor "
            "that restarts on failure and probes nothing (systemd's Restart=on-failure)"
        ),
    ] = False,
    max_in_flight: Annotated[
        int | None,
        typer.Option(
            help="requests in flight at most (all but /healthz and /metrics); more are answered 429 with "
            "Retry-After at once (default: no limit; it cost throughput here, docs/engine.md, Overload)"
        ),
    ] = None,
    max_listings: Annotated[
        int,
        typer.Option(
            help="listings (GET /vms, /allocations, /machines, /state/snapshot, /journal) built at once at most; "
            "more: 429"
        ),
    ] = 4,
    max_body_mb: Annotated[
        float,
        typer.Option(
            help="largest request body read, in MiB (more: 413); the extender's Nodes mode sends whole "
            "Node objects, 5-15 KB each"
        ),
    ] = 64.0,
    network: Annotated[
        str | None,
        typer.Option(
            help="also place jobs of the network-aware setting (POST /jobs: several servers, bandwidth between them) "
            "on this topology: a preset (alpha, beta, gamma, delta) or a topology file"
        ),
    ] = None,
    network_policy: Annotated[
        str | None,
        typer.Option(
            help="with --network: the netalloc policy (default tetris-bw: the highest mean acceptance we measured on "
            "every topology and request set where requests wait for room, close to the best where a full cluster "
            "rejects, and deterministic; tetris, nalb-strict, nara, ...; name=checkpoint; your own as "
            "package.module:ClassName)"
        ),
    ] = None,
    network_db: Annotated[
        Path | None,
        typer.Option(help="with --network: the SQLite file of its running jobs (default: DB's name with .network)"),
    ] = None,
    journal_keep: Annotated[
        int | None,
        typer.Option(
            help="journal entries kept, the newest (GET /journal and /network/journal, `dcplace cluster journal`, "
            "`cluster trace`), in the VM database and the network one each; 0: none written; about 70 bytes each on "
            "disk (a network one 48); default: as the database was last opened, else 1,000,000"
        ),
    ] = None,
) -> None:
    """Run the placement service: register machines, place and release VMs over HTTP, durable in --db
    (OpenAPI docs at /docs)."""
    import uvicorn

    from dcplace.engine import PlacementEngine, ReoptPolicy
    from dcplace.engine.store import StoreError, remove_database
    from dcplace.policies import get_policy
    from dcplace.policies.numa_heuristics import warm_up_jit
    from dcplace.service import create_app

    if http not in ("auto", "httptools", "h11"):
        _fail(InputError(f"must be auto, httptools or h11, not {http!r}", field="http"))
    from uvicorn.config import LOG_LEVELS

    if log_level not in LOG_LEVELS:
        _fail(InputError(f"must be one of {', '.join(LOG_LEVELS)}, not {log_level!r}", field="log_level"))
    if not 1 <= port <= 65535:
        _fail(InputError(f"must be a TCP port from 1 to 65535, not {port}", field="port"))
    if probe_port is not None and not (1 <= probe_port <= 65535 and probe_port != port):
        _fail(InputError(f"must be a TCP port from 1 to 65535 other than --port, not {probe_port}", field="probe_port"))
    from dcplace.service.auth import Tokens, read_tokens, tls_context

    try:  # before the database: a refused secret leaves no new file behind
        tokens = () if token_file is None else read_tokens(token_file)
        tls = tls_context(tls_cert, tls_key, tls_client_ca)
    except InputError as exc:
        _fail(exc)
    held = Tokens(tokens) if tokens else None
    # from here on a SIGHUP re-reads the tokens; without a token file it is acknowledged and ignored (its default
    # action would kill the service mid-request, and `systemctl reload` sends one)
    _reread_on_sighup(held, token_file if held is not None else None)
    if not 1 <= stop_timeout <= 86400:
        _fail(InputError(f"must be from 1 to 86400 seconds, not {stop_timeout}", field="stop_timeout"))
    for name, value in (("max_in_flight", max_in_flight), ("max_listings", max_listings)):
        if value is not None and not 1 <= value <= 10**6:
            _fail(InputError(f"must be a whole number from 1 to 1000000, not {value}", field=name))
    if not 0 < max_body_mb <= 2**20:  # inf was an OverflowError traceback after the database was made
        _fail(InputError(f"must be above 0 and at most {2**20} MiB, not {max_body_mb!r}", field="max_body_mb"))
    if reoptimise_every is None and reoptimise_below is None:  # they tune background events, and none would run
        for name, given in (("migration_weight", migration_weight != 1.0), ("max_moves", max_moves is not None),
                            ("cooldown", cooldown != 0.0)):  # fmt: skip
            if given:
                _fail(InputError("applies to background re-optimisation only: add --reoptimise-every or "
                                 "--reoptimise-below", field=name))  # fmt: skip
    if network is None and (network_db is not None or network_policy is not None):
        _fail(InputError("applies to the network-aware setting only: add --network TOPOLOGY",
                         field="network_db" if network_db is not None else "network_policy"))  # fmt: skip
    _raise_open_file_limit()
    main_socks = _bound(host, port)  # held from here on: nobody takes either port while the database opens
    probe_socks = [] if probe_port is None else _bound(host, probe_port, "probe_port")
    reopt = None
    try:
        if reoptimise_every is not None or reoptimise_below is not None:
            reopt = ReoptPolicy(every_s=reoptimise_every, below=reoptimise_below, min_gap_s=60.0,
                                migration_weight=migration_weight, max_moves=max_moves,
                                cooldown_s=cooldown)  # fmt: skip
        # before the database: a refused policy or checkpoint leaves no new file behind
        chosen = get_policy(policy, None if checkpoint is None else str(checkpoint))
        new_db = not db.exists()
        engine = PlacementEngine.open(db, numa=numa, policy=chosen, journal_keep=journal_keep)
        if reopt is not None and engine.numa != 2:  # every background event would fail, for good
            engine.close()
            if new_db:
                remove_database(db)
            flag = "reoptimise_every" if reoptimise_every is not None else "reoptimise_below"
            raise InputError(f"re-optimises double-NUMA machines only; this cluster has {engine.numa} NUMA nodes "
                             "per machine", field=flag)  # fmt: skip
        if machines is not None or import_allocations is not None:
            try:
                if machines is not None:
                    _register(engine, machines)
                if import_allocations is not None:
                    _import_once(engine, import_allocations, db)
            except (InputError, StoreError) as exc:  # a refused file on a new database leaves none behind
                engine.close()
                if new_db:
                    remove_database(db)
                if isinstance(exc, StoreError):  # a full disk: the import was rolled back
                    raise unwritten(db, exc, "the machines and allocations", "start again") from None
                raise
    except InputError as exc:
        if exc.field in ("every_s", "below", "cooldown_s"):
            exc.field = {"every_s": "reoptimise_every", "below": "reoptimise_below", "cooldown_s": "cooldown"}[
                exc.field
            ]
        _close(main_socks + probe_socks)
        _fail(exc)
    net = None
    new_net = False
    if network is not None:
        net_db = network_db or db.with_name(f"{db.stem}.network{db.suffix or '.db'}")
        try:
            if net_db.resolve() == db.resolve():
                raise InputError(f"must be another file than --db ({db}): each keeps its own tables and lock",
                                 field="network_db")  # fmt: skip
            new_net = not net_db.exists()
            network_policy = network_policy or "tetris-bw"
            net = _open_network(network, network_policy, net_db, journal_keep)
        except InputError as exc:
            engine.close()
            if new_db:
                remove_database(db)
            _close(main_socks + probe_socks)
            _fail(exc)
        running = net.stats()["jobs"]
        jobs = f"{running} job{'' if running == 1 else 's'}"
        typer.echo(f"dcplace serve: network {net.topology.name}, {jobs} from {net_db}; policy {network_policy} (POST "
                   "/jobs)", err=True)  # fmt: skip
    for warning in engine.load_warnings:
        typer.echo(f"dcplace serve: warning: {warning}", err=True)
    warm_up_jit()
    warm_s = engine.warm_up()  # the default policy compiled before the first request, not during it
    for socks, flag, number in ((main_socks, "port", port), (probe_socks, "probe_port", probe_port)):
        try:  # a program that binds with SO_REUSEADDR, as servers do, could take a port bound but not listening
            for sock in socks:
                sock.listen(2048)  # uvicorn's backlog; it listens again, which changes nothing
        except OSError as exc:
            engine.close()
            if new_db:
                remove_database(db)
            if net is not None:
                net.close()
                if new_net:
                    remove_database(net_db)
            _close(main_socks + probe_socks)
            _fail(InputError(f"cannot listen on {host}:{number}: {exc.strerror or exc} (taken while the database "
                             "opened)", field=flag))  # fmt: skip
    s = engine.stats()
    scheme = "http" if tls is None else "https"
    guard = [what for what, on in (("tokens", tokens), ("client certificates", tls_client_ca)) if on]
    typer.echo(f"dcplace serve: {sum(s['machines'].values())} machines, {s['vms']} VMs from {db}; policy "
               f"{engine.default_policy.name} (ready in {warm_s:.1f} s); {scheme}://{_netloc(host, port)} (docs at "
               f"/docs); {' and '.join(guard) if guard else 'no authentication'}", err=True)  # fmt: skip
    from dcplace.service.app import is_loopback

    if tokens and tls is None and not is_loopback(host):
        typer.echo(f"dcplace serve: warning: tokens sent over plain HTTP on {host} can be read on the way and "
                   "replayed: add --tls-cert and --tls-key", err=True)  # fmt: skip
    logs = _Logs(LOG_LEVELS[log_level])
    probe = heartbeat = None
    stopped = False
    try:
        if probe_socks:
            from dcplace.service.probe import Heartbeat, ProbeServer

            heartbeat = Heartbeat()
            probe = ProbeServer(_Healthy(engine, net), probe_socks, heartbeat)  # type: ignore[arg-type]
            probe.start()
            typer.echo(f"dcplace serve: GET /healthz also on http://{_netloc(host, probe_port)}", err=True)
        config = uvicorn.Config(
            create_app(
                engine,
                reopt,
                check_every_s=10.0,
                max_body=int(max_body_mb * 2**20),
                allowed_hosts=_allowed_hosts(host, allowed_host or []),
                allowed_origins=tuple(allowed_host or []),
                tokens=held or (),
                client_certs=tls_client_ca is not None,
                max_in_flight=max_in_flight,
                max_listings=max_listings,
                heartbeat=heartbeat,
                network=net,
            ),
            host=host,
            port=port,
            **_tls_options(tls_cert, tls_key, tls_client_ca),
            log_level=log_level,
            access_log=False,
            http=http,
            timeout_graceful_shutdown=stop_timeout,
        )
        server = uvicorn.Server(config)
        if exit_on_failure and engine.store is not None:
            engine.store.on_failure = lambda: setattr(server, "should_exit", True)  # type: ignore[attr-defined]
            _watch_the_database(_Healthy(engine, net), server)
        if exit_on_failure and net is not None:
            net.on_failure = lambda: setattr(server, "should_exit", True)
        server.run(sockets=main_socks)
        if not server.started:  # as uvicorn.run ends then: the application's start failed, uvicorn said why
            raise typer.Exit(3)
        stopped = True  # a Ctrl-C: uvicorn re-raised SIGINT, which asyncio's runner took, and returned
    except (KeyboardInterrupt, Terminated):  # uvicorn shut down gracefully, then re-raised the signal to us
        stopped = True
    finally:
        if probe is not None:  # before the stopped line: its own shutdown logs came after it
            probe.stop()
        _close(main_socks + probe_socks)
        healthy = engine.store is None or bool(engine.store.stats()["healthy"])  # type: ignore[attr-defined]
        engine.close()
        if net is not None:
            net.close()  # notices a file deleted under it, as the VM store's close does
            if net.failed is not None:
                typer.echo(f"dcplace serve: {net.failed}", err=True)
        logs.stop()  # every line logged, before the stopped line
    failed = ([] if healthy else [str(db)]) + ([] if net is None or net.failed is None else [str(net_db)])
    if stopped and failed:  # exit 3: a supervisor's Restart=on-failure, and an operator, see it
        typer.echo(f"dcplace serve: stopped after its database {' and '.join(failed)} failed; the error above says "
                   "what to do", err=True)  # fmt: skip
        raise typer.Exit(3)
    if stopped:
        where = str(db) if net is None else f"{db} and {net_db}"
        typer.echo(f"dcplace serve: stopped; every acknowledged change is durable in {where}", err=True)


class _Healthy:
    """The VM engine's and the network engine's health as one (``/healthz`` on the probe port, ``--exit-on-failure``'s
    watch): StoreError when either database failed."""

    def __init__(self, engine: Any, net: NetworkEngine | None) -> None:
        self.engine, self.net = engine, net

    def health(self) -> dict[str, int]:
        return {**self.engine.health(), **({} if self.net is None else self.net.health())}


def _open_network(topology: str, policy: str, path: Path, journal_keep: int | None = None) -> NetworkEngine:
    """The network-aware engine of ``serve --network``, its errors naming the serve flags."""
    from dcplace.engine.network import NetworkEngine

    try:
        return NetworkEngine.open(path, topology, policy, journal_keep=journal_keep)
    except InputError as exc:
        flag = {
            "topology": "network",
            "db": "network_db",
            "policy": "network_policy",
            "checkpoint": "network_policy",
            "journal_keep": "journal_keep",
        }
        if exc.path is not None and Path(exc.path) == Path(topology):  # --network's file, with its line and field
            raise InputError(f"--network {exc}") from None
        if exc.path is not None:  # a checkpoint (--network-policy)
            raise InputError(f"{exc.path}: {exc.detail}", field="network_policy") from None
        raise InputError(exc.detail, field=flag.get(exc.field or "", "network")) from None


class _Dropping(logging.handlers.QueueHandler):
    """Puts a record in a bounded queue for the writer thread, or drops it when the queue is full: logging wrote to
    stderr on the event loop, so a reader of stderr that paused for 12 s (a pipe to a stalled log shipper) held
    every placement and the health check as long (an overload review); now only the writer waits. The writer says
    how many lines were dropped before its next one."""

    def __init__(self, size: int) -> None:
        import queue

        super().__init__(queue.Queue(size))
        self.dropped = 0

    def enqueue(self, record: logging.LogRecord) -> None:
        import queue

        try:
            self.queue.put_nowait(record)
        except queue.Full:
            self.dropped += 1


class _Writer(StderrHandler):
    def __init__(self, source: _Dropping) -> None:
        super().__init__()
        self.source = source

    def emit(self, record: logging.LogRecord) -> None:
        lock = self.source.lock  # enqueue counts under it (logging.Handler.handle holds it): no count lost between
        with lock if lock is not None else contextlib.nullcontext():  # reading and resetting
            dropped, self.source.dropped = self.source.dropped, 0
        if dropped:
            try:  # a broken pipe here ended the writer thread, and every line after was dropped unsaid
                sys.stderr.write(f"dcplace serve: {dropped} log line(s) dropped: stderr was not read fast enough\n")
            except Exception:
                self.handleError(record)
        super().emit(record)


class _Listener(logging.handlers.QueueListener):
    """A queue listener whose stop gives up after a few seconds: its stop marker went in with ``put_nowait``, which
    raised ``queue.Full`` out of ``serve``'s shutdown when a stalled stderr had filled the queue (no stopped line, a
    traceback), and its join waited for that stderr for ever (a review)."""

    put_s = 2.0
    join_s = 5.0

    def enqueue_sentinel(self) -> None:
        import queue

        with contextlib.suppress(queue.Full):
            self.queue.put(None, timeout=self.put_s)  # type: ignore[attr-defined]  # a Queue; None: the marker

    def stop(self) -> None:
        self.enqueue_sentinel()
        if self._thread is not None:
            self._thread.join(self.join_s)  # a daemon thread: one still blocked on stderr does not hold the exit
            self._thread = None


class _Logs:
    """dcplace's loggers at ``level``, one timestamped line each on stderr (uvicorn configures only its own), written
    by a thread of their own through a bounded queue (:class:`_Dropping`), from the moment the service is about to
    serve until :meth:`stop` (its queue written out, the handler removed). They still propagate: the root logger
    has no handler unless an application gave it one, and then it should see them too."""

    def __init__(self, level: int, queue_size: int = 10_000) -> None:
        self.root = logging.getLogger("dcplace")
        self.level = self.root.level  # given back at stop: a process that serves twice (tests) or goes on
        self.root.setLevel(level)
        self.handler = _Dropping(queue_size)
        writer = _Writer(self.handler)
        utc = logging.Formatter("%(asctime)s.%(msecs)03dZ %(levelname)s %(name)s: %(message)s", "%Y-%m-%dT%H:%M:%S")
        utc.converter = time.gmtime  # UTC and labelled, as the journal and the start line (it was local, unlabelled)
        writer.setFormatter(utc)
        self.listener = _Listener(self.handler.queue, writer)
        self.listener.start()
        self.root.addHandler(self.handler)

    def stop(self) -> None:
        self.root.removeHandler(self.handler)
        self.root.setLevel(self.level)
        self.listener.stop()


def _register(engine: PlacementEngine, path: Path) -> None:
    """``--machines``: register the file's machines with one commit, once per content of the file: it is marked by
    its hash in the same commit, so a restart with the same file skips it (registering it again would bring back
    the machines removed since); a changed file registers the machines it adds. An error names the file, line and
    field."""
    from dcplace.engine import read_machines_at

    specs, lines = read_machines_at(path)
    mark = _new_file(engine, path, "machines", "--machines", "registered", "POST /machines/batch")
    if mark is None:
        return
    gone, changed = _changed_machines(engine, specs)
    for ids, what in ((gone, "removed since (POST /machines registers one again)"),
                      (changed, "registered now with another capacity or rack than the file gives (PATCH "
                                "/machines/{id} changes one)")):  # fmt: skip
        if not ids:  # an edited file that still listed a machine removed since brought it back, empty and active;
            continue  # one that listed a machine otherwise than it is registered refused the start (a restart loop)
        keep = [i for i, m in enumerate(specs) if m.id not in ids]
        specs, lines = [specs[i] for i in keep], None if lines is None else [lines[i] for i in keep]
        named = ", ".join(sorted(ids)[:5]) + (f" and {len(ids) - 5} more" if len(ids) > 5 else "")
        typer.echo(f"--machines {path}: skipped {len(ids)} machine(s) {what}: {named}", err=True)
    added, skipped = engine.add_machines(specs, mark=mark, source=str(path), lines=lines)
    again = f" ({skipped} already registered)" if skipped else ""
    typer.echo(f"registered {len(added)} machine(s) from {path}{again}", err=True)


def _watch_the_database(engine: PlacementEngine | _Healthy, server: Any, every_s: float = 2.0) -> None:
    """``--exit-on-failure`` on an idle service: a daemon thread checks the database every ``every_s`` (its file
    deleted or replaced is noticed by the check itself), so the stop does not wait for the next request."""
    import threading
    import time

    from dcplace.engine import StoreError

    def watch() -> None:
        while not server.should_exit:
            time.sleep(every_s)
            try:
                engine.health()
            except StoreError:
                server.should_exit = True
                return

    threading.Thread(target=watch, name="dcplace-watch-database", daemon=True).start()


def _changed_machines(engine: PlacementEngine, specs: list[Any]) -> tuple[set[str], set[str]]:
    """The machines of ``specs`` that the journal says were removed and are not registered now (none where the engine
    keeps no journal), and those registered now otherwise than ``specs`` has them (changed since: ``PATCH
    /machines``, or removed and registered again with another shape), which a start refused (a restart loop)."""
    try:
        removed = {e.machine for e in engine.journal(event="machine-removed", limit=None)}
    except InputError:  # no journal: nothing is known of removals
        removed = set()
    present = {m.id: m for m in engine.machines()}
    gone = {m.id for m in specs if m.id in removed and m.id not in present}

    def per_node(value: Any) -> list[float] | None:
        try:
            return [float(x) for x in value] if isinstance(value, list | tuple) else [float(value)] * engine.numa
        except (TypeError, ValueError):  # not a number: the registration says so, naming the file and field
            return None

    changed = set()
    for m in specs:
        now = present.get(m.id)
        cpu, mem = per_node(m.cpu), per_node(m.mem)
        if now is not None and cpu is not None and mem is not None and (cpu, mem, m.rack) != (now.cpu, now.mem,
                                                                                                now.rack):  # fmt: skip
            changed.add(m.id)
    return gone, changed


def _new_file(engine: PlacementEngine, path: Path, kind: str, flag: str, done: str, route: str) -> str | None:
    """The mark of ``path``'s content (its hash) to commit with what it records, or None, said on stderr, when a
    file of that content was recorded before."""
    import hashlib

    mark = f"{kind}:" + hashlib.sha256(path.read_bytes()).hexdigest()
    when = engine.imported_before(mark)
    if when is None:
        return mark
    typer.echo(f"{flag} {path}: this file was {done} at {when}; skipped ({route} adds others)", err=True)
    return None


def _import_once(engine: PlacementEngine, path: Path, db: Path) -> None:
    """``--import``: record the file's allocations once per database. The file is marked by its hash in the same
    commit as its VMs, so a restart with the flag skips it: importing it again would bring back the VMs released
    since (and fail on those moved or on a machine failed since)."""
    from dcplace.engine import read_allocations_at

    rows, lines = read_allocations_at(path)
    mark = _new_file(engine, path, "imported", "--import", f"imported into {db}", "POST /allocations")
    if mark is None:
        return
    n = engine.import_allocations(rows, str(path), lines, mark=mark)
    again = f" ({len(rows) - n} already recorded)" if n < len(rows) else ""
    typer.echo(f"imported {n} allocation(s) from {path}{again}", err=True)


def stream(
    trace: str, pms: int, policy: str, double_threshold: float, seed: int, release: bool, max_requests: int,
    samples: int, json_out: bool,
) -> dict[str, Any]:  # fmt: skip
    """``simulate stream``: the whole trace from its first request through the live engine; returns the record."""
    from dcplace.cluster.numa import NumaCluster
    from dcplace.engine.stream import engine_for, run_stream
    from dcplace.policies.numa_heuristics import warm_up_jit
    from dcplace.sim.episodes import prepare
    from dcplace.workload.traces import load_trace

    try:
        table = load_trace(trace, seed=seed)
        prepared = prepare(table, double_threshold)
        engine = engine_for(NumaCluster.uniform(pms), policy, seed)
        warm_up_jit()
        res = run_stream(engine, prepared, max_requests=max_requests, samples=samples, release=release)
        engine.check_invariants()
    except InputError as exc:
        _fail(exc)
    rec: dict[str, Any] = {"trace": trace, "double_threshold": double_threshold, "release": release,
                           **res.as_record()}  # fmt: skip
    if res.requests and not res.accepted:  # with --json too: a record of zeros read like a result
        said = ", ".join(f"{k} {v}" for k, v in res.rejections.items())
        typer.echo(f"warning: no request was placed (by reason: {said}): the cluster cannot host the trace's VMs; use "
                   "more or larger --pms", err=True)  # fmt: skip
    if json_out:
        typer.echo(json.dumps(rec))
        return rec
    why = ", ".join(f"{k} {v}" for k, v in res.rejections.items()) or "none"
    typer.echo(
        f"{res.policy} on {trace}, {pms} machines, stream of {res.requests} requests: accepted {res.accepted} "
        f"({res.acceptance:.2%}), rejected {res.rejected} (by reason: {why}); first rejection after "
        f"{res.first_rejection} placements; {res.wall_s:.2f} s ({res.requests / max(res.wall_s, 1e-9):,.0f} requests/s)"
    )
    if res.samples:
        last = res.samples[-1]
        peak = max(s.machines_in_use for s in res.samples)
        machines = f"{last.machines_in_use} machine{'s' if last.machines_in_use != 1 else ''}"
        typer.echo(f"  at the end: {last.vms} VMs on {machines}, CPU {last.cpu_alloc:.1%}, "
                   f"memory {last.mem_alloc:.1%} allocated; at most {peak} machines in use")  # fmt: skip
    return rec


app = typer.Typer(add_completion=False, rich_markup_mode=None)
app.command("serve")(serve)


def _reread_on_sighup(held: Any, path: Path | None) -> None:
    """On SIGHUP, read ``path`` again and take its tokens (a token replaced without a restart: add the new one,
    SIGHUP, move the clients, remove the old one, SIGHUP); a file that is refused keeps the tokens in use, and says
    why on stderr. Without a token file (``path`` None) a SIGHUP only says so: there is nothing to re-read, and
    the service goes on. The handler runs in the main thread between two steps of whatever runs there (the event loop):
    it writes with ``os.write`` (a buffered write it interrupted would raise on a second one) and lets nothing
    escape."""
    import os
    import signal

    from dcplace.service.auth import read_tokens

    def say(text: str) -> None:
        with contextlib.suppress(OSError):
            os.write(2, f"dcplace serve: {text}\n".encode(errors="replace"))

    def reread(signum: int, frame: object) -> None:
        if path is None:
            say("SIGHUP: no --token-file to re-read; nothing changed")
            return
        try:
            new = read_tokens(path)
            held.replace(new)
        except Exception as exc:  # a refused file, or anything else: the tokens in use stay
            say(f"warning: SIGHUP: kept the {len(held)} token(s) in use: {exc}")
            return
        say(f"SIGHUP: {len(new)} token(s) from {path}")

    if hasattr(signal, "SIGHUP"):
        signal.signal(signal.SIGHUP, reread)


def _tls_options(cert: Path | None, key: Path | None, client_ca: Path | None) -> dict[str, Any]:
    """uvicorn's TLS settings for the files :func:`dcplace.service.auth.tls_context` checked (none: plain HTTP)."""
    import ssl

    if cert is None:
        return {}
    out: dict[str, Any] = {"ssl_certfile": str(cert), "ssl_keyfile": str(key)}
    if client_ca is not None:
        out |= {"ssl_ca_certs": str(client_ca), "ssl_cert_reqs": ssl.CERT_REQUIRED}
    return out


def _allowed_hosts(host: str, extra: list[str]) -> tuple[str, ...] | None:
    """The ``Host`` names the service answers to: on a loopback address localhost's names, the address and ``extra``
    (a web page rebinding its DNS name to the loopback address is refused); elsewhere exactly ``extra`` if given
    (then every name and address clients use, probes and scrapes included), else any (the address is exposed
    anyway, and kube-scheduler calls it by its Service's name)."""
    from dcplace.service.app import LOOPBACK_HOSTS, is_loopback

    names = tuple(h.strip().lower() for h in extra if h.strip())
    if is_loopback(host):
        return (*LOOPBACK_HOSTS, host.strip("[]").lower(), *names)
    return names or None
