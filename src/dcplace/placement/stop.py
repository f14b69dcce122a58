"""When a placement method must stop: a monotonic deadline that every method honours.

A method never threads seconds by hand: it gets a :class:`Stop`, asks ``remaining()`` or ``expired()``, and hands a
*share* of what is left to a sub-step (``stop.share(0.8)``: 80 % of the time left now, ending no later than ``stop``
itself). ``Deadline(math.inf)`` never expires. The clock is ``time.monotonic``: system-wide on Linux, so a deadline
is also valid in a worker process of the same machine.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Protocol, TypeVar

from dcplace.errors import InputError

T = TypeVar("T")


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


def as_stop(stop: Stop | float | object) -> Stop:
    """A stop criterion from a number of seconds (a :class:`Deadline`) or as given."""
    if isinstance(stop, int | float) and not isinstance(stop, bool):
        return Deadline(float(stop))
    if not all(callable(getattr(stop, m, None)) for m in ("remaining", "expired", "share")):  # "10": AttributeError
        raise InputError(f"must be a number of seconds or a Stop (Deadline, ...), got {stop!r}", field="stop")
    return stop  # type: ignore[return-value]


def interruptible(solve: Callable[[], T], stop: Callable[[], object]) -> T:
    """``solve()`` run so that an interrupt is not lost: the solver works in a helper thread while the main thread
    waits; a ``KeyboardInterrupt`` (SIGINT) or the CLI's ``Terminated`` (SIGTERM) raised in the waiting thread calls
    ``stop()`` (the solver's thread-safe stop: CP-SAT's ``stop_search``, MPSolver's ``InterruptSolve``), waits for
    the solver to return and propagates, so nobody takes the cut-short answer for a finished one.

    The solver's own SIGINT handler must be off (it would swallow the signal and return as if a limit had been
    reached). Off the main thread, where no signal arrives, ``solve()`` simply runs.
    """
    if threading.current_thread() is not threading.main_thread():
        return solve()
    result: list[T] = []
    failed: list[BaseException] = []
    done = threading.Event()

    def work() -> None:
        try:
            result.append(solve())
        except BaseException as exc:  # handed to the waiting thread
            failed.append(exc)
        finally:
            done.set()

    threading.Thread(target=work, name="solver", daemon=True).start()
    try:
        done.wait()
    except BaseException:
        stop()
        while not done.wait(0.05):
            pass
        raise
    if failed:
        raise failed[0]
    return result[0]
