"""Small array helpers shared by the simulators and the engine."""

from __future__ import annotations

from typing import Any

import numpy.typing as npt


def read_only(a: npt.NDArray[Any]) -> npt.NDArray[Any]:
    """A read-only view of ``a`` (no copy: it always shows ``a``'s current values)."""
    v = a.view()
    v.flags.writeable = False
    return v
