"""A re-entrant lock a long call can step aside from: the network engine's lock.

``NetworkEngine.make_room`` tries the racks one after another, each on a copy of the state, and took 0.46 s on delta
(docs/benchmarks.md) with the engine's lock held: every placement and release waited behind it. Trying the racks on
a snapshot without the lock, as a VM re-optimisation solves, would run the policy and the routing's caches and
scratch buffers from two threads at once, and neither is made for that. So the search keeps the lock but lets the
calls waiting for it go first between two racks (:meth:`YieldingLock.let_waiters_go`), and starts again where one of
them changed the state. :class:`threading.RLock` cannot say whether anyone waits, and a thread that releases it and
takes it again at once usually wins it back before a waiter wakes; this lock counts its waiters and, stepping
aside, waits until they have had it.
"""

from __future__ import annotations

import threading
import time
from types import TracebackType

STEP_ASIDE_S = 0.05
"""The longest :meth:`YieldingLock.let_waiters_go` waits for the waiting calls to take the lock before it takes it
back (calls that keep coming would otherwise hold the long one off for good)."""


class YieldingLock:
    """A re-entrant lock (as :class:`threading.RLock`, and usable as a context manager) that counts the threads
    waiting for it, so that its holder can let them go first (:meth:`let_waiters_go`)."""

    def __init__(self) -> None:
        self._lock = threading.RLock()
        self._tally = threading.Lock()
        self._waiting = 0
        self._owner: int | None = None
        self._depth = 0  # changed only by the owner, holding the lock

    @property
    def waiting(self) -> int:
        """Threads blocked in :meth:`acquire` now (a count read without a lock: a hint, exact once they settle)."""
        return self._waiting

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        if not blocking and timeout != -1:
            raise ValueError("can't specify a timeout for a non-blocking call")  # as threading.RLock says it
        if not self._lock.acquire(blocking=False):
            if not blocking:
                return False
            with self._tally:
                self._waiting += 1
            try:
                if not self._lock.acquire(True, timeout):
                    return False
            finally:
                with self._tally:
                    self._waiting -= 1
        self._owner = threading.get_ident()
        self._depth += 1
        return True

    def release(self) -> None:
        if self._owner != threading.get_ident():
            raise RuntimeError("cannot release a lock this thread does not hold")
        self._depth -= 1
        if not self._depth:
            self._owner = None
        self._lock.release()

    def __enter__(self) -> bool:
        return self.acquire()

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        self.release()

    def let_waiters_go(self, max_wait_s: float = STEP_ASIDE_S) -> bool:
        """Held once by this thread and waited for by others: release it, wait until the threads waiting have taken
        it (at most ``max_wait_s``), take it back (behind the one holding it then) and answer True. Otherwise
        (nobody waits, or this thread holds it more than once, an outer call's hold it cannot give away) nothing
        happens: False. Whatever the holder read under the lock may have changed once this answers True."""
        if not self._waiting or self._owner != threading.get_ident() or self._depth != 1:
            return False
        self.release()
        try:
            deadline = time.perf_counter() + max_wait_s
            while self._waiting and time.perf_counter() < deadline:
                time.sleep(0.0002)  # the waiters take it in turn; each leaves the count as it does
        finally:  # taken back even where an exception (a signal's) ends the wait: the caller's release expects it
            self.acquire()
        return True
