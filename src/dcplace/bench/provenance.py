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
    """The dcplace version and the git commit of the source tree it runs from (``+dirty`` when that has changes):
    ``0.1.0 (a1b2c3d4e5f6)``; an installed package, which no checkout tracks, is its version alone. The tree counts
    only where git tracks this very file: an install inside the user's own repository (``project/.venv``) reported
    that repository's commit as dcplace's."""
    import dcplace

    here = Path(__file__).resolve()
    try:
        git = ["git", "-C", str(here.parent)]
        subprocess.run([*git, "ls-files", "--error-unmatch", here.name], capture_output=True, timeout=10, check=True)
        rev = subprocess.run([*git, "rev-parse", "--short=12", "HEAD"], capture_output=True, text=True, timeout=10,
                             check=True).stdout.strip()  # fmt: skip
        dirty = subprocess.run([*git, "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True, timeout=10).stdout.strip()  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return f"{dcplace.__version__} (installed, no git checkout)"
    return f"{dcplace.__version__} ({rev}{'+dirty' if dirty else ''})"
