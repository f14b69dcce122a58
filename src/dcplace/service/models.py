"""Request and response bodies of the placement service (pydantic; they are also the OpenAPI schema)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, PositiveFloat

Ident = Field(min_length=1, max_length=256, pattern=r"^\S(.*\S)?$", description="A unique id (no surrounding spaces)")


class MachineIn(BaseModel):
    """A machine to register: CPU cores and memory GB per NUMA node (one number for every node, or one each)."""

    model_config = ConfigDict(extra="forbid")
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


class VmIn(BaseModel):
    """A VM to place."""

    model_config = ConfigDict(extra="forbid")
    id: str = Ident
    cpu: PositiveFloat = Field(description="cores", examples=[4])
    mem: PositiveFloat = Field(description="GB", examples=[8])
    multi_numa: bool = Field(default=False, description="split evenly over every NUMA node of one machine")
    policy: str | None = Field(default=None, description="a registered policy; default: the service's")
    explain: bool = Field(default=True, description="return the decision's explanation")


class ExplainIn(BaseModel):
    """A dry run: where would this VM go now, and why."""

    model_config = ConfigDict(extra="forbid")
    cpu: PositiveFloat
    mem: PositiveFloat
    multi_numa: bool = False
    policy: str | None = None


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


class FailOut(BaseModel):
    machine: str
    replaced: list[PlacementOut]
    dropped: list[RejectionOut]


class ErrorOut(BaseModel):
    detail: str = Field(description="one sentence")


class AllocationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    vm: str = Ident
    machine: str
    node: int | None = Field(description="NUMA node, or null: split over every node")
    cpu: PositiveFloat
    mem: PositiveFloat


class VmBatchIn(BaseModel):
    """Several VMs placed in order, as one ``POST /vms`` each would place them, with one commit."""

    model_config = ConfigDict(extra="forbid")
    vms: list[VmIn] = Field(min_length=1, max_length=10_000)
    policy: str | None = Field(default=None, description="a registered policy; default: the service's")


class BatchOut(BaseModel):
    placed: int
    rejected: int
    results: list[PlacementOut | RejectionOut]
