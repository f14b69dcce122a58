"""The one input layer: opening a user's file and reading numbers from it, every problem one :class:`InputError`.

Every reader of a user file (traces, Azure maps, topologies, request sets, placement instances, Huawei topology-aware
CSVs, checkpoints, config files) goes through these helpers, so each class of mistake is caught once, the same way:

* the path: missing, a folder where a file is wanted, unreadable (permissions) -> :func:`check_file`;
* the bytes: not UTF-8 (a binary or Latin-1 file; the message gives the line of the first bad byte), NUL bytes,
  empty -> :func:`read_text`;
* CSV structure: a header with the required columns, the same number of fields on every row, at least one data row
  -> :func:`read_csv`;
* numbers: not a number, non-finite (``nan``, ``inf``, ``1e400``), out of range, not whole where a whole number is
  wanted (``0.5`` as a VM id) -> :class:`Range` with :func:`number` (one text cell), :func:`check_column` (a parsed
  column, vectorised) and :func:`json_number` (a JSON value).

Ranges have upper bounds so that no value overflows the internal integer types or the float arithmetic built on it:
quantities stored as ``int64`` in the simulators (cores, memory units, bandwidth micro-units, counts) are bounded by
:data:`MAX_QUANTITY` (``2**31 - 1``: sums over millions of them stay exact in ``int64`` and in ``float64``), times by
:data:`MAX_SECONDS` (``1e12`` s, 31,700 years: arrival + lifetime stays finite and exact to the microsecond), link
capacities by :data:`MAX_BANDWIDTH` units (``1e9``: a million micro-units each still fits ``int64`` many times over).

Each error is one sentence naming the file, the 1-based line (a CSV header is line 1) and the field::

    trace.csv, line 7, field 'vmid': must be a whole number from 0 to 9007199254740992, got '0.5'
"""

from __future__ import annotations

import csv
import inspect
import io
import math
import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError

MAX_QUANTITY = 2**31 - 1
"""Largest CPU, memory, hold, count or other whole quantity read from a file."""
MAX_SECONDS = 1e12
"""Largest time (arrival, lifetime, timestamp, duration) in seconds read from a file."""
MAX_BANDWIDTH = 1e9
"""Largest link capacity or bandwidth demand, in bandwidth units (one unit = a server-rack link of the presets)."""
MIN_BANDWIDTH = 1e-6
"""Smallest link capacity or bandwidth demand: one micro-unit (``BW_SCALE``), the grid bandwidth is counted in. A
demand of 4e-7 rounded to 0 micro-units and reserved nothing (and the observer divided by it)."""
MAX_ID = 2**53
"""Largest id (e.g. a VM id): every whole number up to it is exact in float64, in which CSV columns are parsed."""


def _a(what: str) -> str:
    """``what`` with its article: "an allocations file", "a trace"."""
    return f"{'an' if what[:1].lower() in 'aeiou' else 'a'} {what}"


def check_file(path: str | Path, what: str = "file") -> Path:
    """``path`` as a Path, after checking it names a readable regular file; else an InputError naming it.

    ``what`` names the file's role in the message (``"trace file"``, ``"checkpoint"``).
    """
    p = Path(path)
    if p.is_dir():
        raise InputError(f"is a folder, expected {_a(what)}", path=p)
    if not p.exists():
        raise InputError(f"no such {what}", path=p)
    if not p.is_file():
        raise InputError(f"is not a regular file, expected {_a(what)}", path=p)
    if not os.access(p, os.R_OK):
        raise InputError(f"cannot read the {what} (permission denied)", path=p)
    return p


def read_bytes(path: str | Path, what: str = "file") -> bytes:
    """The file's bytes (:func:`check_file` first; an OS error while reading is an InputError too)."""
    p = check_file(path, what)
    try:
        return p.read_bytes()
    except OSError as exc:
        raise InputError(f"cannot read the {what} ({exc.strerror or type(exc).__name__})", path=p) from None


def read_text(path: str | Path, what: str = "file", *, allow_empty: bool = False) -> str:
    """The file decoded as UTF-8 (a byte-order mark is dropped).

    A file that is not UTF-8 text (binary, Latin-1, UTF-16) or holds NUL bytes is refused with the line of the first
    bad byte; an empty (or whitespace-only) file is refused unless ``allow_empty``.
    """
    data = read_bytes(path, what)
    p = Path(path)
    nul = data.find(b"\0")
    if nul >= 0:
        line = data.count(b"\n", 0, nul) + 1
        raise InputError(f"a binary file (NUL byte), expected a text {what}", path=p, line=line)
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = data.count(b"\n", 0, exc.start) + 1
        byte = data[exc.start : exc.start + 1].hex()
        raise InputError(f"not UTF-8 text (byte 0x{byte}); save the {what} as UTF-8", path=p, line=line) from None
    if not allow_empty and not text.strip():
        raise InputError(f"the {what} is empty", path=p)
    return text


def first_line(path: str | Path, what: str = "file") -> str:
    """The first line of a text file (checked like :func:`read_text`)."""
    return read_text(path, what).split("\n", 1)[0]


@dataclass(frozen=True)
class CsvText:
    """A CSV file read by :func:`read_csv`: the stripped header, the data rows (cells stripped) and their lines."""

    path: Path
    header: list[str]
    rows: list[list[str]]
    lines: list[int]  # 1-based file line of each row
    header_line: int = 1

    def column(self, name: str) -> list[str]:
        i = self.header.index(name)
        return [r[i] for r in self.rows]


def read_csv(path: str | Path, required: Sequence[str], what: str = "file", *, min_rows: int = 1) -> CsvText:
    """A headed CSV file: decoded (:func:`read_text`), its header holding every ``required`` column, every data row
    with as many fields as the header, at least ``min_rows`` data rows. Blank lines are skipped."""
    p = Path(path)
    text = read_text(p, what)
    reader = csv.reader(io.StringIO(text))
    header: list[str] | None = None
    rows: list[list[str]] = []
    lines: list[int] = []
    try:
        for cells in reader:
            if not any(c.strip() for c in cells):
                continue
            cells = [c.strip() for c in cells]
            if header is None:
                header, header_line = cells, reader.line_num
                for col in required:
                    if col not in header:
                        raise InputError(
                            f"missing column (the header has {', '.join(header)})", path=p, line=reader.line_num,
                            field=col,
                        )  # fmt: skip
                continue
            if len(cells) != len(header):
                raise InputError(f"{len(cells)} fields, but the header has {len(header)}", path=p, line=reader.line_num)
            rows.append(cells)
            lines.append(reader.line_num)
    except csv.Error as exc:
        raise InputError(f"not a readable CSV file ({exc})", path=p, line=reader.line_num) from None
    assert header is not None  # read_text refused an empty file
    if len(rows) < min_rows:
        raise InputError(f"the {what} has a header but no data rows", path=p, line=1)
    return CsvText(p, header, rows, lines, header_line)


@dataclass(frozen=True)
class Range:
    """The values a numeric field accepts: finite, within ``[lo, hi]`` (``lo`` excluded when ``lo_open``), whole
    numbers only when ``integer``."""

    lo: float = -math.inf
    hi: float = math.inf
    integer: bool = False
    lo_open: bool = False

    def rule(self) -> str:
        """The range in words: ``a whole number from 1 to 2147483647``, ``a number > 0 and at most 1e+09``."""
        kind = "a whole number" if self.integer else "a number"
        lo, hi = _fmt(self.lo), _fmt(self.hi)
        if self.lo_open:
            return f"{kind} > {lo}" + (f" and at most {hi}" if math.isfinite(self.hi) else "")
        if math.isfinite(self.lo) and math.isfinite(self.hi):
            return f"{kind} from {lo} to {hi}"
        if math.isfinite(self.lo):
            return f"{kind} >= {lo}"
        if math.isfinite(self.hi):
            return f"{kind} <= {hi}"
        return f"a finite {kind.removeprefix('a ')}"

    def ok(self, values: npt.NDArray[np.float64]) -> npt.NDArray[np.bool_]:
        """Element-wise: the value is accepted (NaN and infinities never are)."""
        with np.errstate(invalid="ignore"):
            good = np.isfinite(values) & (values <= self.hi)
            good &= (values > self.lo) if self.lo_open else (values >= self.lo)
            if self.integer:
                good &= values == np.floor(values)
        return np.asarray(good)


def _fmt(x: float) -> str:
    return str(int(x)) if math.isfinite(x) and x == int(x) and abs(x) < 1e16 else f"{x:g}"


ANY = Range()
"""Any finite number."""
POSITIVE = Range(0, MAX_QUANTITY, lo_open=True)
"""A quantity above 0 (cores, GB), at most :data:`MAX_QUANTITY`."""
COUNT = Range(0, MAX_QUANTITY, integer=True)
"""A whole quantity >= 0."""
WHOLE_POSITIVE = Range(1, MAX_QUANTITY, integer=True)
"""A whole quantity >= 1."""
SECONDS = Range(0, MAX_SECONDS)
"""A time or duration in seconds."""
ID = Range(0, MAX_ID, integer=True)
"""A whole id >= 0."""


def number(text: str, rng: Range, *, path: str | Path | None, line: int | None, field: str) -> float:
    """The cell ``text`` as a float within ``rng``, or an InputError naming the file, line and field."""
    try:
        x = float(text)
    except ValueError:
        what = "empty" if not text.strip() else f"not a number: {text!r}"
        raise InputError(f"{what} (must be {rng.rule()})", path=path, line=line, field=field) from None
    if not rng.ok(np.array([x]))[0]:
        raise InputError(f"must be {rng.rule()}, got {text!r}", path=path, line=line, field=field)
    return x


def check_column(
    values: npt.NDArray[np.float64],
    rng: Range,
    *,
    path: str | Path,
    field: str,
    lines: npt.ArrayLike,
    texts: Sequence[str] | None = None,
) -> None:
    """Raise an InputError at the first value of a parsed column outside ``rng`` (``lines``: each value's file line;
    ``texts``: the cells as written, quoted in the message; NaN stands for a cell that was not a number)."""
    bad = np.flatnonzero(~rng.ok(values))
    if not len(bad):
        return
    i = int(bad[0])
    line = int(np.asarray(lines)[i])
    shown = texts[i] if texts is not None else f"{values[i]:g}"
    if texts is not None and not shown.strip():
        raise InputError(f"empty (must be {rng.rule()})", path=path, line=line, field=field)
    if texts is not None and math.isnan(values[i]) and shown.strip().lower() not in ("nan", "+nan", "-nan"):
        raise InputError(f"not a number: {shown!r} (must be {rng.rule()})", path=path, line=line, field=field)
    raise InputError(f"must be {rng.rule()}, got {shown!r}", path=path, line=line, field=field)


def json_number(value: Any, rng: Range, *, path: str | Path | None, field: str) -> float:
    """A JSON value as a number within ``rng`` (booleans are not numbers; ``NaN`` / ``Infinity``, which Python's
    JSON reader accepts, are refused like any out-of-range value). Whole numbers come back as ``int``."""
    ok = isinstance(value, int | float) and not isinstance(value, bool)
    if ok and rng.integer and isinstance(value, float) and not value.is_integer():
        ok = False
    if ok:
        try:
            ok = bool(rng.ok(np.array([float(value)]))[0])
        except OverflowError:  # an int beyond float range
            ok = False
    if not ok:
        raise InputError(f"must be {rng.rule()}, got {value!r}", path=path, field=field)
    return int(value) if rng.integer else float(value)


def import_user_module(module: str, said: str = "", field: str | None = None) -> Any:
    """Import a user's ``module`` (named in ``package.module:name``); a module that is missing, or fails while it
    runs, is one InputError (``said`` prefixes its sentence; ``field`` names the flag): the user's code is at fault,
    not dcplace's, so no traceback. The current folder is searched too, as ``python -m`` does (the console script
    ``dcplace`` searched only its own folder and PYTHONPATH, so a module beside the user was not found); it stays
    on ``sys.path``, last, so the module's own later imports and worker processes find its siblings. Only for a
    module not found otherwise: naming a built-in learned policy (``cvd-rl`` is ``dcplace....:CvdPolicy``) put the
    current folder on ``sys.path`` for good, and a ``pyarrow.py`` there then ran at the next ``import pyarrow``."""
    import importlib
    import importlib.util
    import sys

    try:  # dcplace's own learned policies are named this way too: they must not put the current folder on sys.path
        spec = importlib.util.find_spec(module.split(".")[0])
        installed = spec is not None and spec.origin is not None  # a namespace package may live here too
    except (ImportError, ValueError):
        installed = False
    here = str(Path.cwd())
    if not installed and here not in sys.path and "" not in sys.path:
        sys.path.append(here)  # last: never shadows an installed module
    try:
        return importlib.import_module(module)
    except ImportError as e:
        raise InputError(f"{said}cannot import module {module!r} ({e})", field=field) from None
    except (Exception, SystemExit) as e:  # SystemExit: a script that parses its arguments when imported
        raise InputError(f"{said}importing module {module!r} raised {type(e).__name__}: {e}", field=field) from e


def user_callable(ref: str, what: str, field: str | None = None) -> Callable[..., object]:
    """The class or function a user names as ``package.module:attr`` (dotted ``attr`` reaches inside a class): the
    module imported by :func:`import_user_module`; anything missing or not callable is one InputError whose
    sentence starts with ``what`` and the reference (``field`` names the flag)."""
    module, _, attr = ref.partition(":")
    if not module or not attr:
        raise InputError(f"{what} {ref!r} must look like package.module:name", field=field)
    obj: Any = import_user_module(module, f"{what} {ref!r}: ", field)
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise InputError(f"{what} {ref!r}: module {module!r} has no attribute {attr!r}", field=field)
        obj = getattr(obj, part)
    if not callable(obj):
        raise InputError(f"{what} {ref!r} is not a class or a function", field=field)
    if inspect.isbuiltin(obj):  # os:abort, sys:exit: calling one to build a policy or a trace ends the process
        raise InputError(f"{what} {ref!r} is a built-in function, not a class or a function of yours", field=field)
    return obj  # type: ignore[no-any-return]
