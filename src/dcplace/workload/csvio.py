"""Checked reading of numeric CSV files: every problem becomes one InputError naming file, line and field.

The file itself (path, encoding, header, field counts, data rows) is checked by :func:`dcplace.inputs.read_csv`;
each column's values by its :class:`~dcplace.inputs.Range`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from dcplace.errors import InputError
from dcplace.inputs import ANY, Range, check_column, read_csv


class NumericCsv(dict[str, npt.NDArray[np.float64]]):
    """The columns of a numeric CSV (name -> ``(rows,)`` float64) and ``lines``, ``(rows,)`` int64: the file line
    of each row (1-based; the header is line 1; blank lines are skipped, so rows need not be consecutive lines)."""

    lines: npt.NDArray[np.int64]


def read_numeric_csv(
    path: Path,
    columns: Mapping[str, Range] | tuple[str, ...],
    what: str = "trace file",
    optional: Mapping[str, Range] | None = None,
) -> NumericCsv:
    """Read ``columns`` of a headed CSV as float64 arrays, each value within its column's range (a tuple of names:
    any finite number), and those of ``optional`` that the header has (the header as the reader parses it: quoted
    or after blank lines).

    Raises InputError for a missing, unreadable or non-text file, a missing column, a row with another number of
    fields than the header, no data rows, or a cell that is not a number in range (line numbers are 1-based and count
    the header as line 1).
    """
    ranges = dict(columns) if isinstance(columns, Mapping) else dict.fromkeys(columns, ANY)
    table = read_csv(path, tuple(ranges), what)
    ranges |= {col: rng for col, rng in (optional or {}).items() if col in table.header}
    out = NumericCsv()
    out.lines = np.asarray(table.lines, dtype=np.int64)
    for col, rng in ranges.items():
        raw = table.column(col)
        values = pd.to_numeric(pd.Series(raw, dtype=object), errors="coerce").to_numpy(dtype=np.float64)
        check_column(values, rng, path=table.path, field=col, lines=table.lines, texts=raw)
        out[col] = values
    return out


def require(
    ok: npt.NDArray[np.bool_], path: Path, field: str, message: str, lines: npt.ArrayLike | None = None
) -> None:
    """Raise InputError at the first row where ``ok`` is false (``lines``: each row's file line; default: data rows
    start at line 2, one per line)."""
    bad = np.flatnonzero(~ok)
    if len(bad):
        line = int(np.asarray(lines)[bad[0]]) if lines is not None else int(bad[0]) + 2
        raise InputError(message, path=path, line=line, field=field)
