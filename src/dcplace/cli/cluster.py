"""Operate on a cluster database offline: re-optimise, evacuate, reconcile, move, export, back up, plan, its history.

Re-optimise the machines in use, evacuate a machine, make the records what the cluster runs (reconcile), record a
migration done outside dcplace (move), write its allocations and machines in the import forms (export), back the
database up, plan how many machines to add, read its journal, write its demand as a trace, write its state as it
was at a past moment.

The database is the one ``dcplace serve --db`` keeps. ``reoptimise``, ``evacuate``, ``reconcile`` and ``move``
change it (stop the service first: one process owns a database; the service has the same operations over HTTP);
every plan is verified by the independent checker before it is applied, and ``--dry-run`` prints the plan and
changes nothing. ``export``, ``backup``, ``plan``, ``journal``, ``trace`` and ``rewind`` only read it, also while
the service runs.
"""

from __future__ import annotations

import json
import logging
import os
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

import typer

from dcplace.atomic import OutputError, unwritable
from dcplace.cli.common import JSON_HELP, StderrHandler, outcome_failed, unwritten
from dcplace.cli.compare import FromClusterState
from dcplace.cli.options import config_command
from dcplace.cli.serve import _fail
from dcplace.config import check
from dcplace.engine.store import StoreError
from dcplace.errors import InputError

OUT_HELP = ("a folder: result.json (what --json prints), episodes.csv (each number of machines, window and every "
            "metric) and config.toml")  # fmt: skip

app = typer.Typer(add_completion=False, no_args_is_help=True, help=__doc__.split("\n", 1)[0], rich_markup_mode=None)

Db = Annotated[Path, typer.Option(help="SQLite database of the cluster (from `dcplace serve --db`)")]
JsonOut = Annotated[bool, typer.Option("--json", help="print the report as one JSON object")]


def _unwritable_db(db: Path) -> str | None:
    """Why the database ``db`` cannot be written (None: it can)."""
    from dcplace.engine.store import read_only_mount

    if read_only_mount(db.parent):
        return "its file system is mounted read-only"
    if not os.access(db, os.W_OK) or not os.access(db.parent, os.W_OK | os.X_OK):
        return "permission denied"
    return None


def _dry_run_copy(db: Path, why: str) -> Path:
    """A consistent copy of ``db`` (SQLite's backup, read-only) in a folder removed when the command ends: what a
    dry run on a file it cannot write reads (it changes nothing, yet opening the file writes its notes)."""
    import atexit
    import shutil
    import tempfile

    from dcplace.engine.store import backup_database

    scratch = Path(tempfile.mkdtemp(prefix="dcplace-dry-run-"))
    atexit.register(shutil.rmtree, scratch, ignore_errors=True)
    copy = scratch / db.name
    backup_database(db, copy)
    typer.echo(f"note: {db} cannot be written ({why}): the dry run reads a copy of it", err=True)
    return copy


def _open(db: Path, dry_run: bool = False) -> Any:
    """The engine on ``db``, refused where the file cannot be written; a ``dry_run`` there (it changes nothing)
    runs on a consistent copy instead (a review found dry runs refused on a read-only mount)."""
    from dcplace.engine import PlacementEngine

    _store_log_says_warnings_only()

    if not db.exists():
        raise InputError(f"{db} does not exist (a cluster's database is made by `dcplace serve --db`)", field="db")
    if not db.is_file():
        raise InputError(f"{db} is not a database file", field="db")
    why = _unwritable_db(db)
    if why is not None:
        if not dry_run:
            raise InputError(f"cannot write {db} ({why}): the cluster command changes it", field="db")
        db = _dry_run_copy(db, why)
    # an empty or foreign file is refused before anything is written to it (SqliteStore)
    engine = PlacementEngine.open(db)
    for warning in engine.load_warnings:
        typer.echo(f"warning: {warning}", err=True)
    return engine


class _BelowCritical(logging.Filter):
    def filter(self, record: logging.LogRecord) -> bool:
        return record.levelno < logging.CRITICAL


def _store_log_says_warnings_only() -> None:
    """The store's warnings (a lock held by another program, waited for) on stderr as ``warning: ...``; not its
    fail-stop line, which the command says itself as its one sentence (both were printed, two lines)."""
    logger = logging.getLogger("dcplace.engine.store")
    if any(getattr(h, "_dcplace_cli", False) for h in logger.handlers):
        return
    handler = StderrHandler()
    handler.setFormatter(logging.Formatter("warning: %(message)s"))
    handler.addFilter(_BelowCritical())
    handler._dcplace_cli = True  # type: ignore[attr-defined]
    logger.addHandler(handler)
    logger.propagate = False


def _not_written(out: Path, exc: OSError) -> InputError:
    """OUT could not be written (an :class:`~dcplace.atomic.OutputError`: a full disk, a read-only mount): one
    sentence naming OUT; the atomic write left nothing behind (any other OSError is a bug, a traceback)."""
    said = unwritable(exc) or InputError(f"{out} could not be written ({exc.strerror or exc}); nothing was written")
    return InputError(f"OUT: {said.detail}")


def _report(rep: Any, json_out: bool, dry_run: bool = False) -> None:
    if json_out:
        typer.echo(json.dumps(rep.as_dict()))
        return
    for m in rep.moves:
        src = m.source or "(lost)"
        node = "all" if m.node is None else m.node
        typer.echo(f"  {m.vm}: {src} -> {m.machine} node {node}{' (staging)' if m.staging else ''}")
    verb = "planned (dry run)" if dry_run else "applied"
    bound = "" if rep.bound is None else f" (lower bound {rep.bound}{', proven' if rep.bound_proven else ''})"
    dropped = f"; dropped (fit nowhere): {', '.join(rep.dropped)}" if rep.dropped else ""
    held = ", ".join(f"{n} {why}" for why, n in rep.held.items() if n)
    held = f"; held back: {held} of {rep.vms} VMs" if held else ""
    n = rep.planned if dry_run else rep.applied
    typer.echo(
        f"{rep.trigger}: {n} move{'' if n == 1 else 's'} {verb} ({rep.staging} staging, "
        f"{rep.gb_moved:,.0f} GB copied); machines in use {rep.machines_before} -> "
        f"{rep.machines_target if dry_run else rep.machines_after}{bound}; verified: "
        f"{'yes' if rep.verified else 'NO'}; {rep.reason}{held}{dropped}"
    )


def _judge(rep: Any) -> None:
    """Exit 3 after the report when the event left work undone: a cron job went on after a drain that left VMs
    behind, a failure that dropped VMs, or a plan that was not verified (exit 0 said all was well)."""
    what = []
    if not rep.verified:
        what.append("the plan was not verified")
    if not rep.complete:
        what.append(f"it did not finish ({rep.reason})")
    if rep.dropped:
        what.append(f"{len(rep.dropped)} VM(s) fit nowhere and were dropped")
    if what:
        outcome_failed(f"{rep.trigger}: " + "; ".join(what))


@app.command("reoptimise")
def reoptimise(
    db: Db,
    selection: Annotated[str, typer.Option(help="which VMs may move: all, or underused")] = "all",
    underused_below: Annotated[float, typer.Option(help="fill below which a machine is underused, in (0, 1]")] = 0.5,
    migration_weight: Annotated[float, typer.Option(help="cost of a move: weight x memory / a machine's")] = 1.0,
    max_moves: Annotated[int | None, typer.Option(help="budget: at most this many moves")] = None,
    max_gb: Annotated[float | None, typer.Option(help="budget: at most this much memory copied, GB")] = None,
    time_limit: Annotated[float, typer.Option(help="optimiser wall-clock limit, seconds")] = 10.0,
    bound: Annotated[bool, typer.Option(help="also prove the typed relaxation's lower bound (SCIP)")] = False,
    improve: Annotated[float, typer.Option(help="seconds of CP-SAT after the heuristic (within --time-limit)")] = 0.0,
    dry_run: Annotated[bool, typer.Option(help="plan only; change nothing")] = False,
    json_out: JsonOut = False,
) -> None:  # fmt: skip
    """One re-optimisation event: re-solve the machines in use with migration costs (pinned VMs stay) and apply
    the verified migration plan."""
    from dcplace.engine import ReoptPolicy

    try:
        policy = ReoptPolicy(selection=selection, underused_below=underused_below,  # type: ignore[arg-type]
                             migration_weight=migration_weight, max_moves=max_moves, max_gb=max_gb,
                             time_limit_s=time_limit, bound=bound, improve_s=improve)  # fmt: skip
        engine = _open(db, dry_run)
        try:
            rep = engine.reoptimise(policy, now=time.time(), execute=not dry_run)  # the service's clock
        finally:
            engine.close()
    except InputError as exc:
        exc.field = {"time_limit_s": "time_limit", "improve_s": "improve"}.get(exc.field or "", exc.field)
        _fail(exc)
    except StoreError as exc:
        _fail(unwritten(db, exc))
    _report(rep, json_out, dry_run)
    _judge(rep)


@app.command("evacuate")
def evacuate(
    machine: Annotated[str, typer.Argument(help="the machine's id", metavar="MACHINE")],
    db: Db,
    failed: Annotated[bool, typer.Option(help="the machine failed (its VMs restart); default: drain")] = False,
    dry_run: Annotated[bool, typer.Option(help="print the plan, change nothing")] = False,
    json_out: JsonOut = False,
) -> None:  # fmt: skip
    """Drain a machine (live-migrate its VMs away) or mark it failed (place its VMs again), with the fewest moves
    through a verified plan; the machine stays drained or failed (`dcplace serve`'s /activate undoes it)."""
    try:
        engine = _open(db, dry_run)
        try:
            rep = engine.evacuate(machine, failed=failed, now=time.time(), execute=not dry_run)
        finally:
            engine.close()
    except InputError as exc:
        if exc.field == "machine":  # the positional argument, not a flag
            exc = InputError(f"MACHINE: {exc.detail}")
        _fail(exc)
    except StoreError as exc:
        _fail(unwritten(db, exc))
    _report(rep, json_out, dry_run)
    _judge(rep)


@app.command("reconcile")
def reconcile(
    inventory: Annotated[Path, typer.Argument(help="every VM the cluster runs: a CSV or JSON file as `serve "
                                              "--import` reads", metavar="INVENTORY")],
    db: Db,
    dry_run: Annotated[bool, typer.Option(help="only say what would change")] = False,
    as_of: Annotated[str | None, typer.Option(help="when INVENTORY was taken (Unix seconds or ISO 8601, UTC "
                                                   "unless it says otherwise): VMs (or network jobs) whose records "
                                                   "changed since are left as they are")] = None,
    force: Annotated[bool, typer.Option(help="release more than half of the VMs recorded if INVENTORY says so "
                                             "(refused otherwise: an empty or truncated file)")] = False,
    topology: Annotated[str | None, typer.Option(help="a network database: its topology file, where it was not "
                                                      "written for a preset")] = None,
    json_out: JsonOut = False,
) -> None:  # fmt: skip
    """Make the recorded allocations what the cluster runs (drift: VMs made, deleted, resized or migrated outside
    dcplace): VMs not in INVENTORY are released, new ones recorded, VMs elsewhere moved (journalled as moves),
    VMs of another size or uid recorded anew; a row's pinned or uid is set where given, kept where not. All or
    nothing in one commit; machines are not touched (register new ones first). Stop `dcplace serve` first, or
    send the same rows to its POST /allocations/reconcile. A network database (`serve --network-db`) takes a JSON
    INVENTORY of jobs as `GET /jobs` lists them (`links`, `hold` optional): jobs not in it are released, new ones
    recorded where it says, jobs elsewhere recorded anew (its POST /network/reconcile does the same)."""
    from dcplace.engine import read_allocations_at
    from dcplace.engine.journal import parse_time
    from dcplace.engine.store import is_network_database

    if db.is_file() and is_network_database(db):
        _reconcile_network(inventory, db, topology, dry_run, as_of, force, json_out)
        return
    try:
        if topology is not None and db.is_file():
            raise InputError(f"does not apply: {db} is a cluster database (a network one, serve --network-db, "
                             "takes it)", field="topology")  # fmt: skip
        try:
            when = None if as_of is None else parse_time(as_of)
        except InputError as e:
            raise InputError(e.detail, field="as_of") from None
        rows, lines = read_allocations_at(inventory)
        engine = _open(db, dry_run)
        try:
            rep = engine.reconcile(
                rows, source=str(inventory), lines=lines, execute=not dry_run, now=time.time(), as_of=when, force=force
            )
        finally:
            engine.close()
    except InputError as exc:
        _fail(exc)
    except StoreError as exc:
        _fail(unwritten(db, exc))
    if json_out:
        typer.echo(json.dumps(rep.as_dict()))
        return
    for vm, src, src_node, dst, dst_node in rep.moved:
        typer.echo(f"  moved {vm}: {src} node {'all' if src_node is None else src_node} -> {dst} node "
                   f"{'all' if dst_node is None else dst_node}")  # fmt: skip
    _say_ids(
        (
            ("released", rep.removed),
            ("recorded", rep.added),
            ("recorded anew", rep.replaced),
            ("pin changed", rep.repinned),
            ("left as recorded (changed since --as-of)", rep.newer),
        )
    )
    verb = "would change (dry run)" if dry_run else "changed"
    typer.echo(f"{verb}: {len(rep.added)} recorded, {len(rep.removed)} released, {len(rep.moved)} moved, "
               f"{len(rep.replaced)} recorded anew, {len(rep.repinned)} pins; {rep.unchanged} unchanged")  # fmt: skip


def _say_ids(groups: Any) -> None:
    """A reconcile's ids by what happened to them, the first 10 of each."""
    for what, ids in groups:
        if ids:
            shown = ", ".join(ids[:10]) + (f" and {len(ids) - 10} more" if len(ids) > 10 else "")
            typer.echo(f"  {what}: {shown}")


def _reconcile_network(inventory: Path, db: Path, topology: str | None, dry_run: bool, as_of: str | None, force: bool,
                       json_out: bool) -> None:  # fmt: skip
    """``cluster reconcile`` of a network database (NetworkEngine.reconcile)."""
    from dcplace.engine.journal import parse_time
    from dcplace.engine.network import NetworkEngine, last_policy, read_network_inventory, stored_preset

    try:
        try:
            when = None if as_of is None else parse_time(as_of)
        except InputError as e:
            raise InputError(e.detail, field="as_of") from None
        rows = read_network_inventory(inventory)
        where = topology if topology is not None else stored_preset(db)
        if where is None:
            raise InputError(f"{db} was written for a topology file, not a preset: pass it with --topology",
                             field="topology")  # fmt: skip
        policy = last_policy(db)  # routed as the service routes (NALB and NULB: their own routing)
        if policy is None:
            typer.echo(f"note: rows without links are routed as tetris-bw routes them: {db}'s journal no longer says "
                       "which policy its service runs", err=True)  # fmt: skip
            policy = "tetris-bw"
        try:
            policy = NetworkEngine(where, policy).policy
        except InputError as e:
            typer.echo(f"note: rows without links are routed as tetris-bw routes them: the service's policy "
                       f"{policy!r} cannot be made here ({e})", err=True)  # fmt: skip
            policy = "tetris-bw"
        why = _unwritable_db(db) if dry_run else None
        engine = NetworkEngine.open(_dry_run_copy(db, why) if why else db, where, policy, started=False)  # no start
        try:
            rep = engine.reconcile(rows, execute=not dry_run, force=force, as_of=when)
        except InputError as e:
            if e.field is None or not e.field.startswith("jobs"):
                raise
            raise type(e)(e.detail, path=inventory, field=e.field) from None  # the row is the file's
        finally:
            engine.close()
    except InputError as exc:
        _fail(exc)
    except StoreError as exc:
        _fail(unwritten(db, exc))
    if json_out:
        typer.echo(json.dumps(rep.as_dict()))
        return
    _say_ids((("released", rep.released), ("recorded", rep.recorded), ("recorded anew", rep.changed),
              ("left as recorded (changed since --as-of)", rep.newer)))  # fmt: skip
    verb = "would change (dry run)" if dry_run else "changed"
    typer.echo(f"{verb}: {len(rep.recorded)} recorded, {len(rep.released)} released, {len(rep.changed)} recorded "
               f"anew; {rep.kept} unchanged")  # fmt: skip


@app.command("export")
def export(
    out: Annotated[Path, typer.Argument(help="the allocations to write, .csv or .json (must not exist)",
                                        metavar="OUT")],
    db: Db,
    machines: Annotated[Path | None, typer.Option(help="also write the machines here, .csv or .json (must not "
                                                       "exist), as `serve --machines` reads them")] = None,
    topology: Annotated[str | None, typer.Option(help="a network database: its topology file, where it was not "
                                                      "written for a preset")] = None,
) -> None:  # fmt: skip
    """Write the cluster's allocations as `serve --import`, `POST /allocations` and `cluster reconcile` read them
    (vm, machine, node, cpu, mem, pinned, uid), and with --machines its machines as `serve --machines` reads them:
    a cluster moved to a new database, or an inventory to edit and reconcile. Read-only (an online backup), also
    while `dcplace serve` runs on DB. A network database (`serve --network-db`): its running jobs as `GET /jobs`
    lists them, with their hold, to a .json OUT that its `cluster reconcile` and POST /network/reconcile read."""
    from dcplace.engine import PlacementEngine, write_allocations
    from dcplace.engine.store import is_network_database

    if db.is_file() and is_network_database(db):
        _export_network(out, db, machines, topology)
        return
    try:
        if topology is not None and db.is_file():
            raise InputError(f"does not apply: {db} is a cluster database (a network one, serve --network-db, "
                             "takes it)", field="topology")  # fmt: skip
        for path, flag in ((out, "OUT"), (machines, "--machines")):
            if path is None:
                continue
            if path.exists() or path.is_symlink():
                raise InputError(f"{flag}: {path} already exists; choose another name")
            if not path.parent.is_dir():
                raise InputError(f"{flag}: the folder {path.parent} does not exist")
            if path.suffix.lower() not in (".csv", ".json"):
                raise InputError(f"{flag}: {path} must end in .csv or .json (which form to write)")
        state = PlacementEngine.read_snapshot(db)
    except InputError as exc:
        _fail(exc)
    rows = [{"vm": v["id"], "machine": v["machine"], "node": v["node"], "cpu": v["cpu"], "mem": v["mem"],
             "pinned": v["pinned"], "uid": v["uid"]} for v in state["vms"]]  # fmt: skip
    try:
        write_allocations(rows, out)
    except OutputError as exc:
        _fail(_not_written(out, exc))
    if machines is not None:
        try:
            _write_machines(state["machines"], machines)
        except OutputError as exc:  # all or nothing: the allocations written just now go too
            out.unlink(missing_ok=True)
            why = exc.strerror or str(exc)
            _fail(InputError(f"--machines: {machines} could not be written ({why}); nothing was written"))
    typer.echo(
        f"wrote {len(rows):,} allocations to {out}"
        + (f" and {len(state['machines']):,} machines to {machines}" if machines is not None else "")
    )


def _export_network(out: Path, db: Path, machines: Path | None, topology: str | None) -> None:
    """``cluster export`` of a network database: its running jobs, as JSON."""
    from dcplace.atomic import write_text
    from dcplace.engine.network import read_network_jobs

    try:
        if machines is not None:
            raise InputError(f"does not apply: {db} is a network database, whose servers are its topology's",
                             field="machines")  # fmt: skip
        if out.exists() or out.is_symlink():
            raise InputError(f"OUT: {out} already exists; choose another name")
        if not out.parent.is_dir():
            raise InputError(f"OUT: the folder {out.parent} does not exist")
        if out.suffix.lower() != ".json":
            raise InputError(f"OUT: {out} must end in .json (a network database's jobs are JSON)")
        jobs = read_network_jobs(db, topology)
    except InputError as exc:
        _fail(exc)
    try:
        write_text(out, json.dumps(jobs, indent=1) + "\n")
    except OutputError as exc:
        _fail(_not_written(out, exc))
    typer.echo(f"wrote {len(jobs):,} running jobs to {out}")


def _write_machines(machines: list[dict[str, Any]], path: Path) -> None:
    """Machines (the snapshot's form) as ``serve --machines`` reads them; a failed or drained machine's status is
    not part of that form (it registers machines active)."""
    from dcplace.atomic import write_text

    specs = [{"id": m["id"], "cpu": [c for c, _ in m["capacity"]], "mem": [g for _, g in m["capacity"]],
              "rack": m["rack"]} for m in machines]  # fmt: skip
    if path.suffix.lower() == ".json":
        write_text(path, json.dumps(specs, indent=1) + "\n")
        return
    import csv
    import io

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["id", "cpu", "mem", "rack"])
    for m in specs:
        w.writerow([m["id"], ";".join(repr(float(c)) for c in m["cpu"]), ";".join(repr(float(g)) for g in m["mem"]),
                    m["rack"] or ""])  # fmt: skip
    write_text(path, buf.getvalue())


@app.command("move")
def move(
    vm: Annotated[str, typer.Argument(help="the VM's id", metavar="VM")],
    machine: Annotated[str, typer.Argument(help="the machine it now runs on", metavar="MACHINE")],
    db: Db,
    node: Annotated[str, typer.Option(help="the NUMA node it runs on; 'all' for a VM split over every node")],
    dry_run: Annotated[bool, typer.Option(help="only say whether it would fit there")] = False,
) -> None:  # fmt: skip
    """Record that VM now runs on MACHINE: a live migration done outside dcplace (by hand, or a move of a
    re-optimisation plan carried out by your own tooling). It keeps its size, pin and uid; journalled as moved.
    Stop `dcplace serve` first, or use its POST /vms/{id}/move."""
    try:
        if node.strip() != "all" and not node.strip().isdigit():
            raise InputError(f"must be a NUMA node number or 'all', got {node!r}", field="node")
        engine = _open(db, dry_run)
        try:
            at_node = None if node.strip() == "all" else int(node)
            rec = engine.move(vm, machine, at_node, now=time.time(), execute=not dry_run)
        finally:
            engine.close()
    except InputError as exc:
        if exc.field in ("vm", "machine"):  # positional arguments, not flags
            exc = InputError(f"{exc.field.upper()}: {exc.detail}")
        _fail(exc)
    except StoreError as exc:
        _fail(unwritten(db, exc))
    where = f"{rec.machine} node {'all' if rec.node is None else rec.node}"
    typer.echo(f"{rec.id} would fit on {where} (dry run)" if dry_run else f"{rec.id} now on {where}")


@app.command("backup")
def backup(
    out: Annotated[Path, typer.Argument(help="the copy to write (must not exist)", metavar="OUT")],
    db: Db,
) -> None:  # fmt: skip
    """Copy the cluster database to OUT consistently, also while `dcplace serve` runs on it (SQLite's online
    backup; copying the file alone misses what is still in its -wal file). The copy passes SQLite's integrity
    check before it is put in place. To restore: stop the service, remove DB-wal and DB-shm, copy OUT over DB.
    The network engine's database (`serve --network-db`) is copied the same way."""
    from dcplace.engine.store import backup_database

    try:
        rows = backup_database(db, out)
    except InputError as exc:
        _fail(exc)
    said = (f"{rows['machines']} machines and {rows['vms']} VMs" if "vms" in rows
            else f"{rows['jobs']} network jobs")  # fmt: skip
    typer.echo(f"backed up {said} from {db} to {out}")


@app.command("journal")
def journal(
    db: Db,
    vm: Annotated[str | None, typer.Option(help="only this VM's entries")] = None,
    machine: Annotated[str | None, typer.Option(help="only this machine's (a VM moved away from it included)")]
    = None,
    job: Annotated[str | None, typer.Option(help="a network database: only this job's entries")] = None,
    event: Annotated[str | None, typer.Option(help="only this event: placed, moved, pinned, unpinned, released, "
                                                   "dropped, rejected, machine-added, machine-drained, "
                                                   "machine-active, machine-failed, machine-changed, "
                                                   "machine-removed, "
                                                   "journal-resumed; a network database: placed, rejected, "
                                                   "released, moved, started, resumed, drained, "
                                                   "activated")] = None,
    by: Annotated[str | None, typer.Option(help="only VM entries made for this reason: import, reconcile, reported, "
                                                "resize, reoptimisation, evacuation, failure, bind, assign")] = None,
    after: Annotated[int, typer.Option(help="entries after this seq (the last one read)")] = 0,
    limit: Annotated[int, typer.Option(help="entries at most (1-10,000)")] = 100,
    tail: Annotated[int | None, typer.Option(help="instead: the newest this many (1-10,000), oldest first")] = None,
    json_out: Annotated[bool, typer.Option("--json", help="print {entries, next} as `GET /journal` answers (with "
                                                          "--follow: one entry per line)")] = False,
    follow: Annotated[bool, typer.Option(help="then print each new entry as it is committed, until interrupted "
                                              "(Ctrl-C ends it, exit 0)")] = False,
    every: Annotated[float, typer.Option(help="with --follow: seconds between reads (0.05-3600)")] = 1.0,
) -> None:  # fmt: skip
    """What happened to the cluster, oldest first: VMs placed, moved, pinned, released, dropped, requests
    rejected, machines added, drained, activated, failed, removed (docs/engine.md, "The journal"); of a network
    database (`serve --network-db`), jobs placed, rejected, released and moved, servers drained and activated, and
    the engine's starts. Read-only, also
    while `dcplace serve` runs on the database; `--follow` goes on printing what happens."""
    from dcplace.engine.journal import MAX_LIMIT, paged, read_journal
    from dcplace.engine.network import read_network_journal
    from dcplace.engine.store import is_network_database

    network = db.is_file() and is_network_database(db)

    def read(since: int, most: int, newest: int | None = None, peek: bool = False) -> list[Any]:
        if network:
            return read_network_journal(db, job=job, event=event, after=since, limit=most, tail=newest, peek=peek)
        return read_journal(db, vm=vm, machine=machine, event=event, after=since, limit=most, tail=newest, peek=peek,
                            by=by)  # fmt: skip

    try:
        if not network and job is not None:
            read(0, 1)  # a file that is no database, or none, is said so first
        for flag, value in (("vm", vm), ("machine", machine), ("by", by)) if network else (("job", job),):
            if value is not None:
                other = ("network database, whose journal is filtered by --job and --event" if network else
                         "cluster database, whose journal has no jobs (serve --network-db has)")  # fmt: skip
                raise InputError(f"does not apply: {db} is a {other}", field=flag)
        if follow and not 0.05 <= every <= 3600:
            raise InputError(f"must be from 0.05 to 3600 seconds, got {every:g}", field="every")
        entries, more = paged(read(after, limit, tail, peek=True), None if tail is not None else limit)
    except InputError as exc:
        _fail(exc)
    if json_out and not follow:
        typer.echo(json.dumps({"entries": [e.as_dict() for e in entries], "next": more}))
        return
    if entries and not json_out:
        if network:
            typer.echo(f"{'seq':>8}  {'time (UTC)':<24}  {'event':<9} {'job':<20} asked (cpu, mem, bw, hold), detail")
        else:
            typer.echo(f"{'seq':>8}  {'time (UTC)':<24}  {'event':<15} {'vm':<20} {'machine/node':<16} size, detail")
    _print_entries(entries, json_out)
    if not follow:
        if not entries:
            typer.echo("no entries" + ("" if after == 0 else f" after seq {after}"), err=True)
        elif more is not None:
            typer.echo(f"more entries: --after {more}", err=True)
        return
    last = entries[-1].seq if entries else after
    try:
        while True:  # what came after the last entry printed, the rest of a first page that was not all included
            time.sleep(every)
            try:
                new = read(last, MAX_LIMIT)
            except InputError as exc:
                _fail(exc)
            _print_entries(new, json_out)
            last = new[-1].seq if new else last
    except KeyboardInterrupt:  # the way a follow ends
        typer.echo(f"stopped following after seq {last}", err=True)


def _print_entries(entries: list[Any], json_out: bool) -> None:
    from dcplace.engine.journal import utc
    from dcplace.engine.network import NetJournalEntry

    for e in entries:
        if json_out:
            typer.echo(json.dumps(e.as_dict()))
            continue
        try:
            when = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(e.at)) + f".{int(e.at % 1 * 1000):03d}Z"
        except (OverflowError, OSError, ValueError):  # a hand-edited time no calendar holds
            when = f"{e.at!r:<24}"
        if isinstance(e, NetJournalEntry):
            asked = (
                ""
                if e.cpu is None
                else f"{e.cpu} cpu {e.mem} mem {e.bw:g} bw" + ("" if e.hold is None else f" hold {e.hold}")
            )
            said = e.reason or e.policy or e.server or ("" if e.off_since is None else f"off since {utc(e.off_since)}")
            said = said or ("" if e.by is None else f"by {e.by}")
            line = f"{e.seq:>8}  {when}  {e.event:<9} {e.job or '-':<20} {asked}{' ' + said if said else ''}"
            typer.echo(line.rstrip())
            continue
        where = "" if e.machine is None else e.machine + ("" if e.node is None else f"/{e.node}")
        size = "" if e.cpu is None else f"{e.cpu:g} cores {e.mem:g} GB{' every node' if e.multi else ''}"
        detail = " " + json.dumps(e.detail, separators=(",", ":")) if e.detail else ""
        typer.echo(f"{e.seq:>8}  {when}  {e.event:<15} {e.vm or '-':<20} {where or '-':<16} {size}{detail}")


def _network_trace(db: Path, out: Path, rejected: str) -> None:
    """``cluster trace`` of a network database: its jobs as a netalloc request file."""
    from dcplace.atomic import atomic_path
    from dcplace.engine.journal import utc
    from dcplace.engine.network import network_trace

    try:
        trace = network_trace(db, rejected)
    except InputError as exc:
        if exc.field == "rejected":
            exc = InputError(f"--rejected: {exc.detail}")
        _fail(exc)
    if not trace.ids:
        _fail(InputError(f"{db} has no jobs in its journal yet: nothing to write", field="db"))
    try:
        with atomic_path(out) as tmp:
            trace.write(tmp)
    except OutputError as exc:
        _fail(_not_written(out, exc))
    ran = sum(x == "placed" for x in trace.live)
    if rejected == "include":
        refused = (f"{trace.rejected:,} rejected" + (f" ({trace.filled:,} without a declared hold given the median, "
                   f"{trace.median_hold:,} arrivals)" if trace.filled else ""))  # fmt: skip
    else:
        refused = f"{trace.rejected:,} rejected jobs left out (--rejected include adds them)"
    typer.echo(f"wrote {len(trace.ids):,} jobs to {out}: {ran:,} placed ({trace.still_running:,} still running), "
               f"{refused}" + (f"; {trace.unmatched:,} releases of jobs placed before the trace's first entry left "
                               "out" if trace.unmatched else ""))  # fmt: skip
    if trace.before:
        typer.echo(f"note: {trace.before:,} jobs running now were placed before the trace's first entry (a "
                   "database from before the journal, pruned, or while it was off): they are not in the trace, and a "
                   "replay starts without them", err=True)  # fmt: skip
    if trace.resumed is not None:
        since = "" if trace.resumed[0] == trace.resumed[1] else f" from {utc(trace.resumed[0])}"
        typer.echo(f"note: the journal was off{since} until {utc(trace.resumed[1])} (serve "
                   "--journal-keep 0); the trace starts there", err=True)  # fmt: skip
    if trace.off_since is not None:
        typer.echo(f"note: the journal has been off since {utc(trace.off_since)} (serve --journal-keep 0): what "
                   "happened since is not in the trace (a job released since is still running in it)",
                   err=True)  # fmt: skip
    if trace.drains or trace.drained_now:
        now = f"; {trace.drained_now:,} are drained now" if trace.drained_now else ""
        typer.echo(f"note: servers were drained or activated {trace.drains:,} times during the trace{now}: a replay "
                   "has every server, so it may decide otherwise", err=True)  # fmt: skip
    if len(trace.policies) > 1:
        typer.echo(f"note: the engine was started with {len(trace.policies)} policies over the trace "
                   f"({', '.join(trace.policies)}): a replay decides with one", err=True)  # fmt: skip
    if trace.restarts:
        times = "once" if trace.restarts == 1 else f"{trace.restarts:,} times"
        typer.echo(f"note: the engine restarted {times} during the trace; a policy drawing at "
                   "random (nalb-strict, nalb, nulb, random) drew anew from its seed at each, so one replay "
                   "decides as it did only up to the first (deterministic ones, such as tetris and tetris-bw, all "
                   "through)",
                   err=True)  # fmt: skip
    policy = trace.policies[-1] if trace.policies and trace.policies[-1] != "unknown" else "P"
    typer.echo(f"replay: dcplace simulate netalloc --topology {trace.topology or 'TOPOLOGY'} --dataset {out} "
               "--setting paper-reject "
               f"--episodes 1 --policy {policy}", err=True)  # fmt: skip


@app.command("trace")
def trace(
    out: Annotated[Path, typer.Argument(help="the trace to write, a CSV file (must not exist)", metavar="OUT")],
    db: Db,
    rejected: Annotated[str | None, typer.Option(
        help="skip: rejected requests left out (the trace is what ran); include: each added (a VM running the "
             "median lifetime of the VMs that left; a network job its declared hold, else the median of those that "
             "ran). Default: skip for a cluster database, include for a network one (policies are compared there "
             "on the share of jobs they accept)")] = None,
) -> None:  # fmt: skip
    """Write the cluster's own demand, from its journal, as a trace every simulator reads
    (`vmid,cpu,memory,time,type`): each placed VM arrives when it was placed and leaves when it was released or
    dropped; VMs still running never leave. Replay it on the cluster's own machines: `dcplace compare cluster
    --db DB --trace OUT --empty ...` (docs/engine.md, "The journal"). Read-only, also while `dcplace serve` runs on
    DB. A network database (`serve --network-db`) gives a request file (`id,cpu,mem,bw,hold,live`) that
    `simulate netalloc --dataset OUT --setting paper-reject` replays: each job's hold is the arrivals until it was
    released, so the engine's policy decides every job as it did live (one drawing at random: up to the engine's
    first restart, which the command names)."""
    from dcplace.atomic import atomic_path
    from dcplace.engine.journal import TRACE_EVENTS, journal_entries, journal_off_since, journal_trace, utc, vms_held
    from dcplace.engine.store import is_network_database
    from dcplace.workload.huawei import write_huawei_events

    try:
        if out.exists() or out.is_symlink():
            raise InputError(f"OUT: {out} already exists; choose another name")
        if not out.parent.is_dir():
            raise InputError(f"OUT: the folder {out.parent} does not exist")
        if out.suffix.lower() != ".csv":  # it is a CSV, whatever the name said (a review found CSV in t.json)
            raise InputError(f"OUT: {out} must end in .csv: the trace is a CSV file")
        if db.is_file() and is_network_database(db):
            return _network_trace(db, out, rejected or "include")
        table, summary = journal_trace(journal_entries(db, TRACE_EVENTS), rejected=rejected or "skip")
        off = journal_off_since(db)
        running_now = vms_held(db)
    except InputError as exc:
        _fail(exc)
    try:
        with atomic_path(out) as tmp:
            write_huawei_events(table, tmp, [summary.names[int(v)] for v in table.vmid])
    except OutputError as exc:  # a full disk: a traceback before
        _fail(_not_written(out, exc))
    span = float(table.arrival[-1] - table.arrival[0])
    spanned = f"{span / 3600:.2f} h" if span >= 3600 else f"{span:.1f} s"
    if rejected == "include":
        refused = (f"{summary.rejected:,} rejected requests included, each given the median lifetime, "
                   f"{summary.lifetime_s:g} s"
                   + (f" ({summary.retries:,} rejections followed by a retry under the same id left out)"
                      if summary.retries else ""))  # fmt: skip
    else:
        refused = f"{summary.rejections:,} rejected requests left out (--rejected include adds them)"
    typer.echo(f"wrote {summary.requests:,} requests over {spanned} to {out}: {summary.still_running:,} still "
               f"running (they never leave in a replay); {refused}"
               + (f"; {summary.unmatched:,} releases or placements without their other half left out (the journal "
                  "was pruned or began after them)" if summary.unmatched else "")
               + (f"; {summary.adjusted:,} departures at their arrival put just after it" if summary.adjusted else "")
               + (f"; {summary.stepped_back:,} entries stamped before the one committed before them (the clock "
                  "stepped back) given its time" if summary.stepped_back else ""))  # fmt: skip
    if off is None and summary.resumed_at is None and running_now > summary.still_running:
        typer.echo(f"note: {running_now - summary.still_running:,} VMs running now are not in the trace: their "
                   "placement is older than the journal's oldest entry (pruned)", err=True)  # fmt: skip
    if off is not None:
        since = "was never on" if off == 0 else f"has been off since {utc(off)}"
        typer.echo(f"note: the journal {since}: what happened since is not in the trace (a VM released since "
                   "looks as if it still runs)", err=True)  # fmt: skip
    if summary.resumed_at is not None:
        typer.echo(f"note: the journal was off until {utc(summary.resumed_at)}; the trace starts there (nothing "
                   "before can be matched with what came after)", err=True)  # fmt: skip
    multi = int(table.multi_numa.sum())
    if multi:
        typer.echo(f"note: {multi:,} VMs spanned every NUMA node of their machine; the trace's multi column says "
                   "which, and a replay keeps it whatever --double-threshold says", err=True)  # fmt: skip


@app.command("rewind")
def rewind(
    out: Annotated[Path, typer.Argument(help="the state to write, a JSON file (must not exist)", metavar="OUT")],
    db: Db,
    seq: Annotated[int | None, typer.Option(help="the state right after this journal entry (0: before the first)")]
    = None,
    at: Annotated[str | None, typer.Option(help="instead: the state at this time, UTC unless it says otherwise "
                                                "('2026-11-28 21:48:00', ISO 8601, or Unix seconds)")] = None,
) -> None:  # fmt: skip
    """Write the cluster's state as it was at a past moment, the state now with its journal's entries since undone:
    what was on a machine when it failed, what a policy would have faced then. OUT has `GET /state/snapshot`'s form:
    `dcplace compare cluster --snapshot OUT` asks which policy would have done best from there. Read-only, also while
    `dcplace serve` runs on DB."""
    from dcplace.atomic import write_text
    from dcplace.engine import PlacementEngine
    from dcplace.engine.journal import parse_time, utc

    try:
        if out.exists() or out.is_symlink():
            raise InputError(f"OUT: {out} already exists; choose another name")
        if not out.parent.is_dir():
            raise InputError(f"OUT: the folder {out.parent} does not exist")
        when = None if at is None else parse_time(at)
        state = PlacementEngine.read_state_at(db, seq=seq, at=when)
    except InputError as exc:
        _fail(exc)
    moment_said = f" after journal entry {state['seq']:,}" + ("" if when is None else f" ({utc(when)})")
    if seq is not None and state["seq"] != seq:
        typer.echo(f"note: entry {seq:,} is inside one operation (a reconcile's or a re-optimisation's entries "
                   f"share their time), so the state is the one after all of it, entry {state['seq']:,}",
                   err=True)  # fmt: skip
    try:
        write_text(out, json.dumps(state))
    except OutputError as exc:
        _fail(_not_written(out, exc))
    typer.echo(f"wrote the state{moment_said}: {len(state['machines']):,} machines, {len(state['vms']):,} VMs, to "
               f"{out}")  # fmt: skip


@dataclass(frozen=True)
class ClusterPlan(FromClusterState):
    """``cluster plan``: the cluster's state with machines added, on the same windows of a trace."""

    add: tuple[int, ...] = (0, 5, 10)
    """numbers of new machines to try, the first the baseline (repeat the flag for each; 0: the cluster as it is)"""
    cpu: tuple[float, ...] = (40.0,)
    """cores of each NUMA node of a new machine (one value for every node, or one per node, repeating the flag)"""
    mem: tuple[float, ...] = (90.0,)
    """GB of each NUMA node of a new machine (as --cpu)"""
    policy: str = "best-fit"
    """the policy that places (a registered name, package.module:ClassName, or name=checkpoint)"""
    target: float | None = None
    """instead of --add: find the fewest new machines with which this share of the requests (0-1, e.g. 0.99) is
    accepted on average over the windows"""
    max_add: int = 1000
    """with --target: the most new machines to try"""

    def __post_init__(self) -> None:
        super().__post_init__()
        check(self.target is None or 0 < self.target <= 1, "target", self.target, "a share above 0 and at most 1")
        check(1 <= self.max_add <= 100_000, "max_add", self.max_add, "from 1 to 100,000")


@app.command("plan")
@config_command(ClusterPlan)
def plan(
    cfg: ClusterPlan,
    json_out: Annotated[bool, typer.Option("--json", help=JSON_HELP)] = False,
    out: Annotated[Path | None, typer.Option(help=OUT_HELP)] = None,
) -> None:
    """How many machines to add: the cluster's state now (its database, read while the service runs, or a
    snapshot) with each number of new machines, the same windows of a trace placed by one policy (the cluster's VMs
    stay, the trace's leave at their departures); requests accepted per window against the first number's, with
    paired 95 % intervals (as `compare cluster`)."""
    from dcplace.bench.compare import plan_capacity
    from dcplace.cli.compare import _progress, _report

    snap = cfg.state()
    cpu = cfg.cpu[0] if len(cfg.cpu) == 1 else cfg.cpu
    mem = cfg.mem[0] if len(cfg.mem) == 1 else cfg.mem
    table = plan_capacity(cfg.add, snap, cpu, mem, cfg.policy, cfg.trace, cfg.requests, cfg.windows, cfg.seed,
                          cfg.double_threshold, on_variant=_progress(cfg.windows, "window"), metric=cfg.metric,
                          target=cfg.target, max_add=cfg.max_add)  # fmt: skip
    _report(table, cfg, json_out, out, "dcplace cluster plan")
    if cfg.target is not None and not json_out:
        fewest = table.context["fewest"]
        typer.echo(f"fewest machines to add for {cfg.target:.2%} of the requests accepted on average: {fewest} "
                   f"({table.context['tried'][str(fewest)]:.2%} accepted with them)")  # fmt: skip
