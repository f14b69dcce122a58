"""Atomic outputs: a file or a folder appears whole or not at all.

Every command that writes results goes through these helpers, so an interrupted or failed run leaves the previous
consistent state (or nothing) behind, never a half-written file:

- :func:`atomic_path` yields a temporary sibling path; on success it is renamed over the target (``os.replace`` is
  atomic on POSIX within one filesystem), on any exception (``KeyboardInterrupt`` included) it is removed.
- :func:`write_text` / :func:`write_bytes` are the one-call forms.
- :func:`atomic_dir` does the same for a folder: the work is written into ``<name>.tmp-<pid>`` beside it, and on
  success the old folder (if any) is moved aside and the new one renamed into place. A set of files that must agree
  (a checkpoint, its replay buffer, its curves) is therefore replaced as one unit. With ``carry=True`` the files of
  the old folder that the block did not write are hard-linked into the new one first (a training run's folder keeps
  its ``config.toml`` while its checkpoint set is replaced).

Temporary siblings left by a process that was killed outright (SIGKILL, power loss: no exception ran) are removed
by the next :func:`atomic_path` / :func:`atomic_dir` on the same target once their process id is gone.

Example::

    from dcplace.atomic import atomic_dir, write_text

    write_text(out / "result.json", json.dumps(result))
    with atomic_dir(out / "run") as tmp:
        (tmp / "records.jsonl").write_text(records, encoding="utf-8")
        (tmp / "report.md").write_text(report, encoding="utf-8")
"""

from __future__ import annotations

import errno
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from dcplace.errors import InputError

CANNOT_WRITE = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG})
"""Errors that say the place cannot take the output (a full disk, a read-only mount, no permission), not a bug."""


class OutputError(OSError):
    """An output the place would not take (:data:`CANNOT_WRITE`: a full disk, a read-only mount, no permission),
    naming the output, not its temporary sibling; raised by :func:`atomic_path` and :func:`atomic_dir` only for
    their own writes, so an input that cannot be read stays what it is (a review found one reported as an output).
    An OSError still: ``except OSError`` catches it."""


def _named(target: Path, exc: OSError, tmp: Path | None = None) -> OSError:
    """``exc`` as an :class:`OutputError` naming ``target`` where it is a write of the output refused by the place:
    one of the helper's own steps (``tmp`` None), or, inside the block, one naming the temporary (or nothing: a
    full disk's write or close carries no name); any other error as it was."""
    if exc.errno not in CANNOT_WRITE:
        return exc
    if tmp is not None:
        name = os.fsdecode(exc.filename) if exc.filename is not None else None
        ours = name is None and exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EFBIG)
        if not (ours or (name is not None and (name == str(tmp) or name.startswith(str(tmp) + os.sep)))):
            return exc
    return OutputError(exc.errno, exc.strerror, str(target))


def unwritable(exc: OSError) -> InputError | None:
    """An output that could not be written (an :class:`OutputError`) as one sentence: nothing was written, since
    the atomic write removed its temporary; None for any other error (an input, or a bug)."""
    if not isinstance(exc, OutputError):
        return None
    where = Path(exc.filename) if exc.filename else None
    full = exc.errno in (errno.ENOSPC, errno.EDQUOT) and where is not None
    free = next((p for p in where.parents if p.is_dir()), Path(".")).absolute() if full and where else None
    return InputError(f"{where or 'an output'} could not be written ({exc.strerror or exc}); nothing was written"
                      + (f": free space in {free}" if free else ""))  # fmt: skip


def _sibling(path: Path, tag: str) -> Path:
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}")


def _own(tmp: Path) -> Path:
    """Make ``tmp`` an empty regular file of ours: whatever was at that predictable name (a link planted by someone
    who can write the folder) is removed first, and the file is created exclusively without following links, so
    writes cannot go through a link planted before the run (one swapped in during it, in a folder others may write
    and that is not sticky, is beyond this). A block that writes nothing leaves the target empty."""
    if tmp.is_symlink() or tmp.is_file():
        tmp.unlink()
    os.close(os.open(tmp, os.O_CREAT | os.O_EXCL | os.O_WRONLY | getattr(os, "O_NOFOLLOW", 0), 0o666))
    return tmp


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _remove_stale(path: Path) -> None:
    """Remove ``.<name>.tmp-<pid>`` / ``.<name>.old-<pid>`` siblings of ``path`` whose process no longer runs."""
    if not path.parent.is_dir():
        return
    for tag in ("tmp", "old"):
        for p in path.parent.glob(f".{path.name}.{tag}-*"):
            pid = p.name.rsplit("-", 1)[-1]
            if pid.isdigit() and int(pid) != os.getpid() and not _alive(int(pid)):
                if p.is_dir() and not p.is_symlink():
                    shutil.rmtree(p, ignore_errors=True)
                else:
                    p.unlink(missing_ok=True)


def _link_tree(src: Path, dst: Path) -> None:
    """Hard-link (copy where links fail) every entry of ``src`` that ``dst`` lacks into ``dst``."""
    for entry in src.iterdir():
        to = dst / entry.name
        if to.exists() or to.is_symlink():
            continue
        if entry.is_dir() and not entry.is_symlink():
            shutil.copytree(entry, to, symlinks=True, copy_function=_link_or_copy)
        else:
            _link_or_copy(str(entry), str(to))


def _link_or_copy(src: str, dst: str) -> None:
    try:
        os.link(src, dst, follow_symlinks=False)
    except OSError:
        shutil.copy2(src, dst, follow_symlinks=False)


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` when the block ends without an exception.

    The temporary file is removed if the block raises (or is interrupted), so the target keeps its old content.
    Missing parent folders are created (as ``--out DIR`` creates its folder; a file in a missing folder was a
    FileNotFoundError after the whole run).
    """
    target = Path(path)
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        _remove_stale(target)
        tmp = _own(_sibling(target, "tmp"))
    except OSError as e:
        raise _named(target, e) from None
    try:
        yield tmp
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _named(target, e, tmp) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    try:
        tmp.replace(target)
    except OSError as e:
        tmp.unlink(missing_ok=True)
        raise _named(target, e) from None
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise


def write_text(path: Path | str, text: str, encoding: str = "utf-8") -> None:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding=encoding)


def write_bytes(path: Path | str, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


@contextmanager
def atomic_dir(path: Path | str, *, carry: bool = False) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``path``; on success it replaces ``path`` as one unit.

    On an exception the temporary folder is deleted and ``path`` is untouched. The swap is two renames (old aside,
    new in); between them a crash leaves the old folder under ``.<name>.old-<pid>`` and no ``path``, never a mixture.
    ``carry``: entries of the old folder that the block did not write are hard-linked into the new one before the
    swap (module docstring).
    """
    target = Path(path)
    _remove_stale(target)
    tmp = _sibling(target, "tmp")
    try:
        if tmp.is_symlink():  # planted: removing the link, never what it points at
            tmp.unlink()
        elif tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)  # mkdir never follows a link (one planted in between makes it fail)
    except OSError as e:
        raise _named(target, e) from None
    try:
        yield tmp
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _named(target, e, tmp) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    try:
        if carry and target.is_dir():
            _link_tree(target, tmp)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise _named(target, e) from None
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = _sibling(target, "old")
    if target.exists():
        target.replace(old)
    tmp.replace(target)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
