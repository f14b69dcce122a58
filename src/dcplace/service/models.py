"""Request and response bodies of the placement service (pydantic; they are also the OpenAPI schema)."""

from __future__ import annotations

import functools
from typing import Annotated, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, PositiveFloat

Ident = Field(
    min_length=1,
    max_length=256,
    pattern=r"^[^\s\x00-\x1f\x7f]([^\x00-\x1f\x7f]*[^\s\x00-\x1f\x7f])?$",
    description="A unique id (no surrounding spaces, no control characters such as NUL or a newline)",
)


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
    cpu: PositiveFloat | list[PositiveFloat] = Field(description="cores per NUMA node", examples=[40])
    mem: PositiveFloat | list[PositiveFloat] = Field(description="GB per NUMA node", examples=[90])
    rack: str | None = Field(default=None, max_length=256)


class MachineOut(BaseModel):
    id: str
    status: str = Field(description="active, drained or failed")
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
    cpu: PositiveFloat = Field(description="cores", examples=[4])
    mem: PositiveFloat = Field(description="GB", examples=[8])
    multi_numa: bool = Field(default=False, description="split evenly over every NUMA node of one machine")
    pinned: bool = Field(default=False, description="never moved by re-optimisation")


class VmIn(VmBatchItem):
    """A VM to place."""

    policy: PolicyName | None = Field(default=None, description="a registered policy; default: the service's")
    explain: bool = Field(default=True, description="return the decision's explanation")


class ExplainIn(BaseModel):
    """A dry run: where would this VM go now, and why."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    cpu: PositiveFloat
    mem: PositiveFloat
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
    accepted: bool = True
    vm: str
    machine: str
    node: int | None = Field(description="NUMA node; null when the VM spans every node")
    explanation: ExplanationOut | None


class RejectionOut(BaseModel):
    accepted: bool = False
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
    improve_s: float = Field(default=0.0, ge=0, le=3600, description="seconds of CP-SAT after the heuristic")
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
    node: int | None = Field(description="NUMA node, or null: split over every node")
    cpu: PositiveFloat
    mem: PositiveFloat
    pinned: bool = Field(default=False, description="never moved by re-optimisation")


AllocationsIn = Annotated[list[AllocationIn], Field(max_length=MAX_ROWS)]


class VmBatchIn(BaseModel):
    """Several VMs placed in order, as one ``POST /vms`` each would place them, with one commit."""

    model_config = ConfigDict(extra="forbid", strict=True, allow_inf_nan=False)
    vms: list[VmBatchItem] = Field(min_length=1, max_length=MAX_ROWS)
    policy: PolicyName | None = Field(default=None, description="a registered policy; default: the service's")


class BatchOut(BaseModel):
    placed: int
    rejected: int
    results: list[PlacementOut | RejectionOut]
