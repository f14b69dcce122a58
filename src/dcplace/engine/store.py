"""Durable storage of the live cluster: the current machines and allocations, with group commit.

The engine never writes SQL. It hands the store a list of :data:`Change` records per operation (a machine put,
its status, a VM put or delete) and gets a ticket; :meth:`Store.wait` (or :meth:`Store.wait_async`) returns once
that ticket's changes are durable. Storage holds the *current state*, not an event log: restart reads two tables
(:meth:`Store.load`) and rebuilds the arrays with the kernel's own ``place``, so load time grows with the live
state, not with history. Beside them :class:`SqliteStore` appends the *journal* (:mod:`dcplace.engine.journal`):
one row per thing that happened, derived here from each change and the row it replaces, in the same transaction,
pruned to ``journal_keep`` rows and never read to rebuild the state.

:class:`SqliteStore` (the embedded default) keeps one connection in WAL mode with ``synchronous=FULL`` and one
committer thread. Every operation queues its changes under the engine's lock (so queue order is the order the
engine applied them); the committer takes everything queued, writes it in one transaction, commits (one fsync for
the whole group) and then wakes the waiters of every ticket in it. Group commit gives concurrent clients one fsync
per group instead of one each, with the same guarantee: no answer is sent before its change is on disk. A commit that
fails marks the store broken: every waiter and every later operation gets :class:`StoreError`, and the process must
restart and reload what is durable (fail-stop; the in-memory state may hold changes that never became durable, and
none of them was acknowledged).

Another SQL database (PostgreSQL for several engine instances sharing one cluster) needs only a class with the same
four methods: the tables are plain (text keys, integers, reals, a JSON text column) and the one upsert uses the
standard ``INSERT ... ON CONFLICT (id) DO UPDATE`` form, which PostgreSQL accepts unchanged; replace the connection,
the ``?`` placeholders (``%s`` in psycopg) and the WAL pragmas (PostgreSQL commits durably by default,
``synchronous_commit = on``). Several writers would also need the engine's decisions serialised across instances
(``SELECT ... FOR UPDATE`` on the machine row, or one leader); docs/engine.md says more.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import sqlite3
import threading
import time
from bisect import bisect_left
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from dcplace.errors import InputError

log = logging.getLogger(__name__)

COMMIT_BUCKETS = (0.0005, 0.001, 0.002, 0.005, 0.01, 0.02, 0.05, 0.1, 0.25, 1.0, 5.0, float("inf"))
"""Upper bounds (s) of the commit-time histogram (:meth:`SqliteStore.stats`): an fsync takes 0.1-10 ms on a disk
that is well, seconds on one that is failing."""


class StoreError(RuntimeError):
    """The database failed (a commit did not succeed): the state is no longer known to be durable. ``reason``: the
    database's own error (a full disk, a file made read-only)."""

    def __init__(self, message: str, reason: str = "") -> None:
        super().__init__(message)
        self.reason = reason


BUSY_TIMEOUT_S = 5.0
"""How long one SQLite call waits for another program's lock before it reports the database busy (Python's
default); the committer then tries again (:meth:`SqliteStore._begin`), and an open gives up with one sentence."""
LOCK_WARN_S = 10.0
"""How often a commit waiting for another program's lock on the database says so in the log."""
LOCK_CLOSE_S = 30.0
"""How long a closing store's last commit waits for such a lock before it gives up (and fails)."""


def _failed(path: Path, error: BaseException | None) -> StoreError:
    if isinstance(error, StoreError):  # one that says all itself (the file deleted or replaced)
        return StoreError(str(error), error.reason)
    if isinstance(error, sqlite3.OperationalError) and ("locked" in str(error) or "busy" in str(error)):
        return StoreError(f"the database {path} stayed locked by another program ({error}) while the engine was "
                          "stopping, so what was queued last was not written; close that program (an sqlite3 shell "
                          "or a backup tool holding a transaction?) and restart the service", str(error))  # fmt: skip
    return StoreError(f"the database {path} failed ({error}); fix that (free space on its disk, make it writable) "
                      "and restart the service, which reloads exactly what is durable", str(error))  # fmt: skip


@dataclass(frozen=True)
class MachineRow:
    id: str
    slot: int
    rack: str | None
    status: str
    capacity: list[list[float]]
    """``(K, 2)`` CPU cores and memory GB of each NUMA node."""


@dataclass(frozen=True)
class VmRow:
    id: str
    machine: str
    node: int | None
    cpu: float
    mem: float
    multi: bool
    pinned: bool = False
    uid: str | None = None
    """The client's id of this incarnation of the VM (a pod's UID; None: not given): kept from its placement on."""
    by: str | None = None
    """Why, where it was not a client's own call (``import``, ``reconcile``, ``reported``, ``resize``,
    ``reoptimisation``, ``evacuation``, ``failure``, ``bind``, ``assign``): the journal's entry carries it. Not stored
    in the table; a store that keeps no journal may ignore it."""
    moved_at: float | None = None
    """When it last moved (the ``now`` its move was given, in the engine's caller's clock; None: never, or without a
    clock): re-optimisation's cool-down (:attr:`ReoptPolicy.cooldown_s`) outlives a restart. Stored in the table."""


@dataclass(frozen=True)
class MachineStatus:
    id: str
    status: str


@dataclass(frozen=True)
class MachineDelete:
    id: str


@dataclass(frozen=True)
class MachineChange:
    """A registered machine's new rack and capacity (``(K, 2)`` cores and GB per node), as it now is."""

    id: str
    rack: str | None
    capacity: list[list[float]]


@dataclass(frozen=True)
class VmDelete:
    id: str
    reason: str = "released"
    """Why the VM went, as the journal names it: ``released`` by a client, ``dropped`` (its failed machine's VM that
    fit nowhere)."""
    by: str | None = None
    """As :attr:`VmRow.by`."""

    def __post_init__(self) -> None:
        if self.reason not in ("released", "dropped"):
            raise ValueError(f"a VM goes released or dropped, not {self.reason!r}")


@dataclass(frozen=True)
class Rejected:
    """A placement request the engine refused: nothing in the cluster changes, only the journal records it (demand
    that was turned away is demand, for a replay of the cluster's history). ``reason``: the rejection's code."""

    id: str
    cpu: float
    mem: float
    multi: bool
    reason: str


@dataclass(frozen=True)
class MetaSet:
    """A note kept with the cluster (``meta`` table), committed with the changes it describes: ``imported:<sha256>``
    marks an allocations file ``serve --import`` recorded, in the same transaction as its VMs."""

    key: str
    value: str


Change = MachineRow | MachineStatus | MachineChange | MachineDelete | VmRow | VmDelete | MetaSet | Rejected


class Store(Protocol):
    """What the engine needs from durable storage."""

    def load(self) -> tuple[int | None, list[MachineRow], list[VmRow]]:
        """The NUMA node count (None for a new store), the machines and the VMs, in insertion order."""
        ...

    def set_numa(self, numa: int) -> None:
        """Record the cluster's NUMA node count (a new store, durable on return)."""
        ...

    def meta(self, key: str) -> str | None:
        """The note ``key`` (:class:`MetaSet`), or None."""
        ...

    def submit(self, changes: list[Change]) -> int:
        """Queue ``changes`` (one operation's) for the next commit; return its ticket. Raises StoreError when
        broken."""
        ...

    def wait(self, ticket: int) -> None:
        """Return once ``ticket`` is durable; raise StoreError if its commit failed."""
        ...

    async def wait_async(self, ticket: int) -> None:
        """:meth:`wait` for an event loop (does not block it)."""
        ...

    def check(self) -> None:
        """Raise StoreError if the store is broken."""
        ...

    def close(self) -> None: ...


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS machines (
    id TEXT PRIMARY KEY, slot INTEGER NOT NULL UNIQUE, rack TEXT, status TEXT NOT NULL, capacity TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS vms (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, id TEXT NOT NULL UNIQUE, machine TEXT NOT NULL, node INTEGER,
    cpu REAL NOT NULL, mem REAL NOT NULL, multi INTEGER NOT NULL, pinned INTEGER NOT NULL DEFAULT 0, uid TEXT,
    moved_at REAL
);
CREATE TABLE IF NOT EXISTS journal (
    seq INTEGER PRIMARY KEY AUTOINCREMENT, at REAL NOT NULL, event TEXT NOT NULL, vm TEXT, machine TEXT,
    node INTEGER, cpu REAL, mem REAL, multi INTEGER, detail TEXT
);
CREATE INDEX IF NOT EXISTS journal_vm ON journal (vm) WHERE vm IS NOT NULL;
"""
# No index on the journal's machine: a machine's entries include moves away from it (in ``detail``), which no index
# on ``machine`` finds, and the index cost bulk placements a quarter of their rate (benchmarks/bench_journal.py).

JOURNAL_KEEP = 1_000_000
"""Journal rows a :class:`SqliteStore` keeps by default: past that the oldest go, in the commit that passes the
limit by a tenth (docs/engine.md, "The journal", measures the size)."""


SCHEMA_VERSION = 4
"""The tables' layout, in SQLite's ``user_version``: 0 is a database from before versions were recorded, 1 one
without the ``uid`` column (2026-11-28), 2 one without the journal (2026-11-28), 3 one without ``moved_at``
(2026-11-29), 4 the tables above; an older one is upgraded on open (the ``pinned``, ``uid`` and ``moved_at``
columns added: every VM it holds has no uid and no last move; a journal that begins with ``journal-resumed``, since
the cluster's history before it is not in it). A newer one is refused, not read wrongly: by every command, the
read-only ones included (:func:`check_existing`). Version 4 is also where the journal's entries all carry what
undoes them (``by``, ``machine-changed``): a dcplace of version 3 from before that wrote entries a rewind misread,
so it must not open these files (an upgrade review)."""


def _why(path: Path, e: sqlite3.DatabaseError) -> str:
    """What an SQLite error at open means for the operator, as the rest of a sentence after the path: a full disk
    or a file that cannot be written read as "not a SQLite database", which invites deleting a good file."""
    text = str(e)
    if "not a database" in text:
        return f"is not a SQLite database ({text})"
    if "locked" in text or "busy" in text:
        return (
            f"is locked by another program ({text}): an sqlite3 shell or a backup tool holding a transaction? "
            "Close it and try again"
        )
    if "malformed" in text:
        return f'is damaged ({text}): restore a backup (docs/engine.md, "Backups")'
    if "full" in text or "disk I/O" in text:
        return f"cannot be written ({text}): is the disk full? Free space in {path.parent.resolve()}"
    if "readonly" in text or "unable to open" in text:
        if read_only_mount(path.parent):  # os.access says "not writable by this user" there too
            return f"cannot be written ({text}): {path.parent.resolve()} is on a file system mounted read-only"
        for side in (path, Path(f"{path}-wal"), Path(f"{path}-shm")):
            if side.exists() and not os.access(side, os.R_OK | os.W_OK):
                return f"cannot be opened for writing ({text}): {side} is not readable and writable by this user"
        if not os.access(path.parent, os.W_OK | os.X_OK):
            return f"cannot be written ({text}): its folder {path.parent.resolve()} is not writable by this user"
        return f"cannot be opened for writing ({text})"
    return f"is not a usable SQLite database ({text})"


def read_only_mount(folder: Path) -> bool:
    """Whether ``folder`` is on a file system mounted read-only (where os.access says "not writable" too)."""
    try:
        return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _real(path: Path) -> Path:
    """``path`` with its symbolic links followed (a link to a file not made yet: that file); a loop is refused."""
    try:
        return path.resolve(strict=True)
    except FileNotFoundError:
        return Path(os.path.realpath(path))
    except RuntimeError:  # "Symlink loop"
        raise InputError(f"{path} is a symbolic link that leads back to itself", field="db") from None


def create_new(path: str | Path) -> Path | None:
    """Make ``path`` (the file its links lead to) as an empty file if it does not exist, atomically and readable by
    its owner only (it holds the cluster's inventory; SQLite gives its -wal and -shm files the same mode): the real
    path when this call made it, None when it was there already. Only a database this call made may be removed when the
    open fails: two starts racing on a new path had the loser remove the winner's live database."""
    real = _real(Path(path))
    if real.exists() or not real.parent.is_dir():
        return None
    wal = Path(f"{real}-wal")
    if wal.is_file() and wal.stat().st_size > 0:  # SQLite deletes a -wal beside a new, empty database
        saved = sorted(real.parent.glob(f"{real.name}.recovered-*"))
        put_back = (f"a copy the service saved when it noticed is {saved[-1]}: remove {wal.name} and "
                    f"{real.name}-shm, and rename it to {real.name}" if saved else "put the database back or "
                    "restore a backup")  # fmt: skip
        raise InputError(f"{path} does not exist, but its {wal.name} file holds committed changes: the database "
                         f"was deleted or moved while its -wal stayed (while a service ran?); {put_back}; move "
                         f"{wal.name} away only to start a new cluster", field="db")  # fmt: skip
    try:
        os.close(os.open(real, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
    except FileExistsError:
        return None
    except OSError as e:
        raise InputError(f"cannot create {path} ({e.strerror})", field="db") from None
    return real


@contextlib.contextmanager
def _reading(path: Path) -> Iterator[str]:
    """An SQLite URI that reads ``path`` and writes nothing beside it where that is safe. A read-only connection to
    a WAL database makes its ``-wal`` and ``-shm`` files when they are not there (and fails on a read-only mount):
    so where no engine holds the database (a shared ``flock`` is granted, and held for the read, so none starts
    meanwhile) and its ``-wal`` holds nothing, it is read as an immutable file; otherwise (a service runs on it, or
    a crashed one left committed changes in its ``-wal``) as a plain read-only connection."""
    real = path.resolve()  # a link's -wal lies beside its target, not beside the link
    uri = real.as_uri() + "?mode=ro"
    fd: int | None = None
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY)
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except (ImportError, OSError):  # held by an engine (BlockingIOError), unreadable, or no flock here
        if fd is not None:
            os.close(fd)
        fd = None
    try:
        wal = Path(f"{real}-wal")
        if fd is not None and not (wal.exists() and wal.stat().st_size > 0):
            uri += "&immutable=1"
        yield uri
    finally:
        if fd is not None:
            os.close(fd)


def newer_schema(path: Path, version: int) -> str:
    """The sentence for a database a newer dcplace wrote."""
    return (f"{path} was written by a newer dcplace (schema version {version}; this one reads up to "
            f"{SCHEMA_VERSION}): upgrade dcplace, or restore the backup taken before the upgrade (docs/engine.md, "
            "\"Upgrading\")")  # fmt: skip


def check_existing(path: Path, integrity: bool = False) -> None:
    """Refuse an existing file that is not a dcplace database, looking at it read-only (opening it would switch
    it to WAL mode and add the tables): an empty file, another program's database, or a crashed database whose
    ``-wal`` file was lost (its tables were only in the WAL). Each of these was opened as a new, empty cluster,
    and the VMs it had acknowledged were forgotten. ``integrity``: also SQLite's integrity check, read-only too
    (on the writing connection, closing it after a failed check checkpointed the -wal into the damaged file and
    deleted it: the refused files were rewritten)."""
    try:
        with _reading(path) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
            tables = {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
            check = conn.execute("PRAGMA integrity_check(1)").fetchone()[0] if integrity else "ok"
            version = int(conn.execute("PRAGMA user_version").fetchone()[0])
    except sqlite3.DatabaseError as e:
        raise InputError(f"{path} {_why(path, e)}", field="db") from None
    if version > SCHEMA_VERSION:
        raise InputError(newer_schema(path, version), field="db")
    if _network_tables(tables):
        raise InputError(f"{path} is a dcplace network database (serve --network-db), not a cluster one: this takes "
                         f"serve's --db (`dcplace cluster backup OUT --db {path}` and `cluster trace OUT --db {path}` "
                         "take either)", field="db")  # fmt: skip
    if not {"machines", "vms", "meta"} <= tables:
        what = "is empty" if path.stat().st_size == 0 else "has no dcplace tables"
        raise InputError(f"{path} {what}, so it is not a dcplace cluster database (another program's database, or "
                         "a crashed one whose -wal file was lost?): remove it to start a new cluster, or restore a "
                         "backup", field="db")  # fmt: skip
    if check != "ok":
        raise InputError(f"{path} fails SQLite's integrity check ({check}): restore a backup (docs/engine.md, "
                         "\"Backups\")", field="db")  # fmt: skip


def _tables(path: Path) -> set[str]:
    """The tables of the SQLite file ``path``, read read-only (sqlite3.DatabaseError where it is none)."""
    with _reading(path) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        return {name for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def _network_tables(tables: set[str]) -> bool:
    """Whether ``tables`` are a network engine's (``serve --network-db``), not a cluster's."""
    return {"jobs", "meta"} <= tables and "vms" not in tables


def is_network_database(path: Path) -> bool:
    """Whether ``path`` holds a network engine's tables (``serve --network-db``) rather than a cluster's, looked
    at read-only; a file that is neither is for the caller's own check to refuse."""
    try:
        return _network_tables(_tables(path))
    except sqlite3.DatabaseError:
        return False


def check_network_database(p: Path) -> set[str]:
    """Refuse an existing file that is not a network database, read-only: an empty one (a crash whose -wal was lost
    had its tables only there: the jobs it acknowledged would be forgotten), another program's database, a dcplace
    cluster database (its tables and notes are another engine's). Each was opened, and its tables written into.
    Returns its tables (a version-1 file has no ``journal``)."""
    if not p.is_file():
        raise InputError(f"{p} is not a file", field="db")
    try:
        tables = _tables(p)
    except sqlite3.DatabaseError as e:  # a read-only mount or a full disk is not "not a database" (a review)
        said = _why(p, e)
        said = said if not said.startswith("is not") else f"is not a dcplace network database ({e})"
        raise InputError(f"{p} {said}", field="db") from None
    if _network_tables(tables):
        return tables
    if "vms" in tables:
        raise InputError(f"{p} is a dcplace cluster database (serve --db), not a network one: give another file",
                         field="db")  # fmt: skip
    what = "is empty" if p.stat().st_size == 0 else "has no dcplace network tables"
    raise InputError(f"{p} {what}, so it is not a dcplace network database (another program's, or a crashed one "
                     "whose -wal file was lost?): remove it to start anew, or restore a backup",
                     field="db")  # fmt: skip


MAX_KEEP = 2**62
"""The most journal entries a database may be told to keep (SQLite's integers end at 2**63 - 1: a keep above it
made every prune, and so every change, fail)."""


def check_journal_keep(keep: object) -> None:
    """``journal_keep`` as the VM store and the network engine take it: None, or a whole number from 0 to
    :data:`MAX_KEEP` (InputError naming it otherwise)."""
    if keep is not None and (isinstance(keep, bool) or not isinstance(keep, int) or not 0 <= keep <= MAX_KEEP):
        raise InputError(f"must be a whole number from 0 (no journal) to {MAX_KEEP:,}, got {keep!r}",
                         field="journal_keep")  # fmt: skip


def stored_keep(said: str | None) -> int | None:
    """A database's stored ``journal_keep``, None where it is none (missing, or hand-edited past reading)."""
    if said is None or not (said.isascii() and said.isdigit()) or len(said) > 19 or int(said) > MAX_KEEP:
        return None
    return int(said)


def backup_database(db: Path, out: Path) -> dict[str, int]:
    """Copy the dcplace database ``db`` (a cluster's, or the network engine's ``--network-db``) to ``out`` (which
    must not exist) consistently, also while a service runs on it: SQLite's online backup from a read-only
    connection (copying the file alone misses what is still in its -wal file). The copy is written beside ``out``
    under a temporary name, passes SQLite's integrity check, and only then takes its name; on any failure nothing
    is left. Returns the copy's rows per table: ``machines`` and ``vms``, or ``jobs``."""
    import tempfile

    if not db.is_file():
        raise InputError(f"{db} does not exist or is not a file", field="db")
    if is_network_database(db):
        check_network_database(db)
        tables: tuple[str, ...] = ("jobs",)
    else:
        check_existing(db)
        tables = ("machines", "vms")
    if out.exists() or out.is_symlink():
        raise InputError(f"OUT: {out} already exists; choose another name")
    if not out.parent.is_dir():
        raise InputError(f"OUT: the folder {out.parent} does not exist")
    try:
        fd, name = tempfile.mkstemp(prefix=f".{out.name}.", suffix=".partial", dir=out.parent)  # never a planted link
    except OSError as e:  # a read-only mount, no permission: the place, not a bug
        raise InputError(f"OUT: {out.parent} cannot be written ({e.strerror or e}); no copy was made") from None
    os.close(fd)
    partial = Path(name)
    try:
        with _reading(db) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as src:
            with contextlib.closing(sqlite3.connect(partial)) as dst:
                src.backup(dst)
                check = dst.execute("PRAGMA integrity_check(1)").fetchone()[0]
                rows = {t: int(dst.execute(f"SELECT count(*) FROM {t}").fetchone()[0]) for t in tables}
        if check != "ok":
            raise InputError(f"{db} fails SQLite's integrity check ({check}); no copy was made", field="db")
        os.replace(partial, out)
    except (sqlite3.Error, OSError) as e:  # which side failed, SQLite does not say: neither flag is named
        raise InputError(f"the copy of {db} to {out} failed ({e}); no copy was made") from None
    finally:
        partial.unlink(missing_ok=True)
        Path(f"{partial}-journal").unlink(missing_ok=True)  # the copy's rollback journal, left by a failed write
    return rows


def stored_numa(path: Path) -> int | None:
    """The NUMA nodes per machine recorded in the dcplace database ``path`` (None: none recorded yet), read
    read-only."""
    with _reading(path) as uri, contextlib.closing(sqlite3.connect(uri, uri=True)) as conn:
        row = conn.execute("SELECT value FROM meta WHERE key = 'numa'").fetchone()
    try:
        return None if row is None else int(row[0])
    except (TypeError, ValueError):
        raise InputError(f"{path} records {row[0]!r} NUMA nodes per machine, not a number", field="db") from None


class SqliteStore:
    """The embedded default store: SQLite in WAL mode, ``synchronous=FULL``, group commit (module docstring)."""

    def __init__(self, path: str | Path, created: bool = False, journal_keep: int | None = None) -> None:
        """``created``: the caller has just made ``path`` (empty) for this store (:func:`create_new`); any other
        existing file must already be a dcplace database. ``journal_keep``: the newest journal rows kept (0: write
        none; what is there stays); None: what the database was last opened with, else :data:`JOURNAL_KEEP`. The
        setting is kept in the database, so ``dcplace cluster`` commands keep the service's; where the journal
        was off and is turned on again, its first row is a ``journal-resumed`` entry (what happened meanwhile is
        not in it)."""
        check_journal_keep(journal_keep)
        self._asked_keep = journal_keep
        self.journal_keep = JOURNAL_KEEP if journal_keep is None else journal_keep
        self.path = Path(path)
        # what a later chdir does not move, links kept (followed at each stat) and ".." too: abspath took "link/.."
        # away before the link was followed, naming another file than the one open (a review of the fixes)
        self._abs = self.path.absolute()
        real = _real(self.path)
        self._real_path = real  # the file opened: its -wal and -shm lie beside it, and so does a recovery copy
        if not real.parent.exists():
            raise InputError(f"the directory {real.parent} does not exist", field="db")
        if real.exists() and not created:
            if not real.is_file():
                raise InputError(f"{self.path} is not a database file", field="db")
            check_existing(self.path, integrity=True)  # before anything is written to a file that may not be one
        self._lock_fd: int | None = None
        self._closing = False
        self._lost: StoreError | None = None
        self.on_failure: Callable[[], None] | None = None
        """Called once (from whichever thread noticed) when the store fails: ``serve --exit-on-failure`` stops the
        server with it."""
        self._told = False
        self._tell_lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(str(self.path), check_same_thread=False, isolation_level=None,
                                         timeout=BUSY_TIMEOUT_S)  # fmt: skip
        except sqlite3.DatabaseError as e:
            raise InputError(f"{self.path} {_why(self.path, e)}", field="db") from None
        try:
            self._lock_fd = hold_database(
                self.path, self._conn
            )  # before any change: a refused second one changes nothing
            self._prepare()
        except BaseException:
            self._conn.close()
            if self._lock_fd is not None:
                os.close(self._lock_fd)
            raise
        self._cv = threading.Condition()
        self._pending: list[tuple[float, list[Change]]] = []  # each operation's changes, with when it was submitted
        self._submitted = 0
        self._durable = 0
        self._error: BaseException | None = None
        self._async: list[tuple[int, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self.commits = 0
        """Transactions committed (each one fsync); ``submitted / commits`` is the mean group size."""
        self._commit_counts = [0] * len(COMMIT_BUCKETS)  # commits by the first bound their time is within
        self._commit_s = 0.0
        self._thread = threading.Thread(target=self._committer, name="dcplace-store-commit", daemon=True)
        self._thread.start()

    def _prepare(self) -> None:
        """WAL mode, FULL sync, the tables, the schema version (refusing a newer one, upgrading an older one), the
        integrity check, and one write: a database that cannot be written (read-only, a full disk) is refused here,
        where it started and then failed at its first placement, taking the service down."""
        try:
            version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
            if version > SCHEMA_VERSION:
                raise InputError(newer_schema(self.path, version), field="db")
            mode = self._conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                raise InputError(f"{self.path}: SQLite refused WAL mode (got {mode})", field="db")
            self._conn.execute("PRAGMA synchronous=FULL")
            # a checkpoint truncates the WAL to this (8 MiB): without it the file kept its high-water mark, 10.5 MB
            # after a 150,000-row import, until the next restart
            self._conn.execute("PRAGMA journal_size_limit=8388608")
            self._conn.execute("BEGIN IMMEDIATE")
            had_journal = self._conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'journal'"
            ).fetchone()
            for statement in _SCHEMA.split(";"):  # one by one: executescript would commit the transaction first
                if statement.strip():
                    self._conn.execute(statement)
            columns = {row[1] for row in self._conn.execute("PRAGMA table_info(vms)")}
            if "pinned" not in columns:  # schema 0: a database written before VMs could be pinned
                self._conn.execute("ALTER TABLE vms ADD COLUMN pinned INTEGER NOT NULL DEFAULT 0")
            if "uid" not in columns:  # schema 0 or 1: before VMs carried their client's uid
                self._conn.execute("ALTER TABLE vms ADD COLUMN uid TEXT")
            if "moved_at" not in columns:  # schema 3 or older: before VMs kept their last move
                self._conn.execute("ALTER TABLE vms ADD COLUMN moved_at REAL")
            self._conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION}")
            holds_machines = self._conn.execute("SELECT EXISTS (SELECT 1 FROM machines)").fetchone()[0]
            self._journal_setting(begun_on_a_cluster=had_journal is None and bool(holds_machines))
            first = self._conn.execute("SELECT min(seq) FROM journal").fetchone()[0]
            last = self._conn.execute("SELECT seq FROM sqlite_sequence WHERE name = 'journal'").fetchone()
            self._journal_last = 0 if last is None else int(last[0])  # the last seq given, kept or not
            self._journal_first = self._journal_last + 1 if first is None else int(first)
            self._notes: list[tuple[Any, ...]] = []
            self._conn.execute("COMMIT")
        except sqlite3.DatabaseError as e:
            if self._conn.in_transaction:
                self._conn.execute("ROLLBACK")
            raise InputError(f"{self.path} {_why(self.path, e)}", field="db") from None

    def _journal_setting(self, begun_on_a_cluster: bool) -> None:
        """In :meth:`_prepare`'s transaction: take the stored ``journal_keep`` where none was asked for, store the
        one in force, and mark where the journal was off (``journal_off_since`` in ``meta``) and where it resumes
        (a ``journal-resumed`` row): a journal that was off for a while is not a complete history, and a trace of it
        must not pair a placement before the gap with a release after it, nor a rewind cross it.
        ``begun_on_a_cluster``: this open made the journal of a database that holds machines (written before
        journals): it begins with a gap, the cluster's whole history before it."""

        def meta(key: str) -> str | None:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
            return None if row is None else str(row[0])

        def put(key: str, value: object) -> None:
            self._conn.execute("INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                               (key, str(value)))  # fmt: skip

        stored = meta("journal_keep")
        kept = stored_keep(stored)  # a hand-edited one that is none: ignored
        if self._asked_keep is None and kept is not None:
            self.journal_keep = kept
        put("journal_keep", self.journal_keep)
        off_since = meta("journal_off_since")
        if begun_on_a_cluster and off_since is None:
            off_since = "0.0"  # what happened before this journal began is not in it
            if self.journal_keep == 0:
                put("journal_off_since", off_since)
        if self.journal_keep == 0 and off_since is None:
            put("journal_off_since", repr(time.time()))
        elif self.journal_keep > 0 and off_since is not None:
            self._conn.execute("INSERT INTO journal (at, event, detail) VALUES (?, 'journal-resumed', ?)",
                               (time.time(), json.dumps({"off_since": float(off_since)})))  # fmt: skip
            self._conn.execute("DELETE FROM meta WHERE key = 'journal_off_since'")

    # -- reading --------------------------------------------------------------------------------------------
    def load(self) -> tuple[int | None, list[MachineRow], list[VmRow]]:
        try:
            return self._load()
        except (sqlite3.DatabaseError, ValueError, TypeError) as e:  # a damaged or hand-edited row: was a traceback
            raise InputError(f"{self.path} holds rows dcplace cannot read ({type(e).__name__}: {e}): restore a "
                             "backup (docs/engine.md, \"Backups\")", field="db") from None  # fmt: skip

    def _load(self) -> tuple[int | None, list[MachineRow], list[VmRow]]:
        with self._cv:  # no commit runs while we read (the committer takes the lock only between transactions)
            row = self._conn.execute("SELECT value FROM meta WHERE key = 'numa'").fetchone()
            machines = [
                MachineRow(i, s, r, st, json.loads(c))
                for i, s, r, st, c in self._conn.execute(
                    "SELECT id, slot, rack, status, capacity FROM machines ORDER BY slot"
                )
            ]
            vms = [
                VmRow(i, m, n, c, me, bool(mu), bool(p), u, moved_at=t)
                for i, m, n, c, me, mu, p, u, t in self._conn.execute(
                    "SELECT id, machine, node, cpu, mem, multi, pinned, uid, moved_at FROM vms ORDER BY seq"
                )
            ]
        return (None if row is None else int(row[0])), machines, vms

    def meta(self, key: str) -> str | None:
        with self._cv:
            row = self._conn.execute("SELECT value FROM meta WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    @contextlib.contextmanager
    def reading(self) -> Iterator[sqlite3.Connection]:
        """A read-only connection of its own to this store's database (the journal's reads): in WAL mode a reader
        sees what is committed and never holds up the committer, whatever it asks. A failure is a StoreError."""
        try:
            with contextlib.closing(sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True)) as conn:
                yield conn
        except sqlite3.DatabaseError as e:
            raise StoreError(f"the database {self.path} cannot be read ({e})", str(e)) from None

    def set_numa(self, numa: int) -> None:
        self._conn.execute("BEGIN IMMEDIATE")
        self._conn.execute(
            "INSERT INTO meta VALUES ('numa', ?) ON CONFLICT (key) DO UPDATE SET value = ?", (numa, numa)
        )
        self._conn.execute("COMMIT")

    # -- writing --------------------------------------------------------------------------------------------
    def submit(self, changes: list[Change]) -> int:
        with self._cv:
            self.check()
            self._pending.append((time.time(), changes))
            self._submitted += 1
            self._cv.notify_all()
            return self._submitted

    def check(self) -> None:
        if self._error is not None:
            raise _failed(self.path, self._error)
        if self._closing:
            raise StoreError(f"the database {self.path} is closed")
        if not self._is_the_file():  # refused before anything more is acknowledged; the committer saves what it had
            self._tell()
            raise StoreError(f"the database file {self.path} was deleted or replaced while the engine had it open; "
                             "nothing more is acknowledged (the service saves what it committed when it stops)",
                             "deleted or replaced")  # fmt: skip

    def wait(self, ticket: int) -> None:
        with self._cv:
            while self._durable < ticket and self._error is None:
                self._cv.wait()
            if self._durable < ticket:
                self.check()

    async def wait_async(self, ticket: int) -> None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        with self._cv:
            if self._durable >= ticket:
                return
            self.check()
            self._async.append((ticket, loop, fut))
        try:
            await fut
        except asyncio.CancelledError:  # its loop may close before the commit: the committer must not call it
            with self._cv:
                self._async = [w for w in self._async if w[2] is not fut]
            raise

    def _committer(self) -> None:
        """The committer thread. Whatever stops it stops the store: an unexpected error (a bug, not a database
        failure) used to end the thread silently, and every later call waited for a commit that never came."""
        try:
            self._commit_loop()
        except BaseException as e:
            with self._cv:
                if self._error is None:
                    self._failed(e)
                self._cv.notify_all()
                self._wake_async(error=True)

    def _commit_loop(self) -> None:
        while True:
            with self._cv:
                while not self._pending and not self._closing:
                    self._cv.wait()
                if not self._pending:
                    return
                batch, self._pending = self._pending, []
                upto = self._submitted
            t0 = time.perf_counter()
            first, last = self._journal_first, self._journal_last
            try:
                self._begin()
                for at, changes in batch:
                    for c in changes:
                        self._write(c, at)
                self._flush_notes()
                self._prune()
                self._conn.execute("COMMIT")
                if not self._is_the_file():  # before anything is acknowledged
                    raise self._gone()
            except BaseException as e:  # any failure: nothing after it is durable; fail-stop
                self._notes.clear()
                self._journal_first, self._journal_last = first, last  # nothing of this batch is durable
                try:
                    self._conn.execute("ROLLBACK")
                except sqlite3.Error:  # SQLite may have rolled back already (an I/O error at COMMIT)
                    pass
                with self._cv:
                    self._failed(e)
                    self._cv.notify_all()
                    self._wake_async(error=True)
                return
            took = time.perf_counter() - t0
            with self._cv:
                self.commits += 1
                self._commit_counts[bisect_left(COMMIT_BUCKETS, took)] += 1
                self._commit_s += took
                self._durable = upto
                self._cv.notify_all()
                self._wake_async(error=False)

    def _begin(self) -> None:
        """``BEGIN IMMEDIATE``, waiting while another program holds the database's write lock (an ``sqlite3``
        shell's transaction, a checkpoint run by hand): the commit waits with its callers, it does not fail. A
        deferred ``BEGIN`` read first and then asked for the lock, and SQLite fails such an upgrade at once without
        waiting, so a lock held for 50 ms stopped the service until a restart. A warning every
        :data:`LOCK_WARN_S` while it waits."""
        waited_since = time.monotonic()
        warned = waited_since
        while True:
            try:
                self._conn.execute("BEGIN IMMEDIATE")  # SQLite's busy handler waits up to its timeout first
                return
            except sqlite3.OperationalError as e:
                if "locked" not in str(e) and "busy" not in str(e):
                    raise
                now = time.monotonic()
                if now - warned >= LOCK_WARN_S:
                    warned = now
                    log.warning("dcplace: the database %s has been locked by another program for %.0f s (an "
                                "sqlite3 shell or a backup tool holding a transaction?); every change waits for "
                                "it", self.path, now - waited_since)  # fmt: skip
                if self._closing and now - waited_since > LOCK_CLOSE_S:
                    raise
                time.sleep(0.01)

    def _is_the_file(self) -> bool:
        """Whether the path still names the file this store holds open (no ``flock`` here: assumed so)."""
        return names_the_file(self._abs, self._lock_fd)  # the descriptor read once: close() may clear it

    def _gone(self) -> StoreError:
        """The error once the database was deleted, or another file moved over it, while the engine had it open:
        its commits went to a file nobody will open again (the service answered 201 and a restart found an empty
        cluster). Made once, in the committer thread or at close (the connection is theirs): an online backup of
        what the connection still sees (the old file, which the open descriptor keeps, and its -wal) is saved
        beside the path, for the operator to put back."""
        if self._lost is None:
            saved = save_recovery(self._conn, self._real_path)
            self._lost = StoreError(f"the database file {self.path} was deleted or replaced while the engine had it "
                                    f"open; {saved}; nothing more is acknowledged", "deleted or replaced")  # fmt: skip
        return self._lost

    def _tell(self) -> None:
        """Call :attr:`on_failure` once, from whichever thread noticed first (it may hold the store's condition: the
        callback must not call the store, as serve's, which only sets a flag, does not)."""
        with self._tell_lock:
            if self._told or self.on_failure is None:
                return
            self._told = True
        try:
            self.on_failure()
        except Exception:  # a callback's bug must not hide the failure it reports
            log.exception("dcplace: the store's on_failure callback failed")

    def _failed(self, e: BaseException) -> None:
        """Fail-stop (the caller holds ``_cv``): remember why, and say so once in the log; an operator saw a 503
        and nothing on stderr or in /metrics."""
        self._error = e
        self._tell()
        log.critical("dcplace: the database %s failed (%s: %s); the engine stops writing and reading until it is "
                     "restarted (fail-stop); nothing after the last commit was acknowledged", self.path,
                     type(e).__name__, e)  # fmt: skip

    def _wake_async(self, error: bool) -> None:
        """Wake the event-loop waiters whose tickets are durable (or all of them, failed): one thread-safe call per
        event loop and commit, not one per waiter (each such call writes to the loop's wake-up pipe)."""
        keep = []
        woken: dict[asyncio.AbstractEventLoop, list[asyncio.Future[None]]] = {}
        for ticket, loop, fut in self._async:
            if error or ticket <= self._durable:
                woken.setdefault(loop, []).append(fut)
            else:
                keep.append((ticket, loop, fut))
        self._async = keep
        err = _failed(self.path, self._error) if error else None
        for loop, futs in woken.items():
            try:
                loop.call_soon_threadsafe(_settle, futs, err)
            except RuntimeError:  # that loop is closed, and its waiters with it: nobody is left to wake
                pass

    def _write(self, c: Change, at: float) -> None:
        ex = self._conn.execute
        journal = self.journal_keep > 0
        if isinstance(c, VmRow):
            before = ex("SELECT machine, node, pinned FROM vms WHERE id = ?", (c.id,)).fetchone() if journal else None
            ex(
                "INSERT INTO vms (id, machine, node, cpu, mem, multi, pinned, uid, moved_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO UPDATE SET machine = excluded.machine, "
                "node = excluded.node, pinned = excluded.pinned, moved_at = excluded.moved_at",
                (c.id, c.machine, c.node, c.cpu, c.mem, int(c.multi), int(c.pinned), c.uid, c.moved_at),
            )
            if journal:
                where = (c.id, c.machine, c.node, c.cpu, c.mem, int(c.multi))
                if before is None:
                    given = {k: v for k, v in (("uid", c.uid), ("pinned", c.pinned or None)) if v is not None}
                    self._note(at, "placed", *where, (given | _by(c)) or None)
                else:
                    if (before[0], before[1]) != (c.machine, c.node):
                        self._note(at, "moved", *where, {"from": before[0], "from_node": before[1]} | _by(c))
                    if bool(before[2]) != c.pinned:
                        self._note(at, "pinned" if c.pinned else "unpinned", *where)
        elif isinstance(c, VmDelete):
            gone = None
            if journal:
                gone = ex(
                    "SELECT machine, node, cpu, mem, multi, pinned, uid FROM vms WHERE id = ?", (c.id,)
                ).fetchone()
            ex("DELETE FROM vms WHERE id = ?", (c.id,))
            if gone is not None:  # its pin and uid: what puts it back when the journal is rewound ({}: neither)
                kept = {k: v for k, v in (("uid", gone[6]), ("pinned", bool(gone[5]) or None)) if v is not None}
                self._note(at, c.reason, c.id, gone[0], gone[1], gone[2], gone[3], gone[4], kept | _by(c))
        elif isinstance(c, MachineRow):
            ex(
                "INSERT INTO machines (id, slot, rack, status, capacity) VALUES (?, ?, ?, ?, ?)",
                (c.id, c.slot, c.rack, c.status, json.dumps(c.capacity)),
            )
            if journal:
                self._note(
                    at,
                    "machine-added",
                    None,
                    c.id,
                    detail={"rack": c.rack, "capacity": c.capacity, "slot": c.slot, "status": c.status},
                )
        elif isinstance(c, MachineStatus):
            was = ex("SELECT status FROM machines WHERE id = ?", (c.id,)).fetchone() if journal else None
            ex("UPDATE machines SET status = ? WHERE id = ?", (c.status, c.id))
            if was is not None and was[0] != c.status:  # evacuating a drained machine drains it again: no event
                self._note(at, f"machine-{c.status}", None, c.id, detail={"from": was[0]})
        elif isinstance(c, MachineChange):
            was = ex("SELECT rack, capacity FROM machines WHERE id = ?", (c.id,)).fetchone() if journal else None
            ex("UPDATE machines SET rack = ?, capacity = ? WHERE id = ?", (c.rack, json.dumps(c.capacity), c.id))
            if was is not None:  # what it was: what puts it back when the journal is rewound
                self._note(at, "machine-changed", None, c.id, detail={"from_rack": was[0], "from_capacity":
                           json.loads(was[1]), "rack": c.rack, "capacity": c.capacity})  # fmt: skip
        elif isinstance(c, MetaSet):
            ex(
                "INSERT INTO meta VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (c.key, c.value),
            )
        elif isinstance(c, Rejected):
            if journal:
                self._note(at, "rejected", c.id, None, None, c.cpu, c.mem, int(c.multi), {"reason": c.reason})
        else:
            was = None
            if journal:
                was = ex("SELECT slot, rack, status, capacity FROM machines WHERE id = ?", (c.id,)).fetchone()
            ex("DELETE FROM machines WHERE id = ?", (c.id,))
            if was is not None:  # everything that puts it back when the journal is rewound
                self._note(
                    at,
                    "machine-removed",
                    None,
                    c.id,
                    detail={"slot": was[0], "rack": was[1], "status": was[2], "capacity": json.loads(was[3])},
                )

    def _note(
        self,
        at: float,
        event: str,
        vm: str | None,
        machine: str | None,
        node: int | None = None,
        cpu: float | None = None,
        mem: float | None = None,
        multi: int | None = None,
        detail: dict[str, Any] | None = None,
    ) -> None:
        """One journal row, written with the transaction's others (:meth:`_flush_notes`). ``detail`` None: none;
        ``{}`` is kept as ``{}`` (a release's says it had no pin or uid)."""
        self._notes.append(
            (at, event, vm, machine, node, cpu, mem, multi, None if detail is None else json.dumps(detail))
        )

    def _flush_notes(self) -> None:
        """The transaction's journal rows in one statement (a third faster than one each). With AUTOINCREMENT and
        this one writer, they take the seqs after the last one given, in order."""
        if self._notes:
            self._conn.executemany(
                "INSERT INTO journal (at, event, vm, machine, node, cpu, mem, multi, detail) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                self._notes,
            )
            self._journal_last += len(self._notes)
            self._notes.clear()

    def _prune(self) -> None:
        """Past ``journal_keep`` rows by a tenth (at least 1,000), drop the oldest down to ``journal_keep``: one
        ranged delete now and then, not one per commit."""
        keep = self.journal_keep
        if keep and self._journal_last - self._journal_first + 1 > keep + max(1000, keep // 10):
            self._journal_first = self._journal_last - keep + 1
            self._conn.execute("DELETE FROM journal WHERE seq < ?", (self._journal_first,))

    def close(self) -> None:
        """Commit what is queued, stop the committer, close the connection."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        self._thread.join()
        if self._lost is None and not self._is_the_file():  # closing checkpoints into the old file and deletes -wal
            log.critical("dcplace: %s", self._gone())
        self._conn.close()
        fd, self._lock_fd = self._lock_fd, None  # first: a reader of it (_is_the_file) must not fstat a reused number
        if fd is not None:
            os.close(fd)  # releases the lock

    def stats(self) -> dict[str, Any]:
        """Operations ``submitted`` and ``durable``, ``commits``, ``healthy`` (no failed commit, and the path still
        names the file held open),
        ``commit_seconds``: the commits' times as a cumulative histogram (``buckets``: ``(upper bound, commits
        within it)`` over :data:`COMMIT_BUCKETS`) and their ``sum``; ``journal_entries`` kept (at most the limit and
        its slack), ``journal_seq`` (the last entry's) and ``journal_keep`` (the limit; 0: off)."""
        with self._cv:
            counts, total = list(self._commit_counts), self._commit_s
            out: dict[str, Any] = {"submitted": self._submitted, "durable": self._durable, "commits": self.commits,
                   "healthy": self._error is None and self._lost is None and self._is_the_file()}  # fmt: skip
        run, buckets = 0, []
        for bound, n in zip(COMMIT_BUCKETS, counts, strict=True):
            run += n
            buckets.append((bound, run))
        out["commit_seconds"] = {"buckets": buckets, "sum": total}
        first, last = self._journal_first, self._journal_last  # the committer's; ints, read whole
        out.update(journal_entries=max(0, last - first + 1), journal_seq=last, journal_keep=self.journal_keep)
        return out


def remove_database(path: str | Path) -> None:
    """Delete the SQLite database ``path`` and its side files (closed first): for a new database that a failed start
    created, so that nothing half-made is left behind."""
    for leftover in (Path(path), *(Path(f"{path}{x}") for x in ("-wal", "-shm", "-journal"))):
        leftover.unlink(missing_ok=True)


def hold_database(path: Path, conn: sqlite3.Connection) -> int | None:
    """Take the database's exclusive lock for this store's life (``flock`` on the file, which SQLite's own byte-range
    locks do not see; the kernel drops it when the process ends, crash included): one engine per database, since
    the engine keeps the cluster's state in memory and another writer (a second ``serve``, ``dcplace cluster`` on a
    live service's database) would make it wrong. None where the platform has no ``flock``."""
    try:
        import fcntl
    except ImportError:  # pragma: no cover - not on Linux
        return None
    fd = os.open(path, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        conn.close()
        raise InputError(
            f"{path} is open in another dcplace engine (a running `dcplace serve`?) or being read (`dcplace cluster "
            "backup`, `compare cluster`: try again); stop it first, or change the cluster through that service's "
            "HTTP API",
            field="db",
        ) from None
    return fd


def names_the_file(path: Path, fd: int | None) -> bool:
    """Whether ``path`` (absolute) still names the file open as ``fd`` (None: no ``flock`` here, assumed so): a
    database deleted or replaced while an engine had it open went on taking commits nobody would read."""
    if fd is None:
        return True
    try:
        held = os.fstat(fd)
    except OSError:  # closed meanwhile: the store is closing, and says so itself
        return True
    try:
        now = os.stat(path)
    except OSError:
        return False
    return (now.st_dev, now.st_ino) == (held.st_dev, held.st_ino) and held.st_nlink > 0


def save_recovery(conn: sqlite3.Connection, real: Path) -> str:
    """An online backup of what ``conn`` still sees (a file deleted or replaced under it, kept by its open
    descriptor) saved beside ``real`` as ``<name>.recovered-<UTC>`` (mode 600), and the sentence saying what to do;
    or the sentence saying why it could not be saved."""
    out = real.with_name(f"{real.name}.recovered-{time.strftime('%Y%m%dT%H%M%SZ', time.gmtime())}")
    try:
        if out.exists():
            raise FileExistsError(f"{out} exists")
        os.close(os.open(out, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))  # the inventory: its owner's only
        with contextlib.closing(sqlite3.connect(out)) as dst:
            conn.backup(dst)
        return (f"everything it committed was saved to {out}: stop the service, remove {real.name}-wal and "
                f"{real.name}-shm beside it, and rename that file to {real}")  # fmt: skip
    except FileExistsError as e:
        return f"saving what it committed failed ({e})"
    except (OSError, sqlite3.Error) as e:
        out.unlink(missing_ok=True)
        return f"saving what it committed to {out} failed ({e})"


def _by(c: VmRow | VmDelete) -> dict[str, str]:
    """A VM entry's ``by``, where its change says why."""
    return {} if c.by is None else {"by": c.by}


def _settle(futs: list[asyncio.Future[None]], e: BaseException | None) -> None:
    for fut in futs:
        if fut.done():
            continue
        if e is None:
            fut.set_result(None)
        else:
            fut.set_exception(e)
