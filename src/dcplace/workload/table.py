"""The in-memory request table: one struct of arrays for every trace and generator.

A request asks for ``cpu`` cores and ``mem`` GB from ``arrival`` to ``departure`` (seconds). ``multi_numa``
marks requests that span every NUMA node of one machine in equal parts (the paper's double-NUMA VMs on
2-node machines); the others take one NUMA node. ``departure`` is ``inf`` for a VM the trace never deletes.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TypeVar

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError

T = TypeVar("T", bound=np.generic)
F64 = npt.NDArray[np.float64]
I64 = npt.NDArray[np.int64]
B = npt.NDArray[np.bool_]


def _sealed(column: npt.NDArray[T]) -> npt.NDArray[T]:
    """A column this module just made (an indexing's copy, no one else's): read-only as it is, so the table's
    check need not copy it again."""
    column.flags.writeable = False
    return column


@dataclass(frozen=True)
class RequestTable:
    """Requests sorted by arrival (ties keep trace order).

    Attributes:
        vmid: ``(n,)`` int64, the id in the source trace.
        arrival: ``(n,)`` float64 seconds, non-decreasing.
        departure: ``(n,)`` float64 seconds, ``>= arrival``; ``inf`` when the VM is never deleted.
        cpu: ``(n,)`` float64 cores, > 0.
        mem: ``(n,)`` float64 GB, > 0.
        multi_numa: ``(n,)`` bool, spans all NUMA nodes of its machine.
        censored: ``(n,)`` bool, true when the trace only bounds the lifetime from below (Azure ``C`` tokens).
        line: ``(n,)`` int64, the 1-based source line (for error messages); 0 for generated requests.
        source: where the table came from (a path or a generator name).
        numa_given: the source says each request's NUMA span (a live cluster's journal, an event log with a
            ``multi`` column): :meth:`with_double_numa_threshold` keeps it instead of deciding by memory.
    """

    vmid: I64
    arrival: F64
    departure: F64
    cpu: F64
    mem: F64
    multi_numa: B
    censored: B
    line: I64
    source: str = "<memory>"
    numa_given: bool = False

    def __post_init__(self) -> None:
        """Check the columns (a table built in Python gets the checks a file's rows get: a negative cpu, a NaN
        arrival or a missing ``multi_numa`` row ran, or failed deep inside) and make them read-only."""
        n = len(self.vmid)
        for name in ("arrival", "departure", "cpu", "mem", "multi_numa", "censored", "line"):
            if len(getattr(self, name)) != n:
                raise InputError(f"column {name} has {len(getattr(self, name))} rows, expected {n}", field=name)
        for name, ok in (
            ("arrival", np.isfinite(self.arrival)),  # any sign: Azure's spread puts a first bin's VMs before 0
            ("departure", ~np.isnan(self.departure)),
            ("cpu", np.isfinite(self.cpu) & (self.cpu > 0)),
            ("mem", np.isfinite(self.mem) & (self.mem > 0)),
        ):
            bad = np.flatnonzero(~ok)
            if len(bad):
                must = {"arrival": "finite", "departure": "a number (inf: never)"}.get(name, "finite and > 0")
                raise InputError(f"request {int(bad[0])} (vmid {int(self.vmid[bad[0]])}) has {name} "
                                 f"{getattr(self, name)[bad[0]]:g}; it must be {must}", field=name)  # fmt: skip
        if n and np.any(np.diff(self.arrival) < 0):
            raise InputError("arrivals must be sorted (RequestTable.from_arrays sorts them)", field="arrival")
        early = np.flatnonzero(self.departure < self.arrival)
        if len(early):
            i = int(early[0])
            raise InputError(f"request {i} (vmid {int(self.vmid[i])}) departs at {self.departure[i]:g}, before its "
                             f"arrival at {self.arrival[i]:g}", field="departure")  # fmt: skip
        for name in ("vmid", "arrival", "departure", "cpu", "mem", "multi_numa", "censored", "line"):
            column = np.asarray(getattr(self, name))
            if column.flags.writeable:  # frozen means frozen: t.cpu[0] = 999 changed the table; the caller's array
                column = column.copy()  # is copied, not made read-only under the caller
                column.flags.writeable = False
            object.__setattr__(self, name, column)

    def __len__(self) -> int:
        return len(self.vmid)

    @classmethod
    def from_arrays(
        cls,
        arrival: npt.ArrayLike,
        departure: npt.ArrayLike,
        cpu: npt.ArrayLike,
        mem: npt.ArrayLike,
        *,
        multi_numa: npt.ArrayLike | None = None,
        censored: npt.ArrayLike | None = None,
        vmid: npt.ArrayLike | None = None,
        line: npt.ArrayLike | None = None,
        source: str = "<memory>",
        numa_given: bool = False,
    ) -> RequestTable:
        """Build a table, sorting by arrival (stable) if needed. Every column must have one entry per request (an
        extra departure was dropped without a word)."""
        arr = np.asarray(arrival, dtype=np.float64)
        n = len(arr)
        for name, col in (("departure", departure), ("cpu", cpu), ("mem", mem), ("multi_numa", multi_numa),
                          ("censored", censored), ("vmid", vmid), ("line", line)):  # fmt: skip
            if col is not None and len(np.asarray(col)) != n:
                raise InputError(f"column {name} has {len(np.asarray(col))} rows, arrival {n}", field=name)
        dep = np.asarray(departure, dtype=np.float64)
        c = np.asarray(cpu, dtype=np.float64)
        m = np.asarray(mem, dtype=np.float64)
        mn = np.zeros(n, bool) if multi_numa is None else np.asarray(multi_numa, dtype=bool)
        cen = np.zeros(n, bool) if censored is None else np.asarray(censored, dtype=bool)
        ids = np.arange(n, dtype=np.int64) if vmid is None else np.asarray(vmid, dtype=np.int64)
        ln = np.zeros(n, np.int64) if line is None else np.asarray(line, dtype=np.int64)
        order = np.argsort(arr, kind="stable")
        return cls(
            vmid=_sealed(ids[order]),
            arrival=_sealed(arr[order]),
            departure=_sealed(dep[order]),
            cpu=_sealed(c[order]),
            mem=_sealed(m[order]),
            multi_numa=_sealed(mn[order]),
            censored=_sealed(cen[order]),
            line=_sealed(ln[order]),
            source=source,
            numa_given=numa_given,
        )

    def subset(self, rows: npt.ArrayLike) -> RequestTable:
        """The requests at ``rows`` (ascending indices, so arrival order is kept)."""
        idx = np.asarray(rows, dtype=np.int64)
        if len(idx) > 1 and np.any(np.diff(idx) <= 0):
            raise ValueError("rows must be strictly ascending")
        return RequestTable(
            vmid=_sealed(self.vmid[idx]), arrival=_sealed(self.arrival[idx]), departure=_sealed(self.departure[idx]),
            cpu=_sealed(self.cpu[idx]), mem=_sealed(self.mem[idx]), multi_numa=_sealed(self.multi_numa[idx]),
            censored=_sealed(self.censored[idx]), line=_sealed(self.line[idx]), source=self.source,
            numa_given=self.numa_given,
        )  # fmt: skip

    @property
    def lifetime(self) -> F64:
        """``departure - arrival`` in seconds (``inf`` for never-deleted VMs)."""
        return np.asarray(self.departure - self.arrival)

    def with_double_numa_threshold(self, threshold_gb: float) -> RequestTable:
        """Classify as multi-NUMA every request with memory strictly above ``threshold_gb`` (VMAgent's rule); a table
        whose source says each request's span (``numa_given``) keeps it."""
        if not threshold_gb >= 0:
            raise InputError(
                f"double_threshold must be a non-negative number of GB, got {threshold_gb}", field="double_threshold"
            )
        if self.numa_given:
            return self
        return replace(self, multi_numa=np.asarray(self.mem > threshold_gb))
