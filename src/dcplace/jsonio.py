"""Reading JSON input files with errors a user can act on (file, line, field; exit code 2 at the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dcplace.errors import InputError
from dcplace.inputs import read_text


def json_problem(exc: BaseException) -> str:
    """What is wrong, from json's error, with its column ("Unterminated string starting at column 12": some of its
    messages end in "at", which the position completes); the line goes to the caller's ``line``."""
    msg, col = str(getattr(exc, "msg", exc)), getattr(exc, "colno", None)
    if col is None:
        return msg
    return f"{msg} column {col}" if msg.endswith(" at") else f"{msg} at column {col}"


class _DuplicateKey(Exception):
    """A JSON object with one key twice (Python's reader keeps the last)."""


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in pairs:
        if key in out:
            raise _DuplicateKey(key)
        out[key] = value
    return out


def check_keys(item: dict[str, Any], known: tuple[str, ...], path: Path, where: str) -> None:
    """Refuse a key of ``item`` (at ``where`` in ``path``) that is not in ``known``: a misspelt key (``vpcu``) was
    ignored, and its field took its default."""
    unknown = sorted(set(item) - set(known))
    if unknown:
        raise InputError(f"unknown key {unknown[0]!r} (the keys are {', '.join(known)})", path=path,
                         field=f"{where}.{unknown[0]}" if where else unknown[0])  # fmt: skip


def read_json_object(path: Path, lists: tuple[str, ...], what: str = "JSON file") -> dict[str, Any]:
    """The file's top-level object, which must hold a list under each key of ``lists``. The file is opened by
    :func:`dcplace.inputs.read_text` (missing, folder, permissions, encoding); numbers are checked by the caller
    (:func:`dcplace.inputs.json_number`: ``NaN`` and ``Infinity``, which Python's reader accepts, are refused there)."""
    text = read_text(path, what)
    try:
        doc = json.loads(text, object_pairs_hook=_unique_keys)
    except _DuplicateKey as exc:  # the last one won without a word ("vcpu": 2, "vcpu": 64)
        raise InputError(f"the key {exc.args[0]!r} appears twice in one object", path=path) from None
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or an integer of over 4,300 digits
        line = getattr(exc, "lineno", None)
        raise InputError(f"not valid JSON ({json_problem(exc)})", path=path, line=line) from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(key), list) for key in lists):
        names = " and ".join(f"'{key}'" for key in lists)
        raise InputError(f"expected an object with {names} lists", path=path)
    return doc
