"""Typed configuration: frozen dataclasses with a docstring per field, validated at construction, read from and
written to TOML, merged with overrides.

A *config* is a frozen dataclass whose fields are

* scalars: ``bool``, ``int`` (numpy integers are stored as ``int``), ``float`` (an integer is accepted and stored as
  a float), ``str``, ``pathlib.Path``
  (a TOML string);
* ``Literal["a", "b"]`` (one of the listed values), ``X | None`` (``None`` is written by leaving the key out, so
  such a field's default must be ``None``);
* tuples: ``tuple[int, int]`` (fixed length), ``tuple[str, ...]`` (any length), nested (``tuple[tuple[str, int],
  ...]``), written as TOML arrays;
* other configs, written as TOML tables (``[scenario]``).

Each field is documented by an *attribute docstring*, a string literal right below it (a trailing ``# comment`` on
its line serves where no docstring follows). :func:`field_docs` reads them from the class source; the CLI turns
them into help texts, so the documentation lives in one place::

    @dataclass(frozen=True)
    class Scenario:
        pms: int = 50
        \"\"\"Machines at the start.\"\"\"

        def __post_init__(self) -> None:
            check_types(self)
            check(self.pms >= 1, "pms", self.pms, "at least 1")

Errors a user can cause are :class:`~dcplace.errors.InputError` s naming the field (``field='pms'``) and the value,
worded without CLI flags ("must be at least 1, got 0"); a file's errors also name the file and the key as a dotted
path through its tables (``scenario.pms``). The CLI rewrites field names into flag names.

The TOML file of a config holds its fields as keys of the top-level table and each nested config as a table::

    trace = "synthetic"
    episodes = 2

    [scenario]
    pms = 20
    mode = "expansion"
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import json
import math
import numbers
import re
import textwrap
import tomllib
import types
import typing
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, TypeVar

from dcplace.errors import InputError

T = TypeVar("T")

__all__ = [
    "Leaf",
    "check",
    "check_types",
    "dumps",
    "field_docs",
    "field_types",
    "from_dict",
    "is_config",
    "leaves",
    "load",
    "merge",
    "override",
    "parse",
    "read_toml",
    "to_dict",
    "to_dict_value",
    "write",
]


# ----------------------------------------------------------------------------------------------------------------
# What a config is made of: its fields' types and docs.


def is_config(tp: object) -> bool:
    """True when ``tp`` is a dataclass type (a config, or a table inside one)."""
    return isinstance(tp, type) and dataclasses.is_dataclass(tp)


_TYPES: dict[type, dict[str, Any]] = {}
_DOCS: dict[type, dict[str, str]] = {}


def field_types(cls: type) -> dict[str, Any]:
    """The resolved annotation of every field of the dataclass ``cls``, in field order."""
    if cls not in _TYPES:
        hints = typing.get_type_hints(cls)
        _TYPES[cls] = {f.name: hints[f.name] for f in dataclasses.fields(cls) if f.init}
    return _TYPES[cls]


def field_docs(cls: type) -> dict[str, str]:
    """The documentation of every field of ``cls`` that has one: the attribute docstring right below the field
    (``inspect.cleandoc``-ed), else a trailing ``# comment`` on its line. Base classes' docs are inherited."""
    if cls not in _DOCS:
        _DOCS[cls] = _read_docs(cls)
    return _DOCS[cls]


def _read_docs(cls: type) -> dict[str, str]:
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if klass is object or not dataclasses.is_dataclass(klass):
            continue
        try:
            source = textwrap.dedent(inspect.getsource(klass))
        except (OSError, TypeError):  # no source (built in a REPL): no docs
            continue
        lines = source.splitlines()
        body = ast.parse(source).body[0]
        assert isinstance(body, ast.ClassDef)
        for stmt, nxt in zip(body.body, [*body.body[1:], None], strict=True):
            if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                continue
            name = stmt.target.id
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                docs[name] = inspect.cleandoc(nxt.value.value)
                continue
            comment = _trailing_comment(lines[(stmt.end_lineno or stmt.lineno) - 1])
            if comment:
                docs[name] = comment
    return docs


def _trailing_comment(line: str) -> str:
    """The ``# comment`` ending a line of code, outside string literals; empty when there is none."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "'\"":
            quote = ch
        elif ch == "#":
            return line[i + 1 :].strip()
    return ""


@dataclasses.dataclass(frozen=True)
class Leaf:
    """One scalar (non-table) field of a config, reached through ``path`` (field names from the outer config)."""

    path: tuple[str, ...]
    type: Any
    default: Any
    doc: str

    @property
    def key(self) -> str:
        """The dotted key: ``scenario.pms``."""
        return ".".join(self.path)


def leaves(cls: type, default: object | None = None, prefix: tuple[str, ...] = ()) -> Iterator[Leaf]:
    """Every scalar field of the config ``cls``, depth first in field order, with its default (taken from
    ``default``, an instance of ``cls``, when given) and its documentation."""
    docs = field_docs(cls)
    for f in dataclasses.fields(cls):
        if not f.init:
            continue
        tp = field_types(cls)[f.name]
        value = getattr(default, f.name) if default is not None else _field_default(f)
        if is_config(tp):
            yield from leaves(tp, value, (*prefix, f.name))
        else:
            yield Leaf((*prefix, f.name), tp, value, docs.get(f.name, ""))


def _field_default(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return dataclasses.MISSING


# ----------------------------------------------------------------------------------------------------------------
# Checking one value against a field's type.


class _Mismatch(Exception):
    """A value that does not fit a type; ``expected`` says in words what would."""

    def __init__(self, expected: str) -> None:
        super().__init__(expected)
        self.expected = expected


def describe(tp: Any) -> str:
    """A field type in words: ``an integer``, ``one of 'a', 'b'``, ``a list of 2 items``."""
    origin = typing.get_origin(tp)
    if tp is bool:
        return "true or false"
    if tp is int:
        return "an integer"
    if tp is float:
        return "a number"
    if tp is str or tp is Path:
        return "a string"
    if origin is typing.Literal:
        return "one of " + ", ".join(repr(v) for v in typing.get_args(tp))
    if origin in (types.UnionType, typing.Union):
        return " or ".join(describe(a) for a in typing.get_args(tp) if a is not type(None))
    if origin is tuple:
        args = typing.get_args(tp)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_plural(describe(args[0]))}"
        return f"a list of {len(args)} items ({', '.join(describe(a) for a in args)})"
    if is_config(tp):
        return "a table"
    return getattr(tp, "__name__", str(tp))


def _plural(words: str) -> str:
    return words.removeprefix("an ").removeprefix("a ") + ("" if words.startswith("one of") else "s")


def coerce(tp: Any, value: Any) -> Any:
    """``value`` as the field type ``tp`` wants it (a list becomes a tuple, an int a float, a str a Path), or
    :class:`_Mismatch`. Nested configs are not handled here (see :func:`parse`)."""
    origin = typing.get_origin(tp)
    if tp is Any:
        return value
    if tp is bool:
        if isinstance(value, bool):
            return value
    elif tp is int:  # numpy integers too (numbers.Integral), stored as int
        if isinstance(value, numbers.Integral) and not isinstance(value, bool):
            return int(value)
    elif tp is float:
        if isinstance(value, numbers.Real) and not isinstance(value, bool):
            return float(value)
    elif tp is str:
        if isinstance(value, str):
            return value
    elif tp is Path:
        if isinstance(value, str | Path):
            return Path(value)
    elif origin is typing.Literal:
        for allowed in typing.get_args(tp):
            if value == allowed and type(value) is type(allowed):
                return allowed
    elif origin in (types.UnionType, typing.Union):
        if value is None and type(None) in typing.get_args(tp):
            return None
        for arg in typing.get_args(tp):
            if arg is type(None):
                continue
            try:
                return coerce(arg, value)
            except _Mismatch:
                pass
    elif origin is tuple:
        if isinstance(value, list | tuple):
            args = typing.get_args(tp)
            try:
                if len(args) == 2 and args[1] is Ellipsis:
                    return tuple(coerce(args[0], v) for v in value)
                if len(args) == len(value):
                    return tuple(coerce(a, v) for a, v in zip(args, value, strict=True))
            except _Mismatch:
                pass  # the whole list is named, not the item
    else:
        raise TypeError(f"config fields of type {tp!r} are not supported")
    raise _Mismatch(describe(tp))


# ----------------------------------------------------------------------------------------------------------------
# Validation at construction.


def check(ok: bool, name: str, value: object, must: str) -> None:
    """Raise ``InputError("must be {must}, got {value!r}", field=name)`` unless ``ok``: the one wording of a value
    check, for ``__post_init__``."""
    if not ok:
        raise InputError(f"must be {must}, got {value!r}", field=name)


def is_whole(value: object) -> bool:
    """Whether ``value`` is a whole number: a Python or numpy integer, not a bool (1.5, "3" and True are not)."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def check_seed(seed: object, name: str = "seed") -> None:
    """Raise an InputError naming ``name`` unless ``seed`` is a whole number from 0 to ``2**63 - 1`` (what numpy's
    and torch's generators accept; -1 or 1.5 failed inside numpy)."""
    if not is_whole(seed) or not 0 <= seed < 2**63:  # type: ignore[operator]
        raise InputError(f"must be a whole number from 0 to 2**63 - 1, got {seed!r}", field=name)


MAX_WORKERS = 256
"""Worker processes at most (each is a Python process of 100-700 MB: 256 already need far more memory than most
machines have; the operating system, not this number, is then the limit users meet)."""


def check_types(obj: object) -> None:
    """Check every field of the dataclass instance ``obj`` against its annotation (``Literal`` choices included) and
    store it in its canonical form (tuples for lists, floats for integers given to float fields). Call it first in
    ``__post_init__``; it raises an :class:`InputError` naming the field and the value.

    Rules that hold for every config: a field named ``seed`` is a whole number from 0 to ``2**63 - 1`` (what numpy's
    and torch's generators accept); any other whole number is at most ``2**31 - 1`` in size (a count beyond it was
    an OverflowError inside numpy or torch, not an answer); a field named ``workers`` is from 1 to
    :data:`MAX_WORKERS` (``--workers 100000`` forked thousands of processes and filled the memory), unless the config
    sends its work to a Ray cluster (``ray_address``); and no float
    field is NaN (``inf`` stays allowed where a field means "no limit"; each config checks its own ranges)."""
    cls = type(obj)
    # a Ray cluster's workers are its machines' CPUs, not processes here
    most_workers = MAX_WORKERS if not getattr(obj, "ray_address", "") else 2**31 - 1
    for name, tp in field_types(cls).items():
        value = getattr(obj, name)
        if is_config(tp):
            if not isinstance(value, tp):
                raise InputError(f"must be a {tp.__name__}, got {value!r}", field=name)
            continue
        try:
            fixed = coerce(tp, value)
        except _Mismatch as exc:
            raise InputError(f"must be {exc.expected}, got {value!r}", field=name) from None
        if name == "seed" and isinstance(fixed, int) and not 0 <= fixed < 2**63:
            raise InputError(f"must be a whole number from 0 to 2**63 - 1, got {value!r}", field=name)
        if name == "workers" and isinstance(fixed, int) and not 1 <= fixed <= most_workers:
            raise InputError(f"must be a whole number from 1 to {most_workers}, got {value!r}", field=name)
        if name != "seed" and isinstance(fixed, int) and not isinstance(fixed, bool) and abs(fixed) > 2**31 - 1:
            raise InputError(f"must be at most 2147483647 in size, got {value!r}", field=name)
        if isinstance(fixed, float) and math.isnan(fixed):
            raise InputError(f"must be a number, got {value!r}", field=name)
        if fixed is not value:
            object.__setattr__(obj, name, fixed)


# ----------------------------------------------------------------------------------------------------------------
# Dicts (as TOML reads them) to configs and back.


def parse(cls: type, data: Mapping[str, Any], *, source: str | Path | None = None, table: str = "") -> dict[str, Any]:
    """Check ``data`` (a TOML document or table) against the config ``cls``: no unknown keys, every value of its
    field's type, a table for every nested config. Returns the values in canonical form, nested dicts for tables;
    keys absent from ``data`` stay absent. Errors name ``source`` (the file) and the dotted key."""
    types_ = field_types(cls)
    out: dict[str, Any] = {}
    for key, value in data.items():
        where = f"{table}.{key}" if table else key
        if key not in types_:
            scope = f"table [{table}]" if table else "the top-level table"
            raise InputError(f"unknown key in {scope}; its keys are {', '.join(types_)}", path=source, field=where)
        tp = types_[key]
        if is_config(tp):
            if not isinstance(value, Mapping):
                raise InputError(f"must be a table ([{where}]), got {value!r}", path=source, field=where)
            out[key] = parse(tp, value, source=source, table=where)
            continue
        try:
            out[key] = coerce(tp, value)
        except _Mismatch as exc:
            raise InputError(f"must be {exc.expected}, got {value!r}", path=source, field=where) from None
    return out


def build(cls: type[T], data: Mapping[str, Any], *, source: str | Path | None = None) -> T:
    """The config ``cls`` from checked values (:func:`parse`'s output; absent keys take their defaults). A
    validation error gets the dotted path of its field (``scenario.pms``) and names ``source`` when it names no file
    yet (an error about a file the config points to keeps that file)."""
    try:
        return _build(cls, data)
    except InputError as exc:
        if exc.path is not None or source is None:
            raise
        raise InputError(exc.detail, path=source, line=exc.line, field=exc.field) from None


def _build(cls: type[T], data: Mapping[str, Any]) -> T:
    kwargs: dict[str, Any] = {}
    for name, tp in field_types(cls).items():
        if name not in data:
            continue
        value = data[name]
        if is_config(tp) and isinstance(value, Mapping):
            try:
                value = _build(tp, value)
            except InputError as exc:
                if exc.path is not None:
                    raise
                field = f"{name}.{exc.field}" if exc.field else name
                raise InputError(exc.detail, line=exc.line, field=field) from None
        kwargs[name] = value
    return cls(**kwargs)


def from_dict(cls: type[T], data: Mapping[str, Any], *, source: str | Path | None = None) -> T:
    """The config ``cls`` from a nested dict (TOML-shaped): :func:`parse`, then :func:`build`."""
    return build(cls, parse(cls, data, source=source), source=source)


def to_dict(cfg: object) -> dict[str, Any]:
    """The config ``cfg`` as a TOML-ready nested dict: tables for nested configs, lists for tuples, strings for
    paths; a ``None`` field is left out (its default is ``None``, so reading the dict back restores it)."""
    out: dict[str, Any] = {}
    for name, tp in field_types(type(cfg)).items():
        value = getattr(cfg, name)
        if is_config(tp):
            out[name] = to_dict(value)
        elif value is not None:
            out[name] = to_dict_value(value)
    return out


def to_dict_value(value: Any) -> Any:
    """One field's value as TOML holds it: lists for tuples, strings for paths."""
    if isinstance(value, tuple | list):
        return [to_dict_value(v) for v in value]
    if isinstance(value, Path):
        return str(value)
    return value


def merge(base: Mapping[str, Any], top: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``top``'s values over it, recursively through tables (a nested dict merges, anything else
    replaces)."""
    out = dict(base)
    for key, value in top.items():
        below = out.get(key)
        if isinstance(value, Mapping) and isinstance(below, Mapping):
            out[key] = merge(below, value)
        else:
            out[key] = value
    return out


def unflatten(flat: Mapping[str, Any]) -> dict[str, Any]:
    """``{"scenario.pms": 5}`` -> ``{"scenario": {"pms": 5}}``."""
    out: dict[str, Any] = {}
    for key, value in flat.items():
        *tables, last = key.split(".")
        node = out
        for t in tables:
            node = node.setdefault(t, {})
        node[last] = value
    return out


def override(cfg: T, changes: Mapping[str, Any]) -> T:
    """A copy of ``cfg`` with ``changes`` (dotted keys: ``{"scenario.pms": 5}``) applied, checked and validated as
    a file's values would be."""
    return from_dict(type(cfg), merge(_tree(cfg), unflatten(changes)))


def _tree(cfg: object) -> dict[str, Any]:
    """Like :func:`to_dict` but keeps ``None`` and Python types (no TOML conversion)."""
    return {
        name: _tree(getattr(cfg, name)) if is_config(tp) else getattr(cfg, name)
        for name, tp in field_types(type(cfg)).items()
    }


# ----------------------------------------------------------------------------------------------------------------
# TOML files.


def read_toml(path: str | Path) -> dict[str, Any]:
    """A TOML file's document; a missing, unreadable or malformed file is an :class:`InputError` naming it (and the
    line, for a syntax error)."""
    from dcplace.inputs import read_text

    text = read_text(path, "config file", allow_empty=True)
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        line = getattr(exc, "lineno", None)
        if line is None:
            found = re.search(r"line (\d+)", msg)
            line = int(found.group(1)) if found else None
        detail = re.sub(r"\s*\(at line \d+, column \d+\)|\s*\(at end of document\)", "", msg)
        raise InputError(f"not valid TOML: {detail[:1].lower()}{detail[1:]}", path=path, line=line) from None


def load(cls: type[T], path: str | Path) -> T:
    """The config ``cls`` from the TOML file ``path``."""
    return from_dict(cls, read_toml(path), source=path)


def write(cfg: object, path: str | Path, header: str = "") -> None:
    """Write the config ``cfg`` as TOML to ``path`` (atomically), after ``header`` (comment lines, each starting
    with ``#``)."""
    from dcplace.atomic import write_text

    text = dumps(to_dict(cfg))
    write_text(path, f"{header.rstrip()}\n\n{text}" if header else text)


_BARE_KEY = re.compile(r"[A-Za-z0-9_-]+")


def dumps(data: Mapping[str, Any]) -> str:
    """A TOML document holding ``data``: scalars (bool, int, float, str), lists of them (nested lists too) and
    tables (nested dicts). ``tomllib.loads(dumps(d)) == d`` for every such ``d``."""
    lines: list[str] = []
    _dump_table(data, (), lines)
    return "\n".join(lines).lstrip("\n") + "\n"


def _dump_table(data: Mapping[str, Any], where: tuple[str, ...], lines: list[str]) -> None:
    tables = {k: v for k, v in data.items() if isinstance(v, Mapping)}
    if where and (len(tables) < len(data) or not tables):
        lines.extend(["", f"[{'.'.join(_key(k) for k in where)}]"])
    for key, value in data.items():
        if key not in tables:
            lines.append(f"{_key(key)} = {_value(value)}")
    for key, value in tables.items():
        _dump_table(value, (*where, key), lines)


def _key(key: str) -> str:
    if not isinstance(key, str):
        raise TypeError(f"TOML keys are strings, got {key!r}")
    return key if _BARE_KEY.fullmatch(key) else _string(key)


def _string(text: str) -> str:
    # A JSON string is a TOML basic string once DEL (which JSON leaves raw) is escaped.
    return json.dumps(text, ensure_ascii=False).replace("\x7f", "\\u007f")


def _value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        if math.isnan(value):
            return "nan"
        if math.isinf(value):
            return "inf" if value > 0 else "-inf"
        return repr(value)
    if isinstance(value, str):
        return _string(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_value(v) for v in value) + "]"
    raise TypeError(f"cannot write {value!r} ({type(value).__name__}) to TOML")
