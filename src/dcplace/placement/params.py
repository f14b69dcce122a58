"""Typed, validated parameters of a placement method: one frozen dataclass per method, subclassing :class:`Params`.

Params are configs in the sense of :mod:`dcplace.config`: a field is documented by the string literal under it
(read back by :func:`field_docs`, e.g. for CLI help texts), the field types are checked at construction, then
``check()`` validates the values; both raise :class:`~dcplace.errors.InputError` naming the field and the value in
placement's wording, which starts with the field ("beta must be in (0, 1], got 1.5"; ``exc.field`` holds the
field's name so a CLI can word it as its flag). ``from_dict`` builds one from a TOML table or any mapping, rejecting
unknown keys and wrong types (:func:`dcplace.config.from_dict`)::

    [solve.hierarchical]   # dcplace solve --config run.toml
    packs = 25
    beta = 0.7
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Self

from dcplace import config
from dcplace.config import check
from dcplace.config import field_docs as field_docs
from dcplace.errors import InputError


def field_error(name: str, rule: str, value: object) -> InputError:
    """``InputError("<name> must <rule>, got <value>")`` with ``field`` set to ``name`` (not part of the text)."""
    exc = InputError(f"{name} must {rule}, got {value!r}")
    exc.field = name
    return exc


def _worded(exc: InputError) -> InputError:
    """A field error of :mod:`dcplace.config` ("must be an integer, got 2.5", ``field='runs'``) in placement's
    wording ("runs must be an integer, got 2.5"); other errors as they are."""
    if exc.path is None and exc.field is not None and exc.detail.startswith("must "):
        worded = InputError(f"{exc.field} {exc.detail}")
        worded.field = exc.field
        return worded
    return exc


@dataclasses.dataclass(frozen=True)
class Params:
    """Base of every method's parameters: validated at construction, loadable from a mapping or a TOML table."""

    def __post_init__(self) -> None:
        try:
            config.check_types(self)
            self.check()
        except InputError as exc:
            raise _worded(exc) from None

    def check(self) -> None:
        """Raise an error naming the first invalid field: ``check(ok, name, value, must)`` of :mod:`dcplace.config`
        (worded "name must ..." by the constructor) or :func:`field_error` (subclasses override; the base checks
        nothing)."""

    @classmethod
    def from_dict(cls, table: Mapping[str, Any]) -> Self:
        """Parameters from a mapping (a TOML table): unknown keys and values of the wrong type are errors naming
        the key; fields left out keep their defaults."""
        try:
            return config.from_dict(cls, table)
        except InputError as exc:
            raise _worded(exc) from None

    @classmethod
    def from_toml(cls, path: str | Path, table: str = "") -> Self:
        """Parameters from the table ``table`` (dotted, e.g. ``solve.greedy``; empty: the whole file) of a TOML
        file; a missing table gives the defaults."""
        doc: Any = config.read_toml(path)
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


@dataclasses.dataclass(frozen=True)
class SolverParams(Params):
    """Parameters of the methods that run CP-SAT."""

    workers: int = 2
    """CP-SAT search workers (threads), at least 1; with 1, the same seed gives the same answer."""

    def check(self) -> None:
        check(self.workers >= 1, "workers", self.workers, "at least 1")
