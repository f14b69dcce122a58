"""The live placement engine: machines with NUMA nodes, an allocation ledger, place / release / drain / fail
through the simulator's transitions, any NUMA policy deciding, periodic re-optimisation with verified migration
plans, durable state (SQLite), explanations (docs/engine.md, docs/reoptimisation.md); and the network-aware setting
live: multi-server jobs with bandwidth on a datacenter network (:mod:`dcplace.engine.network`)."""

from dcplace.engine.cluster_state import ClusterState, VmRecord
from dcplace.engine.engine import (
    BulkPlacement,
    Conflict,
    Decision,
    FailReport,
    MachineInfo,
    MachineSpec,
    NotFound,
    Placement,
    PlacementEngine,
    ReconcileReport,
    Rejection,
    Unavailable,
    VmColumns,
    VmListing,
    VmPage,
    VmRequest,
    allocation_rows,
    check_id,
    read_allocations,
    read_allocations_at,
    read_machines_at,
    write_allocations,
)
from dcplace.engine.explain import Candidate, Explanation
from dcplace.engine.network import JobPlacement, JobRejection, NetJob, NetMove, NetRoomPlan, NetworkEngine
from dcplace.engine.network_check import check_room_plan
from dcplace.engine.reopt import MoveRecord, ReoptPolicy, ReoptReport, efficiency
from dcplace.engine.store import SqliteStore, Store, StoreError

__all__ = [
    "BulkPlacement",
    "Candidate",
    "ClusterState",
    "Conflict",
    "Decision",
    "Explanation",
    "FailReport",
    "JobPlacement",
    "JobRejection",
    "MachineInfo",
    "MachineSpec",
    "MoveRecord",
    "NetJob",
    "NetMove",
    "NetRoomPlan",
    "NetworkEngine",
    "NotFound",
    "Placement",
    "PlacementEngine",
    "ReconcileReport",
    "Rejection",
    "ReoptPolicy",
    "ReoptReport",
    "SqliteStore",
    "Store",
    "StoreError",
    "Unavailable",
    "VmColumns",
    "VmListing",
    "VmPage",
    "VmRecord",
    "VmRequest",
    "allocation_rows",
    "check_id",
    "check_room_plan",
    "efficiency",
    "read_allocations",
    "read_allocations_at",
    "read_machines_at",
    "write_allocations",
]
