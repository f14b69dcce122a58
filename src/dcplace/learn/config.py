"""Typed trainer configurations from plain mappings (a TOML table, a checkpoint's ``meta``).

A configuration is a frozen dataclass whose fields carry their documentation and whose ``__post_init__`` validates
them; :func:`from_mapping` builds one from a mapping, naming the unknown key or the mistyped field and value, and
:func:`to_mapping` writes it back (tuples as lists, as TOML and JSON hold them).
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Mapping
from typing import Any, TypeVar

from dcplace.errors import InputError

C = TypeVar("C")


def _convert(name: str, hint: Any, value: Any) -> Any:
    """``value`` as the field's type: tuples from lists (element-wise), floats from ints; otherwise checked as is."""
    origin = typing.get_origin(hint)
    if origin is tuple:
        if not isinstance(value, list | tuple):
            raise InputError(f"must be a list, got {value!r}", field=name)
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return tuple(_convert(name, args[0], v) for v in value)
        if len(args) != len(value):
            raise InputError(f"must have {len(args)} entries, got {value!r}", field=name)
        return tuple(_convert(name, a, v) for a, v in zip(args, value, strict=True))
    if hint is float and isinstance(value, int | float) and not isinstance(value, bool):
        return float(value)
    if hint in (int, str, bool) and type(value) is not hint:
        raise InputError(f"must be {hint.__name__}, got {value!r}", field=name)
    return value


def from_mapping(cls: type[C], data: Mapping[str, Any]) -> C:
    """``cls(**data)`` with each value checked against (and converted to) its field's type; unknown keys refused.
    Missing keys take the field's default."""
    if not dataclasses.is_dataclass(cls):
        raise TypeError(f"{cls!r} is not a dataclass")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - names)
    if unknown:
        raise InputError(f"unknown setting of {cls.__name__} (known: {', '.join(sorted(names))})", field=unknown[0])
    return cls(**{k: _convert(k, hints[k], v) for k, v in data.items()})


def to_mapping(config: Any) -> dict[str, Any]:
    """The configuration as plain values (tuples become lists)."""

    def plain(v: Any) -> Any:
        return [plain(x) for x in v] if isinstance(v, tuple | list) else v

    return {f.name: plain(getattr(config, f.name)) for f in dataclasses.fields(config)}
