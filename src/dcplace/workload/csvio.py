"""Checked reading of numeric CSV files: every problem becomes one InputError naming file, line and field."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt
import pandas as pd

from dcplace.errors import InputError


def read_numeric_csv(path: Path, columns: tuple[str, ...]) -> dict[str, npt.NDArray[np.float64]]:
    """Read ``columns`` of a headed CSV as float64 arrays.

    Raises InputError for a missing file, a missing column, or a non-numeric / empty cell (line numbers are
    1-based and count the header as line 1).
    """
    if not path.is_file():
        raise InputError("no such trace file", path=path)
    try:
        frame = pd.read_csv(path, dtype=str, keep_default_na=False, skipinitialspace=True)
    except (pd.errors.ParserError, UnicodeDecodeError) as exc:
        raise InputError(f"not a readable CSV file ({str(exc).splitlines()[0]})", path=path) from None
    except pd.errors.EmptyDataError:
        raise InputError("the file is empty", path=path) from None
    header = [str(c).strip() for c in frame.columns]
    frame.columns = pd.Index(header)
    for col in columns:
        if col not in header:
            raise InputError(f"missing column (the header has {', '.join(header)})", path=path, line=1, field=col)
    out: dict[str, npt.NDArray[np.float64]] = {}
    for col in columns:
        raw = frame[col]
        values = pd.to_numeric(raw, errors="coerce").to_numpy(dtype=np.float64)
        bad = np.flatnonzero(~np.isfinite(values))
        if len(bad):
            i = int(bad[0])
            text = raw.iloc[i]
            what = "empty" if text == "" else f"not a finite number: {text!r}"
            raise InputError(what, path=path, line=i + 2, field=col)
        out[col] = values
    return out


def require(ok: npt.NDArray[np.bool_], path: Path, field: str, message: str) -> None:
    """Raise InputError at the first row (data rows start at line 2) where ``ok`` is false."""
    bad = np.flatnonzero(~ok)
    if len(bad):
        raise InputError(message, path=path, line=int(bad[0]) + 2, field=field)
