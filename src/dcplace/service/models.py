"""Request and response bodies of the placement service (pydantic; they are also the OpenAPI schema)."""

from __future__ import annotations

import functools
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PositiveFloat

from dcplace.engine.engine import MAX_AMOUNT, MIN_AMOUNT

_SPACE = r" \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
"""Python's whitespace (``str.strip``, the engine's rule) outside the control characters, spelled out: ``\\s``
means other sets in other regex engines (ECMA-262's, which a client's JSON Schema validator uses, holds U+FEFF and
not U+0085), so an id one side took the other refused."""
_CONTROL = r"\x00-\x1f\x7f"
ID_PATTERN = rf"^[^{_SPACE}{_CONTROL}]([^{_CONTROL}]*[^{_SPACE}{_CONTROL}])?$"
""":func:`dcplace.engine.check_id` as a regular expression with no class shorthand, so that every engine reads it
alike (``tests/service/test_openapi_contract.py`` checks it against the engine character by character)."""
ID_RULE = "1-256 characters, no surrounding spaces, no control characters such as NUL or a newline"

Ident = Field(min_length=1, max_length=256, pattern=ID_PATTERN, description=f"A unique id ({ID_RULE})")
Uid = Field(default=None, min_length=1, max_length=256, pattern=ID_PATTERN,
            description="this incarnation's id, e.g. a pod's UID (optional): a retry sends the same and gets its "
                        "placement back, another VM under a reused id sends another and is a 409; DELETE "
                        f"/vms/{{id}}?uid= frees only it ({ID_RULE})")  # fmt: skip

Amount = Annotated[
    PositiveFloat,
    Field(json_schema_extra={"minimum": MIN_AMOUNT, "maximum": MAX_AMOUNT}),
]
"""Cores or GB: the engine's bounds (``MIN_AMOUNT``, ``MAX_AMOUNT``), stated in the schema and enforced by the engine,
whose refusal names them."""


@functools.cache
def served_policies() -> frozenset[str]:
    """The policy names a request may give: the registered NUMA policies and installed plugins' entry points, read
    once. Never a ``package.module:Name`` reference: over HTTP that would import and call any function on the
    server."""
    from dcplace.policies.registry import policy_names

    return frozenset(policy_names("numa"))


def check_policy(name: str) -> str:
    """``name`` if the service takes it (:func:`served_policies`), else ValueError (a 422 naming the field)."""
    if name not in served_policies():
        raise ValueError(f"must be a registered policy ({', '.join(sorted(served_policies()))}), got {name!r}")
    return name


PolicyName = Annotated[str, AfterValidator(check_policy)]


class MachineIn(BaseModel):
    """A machine to register: CPU cores and memory GB per NUMA node (one number for every node, or one each)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    id: str = Ident
    cpu: Amount | list[Amount] = Field(description="cores per NUMA node (a list: one per node)", examples=[40])
    mem: Amount | list[Amount] = Field(description="GB per NUMA node (a list: one per node)", examples=[90])
    rack: str | None = Field(default=None, min_length=1, max_length=256, pattern=ID_PATTERN,
                             description=f"the machine's rack ({ID_RULE})")  # fmt: skip


class MachineChangeIn(BaseModel):
    """A registered machine's new capacity or rack; what is left out stays as it is."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    cpu: Amount | list[Amount] | None = Field(default=None, description="cores per NUMA node (a list: one per node)")
    mem: Amount | list[Amount] | None = Field(default=None, description="GB per NUMA node (a list: one per node)")
    rack: str | None = Field(default=None, min_length=1, max_length=256, pattern=ID_PATTERN,
                             description=f"the machine's rack ({ID_RULE}); null: none")  # fmt: skip


class MachinesIn(BaseModel):
    """Machines registered with one commit, all or nothing; one already registered exactly so is skipped."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    machines: list[MachineIn] = Field(min_length=1, max_length=10_000)


class MachineOut(BaseModel):
    id: str
    status: Literal["active", "drained", "failed"]
    rack: str | None
    cpu: list[float]
    mem: list[float]
    free_cpu: list[float]
    free_mem: list[float]
    vms: int


class VmBatchItem(BaseModel):
    """A VM of a batch: placed with the batch's policy, without an explanation (naming either is a 422)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    id: str = Ident
    cpu: Amount = Field(description="cores", examples=[4])
    mem: Amount = Field(description="GB", examples=[8])
    multi_numa: bool = Field(default=False, description="split evenly over every NUMA node of one machine")
    pinned: bool = Field(default=False, description="never moved by re-optimisation")
    uid: str | None = Uid


class VmIn(VmBatchItem):
    """A VM to place."""

    policy: PolicyName | None = Field(default=None, description="a registered policy; default: the service's")
    explain: bool = Field(default=True, description="return the decision's explanation")


class ExplainIn(BaseModel):
    """A dry run: where would this VM go now, and why."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    cpu: Amount
    mem: Amount
    multi_numa: bool = False
    policy: PolicyName | None = None


class CandidateOut(BaseModel):
    machine: str
    node: int | None
    score: list[float] = Field(description="the policy's key (lower is better for the heuristics)")


class ExplanationOut(BaseModel):
    policy: str
    machines: int
    feasible: int
    infeasible: dict[str, int] = Field(description="machines by reason: cpu, mem, numa, drained, failed")
    candidates: list[CandidateOut]
    chosen: CandidateOut | None
    summary: str


class PlacementOut(BaseModel):
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)  # always sent: clients branch on it
    accepted: Literal[True] = True
    vm: str
    machine: str
    node: int | None = Field(description="NUMA node; null when the VM spans every node")
    explanation: ExplanationOut | None
    replayed: bool = Field(
        False,
        description="true: the VM was already placed with this size and span (a retry after a lost answer): its "
        "placement as it is now, nothing changed, answered once the first placement was durable, 200 instead of 201",
    )


class RejectionOut(BaseModel):
    model_config = ConfigDict(json_schema_serialization_defaults_required=True)
    accepted: Literal[False] = False
    vm: str
    detail: str = Field(description="one sentence: why")
    code: str = Field(description="no-fit, declined (by the policy) or invalid (the policy chose an infeasible action)")
    explanation: ExplanationOut | None


class VmOut(BaseModel):
    id: str
    machine: str
    node: int | None
    cpu: float
    mem: float
    multi: bool
    pinned: bool = Field(description="never moved by re-optimisation (false in a release's answer)")
    uid: str | None = Field(default=None, description="the uid it was placed with (null: none; null in a release's "
                                                       "answer)")  # fmt: skip


class FailOut(BaseModel):
    machine: str
    replaced: list[PlacementOut]
    dropped: list[RejectionOut]


class PinIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    pinned: bool = Field(description="true: re-optimisation never moves the VM")


class ReoptIn(BaseModel):
    """A re-optimisation event (dcplace.engine.ReoptPolicy's fields; the triggers are the server's)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    selection: Literal["all", "underused"] = Field(default="all", description="which VMs may move")
    underused_below: float = Field(default=0.5, gt=0, le=1, description="fill below which a machine is underused")
    cooldown_s: float = Field(default=0.0, ge=0, description="VMs moved less than this long ago stay")
    migration_weight: float = Field(
        default=1.0, ge=0, le=1e6, description="cost of a move: weight x memory / a machine's"
    )
    max_moves: int | None = Field(default=None, ge=0, description="budget: moves per event")
    max_gb: float | None = Field(default=None, ge=0, description="budget: GB copied per event")
    time_limit_s: float = Field(default=10.0, gt=0, le=3600, description="optimiser wall-clock limit")
    bound: bool = Field(default=False, description="also prove the typed relaxation's lower bound")
    improve_s: float = Field(default=0.0, ge=0, le=3600,
                             description="seconds of CP-SAT after the heuristic, at most time_limit_s")  # fmt: skip
    execute: bool = Field(default=True, description="false: plan only (a dry run)")


class MoveOut(BaseModel):
    vm: str
    source: str | None = Field(description="machine it left; null: it had no home (failed machine)")
    machine: str
    node: int | None
    staging: bool
    gb: float


class ReoptOut(BaseModel):
    trigger: str
    time: float | None
    vms: int
    movable: int
    machines_before: int
    machines_target: int
    machines_after: int
    bound: int | None
    bound_proven: bool
    migration_cost: float
    verified: bool
    complete: bool
    truncated: bool
    reason: str
    planned: int
    applied: int
    staging: int
    gb_moved: float
    solve_s: float
    plan_s: float
    check_s: float
    moves: list[MoveOut]
    dropped: list[str]
    held: dict[str, int] = Field(
        default_factory=dict,
        description="placed VMs that could not move, by the first reason that applies: unusable (a drained or failed "
        "machine's), pinned, selection (underused: a machine filled above the threshold), cooling (moved within the "
        "cool-down); empty for an evacuation",
    )


class ErrorOut(BaseModel):
    detail: str = Field(description="one sentence")


MAX_ROWS = 10_000
"""The most VMs one ``POST /vms/batch`` places or one ``POST /allocations`` records: a request's body is parsed and
validated on the event loop, and 300,000 allocations held every other request for 24 s (``serve --import FILE``
records a file of any size before serving)."""


class AllocationIn(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    vm: str = Ident
    machine: str
    node: int | Literal["all"] | None = Field(
        description='NUMA node, or null (or "all", as an import file says it): split over every node'
    )
    cpu: Amount
    mem: Amount
    pinned: bool = Field(default=False, description="never moved by re-optimisation")
    uid: str | None = Uid


AllocationsIn = Annotated[list[AllocationIn], Field(max_length=MAX_ROWS)]


class VmBatchIn(BaseModel):
    """Several VMs placed in order, as one ``POST /vms`` each would place them, with one commit."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    vms: list[VmBatchItem] = Field(min_length=1, max_length=MAX_ROWS)
    policy: PolicyName | None = Field(default=None, description="a registered policy; default: the service's")


class BatchOut(BaseModel):
    placed: int = Field(description="VMs placed by this request (replays not counted)")
    rejected: int
    replayed: int = Field(description="VMs that were already placed so (a retried batch): answered, not placed again")
    results: list[PlacementOut | RejectionOut]


class HealthOut(BaseModel):
    status: Literal["ok"]
    machines: int = Field(description="machines registered")
    vms: int = Field(description="VMs placed")
    jobs: int | None = Field(default=None, description="with `serve --network`: jobs running")


class Resources(BaseModel):
    cpu: float = Field(description="cores")
    mem: float = Field(description="GB")


class JournalEntryOut(BaseModel):
    seq: int = Field(description="grows with every entry: pass the last one read as `after` to read on")
    at: float = Field(description="Unix time the operation was submitted")
    event: str = Field(description="placed, moved, pinned, unpinned, released, dropped, rejected, machine-added, "
                                   "machine-drained, machine-active, machine-failed, machine-changed, "
                                   "machine-removed, "
                                   "journal-resumed")  # fmt: skip
    vm: str | None
    machine: str | None
    node: int | None = Field(description="the VM's NUMA node (null: over every node, or not a VM event)")
    cpu: float | None
    mem: float | None
    multi: bool | None
    detail: dict[str, Any] | None = Field(
        description="placed, released, dropped: the VM's uid and pinned, where it had them; moved: from, from_node; "
        "VM events: by (import, reconcile, reported, resize, reoptimisation, evacuation, failure, bind, assign), where "
        "not a "
        "client's own call; "
        "rejected: reason; machine-added, machine-removed: slot, rack, status, capacity per NUMA node; "
        "machine-changed: from_rack, from_capacity, rack, capacity; other machine events: from (the status before); "
        "journal-resumed: off_since"
    )


class JournalOut(BaseModel):
    entries: list[JournalEntryOut] = Field(description="oldest first")
    next: int | None = Field(description="`after` for the next page; null: nothing more now")


class StateOut(BaseModel):
    machines: dict[str, int] = Field(description="machines by status: active, drained, failed")
    machines_in_use: int
    vms: int
    capacity: Resources = Field(description="every registered machine, drained and failed included")
    allocated: Resources
    counters: dict[str, int] = Field(
        description="since the service started (docs/engine.md): placed, rejected "
        "(and by code), released, dropped, imported, migrated, reoptimisations"
    )


class SnapshotMachine(BaseModel):
    id: str
    slot: int
    rack: str | None
    status: Literal["active", "drained", "failed"]
    capacity: list[list[float]] = Field(description="per NUMA node: [cores, GB]")


class SnapshotOut(BaseModel):
    numa: int = Field(description="NUMA nodes per machine")
    machines: list[SnapshotMachine]
    vms: list[VmOut] = Field(description="by id")
    seq: int | None = Field(None, description="with `seq` or `at`: the journal entry this state is right after (a "
                            "`seq` inside one operation's entries gives that operation's last)")  # fmt: skip


class NoEventOut(BaseModel):
    """``{}``: no background event has run yet."""

    model_config = ConfigDict(extra="forbid")


class EventErrorOut(BaseModel):
    model_config = ConfigDict(extra="forbid")
    error: str = Field(description="one sentence: why the cluster could not be re-optimised")


LastReoptOut = ReoptOut | NoEventOut | EventErrorOut


MAX_INVENTORY = 200_000
"""The most allocations one ``POST /allocations/reconcile`` takes (a whole cluster's inventory: about 22 MB of JSON;
read and checked off the event loop, so other requests are served meanwhile)."""


class ResizeIn(BaseModel):
    """A VM's new size where it runs, after a resize done outside dcplace."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    cpu: Amount
    mem: Amount


class MoveIn(BaseModel):
    """Where a VM now runs, after a live migration done outside dcplace."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    machine: str
    node: int | Literal["all"] | None = Field(
        description='NUMA node; null (or "all") for a VM split over every node, as it is'
    )


class ReconcileMoveOut(BaseModel):
    vm: str
    from_machine: str
    from_node: int | None
    machine: str
    node: int | None


class ReconcileOut(BaseModel):
    added: list[str] = Field(description="VMs the records lacked: recorded")
    removed: list[str] = Field(description="VMs the inventory lacks: released")
    replaced: list[str] = Field(description="VMs of another size or uid under a recorded id: released, recorded anew")
    moved: list[ReconcileMoveOut] = Field(description="VMs elsewhere: moved (journalled as moves)")
    repinned: list[str] = Field(description="VMs whose pin the inventory changed")
    unchanged: int
    applied: bool = Field(description="false: a dry run, nothing changed")
    newer: list[str] = Field(description="VMs left as recorded: their records changed after as_of")


class ImportOut(BaseModel):
    imported: int = Field(description="rows recorded")
    already_recorded: int = Field(description="rows skipped: recorded exactly so before (a retry)")


# -- the kube-scheduler extender's bodies (k8s.io/kube-scheduler/extender/v1), for the document only: the routes read
# them field by field, so that a malformed one is an Error naming its field where the scheduler reads errors

K8sObject = dict[str, Any]


class NodeList(BaseModel):
    items: list[K8sObject] = Field(description="v1.Node objects")


class ExtenderArgs(BaseModel):
    Pod: K8sObject = Field(description="the v1.Pod being scheduled (its containers' resource requests are read)")
    Nodes: NodeList | None = Field(default=None, description="nodeCacheCapable: false")
    NodeNames: list[str] | None = Field(default=None, description="nodeCacheCapable: true")


class ExtenderFilterResult(BaseModel):
    Nodes: NodeList | None = None
    NodeNames: list[str] | None = None
    FailedNodes: dict[str, str] = Field(description="node -> why (capacity: preemption may help)")
    FailedAndUnresolvableNodes: dict[str, str] = Field(description="node -> why (drained, failed, unknown)")
    Error: str = Field(description="empty, or why the pod could not be assessed")


class HostPriority(BaseModel):
    Host: str
    Score: int = Field(ge=0, le=10)


class ExtenderBindingArgs(BaseModel):
    PodName: str
    PodNamespace: str
    PodUID: str
    Node: str


class ExtenderBindingResult(BaseModel):
    Error: str = Field(description="empty when bound")


class MachinesOut(BaseModel):
    registered: int = Field(description="machines added")
    already_registered: int = Field(description="machines skipped: registered exactly so before (a retry)")
    machines: list[MachineOut] = Field(description="the machines added, active")


class JobIn(BaseModel):
    """A job of the network-aware setting: CPU and memory in server units over as many servers as it takes, and
    bandwidth on every link between its servers (``dcplace serve --network``)."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    id: str = Ident
    cpu: int = Field(ge=0, le=1_000_000, description="CPU units (a Nara server has 10)", examples=[15])
    mem: int = Field(ge=0, le=1_000_000, description="memory units (a Nara server has 10)", examples=[12])
    bw: float = Field(ge=1e-6, le=1e9, description="link units on every link between its servers (1: a whole "
                      "server-rack link of the presets)", examples=[0.1])  # fmt: skip
    hold: int | None = Field(default=None, ge=1, le=1_000_000, description="its expected holding period in arrivals "
                             "(only a learned policy reads it); default: half the policy's horizon")  # fmt: skip


class JobOut(BaseModel):
    """A job placed: its servers with what each gives, the links that carry its bandwidth, its locality."""

    id: str
    accepted: Literal[True]
    servers: list[str]
    cpu: list[int]
    mem: list[int]
    links: list[list[str]] = Field(description="each link by its two endpoints, reserved once")
    bw: float
    locality: Literal["single server", "one rack", "neighbouring racks", "non-neighbouring racks"]
    hold: int | None = Field(default=None, description="its expected holding period in arrivals, as declared")


class JobRejectionOut(BaseModel):
    """A job not placed: ``capacity`` (the free CPU or memory cannot hold it), ``network`` (no path with its
    bandwidth between two of its servers), ``invalid`` (the policy picked a server it could not use)."""

    id: str
    accepted: Literal[False]
    reason: Literal["capacity", "network", "invalid"]


class NetInventoryJobIn(BaseModel):
    """A job the cluster runs, as ``GET /jobs`` lists it (``POST /network/reconcile``'s body is a list of these):
    ``accepted`` and ``locality`` may be there and are ignored."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    id: str = Ident
    servers: list[str] = Field(min_length=1, description="the servers it runs on, by name", examples=[["s0", "s1"]])
    cpu: list[int] = Field(description="the CPU units each server gives it, one per server", examples=[[10, 5]])
    mem: list[int] = Field(description="the memory units each server gives it, one per server", examples=[[8, 4]])
    bw: float = Field(ge=1e-6, le=1e9, description="link units on every link between its servers", examples=[0.1])
    links: list[list[str]] | None = Field(default=None, description="the links carrying its bandwidth, each by its "
                                          "two endpoints; left out: routed as a placement is")  # fmt: skip
    hold: int | None = Field(default=None, ge=1, le=1_000_000, description="its expected holding period in arrivals")
    accepted: bool | None = Field(default=None, description="ignored (GET /jobs lists it)")
    locality: str | None = Field(default=None, description="ignored (GET /jobs lists it)")


class NetMoveIn(BaseModel):
    """Where a running job runs now (``POST /jobs/{id}/move``): a move of a plan carried out."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    servers: list[str] = Field(min_length=1, description="the servers it runs on now, by name", examples=[["s2", "s3"]])
    cpu: list[int] = Field(description="the CPU units each server gives it (the job's total)", examples=[[10, 5]])
    mem: list[int] = Field(description="the memory units each server gives it (the job's total)", examples=[[8, 4]])
    links: list[list[str]] | None = Field(default=None, description="the links carrying its bandwidth, each by its "
                                          "two endpoints; left out: routed as a placement is")  # fmt: skip
    source: list[str] | None = Field(default=None, alias="from", description="where it ran, as the plan says: "
                                     "refused (409) where the engine records it elsewhere")  # fmt: skip
    step: int | None = Field(default=None, description="the plan's step: ignored")
    id: str | None = Field(default=None, description="the job, as the plan's move names it (the path's)")


class NetJobMoveIn(NetMoveIn):
    """A running job where it runs now (``POST /network/moves``'s body is a list of these: one step of a plan, its
    moves as the plan lists them)."""

    id: str = Ident


class NetMoveOut(BaseModel):
    id: str
    source: list[str] = Field(alias="from", description="the servers it runs on now")
    servers: list[str] = Field(description="the servers it would run on")
    cpu: list[int] = Field(description="the CPU units each of them would give it")
    mem: list[int] = Field(description="the memory units each of them would give it")
    links: list[list[str]] = Field(description="the links that would carry its bandwidth")
    step: int = Field(description="moves of one step are made together (all stopped, then all started); steps in "
                      "order")  # fmt: skip


class NetRoomOut(BaseModel):
    """Where a job could run if the jobs of one rack moved (``POST /network/make-room``); changed only where
    ``executed``."""

    id: str
    accepted: bool = Field(description="whether it could run: now (no moves) or after the moves")
    reason: Literal["capacity", "network", "invalid"] | None = Field(description="why not")
    placement: JobOut | None = Field(description="where it would run")
    rack: str | None = Field(description="the switch whose jobs move (null: none move)")
    moves: list[NetMoveOut] = Field(description="the running jobs to move first, and where, in the order to move "
                                    "them (cold: each stopped, then started where it says)")  # fmt: skip
    inventory: list[JobOut] = Field(description="every job as it would run, this one included")
    executed: bool = Field(description="whether the moves and the job were recorded (execute=true)")
    at: float = Field(description="when the plan was made (Unix time): the inventory's as_of for a reconcile")


class NetReconcileOut(BaseModel):
    """What ``POST /network/reconcile`` did (or, a dry run, would do)."""

    released: list[str] = Field(description="jobs recorded but not in the inventory: released")
    recorded: list[str] = Field(description="jobs in the inventory but not recorded: recorded where it says")
    changed: list[str] = Field(description="jobs recorded elsewhere or with other amounts: released, recorded anew")
    kept: int = Field(description="jobs recorded as the inventory has them")
    executed: bool = Field(description="false for a dry run: nothing was changed")
    newer: list[str] = Field(description="jobs left as recorded: placed, moved or released after as_of")


class TierRoomOut(BaseModel):
    links_with_room: int = Field(description="links of the tier with at least the job's bandwidth free")
    widest_link: float = Field(description="the most bandwidth free on one link of the tier, link units")


class NetExplanationOut(BaseModel):
    """Where a job would go now and why (``POST /network/explain``); nothing was placed."""

    id: str
    policy: str
    accepted: bool = Field(description="whether the policy would place it now")
    placement: JobOut | None = Field(description="where it would run (null: it would be rejected)")
    reason: Literal["capacity", "network", "invalid"] | None = Field(description="why it would be rejected")
    picks: list[str] = Field(description="the servers the policy picked, in order (a rejection: the last is where "
                                         "it failed)")  # fmt: skip
    pair: list[str] | None = Field(description="network: the two servers no candidate path joined with its bandwidth")
    widest: float | None = Field(description="network: the most free bandwidth on any candidate path between them")
    free_cpu: int = Field(description="CPU units free in the cluster")
    free_mem: int = Field(description="memory units free in the cluster")
    tiers: dict[str, TierRoomOut] = Field(description="per tier (server-rack, rack-fabric, fabric-spine)")
    summary: str = Field(description="one sentence")


class NetJournalEntryOut(BaseModel):
    seq: int = Field(description="grows with every entry: pass the last one read as `after` to read on")
    at: float = Field(description="Unix time")
    event: Literal["placed", "rejected", "released", "moved", "started", "resumed", "drained", "activated"]
    job: str | None = Field(description="placed, rejected, released: the job")
    cpu: int | None = Field(description="placed, rejected: the CPU units it asked for")
    mem: int | None = Field(description="placed, rejected: the memory units it asked for")
    bw: float | None = Field(description="placed, rejected: the bandwidth it asked for, in link units")
    hold: int | None = Field(description="placed, rejected: its declared hold in arrivals (null: none declared)")
    reason: Literal["capacity", "network", "invalid"] | None = Field(description="rejected: why")
    policy: str | None = Field(description="started: the policy the engine started with")
    off_since: float | None = Field(description="resumed: when the journal went off (Unix time)")
    server: str | None = Field(description="drained, activated: the server")
    by: Literal["reconcile", "make-room", "move"] | None = Field(
        default=None,
        description="placed, released, moved: `reconcile` where a reconcile recorded or released the job, "
        "`make-room` where an executed plan moved or placed it, `move` where a client told a move",
    )


class NetJournalOut(BaseModel):
    entries: list[NetJournalEntryOut] = Field(description="oldest first")
    next: int | None = Field(description="`after` for the next page; null: nothing more now")


class ServerOut(BaseModel):
    """A server of the network-aware cluster."""

    name: str
    drained: bool = Field(description="no new job is given any of it (its running jobs keep it)")
    cpu_capacity: int
    mem_capacity: int
    cpu_used: int = Field(description="units its running jobs hold")
    mem_used: int
    jobs: list[str] = Field(description="its running jobs, in the order placed")


class NetworkOut(BaseModel):
    """The network-aware cluster's totals."""

    topology: str
    policy: str
    servers: int
    links: int
    jobs: int
    cpu_used: int
    cpu_capacity: int
    mem_used: int
    mem_capacity: int
    cpu_share: float
    mem_share: float
    drained: list[str] = Field(description="servers drained: no new job is given any of them")
    cpu_drained: int = Field(description="CPU units free on drained servers (held apart)")
    mem_drained: int = Field(description="memory units free on drained servers (held apart)")
    bw_share_by_tier: dict[str, float] = Field(description="bandwidth in use over the tier's capacity")
    counters: dict[str, int] = Field(description="placed, rejected, released since the service started")
    durable: bool = Field(description="its jobs are kept in a database")
    healthy: bool = Field(description="false once that database failed (restart the service)")
