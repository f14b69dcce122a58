"""What every placement method returns: one immutable :class:`Result`, the same shape for every method."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, fields
from types import MappingProxyType
from typing import Any

import numpy as np
import numpy.typing as npt

STATUSES = ("optimal", "feasible", "infeasible", "unknown")


def _frozen_array(a: npt.ArrayLike | None) -> npt.NDArray[np.int64] | None:
    if a is None:
        return None
    if isinstance(a, np.ndarray) and a.dtype == np.int64 and not a.flags.writeable:
        return a  # already frozen (a ``replace`` of a result): no copy
    out = np.array(a, dtype=np.int64)  # a copy: the caller's array stays the caller's
    out.setflags(write=False)
    return out


@dataclass(frozen=True)
class Result:
    """One answer of a placement method; read-only (derive a changed copy with ``dataclasses.replace``).

    ``status``: ``optimal`` (cost proven equal to the bound), ``feasible`` (an answer, not proven optimal),
    ``infeasible`` (proven to have no answer) or ``unknown`` (no answer within the stop criterion). ``cost`` and
    ``bound`` are in the problem's cost unit (PM cost for :class:`~dcplace.placement.problem.Problem`, servers for a
    :class:`~dcplace.placement.numa_batch.NumaBatch`; from a current placement, that plus the migration cost, with
    the parts in ``stats``: ``machine_cost`` / ``servers``, ``migration_cost``, ``migrations``);
    ``gap = (cost - bound) / cost``. ``verified`` is true only
    when the independent checker accepted the assignment; ``violations`` says what it rejected.
    """

    instance: str
    """Name of the problem solved."""
    method: str
    """Name of the method that produced the answer."""
    status: str
    """optimal, feasible, infeasible or unknown."""
    cost: float | None = None
    """Objective of the answer, or None without one."""
    bound: float | None = None
    """Proven lower bound on the optimum, or None."""
    wall_s: float = 0.0
    """Seconds the method ran (wall clock, verification excluded)."""
    vms: int = 0
    """VMs in the problem."""
    vm_pm: npt.NDArray[np.int64] | None = field(default=None, repr=False)
    """(vms,) int64, read-only: the PM (server) of each VM, or None without an answer."""
    vm_disks: Sequence[Sequence[int]] | None = field(default=None, repr=False)
    """Per VM, the physical disk of each of its virtual disks (problems with disks; stored as tuples), else None."""
    vm_node: npt.NDArray[np.int64] | None = field(default=None, repr=False)
    """(vms,) int64, read-only: the NUMA node of each VM, -1 for one split over both (NUMA batches), else None."""
    verified: bool = False
    """Whether the independent checker accepted the assignment."""
    violations: tuple[str, ...] = ()
    """What the checker rejected (empty when verified)."""
    stats: Mapping[str, Any] = field(default_factory=dict)
    """Method statistics (read-only mapping), e.g. greedy's ``cost_mean`` or pattern's ``cg_rounds``."""

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"status must be one of {', '.join(STATUSES)}, got {self.status!r}")
        object.__setattr__(self, "vm_pm", _frozen_array(self.vm_pm))
        object.__setattr__(self, "vm_node", _frozen_array(self.vm_node))
        disks = self.vm_disks
        if disks is not None and not (isinstance(disks, tuple) and all(type(v) is tuple for v in disks)):
            object.__setattr__(self, "vm_disks", tuple(map(tuple, disks)))
        object.__setattr__(self, "violations", tuple(self.violations))
        object.__setattr__(self, "stats", MappingProxyType(dict(self.stats)))

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        """Pickle through the constructor (the read-only stats mapping does not pickle by itself), e.g. from a
        worker process."""
        values = {f.name: getattr(self, f.name) for f in fields(self)}
        return (_rebuild, (values | {"stats": dict(self.stats)},))

    @property
    def gap(self) -> float | None:
        """``(cost - bound) / cost``, or None without both (or with a zero cost)."""
        if self.cost is None or self.bound is None or self.cost == 0:
            return None
        return (self.cost - self.bound) / self.cost

    @property
    def pms_used(self) -> int:
        """Distinct PMs (servers) the answer uses."""
        return 0 if self.vm_pm is None else len(np.unique(self.vm_pm))

    def summary(self) -> dict[str, Any]:
        """The flat record ``dcplace solve --json`` prints and reproductions write (statistics merged in). An
        assignment the checker rejected has status ``invalid`` there, whatever the method claimed (as a NUMA batch's
        record does), so a reader of ``status`` alone is not misled."""
        rejected = self.vm_pm is not None and not self.verified and bool(self.violations)
        return {
            "instance": self.instance,
            "method": self.method,
            "status": "invalid" if rejected else self.status,
            "cost": self.cost,
            "bound": self.bound,
            "gap": self.gap,
            "wall_s": self.wall_s,
            "pms_used": self.pms_used,
            "vms": self.vms,
            "verified": self.verified,
            **({"violations": list(self.violations)} if self.violations else {}),
            **self.stats,
        }


def _rebuild(values: dict[str, Any]) -> Result:
    return Result(**values)
