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


def read_json_object(path: Path, lists: tuple[str, ...], what: str = "JSON file") -> dict[str, Any]:
    """The file's top-level object, which must hold a list under each key of ``lists``. The file is opened by
    :func:`dcplace.inputs.read_text` (missing, folder, permissions, encoding); numbers are checked by the caller
    (:func:`dcplace.inputs.json_number`: ``NaN`` and ``Infinity``, which Python's reader accepts, are refused there)."""
    text = read_text(path, what)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or an integer of over 4,300 digits
        line = getattr(exc, "lineno", None)
        raise InputError(f"not valid JSON ({json_problem(exc)})", path=path, line=line) from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(key), list) for key in lists):
        names = " and ".join(f"'{key}'" for key in lists)
        raise InputError(f"expected an object with {names} lists", path=path)
    return doc
