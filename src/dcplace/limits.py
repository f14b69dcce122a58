"""Size guards: before a run allocates, estimate the memory it needs and refuse when the machine does not have it.

A run whose size is a number the user types (machines, requests, VM counts in an instance file) can ask for more
memory than the machine has; without a guard it swaps, is killed, or runs for hours. Each place that allocates in
proportion to such a number calls :func:`check_memory` first with an estimate (bytes per unit, measured, times the
units); when the estimate exceeds the memory available now (``MemAvailable`` of ``/proc/meminfo``), it raises a
:class:`SizeError` that names the field, the estimate and what is available. The command line adds how to override
it (``--force``), which runs :func:`unguarded` around the command.

The estimates and where they are checked are listed in ``docs/errors.md``.
"""

from __future__ import annotations

import contextlib
import math
import os
from collections.abc import Iterator
from contextvars import ContextVar

from dcplace.errors import InputError

_UNGUARDED: ContextVar[bool] = ContextVar("dcplace_unguarded", default=False)


class SizeError(InputError):
    """A run that would need more memory than the machine has (an :class:`InputError`: exit code 2 at the CLI)."""

    def __init__(self, message: str, *, field: str | None, need: float, available: float) -> None:
        super().__init__(message, field=field)
        self.need = need
        self.available = available


_SUFFIX = {"": 1, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "KI": 2**10, "MI": 2**20, "GI": 2**30, "TI": 2**40}


def parse_bytes(text: str, name: str) -> int:
    """``text`` as bytes: a number, optionally with a unit (``8G``, ``512MiB``, ``1.5e9``); else one sentence naming
    ``name`` (``DCPLACE_MEMORY=1G`` was a ValueError traceback)."""
    t = text.strip().upper().removesuffix("B")
    num = t.rstrip("KMGTI")
    unit = t[len(num) :]
    try:
        value = float(num) * _SUFFIX[unit]
    except (ValueError, KeyError):
        value = math.nan
    if not math.isfinite(value) or value < 0:
        raise InputError(f"{name} must be a number of bytes, optionally with a unit such as 8G or 512MiB, got {text!r}")
    return int(value)


def available_memory() -> int:
    """Bytes of memory available to a new allocation now: ``MemAvailable`` from ``/proc/meminfo`` (Linux), else the
    physical memory (``os.sysconf``); ``$DCPLACE_MEMORY`` (bytes) overrides both (tests, containers)."""
    env = os.environ.get("DCPLACE_MEMORY")
    if env:
        return parse_bytes(env, "$DCPLACE_MEMORY")
    try:
        with open("/proc/meminfo", encoding="ascii") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    try:
        return int(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES"))
    except (ValueError, OSError, AttributeError):
        return 1 << 62  # unknown: do not refuse


def human_bytes(n: float) -> str:
    """``1.5 GB``, ``320 MB`` (decimal units)."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= scale:
            return f"{n / scale:,.1f} {unit}"
    return f"{n / 1e3:,.0f} kB"


def check_memory(need: float, what: str, field: str | None) -> None:
    """Raise :class:`SizeError` when ``need`` bytes (an estimate for ``what``, e.g. ``"10,000,000 machines"``) exceed
    the memory available now, unless inside :func:`unguarded`. ``field`` names the setting that sets the size."""
    if _UNGUARDED.get():
        return
    available = available_memory()
    if need > available:
        raise SizeError(
            f"{what} need about {human_bytes(need)} of memory, more than the {human_bytes(available)} available",
            field=field,
            need=need,
            available=available,
        )


@contextlib.contextmanager
def unguarded() -> Iterator[None]:
    """Inside it, :func:`check_memory` never refuses (the CLI's ``--force``)."""
    token = _UNGUARDED.set(True)
    try:
        yield
    finally:
        _UNGUARDED.reset(token)
