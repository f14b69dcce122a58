"""Reading JSON input files with errors a user can act on (file, line, field; exit code 2 at the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dcplace.errors import InputError
from dcplace.inputs import read_text


def read_json_object(path: Path, lists: tuple[str, ...], what: str = "JSON file") -> dict[str, Any]:
    """The file's top-level object, which must hold a list under each key of ``lists``. The file is opened by
    :func:`dcplace.inputs.read_text` (missing, folder, permissions, encoding); numbers are checked by the caller
    (:func:`dcplace.inputs.json_number`: ``NaN`` and ``Infinity``, which Python's reader accepts, are refused there)."""
    text = read_text(path, what)
    try:
        doc = json.loads(text)
    except (ValueError, RecursionError) as exc:  # JSONDecodeError, or an integer of over 4,300 digits
        line = getattr(exc, "lineno", None)
        raise InputError(f"not valid JSON ({getattr(exc, 'msg', exc)})", path=path, line=line) from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(key), list) for key in lists):
        names = " and ".join(f"'{key}'" for key in lists)
        raise InputError(f"expected an object with {names} lists", path=path)
    return doc
