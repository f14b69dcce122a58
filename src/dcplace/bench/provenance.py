"""Where a result came from: the machine and the git commit of the source tree (``run.json`` of ``reproduce all``,
and the report's "rendered by")."""

from __future__ import annotations

import os
import platform
import subprocess
from pathlib import Path


def machine() -> str:
    return f"{platform.node()} ({platform.machine()}, {os.cpu_count()} cores, {platform.platform()})"


def commit() -> str:
    """The git commit of the source tree this package runs from (``+dirty`` when it has changes), or 'unknown'."""
    here = Path(__file__).resolve().parent
    try:
        rev = subprocess.run(
            ["git", "-C", str(here), "rev-parse", "--short=12", "HEAD"],
            capture_output=True,
            text=True,
            timeout=10,
            check=True,
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", str(here), "status", "--porcelain", "--untracked-files=no"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return rev + ("+dirty" if dirty else "")
