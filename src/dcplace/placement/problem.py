"""Batch placement of VMs with disks onto PMs with disks (paper 004, section IV-A): the problem, the paper's VM and
PM catalogs (Tables I and II), its instances, seeded random instances and a JSON instance format.

A problem is a multiset of VM types and a multiset of PM types. VMs and PMs are numbered type-major (all VMs of the
first type, then the second, ...), which is how every model, the checker and the results refer to them. Memory is
held in quarter-GiB units so that every quantity is an integer (Table I's 3.75 and 15.25 GiB included).

Placement constraints (section III-D's IBM Connections example), optional, on VM numbers; racks are a rack number
per PM (default: every PM its own rack):

* ``colocate`` at ``pm`` or ``rack`` level: the VMs share one PM / one rack;
* ``anti-colocate`` at ``pm`` or ``rack`` level over *sets* of VMs: VMs of different sets never share a PM / rack
  (sets of one VM: all apart; sets = packs: pack anti-colocation);
* ``spread``: the VMs span at least ``min_racks`` racks with at most ``max_per_rack`` of them in any rack (0: no
  limit).

Packs (optional): a partition of the VM numbers that the hierarchical decomposition uses as its packs (e.g. the
tiers of an application) instead of drawing random ones.

``flat``, ``greedy``, ``compact`` (counts per class of VMs that carry the same labels, exact) and ``auto`` (greedy,
then compact; flat above ``compact_max_pms`` PMs) model constraints; ``hierarchical`` with its pattern first level
models PM-level colocate and anti-colocate (the pattern model over items, :mod:`.items`) and refuses the rest with a
clear error; the ``pattern`` method itself refuses a constrained problem. :func:`constrained_problem` generates
seeded instances with colocated groups and replica sets.

**Starting from a current placement** (re-optimisation, paper 004 section III-D), optional:

* ``current``: per VM, its PM now (-1: a new VM, not placed yet) and ``current_disks``: per VM, the physical disk of
  each of its virtual disks now (empty for a new VM);
* ``migration_cost``: per VM, what moving it costs, in the PM cost unit (an integer >= 0); empty: the default,
  :func:`default_migration_cost` = the VM's memory in GiB rounded up (a live migration copies the memory, so its
  time and network traffic grow with it);
* ``pinned``: VM numbers that must stay where they are, PM and physical disks (each needs a current PM).

The objective is then machine cost + migration cost: ``sum_j cost_j [PM j used] + sum_i mig_i [pm_i != current_i]``
over VMs with a current PM. A VM *migrates* when its PM changes; moving a virtual disk to another physical disk of
the same PM does not count: the VM keeps running on its host, nothing crosses the network, and the copy is a local
disk-to-disk one that costs little beside a live migration (it lets the counting model stay exact without tracking
which physical disk each VM held). The current placement itself must be feasible (within capacity, disks exclusive).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.config import is_whole
from dcplace.errors import InputError
from dcplace.inputs import COUNT, MAX_QUANTITY, WHOLE_POSITIVE, Range, json_number
from dcplace.jsonio import check_keys, read_json_object
from dcplace.limits import check_memory

MEM_UNIT = 4  # memory units per GiB


@dataclass(frozen=True)
class VMType:
    """A VM type: ``vcpu`` cores, ``mem`` in quarter-GiB units (``MEM_UNIT`` per GiB: 8 GiB is ``mem=32``), one
    virtual disk per entry of ``disks`` (GB). Checked at construction (whole numbers, all above 0)."""

    name: str
    vcpu: int
    mem: int  # quarter-GiB
    disks: tuple[int, ...]  # virtual disk sizes, GB

    def __post_init__(self) -> None:
        _check_type(self)


@dataclass(frozen=True)
class PMType:
    """A PM type: ``vcpu`` cores, ``mem`` in quarter-GiB units (``MEM_UNIT`` per GiB), one physical disk per entry
    of ``disks`` (GB), and its ``cost`` (whole, >= 0). Checked at construction."""

    name: str
    vcpu: int
    mem: int  # quarter-GiB
    disks: tuple[int, ...]  # physical disk sizes, GB
    cost: int

    def __post_init__(self) -> None:
        _check_type(self)
        if not _whole(self.cost, 0):
            raise InputError(f"PM type {self.name!r}: cost must be a whole number >= 0, got {self.cost!r}",
                             field="cost")  # fmt: skip


def _whole(value: Any, low: int) -> bool:
    """A whole number (:func:`~dcplace.config.is_whole`) from ``low`` to :data:`~dcplace.inputs.MAX_QUANTITY` (larger
    ones would overflow the solvers' integer arrays): a file's entry or a field set in Python."""
    return is_whole(value) and low <= value <= MAX_QUANTITY


def _check_type(t: VMType | PMType) -> None:
    """A VM or PM type built in Python: whole numbers >= 0 (a negative vcpu solved as "feasible", 2.5 was an
    ortools TypeError). Files are stricter (sizes above 0); the methods handle a zero size."""
    what = "VM" if isinstance(t, VMType) else "PM"
    for name in ("vcpu", "mem"):
        if not _whole(getattr(t, name), 0):
            raise InputError(f"{what} type {t.name!r}: {name} must be a whole number >= 0, got "
                             f"{getattr(t, name)!r}" + (" (quarter-GiB units)" if name == "mem" else ""),
                             field=name)  # fmt: skip
    if not isinstance(t.disks, tuple) or not all(_whole(d, 0) for d in t.disks):
        raise InputError(f"{what} type {t.name!r}: disks must be a tuple of whole sizes >= 0 GB, got {t.disks!r}",
                         field="disks")  # fmt: skip


def _vm(name: str, vcpu: int, gib: float, n: int, size: int) -> VMType:
    return VMType(name, vcpu, round(gib * MEM_UNIT), (size,) * n)


def _pm(name: str, vcpu: int, gib: int, n: int, size: int, cost: int) -> PMType:
    return PMType(name, vcpu, gib * MEM_UNIT, (size,) * n, cost)


# Table I (Amazon EC2 VM types, all-SSD local storage).
VM_TYPES: dict[str, VMType] = {
    v.name: v
    for v in (
        _vm("m3.medium", 1, 3.75, 1, 4),
        _vm("m3.large", 2, 7.5, 1, 32),
        _vm("m3.xlarge", 4, 15, 2, 40),
        _vm("m3.2xlarge", 8, 30, 2, 80),
        _vm("c3.large", 2, 3.75, 2, 16),
        _vm("c3.xlarge", 4, 7.5, 2, 40),
        _vm("c3.2xlarge", 8, 15, 2, 80),
        _vm("c3.4xlarge", 16, 30, 2, 160),
        _vm("c3.8xlarge", 32, 60, 2, 320),
        _vm("r3.large", 2, 15.25, 1, 32),
        _vm("r3.xlarge", 4, 30.5, 1, 80),
        _vm("r3.2xlarge", 8, 61, 1, 160),
        _vm("r3.4xlarge", 16, 122, 1, 320),
        _vm("r3.8xlarge", 32, 244, 2, 320),
        _vm("i2.xlarge", 4, 30.5, 1, 800),
        _vm("i2.2xlarge", 8, 61, 2, 800),
        _vm("i2.4xlarge", 16, 122, 4, 800),
        _vm("i2.8xlarge", 32, 244, 8, 800),
    )
}

# Table II (PM types; costs normalised).
PM_TYPES: dict[str, PMType] = {
    p.name: p
    for p in (
        _pm("s1", 8, 16, 1, 256, 100),
        _pm("s2", 8, 32, 1, 512, 120),
        _pm("s3", 8, 64, 2, 512, 200),
        _pm("s4", 8, 64, 4, 512, 300),
        _pm("m1", 16, 32, 2, 512, 600),
        _pm("m2", 16, 64, 4, 512, 700),
        _pm("m3", 16, 128, 4, 1000, 900),
        _pm("m4", 16, 256, 8, 1000, 1500),
        _pm("m5", 16, 256, 16, 512, 1800),
        _pm("l1", 32, 256, 4, 1000, 2500),
        _pm("l2", 48, 512, 8, 1000, 3500),
        _pm("l3", 64, 1024, 4, 1000, 5000),
        _pm("l4", 80, 2048, 16, 1600, 7000),
        _pm("l5", 120, 4096, 4, 1000, 9000),
        _pm("l6", 120, 4096, 24, 1600, 12000),
    )
}


CONSTRAINT_KINDS = ("colocate", "anti-colocate", "spread")


@dataclass(frozen=True)
class Constraint:
    """One placement constraint over VM numbers (see the module docstring)."""

    kind: str
    level: str  # pm | rack (spread: rack)
    sets: tuple[tuple[int, ...], ...]  # colocate / spread: one set; anti-colocate: the sets kept apart
    min_racks: int = 0
    max_per_rack: int = 0

    @property
    def vms(self) -> list[int]:
        return [i for s in self.sets for i in s]

    def to_json(self) -> dict[str, Any]:
        if self.kind == "anti-colocate":
            return {"kind": self.kind, "level": self.level, "sets": [list(s) for s in self.sets]}
        if self.kind == "spread":
            return {"kind": self.kind, "vms": self.vms, "min_racks": self.min_racks, "max_per_rack": self.max_per_rack}
        return {"kind": self.kind, "level": self.level, "vms": self.vms}


@dataclass(frozen=True)
class Problem:
    """VM types with counts and PM types with counts (types with count 0 are dropped), optional racks (one number
    per PM) and placement constraints."""

    name: str
    vm_types: tuple[VMType, ...]
    vm_counts: tuple[int, ...]
    pm_types: tuple[PMType, ...]
    pm_counts: tuple[int, ...]
    racks: tuple[int, ...] = ()
    constraints: tuple[Constraint, ...] = field(default=())
    packs: tuple[tuple[int, ...], ...] = ()
    """Given packs (a partition of the VM numbers) for the hierarchical decomposition; empty: it draws its own."""
    current: tuple[int, ...] = ()
    """Per VM, its current PM (-1: a new VM); empty: no current placement (everything is placed from scratch)."""
    current_disks: tuple[tuple[int, ...], ...] = ()
    """Per VM, the current physical disk (index on its current PM) of each virtual disk; empty for a new VM."""
    migration_cost: tuple[int, ...] = ()
    """Per VM, the cost of moving it (PM cost unit, >= 0); empty: :func:`default_migration_cost` for every VM."""
    pinned: tuple[int, ...] = ()
    """VM numbers that must keep their current PM and disks."""

    def __post_init__(self) -> None:
        """The shape and sign checks a problem file gets, for a problem built in Python (a count of -3 solved to
        cost 0; counts longer than the types were a zip error inside a method)."""
        for kind, types, counts, cls in (("vm", self.vm_types, self.vm_counts, VMType),
                                         ("pm", self.pm_types, self.pm_counts, PMType)):  # fmt: skip
            if len(types) != len(counts):
                raise InputError(f"{kind}_types has {len(types)} entries and {kind}_counts {len(counts)}; give one "
                                 "count per type", field=f"{kind}_counts")  # fmt: skip
            if not all(isinstance(t, cls) for t in types):
                raise InputError(f"{kind}_types must hold {cls.__name__}s", field=f"{kind}_types")
            if not all(_whole(c, 0) for c in counts):
                raise InputError(f"{kind}_counts must be whole numbers >= 0, got {counts!r}", field=f"{kind}_counts")
        if self.racks and (len(self.racks) != self.n_pms or not all(_whole(r, 0) for r in self.racks)):
            raise InputError(f"racks must be {self.n_pms} rack numbers >= 0 (one per PM)", field="racks")
        if self.current or self.pinned or self.migration_cost:
            check_current(self)

    @property
    def has_current(self) -> bool:
        """Whether the problem starts from a current placement (re-optimisation)."""
        return bool(self.current)

    def migration_costs(self) -> np.ndarray:
        """(n_vms,) int64: the cost of moving each VM (given, or :func:`default_migration_cost`)."""
        if self.migration_cost:
            return np.asarray(self.migration_cost, np.int64)
        per_type = [default_migration_cost(t) for t in self.vm_types]
        return np.repeat(np.asarray(per_type, np.int64), self.vm_counts)

    def current_pm(self) -> np.ndarray:
        """(n_vms,) int64: the current PM of every VM, -1 for new ones (all -1 without a current placement)."""
        return np.asarray(self.current, np.int64) if self.current else np.full(self.n_vms, -1, np.int64)

    def rack_of(self) -> np.ndarray:
        """(n_pms,) rack of every PM (every PM its own rack when none are given)."""
        return np.asarray(self.racks, np.int64) if self.racks else np.arange(self.n_pms, dtype=np.int64)

    @property
    def n_vms(self) -> int:
        return sum(self.vm_counts)

    @property
    def n_pms(self) -> int:
        return sum(self.pm_counts)

    def vm_type_of(self) -> np.ndarray:
        """(n_vms,) type index of every VM (type-major numbering)."""
        return np.repeat(np.arange(len(self.vm_types)), self.vm_counts)

    def pm_type_of(self) -> np.ndarray:
        return np.repeat(np.arange(len(self.pm_types)), self.pm_counts)

    def to_json(self) -> dict[str, Any]:
        def vm(t: VMType) -> dict[str, Any]:
            return {"vcpu": t.vcpu, "mem_gib": t.mem / MEM_UNIT, "disks_gb": list(t.disks)}

        def pm(t: PMType) -> dict[str, Any]:
            return {"vcpu": t.vcpu, "mem_gib": t.mem / MEM_UNIT, "disks_gb": list(t.disks), "cost": t.cost}

        doc: dict[str, Any] = {
            "name": self.name,
            "vms": [{"type": t.name, "count": c, **vm(t)} for t, c in zip(self.vm_types, self.vm_counts, strict=True)],
            "pms": [{"type": t.name, "count": c, **pm(t)} for t, c in zip(self.pm_types, self.pm_counts, strict=True)],
        }
        if self.racks:
            doc["racks"] = list(self.racks)
        if self.constraints:
            doc["constraints"] = [c.to_json() for c in self.constraints]
        if self.packs:
            doc["packs"] = [list(p) for p in self.packs]
        if self.current:
            doc["current"] = [None if j < 0 else {"pm": j, "disks": list(d)}
                              for j, d in zip(self.current, self.current_disks, strict=True)]  # fmt: skip
        if self.migration_cost:
            doc["migration_costs"] = list(self.migration_cost)
        if self.pinned:
            doc["pinned"] = list(self.pinned)
        return doc


BYTES_PER_VM = 128
"""Memory one VM of a problem takes in the lightest full solve (greedy: the per-VM arrays, the verification's
per-VM lists): 122 bytes per VM measured (peak RSS of ``solve --method greedy`` on 100,000 VMs and 10,000 PMs minus
1,000 and 100), rounded up; the size guard (:mod:`dcplace.limits`)."""
BYTES_PER_PM = 128
"""The same per PM (counted in the same measurement)."""


def check_size(n_vms: int, n_pms: int) -> None:
    """Refuse (:class:`~dcplace.limits.SizeError`) a problem whose VMs and PMs need more memory than is available."""
    check_memory(n_vms * BYTES_PER_VM + n_pms * BYTES_PER_PM, f"{n_vms:,} VMs and {n_pms:,} PMs", "instance")


def default_migration_cost(vm: VMType) -> int:
    """The default cost of migrating a VM of type ``vm``: its memory in GiB, rounded up to an integer (the PM cost
    unit; Table II's PMs cost 100 to 12,000, so a 3.75 GiB m3.medium costs 4 to move, a 244 GiB r3.8xlarge 244)."""
    return -(-vm.mem // MEM_UNIT)


def with_current(
    problem: Problem,
    vm_pm: Sequence[int],
    vm_disks: Sequence[Sequence[int]],
    migration_cost: Sequence[int] = (),
    pinned: Sequence[int] = (),
) -> Problem:
    """``problem`` starting from the placement ``vm_pm`` (-1: new VM) / ``vm_disks``, with per-VM migration costs
    (empty: the default) and pinned VMs; checked like a loaded file (:func:`check_current`)."""
    out = replace(
        problem,
        current=tuple(int(j) for j in vm_pm),
        current_disks=tuple(tuple(int(d) for d in ds) if j >= 0 else () for j, ds in zip(vm_pm, vm_disks, strict=True)),
        migration_cost=tuple(int(c) for c in migration_cost),
        pinned=tuple(int(i) for i in pinned),
    )
    check_current(out)
    return out


def check_current(problem: Problem) -> None:
    """Raise :class:`InputError` (naming the field; a file's reader adds the file) unless the current placement is
    well formed: one entry per VM, PMs and disks that exist, each VM's disks distinct, no PM or disk over capacity,
    migration costs integers >= 0, pinned VMs distinct, existing and currently placed."""
    n, pms = problem.n_vms, [p for p, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]
    vms = [v for v, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    if not problem.current:
        if problem.pinned:
            raise InputError("pinned VMs need a current placement", field="pinned")
        if problem.migration_cost and len(problem.migration_cost) != n:
            raise InputError(f"must hold {n} costs (one per VM)", field="migration_costs")
        return
    if len(problem.current) != n or len(problem.current_disks) != n:
        raise InputError(f"must hold {n} entries (one per VM), got {len(problem.current)}", field="current")
    cpu, mem = [0] * len(pms), [0] * len(pms)
    used: dict[tuple[int, int], int] = {}
    for i, (j, disks) in enumerate(zip(problem.current, problem.current_disks, strict=True)):
        where = f"current[{i}]"
        if j == -1:
            if disks:
                raise InputError("a new VM (no current PM) has no current disks", field=f"{where}.disks")
            continue
        if not 0 <= j < len(pms):
            raise InputError(f"PM {j} does not exist (PMs are 0..{len(pms) - 1})", field=f"{where}.pm")
        if len(disks) != len(vms[i].disks):
            raise InputError(f"VM {i} ({vms[i].name}) has {len(vms[i].disks)} virtual disks, got {len(disks)} disk "
                             "numbers", field=f"{where}.disks")  # fmt: skip
        if len(set(disks)) != len(disks) or not all(0 <= d < len(pms[j].disks) for d in disks):
            raise InputError(f"must be distinct disk numbers of PM {j} (0..{len(pms[j].disks) - 1}), got {list(disks)}",
                             field=f"{where}.disks")  # fmt: skip
        cpu[j] += vms[i].vcpu
        mem[j] += vms[i].mem
        for size, d in zip(vms[i].disks, disks, strict=True):
            used[(j, d)] = used.get((j, d), 0) + size
    for j, pm in enumerate(pms):
        if cpu[j] > pm.vcpu or mem[j] > pm.mem:
            raise InputError(f"the current placement puts {cpu[j]} vCPU and {mem[j] / MEM_UNIT} GiB on PM {j} "
                             f"({pm.name}: {pm.vcpu} vCPU, {pm.mem / MEM_UNIT} GiB)",
                             field="current")  # fmt: skip
    for (j, d), gb in used.items():
        if gb > pms[j].disks[d]:
            raise InputError(f"the current placement puts {gb} GB on disk {d} of PM {j} (size {pms[j].disks[d]})",
                             field="current")  # fmt: skip
    if problem.migration_cost and (
        len(problem.migration_cost) != n or not all(_whole(c, 0) for c in problem.migration_cost)
    ):
        raise InputError(f"must hold {n} integers >= 0 (one per VM)", field="migration_costs")
    pinned = problem.pinned
    if len(set(pinned)) != len(pinned) or not all(_whole(i, 0) and i < n for i in pinned):
        raise InputError(f"must be distinct VM numbers in 0..{n - 1}, got {list(pinned)}", field="pinned")
    for i in pinned:
        if problem.current[i] < 0:
            raise InputError(f"VM {i} is pinned but has no current PM", field="pinned")


def make(name: str, vms: dict[str, int], pms: dict[str, int]) -> Problem:
    """A problem from the catalogs: ``{"m3.medium": 36, ...}`` and ``{"s1": 7, ...}``."""
    v = [(VM_TYPES[k], c) for k, c in vms.items() if c > 0]
    p = [(PM_TYPES[k], c) for k, c in pms.items() if c > 0]
    return Problem(name, tuple(t for t, _ in v), tuple(c for _, c in v), tuple(t for t, _ in p), tuple(c for _, c in p))


_ALL_VM = list(VM_TYPES)
_ALL_PM = list(PM_TYPES)

# The paper's instances (section V-C, V-D).
INSTANCES: dict[str, Problem] = {
    "exp1": make(
        "exp1",
        {"m3.medium": 36, "m3.large": 14, "m3.xlarge": 10, "m3.2xlarge": 10},
        {"s1": 7, "s2": 7, "s3": 10, "s4": 7, "m1": 5, "m2": 5, "m3": 5, "m4": 2, "m5": 2},
    ),
    # Table IV prints l5: 0, which gives 65 PMs; the text says 70 PMs, so the fifth column of five is l5 (docs).
    "exp2": make(
        "exp2",
        {**{k: 5 for k in _ALL_VM[:14]}, "i2.xlarge": 2, "i2.2xlarge": 2, "i2.4xlarge": 3},
        {k: 5 for k in _ALL_PM[:14]},
    ),
    "mix1": make(
        "mix1",
        {"m3.medium": 500, "m3.large": 200, "m3.xlarge": 150, "m3.2xlarge": 150},
        {"s1": 150, "s2": 150, "s3": 150, "s4": 150, "m1": 100, "m2": 100, "m3": 100, "m4": 50, "m5": 50},
    ),
    "mix2": make(
        "mix2",
        {"m3.medium": 200, "m3.large": 100, "m3.xlarge": 100, "m3.2xlarge": 100, **{k: 50 for k in _ALL_VM[4:14]}},
        {**{k: 100 for k in _ALL_PM[:6]}, **{k: 50 for k in _ALL_PM[6:14]}},
    ),
}


def scaled(problem: Problem, factor: int) -> Problem:
    """Every count times ``factor`` (the issue's 100,000 x 100,000 instance is ``scaled(mix2, 100)``)."""
    return Problem(
        f"{problem.name}x{factor}",
        problem.vm_types,
        tuple(c * factor for c in problem.vm_counts),
        problem.pm_types,
        tuple(c * factor for c in problem.pm_counts),
    )


def random_problem(n_vms: int, n_pms: int, seed: int, vm_types: int = 8, pm_types: int = 9) -> Problem:
    """A seeded instance: VM counts drawn over the first ``vm_types`` catalog types, PM counts over the first
    ``pm_types``; not guaranteed feasible."""
    rng = np.random.default_rng(seed)
    vm_names = _ALL_VM[:vm_types]
    pm_names = _ALL_PM[:pm_types]
    vc = np.bincount(rng.integers(len(vm_names), size=n_vms), minlength=len(vm_names))
    pc = np.bincount(rng.integers(len(pm_names), size=n_pms), minlength=len(pm_names))
    return make(
        f"random-{n_vms}x{n_pms}-s{seed}",
        dict(zip(vm_names, vc.tolist(), strict=True)),
        dict(zip(pm_names, pc.tolist(), strict=True)),
    )


COLOCATED_TEMPLATES: tuple[tuple[str, ...], ...] = (
    ("m3.medium", "m3.large"),
    ("c3.large", "c3.large"),
    ("m3.medium", "c3.xlarge", "r3.large"),
    ("m3.large", "r3.xlarge"),
)
"""The VM types of a colocated group in :func:`constrained_problem` (a front end and its cache, a pair of
workers, ...): small Table I types, each group fits one s3 (8 vCPU, 64 GiB, two disks) or larger."""
REPLICAS = (2, 3)
"""Sizes of the anti-colocated replica sets of :func:`constrained_problem`."""


def constrained_problem(
    n_vms: int, n_pms: int, seed: int, colocated: float = 0.1, anti: float = 0.1, vm_types: int = 18,
    pm_types: int = 15,
) -> Problem:  # fmt: skip
    """:func:`random_problem` (``seed``) with PM-level placement constraints, seeded by ``seed`` too:

    * colocated groups: about ``colocated`` x ``n_vms`` VMs in groups, each a :data:`COLOCATED_TEMPLATES` entry
      chosen uniformly, its VMs drawn without replacement from the free VMs of those types (a template stops when its
      types run out);
    * replica sets: about ``anti`` x ``n_vms`` other VMs in anti-colocate constraints with sets of one VM (all on
      different PMs), each of :data:`REPLICAS` VMs (chosen uniformly) of one VM type, the type chosen uniformly
      among those with enough free VMs.

    A VM is in at most one constraint. Not guaranteed feasible (a replica set needs as many PMs that can host its
    type)."""
    base = random_problem(n_vms, n_pms, seed, vm_types, pm_types)
    rng = np.random.default_rng([seed, 1])
    vt = base.vm_type_of()
    names = [t.name for t in base.vm_types]
    free = [list(rng.permutation(np.flatnonzero(vt == t)).tolist()) for t in range(len(names))]
    templates = [[names.index(n) for n in tpl] for tpl in COLOCATED_TEMPLATES if all(n in names for n in tpl)]
    cons: list[Constraint] = []
    in_groups = 0
    while templates and in_groups < colocated * n_vms:
        tpl = templates[int(rng.integers(len(templates)))]
        if any(len(free[t]) < tpl.count(t) for t in tpl):
            templates.remove(tpl)
            continue
        group = tuple(sorted(free[t].pop() for t in tpl))
        cons.append(Constraint("colocate", "pm", (group,)))
        in_groups += len(group)
    in_sets = 0
    while in_sets < anti * n_vms:
        r = REPLICAS[int(rng.integers(len(REPLICAS)))]
        able = [t for t in range(len(names)) if len(free[t]) >= r]
        if not able:
            break
        t = able[int(rng.integers(len(able)))]
        cons.append(Constraint("anti-colocate", "pm", tuple((free[t].pop(),) for _ in range(r))))
        in_sets += r
    return replace(base, name=f"constrained-{n_vms}x{n_pms}-s{seed}", constraints=tuple(cons))


_RANGES = {
    "count": COUNT,
    "vcpu": WHOLE_POSITIVE,
    "mem_gib": Range(0, MAX_QUANTITY / MEM_UNIT, lo_open=True),
    "cost": COUNT,
    "migration_cost": COUNT,
}
"""The numeric fields of a VM or PM entry of an instance file and the values each accepts."""


def _field(doc: dict[str, Any], key: str, path: Path, where: str) -> Any:
    if key not in doc:
        raise InputError("missing", path=path, field=f"{where}.{key}")
    return json_number(doc[key], _RANGES[key], path=path, field=f"{where}.{key}")


TOP_KEYS = ("name", "vms", "pms", "racks", "constraints", "packs", "current", "migration_costs", "pinned")
"""The keys of a problem file (:meth:`Problem.to_json`)."""
VM_KEYS = ("type", "count", "vcpu", "mem_gib", "disks_gb", "migration_cost")
PM_KEYS = ("type", "count", "vcpu", "mem_gib", "disks_gb", "cost")


def load_problem(spec: str) -> Problem:
    """A named instance (exp1, exp2, mix1, mix2, mix2x100: Mix 2 with every count x 100) or a JSON file in
    :meth:`Problem.to_json`'s format."""
    if spec in INSTANCES:
        return INSTANCES[spec]
    if spec == "mix2x100":
        return scaled(INSTANCES["mix2"], 100)
    path = Path(spec)
    if not path.exists():
        names = ", ".join([*INSTANCES, "mix2x100"])
        exc = InputError(f"instance must be one of {names} or an existing .json file, got {spec!r}")
        exc.field = "instance"
        raise exc
    doc = read_json_object(path, ("vms", "pms"))
    check_keys(doc, TOP_KEYS, path, "")
    vms: list[tuple[VMType, int]] = []
    pms: list[tuple[PMType, int]] = []
    type_costs: list[tuple[int, int]] = []  # per VM type: (its migration cost, given or default; its count)
    type_mig = 0
    for kind in ("vms", "pms"):
        for i, item in enumerate(doc[kind]):
            where = f"{kind}[{i}]"
            if not isinstance(item, dict):
                raise InputError("must be an object", path=path, field=where)
            check_keys(item, VM_KEYS if kind == "vms" else PM_KEYS, path, where)
            name = str(item.get("type", f"{kind[:-1]}{i}"))
            count = _field(item, "count", path, where)
            vcpu = _field(item, "vcpu", path, where)
            mem = _field(item, "mem_gib", path, where)
            if round(mem * MEM_UNIT) != mem * MEM_UNIT:
                raise InputError(f"must be a multiple of 0.25 GiB, got {mem!r}", path=path, field=f"{where}.mem_gib")
            disks = item.get("disks_gb", [])
            if not isinstance(disks, list) or not all(_whole(d, 1) for d in disks):
                raise InputError(f"must be a list of sizes > 0, got {disks!r}", path=path, field=f"{where}.disks_gb")
            if kind == "vms" and "migration_cost" in item:
                type_mig = _field(item, "migration_cost", path, where)
            if count == 0:
                continue
            if kind == "vms":
                vt = VMType(name, vcpu, round(mem * MEM_UNIT), tuple(disks))
                vms.append((vt, count))
                type_costs.append((type_mig if "migration_cost" in item else default_migration_cost(vt), count))
            else:
                cost = _field(item, "cost", path, where)
                pms.append((PMType(name, vcpu, round(mem * MEM_UNIT), tuple(disks), cost), count))
    n_vms = sum(c for _, c in vms)
    n_pms = sum(c for _, c in pms)
    for kind, n in (("vms", n_vms), ("pms", n_pms)):
        if n == 0:
            raise InputError(f"no {kind[:-1].upper()}s (every entry has count 0 or the list is empty)", path=path,
                             field=kind)  # fmt: skip
    check_size(n_vms, n_pms)
    mig = [cost for cost, count in type_costs for _ in range(count)]
    racks = doc.get("racks", [])
    if not isinstance(racks, list) or (racks and len(racks) != n_pms) or not all(_whole(r, 0) for r in racks):
        raise InputError(f"must be a list of {n_pms} rack numbers >= 0 (one per PM), got {racks!r}", path=path,
                         field="racks")  # fmt: skip
    cons = doc.get("constraints", [])
    if not isinstance(cons, list):
        raise InputError("must be a list", path=path, field="constraints")
    packs = doc.get("packs", [])
    members = (
        [v for p in packs for v in p] if isinstance(packs, list) and all(isinstance(p, list) for p in packs) else None
    )
    if members is None or (packs and sorted(members) != list(range(n_vms))) or not all(packs):
        raise InputError(f"must be a list of non-empty lists that together hold every VM number 0..{n_vms - 1} once",
                         path=path, field="packs")  # fmt: skip
    problem = Problem(
        str(doc.get("name", path.stem)),
        tuple(t for t, _ in vms),
        tuple(c for _, c in vms),
        tuple(t for t, _ in pms),
        tuple(c for _, c in pms),
        tuple(racks),
        tuple(_constraint(item, i, n_vms, path) for i, item in enumerate(cons)),
        tuple(tuple(p) for p in packs),
    )
    return _current_from(doc, problem, mig, path)


def _current_from(doc: dict[str, Any], problem: Problem, mig: list[int], path: Path) -> Problem:
    """The current placement, migration costs and pinned VMs of an instance file (module docstring), checked."""
    n = problem.n_vms
    raw = doc.get("current")
    current: list[int] = []
    disks: list[tuple[int, ...]] = []
    if raw is not None:
        if not isinstance(raw, list) or len(raw) != n:
            raise InputError(f"must be a list of {n} entries (one per VM: null or {{\"pm\": ..., \"disks\": [...]}})",
                             path=path, field="current")  # fmt: skip
        for i, entry in enumerate(raw):
            if entry is None:
                current.append(-1)
                disks.append(())
                continue
            where = f"current[{i}]"
            if not isinstance(entry, dict) or not _whole(entry.get("pm"), 0):
                raise InputError(f"must be null or an object with a PM number 'pm' >= 0, got {entry!r}", path=path,
                                 field=where)  # fmt: skip
            ds = entry.get("disks", [])
            if not isinstance(ds, list) or not all(_whole(d, 0) for d in ds):
                raise InputError(f"must be a list of disk numbers >= 0, got {ds!r}", path=path, field=f"{where}.disks")
            current.append(entry["pm"])
            disks.append(tuple(ds))
    costs = doc.get("migration_costs")
    if costs is not None:
        if not isinstance(costs, list) or len(costs) != n or not all(c is None or _whole(c, 0) for c in costs):
            raise InputError(f"must be a list of {n} integers >= 0 or null (one per VM; null: the type's cost)",
                             path=path, field="migration_costs")  # fmt: skip
        mig = [m if c is None else c for c, m in zip(costs, mig, strict=True)]
    pinned = doc.get("pinned", [])
    if not isinstance(pinned, list) or not all(_whole(i, 0) for i in pinned):
        raise InputError(f"must be a list of VM numbers, got {pinned!r}", path=path, field="pinned")
    typed = any("migration_cost" in v for v in doc["vms"] if isinstance(v, dict))
    given = raw is not None or costs is not None or typed
    try:  # Problem checks its current placement itself (check_current); the file is named here
        return replace(problem, current=tuple(current), current_disks=tuple(disks),
                       migration_cost=tuple(mig) if given else (), pinned=tuple(pinned))  # fmt: skip
    except InputError as exc:
        raise InputError(exc.detail, path=path, line=exc.line, field=exc.field) from None


def _constraint(item: Any, i: int, n_vms: int, path: Path) -> Constraint:
    where = f"constraints[{i}]"
    if not isinstance(item, dict):
        raise InputError("must be an object", path=path, field=where)
    kind = item.get("kind")
    if kind not in CONSTRAINT_KINDS:
        raise InputError(f"must be one of {', '.join(CONSTRAINT_KINDS)}, got {kind!r}", path=path,
                         field=f"{where}.kind")  # fmt: skip
    level = item.get("level", "rack")
    if level not in ("pm", "rack") or (kind == "spread" and level != "rack"):
        raise InputError(f"must be pm or rack (spread: rack), got {level!r}", path=path, field=f"{where}.level")
    key = "sets" if kind == "anti-colocate" else "vms"
    raw = item.get(key)
    if not isinstance(raw, list):
        raise InputError("must be a list", path=path, field=f"{where}.{key}")
    sets: list[Any] = raw if kind == "anti-colocate" else [raw]
    if not all(isinstance(s, list) and s for s in sets):
        raise InputError(f"must be a non-empty list{' of lists' if key == 'sets' else ''} of VM numbers", path=path,
                         field=f"{where}.{key}")  # fmt: skip
    flat = [v for s in sets for v in s]
    if not all(_whole(v, 0) and v < n_vms for v in flat) or len(set(flat)) != len(flat):
        raise InputError(f"VM numbers must be distinct and in 0..{n_vms - 1}", path=path, field=f"{where}.{key}")
    min_racks = item.get("min_racks", 0)
    max_per_rack = item.get("max_per_rack", 0)
    if not _whole(min_racks, 0) or not _whole(max_per_rack, 0):
        raise InputError("min_racks and max_per_rack must be integers >= 0", path=path, field=where)
    return Constraint(kind, level, tuple(tuple(s) for s in sets), min_racks, max_per_rack)
