"""Reading JSON input files with errors a user can act on (file, line, field; exit code 2 at the CLI)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dcplace.errors import InputError


def read_json_object(path: Path, lists: tuple[str, ...]) -> dict[str, Any]:
    """The file's top-level object, which must hold a list under each key of ``lists``."""
    try:
        doc = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        line = getattr(exc, "lineno", None)
        raise InputError(f"not valid JSON ({getattr(exc, 'msg', exc)})", path=path, line=line) from None
    if not isinstance(doc, dict) or not all(isinstance(doc.get(key), list) for key in lists):
        names = " and ".join(f"'{key}'" for key in lists)
        raise InputError(f"expected an object with {names} lists", path=path)
    return doc
