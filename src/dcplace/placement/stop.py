"""When a placement method must stop: a monotonic deadline that every method honours.

A method never threads seconds by hand: it gets a :class:`Stop`, asks ``remaining()`` or ``expired()``, and hands a
*share* of what is left to a sub-step (``stop.share(0.8)``: 80 % of the time left now, ending no later than ``stop``
itself). ``Deadline(math.inf)`` never expires. The clock is ``time.monotonic``: system-wide on Linux, so a deadline
is also valid in a worker process of the same machine.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from typing import Protocol

from dcplace.errors import InputError


class Stop(Protocol):
    """A stop criterion: how long is left, whether it is over, and a sub-budget of what is left."""

    def remaining(self) -> float:
        """Seconds left (``math.inf`` for no limit; 0.0 once over)."""
        ...

    def expired(self) -> bool:
        """Whether the method must stop now."""
        ...

    def share(self, fraction: float, *, least: float = 0.0, most: float = math.inf) -> Stop:
        """A sub-budget: ``fraction`` of the time left now, clamped to [``least``, ``most``] seconds."""
        ...


@dataclass(frozen=True)
class Deadline:
    """Stop ``seconds`` after construction (wall clock, monotonic). ``seconds`` must be positive; ``math.inf``
    means no limit."""

    seconds: float
    """Budget in seconds from construction, > 0 (``math.inf``: never stop)."""
    end: float = field(default=math.nan, compare=False)
    """``time.monotonic()`` value at which the deadline expires (set at construction when not given)."""

    def __post_init__(self) -> None:
        if not self.seconds > 0:  # also catches NaN
            exc = InputError(f"time_limit must be positive, got {self.seconds!r}")
            exc.field = "time_limit"
            raise exc
        if math.isnan(self.end):
            object.__setattr__(self, "end", time.monotonic() + self.seconds)

    def remaining(self) -> float:
        return max(self.end - time.monotonic(), 0.0) if math.isfinite(self.end) else math.inf

    def expired(self) -> bool:
        return time.monotonic() >= self.end

    def share(self, fraction: float, *, least: float = 0.0, most: float = math.inf) -> Deadline:
        if not 0 < fraction <= 1:
            raise ValueError(f"fraction must be in (0, 1], got {fraction}")
        seconds = min(max(fraction * self.remaining(), least), most)
        return Deadline(max(seconds, 1e-9))


def as_stop(stop: Stop | float) -> Stop:
    """A stop criterion from a number of seconds (a :class:`Deadline`) or as given."""
    return Deadline(float(stop)) if isinstance(stop, int | float) else stop
