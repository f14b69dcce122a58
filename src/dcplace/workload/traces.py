"""Find and load traces by name: ``huawei-east-1``, ``azure-v1``, ``synthetic``, a path, or a user's own.

A trace of your own is a function ``(seed: int) -> RequestTable`` in your module, named ``package.module:function``
wherever a trace is named (``dcplace simulate numa --trace bursty_trace:bursty``, ``load_trace``, the NumaVM
environment, ``simulate stream``); :meth:`RequestTable.from_arrays` builds the table. Its answer is checked like a
file's (:func:`user_trace`). Worked example: docs/examples/bursty_trace.py.

The shared data folder is looked up in this order: ``$DCPLACE_DATA``; ``../shared/data`` next to the current
directory; ``../shared/data`` next to the project checkout. Nothing is copied into the repository.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import os
from pathlib import Path

from dcplace.errors import InputError
from dcplace.inputs import first_line, user_callable
from dcplace.workload.azure import read_azure
from dcplace.workload.huawei import read_huawei_events, read_huawei_lifetime
from dcplace.workload.synthetic import synthetic_trace
from dcplace.workload.table import RequestTable

TRACE_NAMES = ("huawei-east-1", "azure-v1", "synthetic")


def shared_data_dir() -> Path | None:
    """The shared data folder, or None when it is absent."""
    env = os.environ.get("DCPLACE_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(Path.cwd().parent / "shared" / "data")
    candidates.append(Path(__file__).resolve().parents[3].parent / "shared" / "data")
    for c in candidates:
        if c.is_dir():
            return c
    return None


def trace_available(name: str) -> bool:
    """Whether a named real trace can be read here."""
    root = shared_data_dir()
    if root is None:
        return False
    if name == "huawei-east-1":
        return (root / "huawei-east-1" / "Huawei-East-1-lt.csv").is_file()
    if name == "azure-v1":
        return (root / "azure-v1" / "v1.dev.txt").is_file()
    return name == "synthetic"


def _header(path: Path) -> list[str]:
    """The header's cells as the CSV reader reads them (quotes and spaces off, blank lines before it skipped): which
    form a trace file has. Only the first line was looked at, so a header after a blank line, or quoted, was not
    recognised."""
    first_line(path, "trace file")  # an unreadable, binary or empty file: the one sentence it says
    with open(path, "rb") as fh:
        head = fh.read(1 << 16).decode("utf-8", errors="replace").lstrip("\ufeff")
    for cells in csv.reader(io.StringIO(head)):
        if any(c.strip() for c in cells):
            return [c.strip() for c in cells]
    return []


def load_trace(name_or_path: str, *, seed: int = 0, synthetic_n: int = 20_000) -> RequestTable:
    """Load a named trace or a file.

    A path ending in ``.csv`` is read as the Huawei lifetime form when its header has ``at,lt`` and as the
    event-log form when it has ``time,type``; a folder is read as Azure V1 (dev split).
    """
    if name_or_path == "synthetic":
        return synthetic_trace(synthetic_n, seed=seed)
    if name_or_path in ("huawei-east-1", "azure-v1"):
        root = shared_data_dir()
        if root is None or not trace_available(name_or_path):
            raise InputError(
                f"trace '{name_or_path}' needs the shared data folder (../shared/data or $DCPLACE_DATA), "
                "which is not here; give a trace file's path or 'synthetic' as the trace instead"
            )
        if name_or_path == "huawei-east-1":
            return read_huawei_lifetime(root / "huawei-east-1" / "Huawei-East-1-lt.csv")
        return read_azure(root / "azure-v1", split="dev")
    p = Path(name_or_path)
    if ":" in name_or_path and not p.exists():
        return user_trace(name_or_path, seed)
    if p.is_dir():
        if not (p / "v1.dev.txt").is_file():  # any folder was read as Azure and failed on a file it never named
            raise InputError(
                f"a folder is read as an Azure V1 trace (v1.dev.txt, flav_map.txt, ...), and {name_or_path} has no "
                "v1.dev.txt; give a trace file or such a folder",
                field="trace",
            )
        return read_azure(p, split="dev")
    if not p.exists():
        raise InputError(
            f"trace must be one of {', '.join(TRACE_NAMES)}, an existing file or your own as package.module:function, "
            f"got {name_or_path!r}",
            field="trace",
        )
    header = _header(p)
    if "type" in header and "time" in header:
        return read_huawei_events(p)
    return read_huawei_lifetime(p)


def user_trace(ref: str, seed: int = 0) -> RequestTable:
    """The trace a user's function ``package.module:function`` returns for ``seed`` (module docstring): a
    non-empty :class:`RequestTable`, which checks its rows as a file's are (arrivals finite;
    departures at or after arrivals, ``inf``: never deleted; CPU and memory finite and above 0). Anything wrong, or
    raised by the function, is one InputError naming the function (and the request)."""
    make = user_callable(ref, "trace", field="trace")
    try:
        table = make(seed)
    except InputError as exc:  # RequestTable's own checks, raised inside the user's function
        raise InputError(f"trace {ref!r}: {exc.detail}", field="trace") from exc
    except (Exception, SystemExit) as exc:  # the user's code is at fault: one sentence, the cause chained
        raise InputError(f"trace {ref!r} raised {type(exc).__name__}: {exc}", field="trace") from exc
    if not isinstance(table, RequestTable):
        raise InputError(f"trace {ref!r} returned a {type(table).__name__}, not a RequestTable (build one with "
                         "RequestTable.from_arrays)", field="trace")  # fmt: skip
    if len(table) == 0:
        raise InputError(f"trace {ref!r} returned no request", field="trace")
    if table.source == "<memory>":  # later errors (an oversize VM) name the trace, not "<memory>"
        table = dataclasses.replace(table, source=f"trace {ref}")
    return table
