"""Atomic outputs: a file or a folder appears whole or not at all.

Every command that writes results goes through these helpers, so an interrupted or failed run leaves the previous
consistent state (or nothing) behind, never a half-written file:

- :func:`atomic_path` yields a temporary sibling path; on success it is renamed over the target (``os.replace`` is
  atomic on POSIX within one filesystem), on any exception (``KeyboardInterrupt`` included) it is removed.
- :func:`write_text` / :func:`write_bytes` are the one-call forms.
- :func:`atomic_dir` does the same for a folder: the work is written into ``<name>.tmp-<pid>`` beside it, and on
  success the old folder (if any) is moved aside and the new one renamed into place. A set of files that must agree
  (a checkpoint, its replay buffer, its curves) is therefore replaced as one unit.

Example::

    from dcplace.atomic import atomic_dir, write_text

    write_text(out / "result.json", json.dumps(result))
    with atomic_dir(out / "run") as tmp:
        (tmp / "records.jsonl").write_text(records)
        (tmp / "report.md").write_text(report)
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


def _sibling(path: Path, tag: str) -> Path:
    return path.with_name(f".{path.name}.{tag}-{os.getpid()}")


@contextmanager
def atomic_path(path: Path | str) -> Iterator[Path]:
    """Yield a temporary path beside ``path``; rename it onto ``path`` when the block ends without an exception.

    The temporary file is removed if the block raises (or is interrupted), so the target keeps its old content.
    """
    target = Path(path)
    tmp = _sibling(target, "tmp")
    try:
        yield tmp
        tmp.replace(target)
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
def atomic_dir(path: Path | str) -> Iterator[Path]:
    """Yield a fresh temporary folder beside ``path``; on success it replaces ``path`` as one unit.

    On an exception the temporary folder is deleted and ``path`` is untouched. The swap is two renames (old aside,
    new in); between them a crash leaves the old folder under ``.<name>.old-<pid>`` and no ``path``, never a mixture.
    """
    target = Path(path)
    tmp = _sibling(target, "tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    old = _sibling(target, "old")
    if target.exists():
        target.replace(old)
    tmp.replace(target)
    if old.exists():
        shutil.rmtree(old, ignore_errors=True)
