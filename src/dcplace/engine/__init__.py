"""The live placement engine: machines with NUMA nodes, an allocation ledger, place / release / drain / fail through
the simulator's transitions, any NUMA policy deciding, durable state (SQLite), explanations (docs/engine.md)."""

from dcplace.engine.cluster_state import ClusterState, VmRecord
from dcplace.engine.engine import (
    Conflict,
    Decision,
    FailReport,
    MachineInfo,
    NotFound,
    Placement,
    PlacementEngine,
    Rejection,
    VmRequest,
    read_allocations,
    write_allocations,
)
from dcplace.engine.explain import Candidate, Explanation
from dcplace.engine.store import SqliteStore, Store, StoreError

__all__ = [
    "Candidate",
    "ClusterState",
    "Conflict",
    "Decision",
    "Explanation",
    "FailReport",
    "MachineInfo",
    "NotFound",
    "Placement",
    "PlacementEngine",
    "Rejection",
    "SqliteStore",
    "Store",
    "StoreError",
    "VmRecord",
    "VmRequest",
    "read_allocations",
    "write_allocations",
]
