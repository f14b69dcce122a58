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

Only ``flat``, ``greedy`` and ``auto`` (which then runs those two) model constraints; the counting models (compact,
pattern, hierarchical) refuse a constrained problem with a clear error, because identical VMs stop being
interchangeable once some carry labels.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from dcplace.errors import InputError
from dcplace.jsonio import read_json_object

MEM_UNIT = 4  # memory units per GiB


@dataclass(frozen=True)
class VMType:
    name: str
    vcpu: int
    mem: int  # quarter-GiB
    disks: tuple[int, ...]  # virtual disk sizes, GB


@dataclass(frozen=True)
class PMType:
    name: str
    vcpu: int
    mem: int  # quarter-GiB
    disks: tuple[int, ...]  # physical disk sizes, GB
    cost: int


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
        return doc


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


def _field(doc: dict[str, Any], key: str, path: Path, where: str, kind: type, positive: bool = True) -> Any:
    if key not in doc:
        raise InputError("missing", path=path, field=f"{where}.{key}")
    value = doc[key]
    ok = isinstance(value, kind) and not isinstance(value, bool)
    if kind is float:
        ok = isinstance(value, int | float) and not isinstance(value, bool)
    if not ok or (positive and value <= 0) or (not positive and value < 0):
        rule = "> 0" if positive else ">= 0"
        raise InputError(f"must be a number {rule}, got {value!r}", path=path, field=f"{where}.{key}")
    return value


def load_problem(spec: str) -> Problem:
    """A named instance (exp1, exp2, mix1, mix2, mix2x100: Mix 2 with every count x 100) or a JSON file in
    :meth:`Problem.to_json`'s format."""
    if spec in INSTANCES:
        return INSTANCES[spec]
    if spec == "mix2x100":
        return scaled(INSTANCES["mix2"], 100)
    path = Path(spec)
    if not path.is_file():
        names = ", ".join([*INSTANCES, "mix2x100"])
        exc = InputError(f"instance must be one of {names} or an existing .json file, got {spec!r}")
        exc.field = "instance"
        raise exc
    doc = read_json_object(path, ("vms", "pms"))
    vms: list[tuple[VMType, int]] = []
    pms: list[tuple[PMType, int]] = []
    for kind in ("vms", "pms"):
        for i, item in enumerate(doc[kind]):
            where = f"{kind}[{i}]"
            if not isinstance(item, dict):
                raise InputError("must be an object", path=path, field=where)
            name = str(item.get("type", f"{kind[:-1]}{i}"))
            count = _field(item, "count", path, where, int, positive=False)
            vcpu = _field(item, "vcpu", path, where, int)
            mem = _field(item, "mem_gib", path, where, float)
            if round(mem * MEM_UNIT) != mem * MEM_UNIT:
                raise InputError(f"must be a multiple of 0.25 GiB, got {mem!r}", path=path, field=f"{where}.mem_gib")
            disks = item.get("disks_gb", [])
            if not isinstance(disks, list) or not all(
                isinstance(d, int) and not isinstance(d, bool) and d > 0 for d in disks
            ):
                raise InputError(f"must be a list of sizes > 0, got {disks!r}", path=path, field=f"{where}.disks_gb")
            if count == 0:
                continue
            if kind == "vms":
                vms.append((VMType(name, vcpu, round(mem * MEM_UNIT), tuple(disks)), count))
            else:
                cost = _field(item, "cost", path, where, int, positive=False)
                pms.append((PMType(name, vcpu, round(mem * MEM_UNIT), tuple(disks), cost), count))
    n_vms = sum(c for _, c in vms)
    n_pms = sum(c for _, c in pms)
    racks = doc.get("racks", [])
    if not isinstance(racks, list) or (racks and len(racks) != n_pms) or not all(_is_int(r, 0) for r in racks):
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
    return Problem(
        str(doc.get("name", path.stem)),
        tuple(t for t, _ in vms),
        tuple(c for _, c in vms),
        tuple(t for t, _ in pms),
        tuple(c for _, c in pms),
        tuple(racks),
        tuple(_constraint(item, i, n_vms, path) for i, item in enumerate(cons)),
        tuple(tuple(p) for p in packs),
    )


def _is_int(value: Any, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


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
    if not all(_is_int(v, 0) and v < n_vms for v in flat) or len(set(flat)) != len(flat):
        raise InputError(f"VM numbers must be distinct and in 0..{n_vms - 1}", path=path, field=f"{where}.{key}")
    min_racks = item.get("min_racks", 0)
    max_per_rack = item.get("max_per_rack", 0)
    if not _is_int(min_racks, 0) or not _is_int(max_per_rack, 0):
        raise InputError("min_racks and max_per_rack must be integers >= 0", path=path, field=where)
    return Constraint(kind, level, tuple(tuple(s) for s in sets), min_racks, max_per_rack)
