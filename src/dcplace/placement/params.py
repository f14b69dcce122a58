"""Typed, validated parameters of a placement method: one frozen dataclass per method, subclassing :class:`Params`.

A field is documented by the string literal under it (read back by :func:`field_docs`, e.g. for CLI help texts);
``check()`` validates at construction and raises :class:`~dcplace.errors.InputError` naming the field and the value
("beta must be in (0, 1], got 1.5"; ``exc.field`` holds the field's name so a CLI can word it as its flag).
``from_dict`` builds one from a TOML table or any mapping, rejecting unknown keys and wrong types::

    [solve.hierarchical]   # dcplace solve --config run.toml
    packs = 25
    beta = 0.7
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
import textwrap
import tomllib
from collections.abc import Mapping
from functools import cache
from itertools import pairwise
from pathlib import Path
from typing import Any, Self, get_type_hints

from dcplace.errors import InputError


def field_error(name: str, rule: str, value: object) -> InputError:
    """``InputError("<name> must <rule>, got <value>")`` with ``field`` set to ``name`` (not part of the text)."""
    exc = InputError(f"{name} must {rule}, got {value!r}")
    exc.field = name
    return exc


@dataclasses.dataclass(frozen=True)
class Params:
    """Base of every method's parameters: validated at construction, loadable from a mapping or a TOML table."""

    def __post_init__(self) -> None:
        self.check()

    def check(self) -> None:
        """Raise :func:`field_error` for the first invalid field (subclasses override; the base checks nothing)."""

    @classmethod
    def from_dict(cls, table: Mapping[str, Any]) -> Self:
        """Parameters from a mapping (a TOML table): unknown keys and values of the wrong type are errors naming
        the key; fields left out keep their defaults."""
        hints = get_type_hints(cls)
        names = [f.name for f in dataclasses.fields(cls)]
        values: dict[str, Any] = {}
        for key, value in table.items():
            if key not in names:
                exc = InputError(f"{cls.__name__} has no field {key!r}; fields: {', '.join(names) or 'none'}")
                exc.field = key
                raise exc
            want = hints[key]
            if want is float and isinstance(value, int) and not isinstance(value, bool):
                value = float(value)
            if not isinstance(want, type) or isinstance(value, bool) != (want is bool) or not isinstance(value, want):
                raise field_error(key, f"be of type {getattr(want, '__name__', want)}", value)
            values[key] = value
        return cls(**values)

    @classmethod
    def from_toml(cls, path: str | Path, table: str = "") -> Self:
        """Parameters from the table ``table`` (dotted, e.g. ``solve.greedy``; empty: the whole file) of a TOML
        file; a missing table gives the defaults."""
        try:
            doc: Any = tomllib.loads(Path(path).read_text())
        except (OSError, tomllib.TOMLDecodeError) as exc:
            raise InputError(f"cannot read TOML: {exc}", path=path) from None
        for part in filter(None, table.split(".")):
            doc = doc.get(part, {}) if isinstance(doc, dict) else None
            if not isinstance(doc, dict):
                raise InputError(f"{table} must be a table", path=path, field=table)
        try:
            return cls.from_dict(doc)
        except InputError as exc:
            raise InputError(exc.detail, path=path, field=f"{table}.{exc.field}" if table else exc.field) from None

    def as_dict(self) -> dict[str, Any]:
        """The fields and their values (what ``from_dict`` reads back)."""
        return dataclasses.asdict(self)


@cache
def field_docs(cls: type[Params]) -> dict[str, str]:
    """The docstring under each field of a params dataclass (and its bases), by field name."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass) or klass is object:
            continue
        try:
            tree = ast.parse(textwrap.dedent(inspect.getsource(klass)))
        except (OSError, TypeError):
            continue
        body = tree.body[0].body if tree.body and isinstance(tree.body[0], ast.ClassDef) else []
        for node, after in pairwise(body):
            if (isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
                    and isinstance(after, ast.Expr) and isinstance(after.value, ast.Constant)
                    and isinstance(after.value.value, str)):  # fmt: skip
                docs[node.target.id] = inspect.cleandoc(after.value.value)
    return docs


@dataclasses.dataclass(frozen=True)
class SolverParams(Params):
    """Parameters of the methods that run CP-SAT."""

    workers: int = 2
    """CP-SAT search workers (threads), at least 1; with 1, the same seed gives the same answer."""

    def check(self) -> None:
        if self.workers < 1:
            raise field_error("workers", "be at least 1", self.workers)
