"""Why a request went where it went, or nowhere: counts of machines by reason, the policy's top candidates.

Every machine in the cluster falls in exactly one class for a request ``d`` (``cpu``, ``mem``, single- or
multi-NUMA), checked in this order:

1. ``failed`` or 2. ``drained``: the machine may not receive VMs;
3. ``feasible``: :func:`dcplace.sim.numa_kernel.fits` holds at some node (at every node's ``1/K`` share for a
   multi-NUMA VM), the same filter the policies use;
4. ``cpu``: the machine's free CPU summed over its nodes is below the request's CPU;
5. ``mem``: enough CPU in total, but the free memory summed over the nodes is below the request's memory;
6. ``numa``: enough of both in total, but no single node holds the VM (or, for a multi-NUMA VM, not every node
   holds its share): the capacity is split across NUMA nodes.

So ``feasible + sum(infeasible.values()) == machines``. The counts come from one compiled pass over the machines
(:func:`reason_counts`, a few microseconds at 1,000 machines), cheap enough for every call.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numba as nb
import numpy as np

from dcplace.engine.cluster_state import ABSENT, DRAINED, FAILED
from dcplace.sim import numa_kernel as K

REASONS = ("cpu", "mem", "numa", "drained", "failed")
_FEASIBLE = 0
_CPU = 1
_MEM = 2
_NUMA = 3
_DRAINED = 4
_FAILED = 5


@nb.njit(cache=True, nogil=True)
def machine_class(free: np.ndarray, status: np.ndarray, d: np.ndarray, multi: bool, m: int) -> int:
    """The class of machine ``m`` for request ``d`` (module docstring): 0 feasible, 1 cpu, 2 mem, 3 numa,
    4 drained, 5 failed; -1 for an empty slot."""
    s = status[m]
    if s == ABSENT:
        return -1
    if s == FAILED:
        return _FAILED
    if s == DRAINED:
        return _DRAINED
    KN = free.shape[1]
    for k in range(1 if multi else KN):
        if K.fits(free, d, multi, m, k):
            return _FEASIBLE
    cpu = 0.0
    mem = 0.0
    for k in range(KN):
        cpu += free[m, k, 0]
        mem += free[m, k, 1]
    if cpu < d[0]:
        return _CPU
    if mem < d[1]:
        return _MEM
    return _NUMA


@nb.njit(cache=True, nogil=True)
def reason_counts(free: np.ndarray, status: np.ndarray, d: np.ndarray, multi: bool, n_active: int) -> np.ndarray:
    """``(6,)`` int64: machines feasible, then infeasible for cpu, mem, numa, drained, failed (module docstring)."""
    out = np.zeros(6, np.int64)
    for m in range(n_active):
        c = machine_class(free, status, d, multi, m)
        if c >= 0:
            out[c] += 1
    return out


@nb.njit(cache=True, nogil=True)
def machine_classes(free: np.ndarray, status: np.ndarray, d: np.ndarray, multi: bool, n_active: int) -> np.ndarray:
    """``(n_active,)`` int64: :func:`machine_class` of every slot."""
    out = np.empty(n_active, np.int64)
    for m in range(n_active):
        out[m] = machine_class(free, status, d, multi, m)
    return out


#: Class code -> name (index 0 is feasible).
CLASS_NAMES = ("feasible", *REASONS)


@dataclass(frozen=True)
class Candidate:
    """One of the policy's best actions: the machine, its node (None: every node) and the policy's score key."""

    machine: str
    node: int | None
    score: tuple[float, ...]


@dataclass(frozen=True)
class Explanation:
    """Why a decision came out as it did (see the module docstring for the classes)."""

    policy: str
    machines: int
    """Machines in the cluster (every state)."""
    feasible: int
    """Machines that could host the request."""
    infeasible: dict[str, int]
    """Machines that could not, by reason (``cpu``, ``mem``, ``numa``, ``drained``, ``failed``)."""
    candidates: list[Candidate] = field(default_factory=list)
    """The policy's best actions with their score, best first (its ``rank``; the chosen one first)."""
    chosen: Candidate | None = None
    """Where the request went (None for a rejection)."""
    summary: str = ""
    """One sentence: the decision and its main reason."""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def counts_dict(counts: np.ndarray) -> tuple[int, dict[str, int]]:
    """(feasible, {reason: machines}) from :func:`reason_counts`' array."""
    return int(counts[_FEASIBLE]), {r: int(counts[i + 1]) for i, r in enumerate(REASONS)}


def rejection_sentence(cpu: float, mem: float, multi: bool, machines: int, infeasible: dict[str, int]) -> str:
    """One sentence saying why no machine could host the request."""
    span = "multi-NUMA" if multi else "single-NUMA"
    if machines == 0:
        return f"no machine is registered, so the {span} VM ({cpu:g} cores, {mem:g} GB) cannot be placed"
    parts = [f"{n} {_WORDS[r]}" for r, n in infeasible.items() if n]
    return f"no machine can host the {span} VM ({cpu:g} cores, {mem:g} GB): " + ", ".join(parts)


_WORDS = {
    "cpu": "short of CPU",
    "mem": "short of memory",
    "numa": "with enough in total but not on one NUMA node",
    "drained": "drained",
    "failed": "failed",
}
