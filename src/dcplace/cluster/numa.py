"""Machines made of NUMA nodes, each with a capacity per resource.

The capacity array is the whole description: ``capacity[machine, numa, resource]``. Machines may differ
(heterogeneous clusters); every machine has the same number of NUMA nodes (pad a smaller machine with
zero-capacity nodes if needed).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.limits import check_memory

#: VMAgent's server: two NUMA nodes of 40 CPU cores and 90 GB each.
VMAGENT_NODE_CPU = 40.0
VMAGENT_NODE_MEM = 90.0


BYTES_PER_MACHINE = 128
"""Memory a simulated machine takes (cluster, state and per-decision score arrays), rounded up from 88 bytes
measured (peak RSS of ``simulate numa --pms 1000000`` minus ``--pms 1000``); the size guard of :mod:`dcplace.limits`."""


@dataclass(frozen=True)
class NumaCluster:
    """An immutable set of machines.

    Attributes:
        capacity: ``(machines, numa, resources)`` float64, the total of each resource on each NUMA node.
        resources: names of the resource axis, ``("cpu", "mem")`` by default (cores, GB).
    """

    capacity: npt.NDArray[np.float64]
    resources: tuple[str, ...] = field(default=("cpu", "mem"))

    def __post_init__(self) -> None:
        cap = np.asarray(self.capacity, dtype=np.float64)
        if cap.ndim != 3:
            raise InputError(f"capacity must have shape (machines, numa, resources), got {cap.shape}")
        if cap.shape[0] < 1 or cap.shape[1] < 1:
            raise InputError("a cluster needs at least one machine with at least one NUMA node")
        if cap.shape[2] != len(self.resources):
            raise InputError(f"capacity has {cap.shape[2]} resources but {len(self.resources)} names")
        if not np.all(np.isfinite(cap)) or np.any(cap < 0):
            raise InputError("capacities must be finite and non-negative")
        cap = np.ascontiguousarray(cap)
        cap.setflags(write=False)
        object.__setattr__(self, "capacity", cap)

    @classmethod
    def uniform(
        cls,
        machines: int,
        numa: int = 2,
        cpu: float = VMAGENT_NODE_CPU,
        mem: float = VMAGENT_NODE_MEM,
    ) -> NumaCluster:
        """``machines`` identical machines of ``numa`` nodes with ``cpu`` cores and ``mem`` GB per node."""
        if machines < 1:
            raise InputError(f"pms must be at least 1, got {machines}", field="pms")
        if numa < 1:
            raise InputError(f"a machine needs at least one NUMA node, got {numa}")
        check_memory(machines * BYTES_PER_MACHINE, f"{machines:,} machines", "pms")
        cap = np.empty((machines, numa, 2), dtype=np.float64)
        cap[:, :, 0] = cpu
        cap[:, :, 1] = mem
        return cls(cap)

    @property
    def machines(self) -> int:
        return int(self.capacity.shape[0])

    @property
    def numa(self) -> int:
        return int(self.capacity.shape[1])
