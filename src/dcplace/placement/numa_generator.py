"""Seeded sequences of the Huawei topology-aware family, for judging a method on batches it was never tuned on.

A *family* is a set of servers (free CPU / RAM per NUMA node, rack) and a pool of request sequences
(:class:`~dcplace.placement.numa_batch.NumaBatch` values on those servers, e.g. C1-C4). :func:`generate` draws a new
sequence from a family with ``numpy.random.default_rng(seed)``; every knob of the draw is itself drawn from the
seed within :class:`FamilySpec`'s ranges, so that seeds differ in kind, not only in noise:

* **machine subset**: a share ``racks`` of the family's racks, whole racks (the topology inside a rack is kept);
* **requests**: ``vms`` VMs (a share of the pool's mean sequence length) by resampling the pool's flavours
  (CPU, RAM, NUMA span);
* **double-NUMA share**: the unconstrained VMs are drawn double-NUMA with the probability that brings the whole
  sequence to a drawn target share (the pool's flavours of that span, resampled);
* **constraint density and group sizes**: whole groups of the pool (strategy, the flavours of their members, their
  fault-domain labels) are drawn until a drawn share of the VMs is constrained, each resized by a drawn factor
  (members resampled with replacement within the group, so a group keeps its flavour mix and domain split).

A draw that a server subset cannot hold (a flavour that fits no server's node, an affinity group larger than every
rack's free RAM or CPU, an anti-affinity group larger than the servers its VMs fit, more than 90 % of the subset's
CPU or RAM, or a batch the pattern model's LP cannot cover even without constraints) is redrawn from the same
generator, so a seed always names one sequence. These are necessary conditions: a sequence can still be infeasible
under its constraints (none of the fixed ones is: every method's answer on them is checked).

:data:`HELD_OUT` fixes four seeds whose sequences no method here was tuned on (``huawei-heldout-1`` .. ``-4``);
``huawei-gen-<seed>`` names any other seed, for development. Both need the real dataset (the family's servers and
pool); tests use :func:`synthetic_family`, a small family made up here.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from dcplace.config import check as check_value
from dcplace.errors import InputError
from dcplace.placement.numa_batch import STRATEGIES, NumaBatch

HELD_OUT = {1: 9_001, 2: 9_002, 3: 9_003, 4: 9_004}
"""``huawei-heldout-N`` -> generator seed. Never tune a method on these: use ``huawei-gen-<seed>`` for that."""


@dataclass(frozen=True)
class FamilySpec:
    """Ranges each sequence's knobs are drawn from (uniformly), one draw per seed."""

    racks: tuple[float, float] = (0.6, 1.0)
    """Share of the family's racks kept (whole racks)."""
    vms: tuple[float, float] = (0.8, 1.05)
    """Sequence length as a share of the pool's mean length (C1-C4: 4,998 VMs)."""
    double_numa: tuple[float, float] = (0.12, 0.40)
    """Target share of double-NUMA VMs (C1-C4: 0.22-0.28)."""
    constrained: tuple[float, float] = (0.30, 0.70)
    """Share of VMs in a constraint group (C1-C4: 0.45-0.58)."""
    group_scale: tuple[float, float] = (0.5, 1.6)
    """Factor on each drawn group's size (at least one VM)."""
    tries: int = 50
    """Redraws before a seed is declared infeasible for the family."""

    def check(self) -> None:
        for name in ("racks", "vms", "double_numa", "constrained", "group_scale"):
            lo, hi = getattr(self, name)
            check_value(0 < lo <= hi, name, (lo, hi), "a range 0 < low <= high")
        check_value(self.racks[1] <= 1 and self.double_numa[1] <= 1 and self.constrained[1] <= 1, "spec",
                    self, "shares at most 1")  # fmt: skip
        check_value(self.tries >= 1, "tries", self.tries, "at least 1")


@dataclass(frozen=True)
class _Group:
    strategy: str
    flavours: npt.NDArray[np.float64]  # (members, 3) cpu, ram, numa
    domains: tuple[str, ...]  # (members,)


def _pool_groups(pool: list[NumaBatch]) -> list[_Group]:
    out = []
    for b in pool:
        fl = np.c_[b.cpu, b.ram, b.numa]
        for s in STRATEGIES[1:]:
            for members in b.groups(s).values():
                out.append(_Group(s, fl[members], tuple(b.domain[i] for i in members)))
    return out


def _fits_somewhere(node_free: npt.NDArray[np.float64], c: float, r: float, numa: int) -> npt.NDArray[np.bool_]:
    """(S,) servers one VM of this flavour fits on alone."""
    share = 0.5 if numa == 2 else 1.0
    fit = (node_free[:, :, 0] >= c * share - 1e-9) & (node_free[:, :, 1] >= r * share - 1e-9)  # (S, 2)
    out: npt.NDArray[np.bool_] = np.all(fit, axis=1) if numa == 2 else np.any(fit, axis=1)
    return out


def _feasible(node_free: npt.NDArray[np.float64], rack: npt.NDArray[np.int64], b: NumaBatch) -> bool:
    """Necessary conditions for a draw (module docstring); cheap, not a proof of feasibility."""
    if b.cpu.sum() > node_free[:, :, 0].sum() * 0.9 or b.ram.sum() > node_free[:, :, 1].sum() * 0.9:
        return False
    fits: dict[tuple[float, float, int], npt.NDArray[np.bool_]] = {}
    for c, r, n in {(float(c), float(r), int(n)) for c, r, n in zip(b.cpu, b.ram, b.numa, strict=True)}:
        fits[(c, r, n)] = _fits_somewhere(node_free, c, r, n)
        if not fits[(c, r, n)].any():
            return False
    rack_cap = np.zeros((int(rack.max()) + 1, 2))
    np.add.at(rack_cap, rack, node_free.sum(axis=1))
    for members in b.groups("affinity").values():
        if not np.any(np.all(rack_cap >= [b.cpu[members].sum(), b.ram[members].sum()], axis=1)):
            return False
    for members in b.groups("anti-affinity").values():
        ok = np.zeros(len(rack), bool)
        for i in members:
            ok |= fits[(float(b.cpu[i]), float(b.ram[i]), int(b.numa[i]))]
        if ok.sum() < len(members):
            return False
    return True


def _fits_unconstrained(b: NumaBatch) -> bool:
    """Whether the pattern model's LP (column generation to the end, constraints ignored) covers every VM: a draw
    that fails cannot be placed at all."""
    from dcplace.placement.numa_pattern import Pricer, catalogue, generate_columns
    from dcplace.placement.stop import Deadline

    cat = catalogue(b)
    master = generate_columns(cat, Pricer(cat), Deadline(math.inf))
    return master.converged


def generate(
    node_free: npt.NDArray[np.float64],
    rack: npt.NDArray[np.int64],
    pool: list[NumaBatch],
    seed: int,
    name: str | None = None,
    spec: FamilySpec | None = None,
) -> NumaBatch:
    """One sequence of the family (servers ``node_free`` (S, 2, 2) and ``rack`` (S,), requests resampled from
    ``pool``) for ``seed``, as described in the module docstring; the same seed gives the same sequence. Raises
    :class:`InputError` if ``spec.tries`` draws all fail the feasibility checks."""
    spec = spec or FamilySpec()
    spec.check()
    if not pool or node_free.shape != (len(rack), 2, 2):
        raise InputError("a family needs servers of shape (S, 2, 2) with one rack each and a non-empty pool",
                         field="family")  # fmt: skip
    rng = np.random.default_rng(seed)
    groups = _pool_groups(pool)
    allfl = np.concatenate([np.c_[b.cpu, b.ram, b.numa] for b in pool])
    single, double = allfl[allfl[:, 2] == 1], allfl[allfl[:, 2] == 2]
    mean_len = float(np.mean([b.vms for b in pool]))
    racks = np.unique(rack)
    for _ in range(spec.tries):
        u = {k: float(rng.uniform(*getattr(spec, k))) for k in ("racks", "vms", "double_numa", "constrained",
                                                                   "group_scale")}  # fmt: skip
        keep_racks = rng.choice(racks, size=max(1, round(u["racks"] * len(racks))), replace=False)
        servers = np.flatnonzero(np.isin(rack, keep_racks))
        n = max(1, round(u["vms"] * mean_len))
        fl: list[npt.NDArray[np.float64]] = []
        strat: list[str] = []
        grp: list[str] = []
        dom: list[str] = []
        k = 0
        while groups and len(strat) < u["constrained"] * n:
            g = groups[int(rng.integers(len(groups)))]
            size = max(1, round(len(g.domains) * u["group_scale"] * float(rng.uniform(0.75, 1.25))))
            size = min(size, n - len(strat))
            pick = rng.integers(len(g.domains), size=size)
            fl.append(g.flavours[pick])
            strat += [g.strategy] * size
            grp += [f"g{k}"] * size
            dom += [g.domains[p] for p in pick]
            k += 1
        done = np.concatenate(fl) if fl else np.zeros((0, 3))
        rest = n - len(strat)
        want_double = u["double_numa"] * n - float((done[:, 2] == 2).sum())
        p_double = min(max(want_double / rest, 0.0), 1.0) if rest else 0.0
        if len(double) == 0:
            p_double = 0.0
        if len(single) == 0:
            p_double = 1.0
        is_double = rng.random(rest) < p_double
        free_fl = np.empty((rest, 3))
        free_fl[is_double] = double[rng.integers(len(double), size=int(is_double.sum()))]
        free_fl[~is_double] = single[rng.integers(len(single), size=int((~is_double).sum()))]
        all_fl = np.concatenate([done, free_fl])
        strategy = tuple(strat + [""] * rest)
        order = rng.permutation(n)  # a batch: its order carries no meaning, so mix groups and loose VMs
        b = NumaBatch(
            name=name or f"huawei-gen-{seed}",
            node_free=np.ascontiguousarray(node_free[servers]),
            rack=np.ascontiguousarray(rack[servers]),
            cpu=np.ascontiguousarray(all_fl[order, 0]),
            ram=np.ascontiguousarray(all_fl[order, 1]),
            numa=np.ascontiguousarray(all_fl[order, 2].astype(np.int64)),
            strategy=tuple(strategy[i] for i in order),
            group=tuple((grp + [""] * rest)[i] for i in order),
            domain=tuple((dom + [""] * rest)[i] if strategy[i] == "fault_domain" else "" for i in order),
        )
        if _feasible(b.node_free, b.rack, b) and _fits_unconstrained(b):
            return b
    raise InputError(f"no feasible sequence for seed {seed} in {spec.tries} draws", field="seed")


def describe(b: NumaBatch) -> dict[str, float | int]:
    """The knobs a sequence ended with: servers, racks, VMs, double-NUMA share, constrained share, groups per kind."""
    groups: dict[str, int] = defaultdict(int)
    for s in STRATEGIES[1:]:
        groups[s] = len(b.groups(s))
    return {
        "servers": b.servers,
        "racks": len(np.unique(b.rack)),
        "vms": b.vms,
        "double_numa": float(np.mean(b.numa == 2)),
        "constrained": float(np.mean([s != "" for s in b.strategy])),
        **groups,
    }


def synthetic_family(seed: int, servers: int = 40, racks: int = 6, vms: int = 80) -> tuple[
        npt.NDArray[np.float64], npt.NDArray[np.int64], list[NumaBatch]]:  # fmt: skip
    """A small made-up family (for tests without the dataset): servers with random free nodes in ``racks`` racks
    and one pool sequence of ``vms`` VMs with affinity, anti-affinity and fault-domain groups of 1-4 VMs."""
    rng = np.random.default_rng(seed)
    node_free = rng.integers(8, 49, size=(servers, 2, 2)).astype(np.float64)
    node_free[:, :, 1] *= 2
    rack = np.sort(rng.integers(0, racks, size=servers)).astype(np.int64)
    flavours = np.array([(2, 4, 1), (4, 8, 1), (2, 8, 1), (8, 16, 1), (8, 32, 2), (16, 32, 2)], np.float64)
    cpu: list[float] = []
    ram: list[float] = []
    numa: list[int] = []
    strat: list[str] = []
    grp: list[str] = []
    dom: list[str] = []
    k = 0
    while len(cpu) < vms:
        kind = STRATEGIES[int(rng.integers(len(STRATEGIES)))]
        size = 1 if not kind else int(rng.integers(1, 5))
        for m in range(size):
            c, r, n = flavours[int(rng.integers(3 if kind == "affinity" else len(flavours)))]
            cpu.append(float(c))
            ram.append(float(r))
            numa.append(int(n))
            strat.append(kind)
            grp.append(f"s{k}" if kind else "")
            dom.append(str(m % 2) if kind == "fault_domain" else "")
        k += 1
    pool = NumaBatch("synthetic", node_free, rack, np.asarray(cpu), np.asarray(ram), np.asarray(numa, np.int64),
                     tuple(strat), tuple(grp), tuple(dom))  # fmt: skip
    return node_free, rack, [pool]
