"""What the pattern model covers under PM-level placement constraints: colocated VMs merged into one item, the
anti-colocated items counted per PM.

An *item* is a set of VMs that share one PM: a colocated group (PM-level ``colocate`` constraints, overlapping ones
merged) or a single VM. Items with the same composition (VMs per type) and the same part in the anti-colocation
constraints are interchangeable and form a *class* ``k``:

    comp[k, t]     VMs of type t in one item of class k                      (K, T) int64
    counts[k]      items of class k                                          (K,)
    cap[k]         at most this many items of class k on one PM, 0: no cap   (K,)
    stride[k]      the constraints a family class's items come from, else 1 (K,)
    members[k]     the items' VM numbers, one row per item, by type in a row (counts[k], VMs per item) int64

A pattern then counts items per class; its VMs per type are ``comp.T @ n``, and the one-PM constraints (CPU,
memory, the disks of every VM type) are the pattern model's on those totals: exact, because disk exclusivity binds
the disks of one VM, and VMs of one colocated item are different VMs (the compact model's slot construction per
type holds whatever item a VM came from).

Anti-colocation (PM-level ``anti-colocate``: VMs of different sets never share a PM), per constraint ``c``:

* **every set one VM** ("all apart"): at most one item of ``c`` per PM.

  - A *family*: ``c``'s items all have one composition ``q`` and touch no other anti-colocation constraint; the ``N``
    constraints with the same ``(q, r = items)`` form one class of ``N r`` items with ``cap = stride = N``. A pattern
    with ``a_j <= N`` of them on each PM ``j`` is realised by the slot rule: the family's items taken by the PMs in
    turn are slots ``0 .. N r - 1``, and slot ``s`` gets the ``(s div N)``-th item of constraint ``s mod N``; a PM's
    ``a_j <= N`` consecutive slots belong to ``a_j`` different constraints and every constraint gives its ``r``
    items. Replicas of a service (anti-colocated VMs of one type) are families; then the constraints cost the
    pattern model one class and a cap, however many there are.
  - Otherwise an *apart row*: ``sum_{k touching c} n_k <= 1`` on every PM (classes per composition and the
    constraints touched, so any item of a class may go where the class's count says).

* **some set of several VMs**: a *choice row*: per PM a boolean ``h_s`` per set, ``n_k <= ub_k h_s`` for the classes
  touching set ``s`` and ``sum_s h_s <= 1`` (classes per composition and the sets touched).

So every pattern solution realises into an assignment that meets the constraints, and every such assignment is a
pattern solution: the pattern model stays exact, and its LP bound a bound, under these constraints. An item that
meets two sets of one anti-colocation constraint (colocated VMs that must be apart) makes the problem infeasible
(:class:`~dcplace.placement.compact.Infeasible`). Rack-level constraints and ``spread`` are not modelled
(:class:`~dcplace.errors.InputError`).

Shapes are per class, so a problem with many families and few compositions stays as small as the unconstrained one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dcplace.errors import InputError
from dcplace.placement.compact import Infeasible
from dcplace.placement.problem import Problem

Touch = tuple[int, int]
"""(constraint, set) an item meets; set -1 for an all-apart constraint (every set one VM)."""


@dataclass(frozen=True)
class Items:
    """Classes of interchangeable items (module docstring); the rows the pricer adds per PM."""

    comp: np.ndarray  # (K, T) int64: VMs of each type in one item of each class
    counts: tuple[int, ...]  # (K,) items per class
    cap: tuple[int, ...]  # (K,) items of the class one PM may hold, 0: no cap
    stride: tuple[int, ...]  # (K,) constraints of a family class (slot rule), else 1
    members: tuple[np.ndarray, ...]  # per class (counts[k], VMs per item) int64 VM numbers, a row by type
    apart: tuple[tuple[int, ...], ...] = ()
    """Rows: on every PM at most one item of these classes in all."""
    choose: tuple[tuple[tuple[int, ...], ...], ...] = ()
    """Rows: on every PM items of at most one of these groups of classes."""

    @property
    def n_classes(self) -> int:
        return len(self.counts)

    def type_counts(self, take: dict[int, int]) -> list[int]:
        """VMs per type of ``take`` (items per class)."""
        out = np.zeros(self.comp.shape[1], np.int64)
        for k, a in take.items():
            out += a * self.comp[k]
        return out.tolist()


def plain_items(problem: Problem) -> Items:
    """Every VM its own item, one class per VM type (the unconstrained pattern model)."""
    t = len(problem.vm_types)
    first = np.concatenate([[0], np.cumsum(problem.vm_counts)]).astype(np.int64)
    members = tuple(np.arange(first[k], first[k + 1], dtype=np.int64)[:, None] for k in range(t))
    return Items(np.eye(t, dtype=np.int64), tuple(problem.vm_counts), (0,) * t, (1,) * t, members)


def constrained_items(problem: Problem) -> Items:
    """The classes of ``problem`` under its PM-level colocate and anti-colocate constraints (module docstring).
    Raises InputError for a constraint it does not model, Infeasible when an item must be apart from itself."""
    for n, c in enumerate(problem.constraints):
        if c.level != "pm" or c.kind not in ("colocate", "anti-colocate"):
            raise InputError(f"constraint {n}: the pattern model models PM-level colocate and anti-colocate "
                             f"constraints only, got {c.kind} at level {c.level}")  # fmt: skip
    vt = problem.vm_type_of()
    n_types = len(problem.vm_types)
    parent: dict[int, int] = {}

    def root(v: int) -> int:
        parent.setdefault(v, v)
        while parent[v] != v:
            parent[v] = parent[parent[v]]
            v = parent[v]
        return v

    for c in problem.constraints:
        if c.kind == "colocate":
            first = root(c.vms[0])
            for v in c.vms[1:]:
                r = root(v)
                if r != first:
                    parent[r] = first
    for c in problem.constraints:  # anti-colocated VMs outside any group are items of their own
        for v in c.vms:
            root(v)
    groups: dict[int, list[int]] = {}
    for v in parent:
        groups.setdefault(root(v), []).append(v)
    items = [sorted(g, key=lambda v: (int(vt[v]), v)) for g in sorted(groups.values(), key=min)]
    item_of = {v: i for i, g in enumerate(items) for v in g}
    # what each item meets, per anti-colocation constraint
    apart_cons = {n for n, c in enumerate(problem.constraints)
                  if c.kind == "anti-colocate" and all(len(s) == 1 for s in c.sets)}  # fmt: skip
    touches: list[dict[int, int]] = [{} for _ in items]
    for n, c in enumerate(problem.constraints):
        if c.kind != "anti-colocate":
            continue
        for s, vms in enumerate(c.sets):
            for v in vms:
                i = item_of[v]
                if touches[i].get(n, s) != s or (n in apart_cons and n in touches[i]):
                    raise Infeasible(f"constraint {n} (anti-colocate) keeps apart VMs that colocation puts on one PM")
                touches[i][n] = s
    comp_of = [tuple(np.bincount(vt[g], minlength=n_types).tolist()) for g in items]
    # families: all-apart constraints whose items share one composition and meet no other constraint
    cons_items: dict[int, list[int]] = {}
    for i, met in enumerate(touches):
        for n in met:
            cons_items.setdefault(n, []).append(i)
    family_of: dict[int, tuple[tuple[int, ...], int]] = {}
    for n in sorted(apart_cons):
        its = cons_items.get(n, [])
        if its and len({comp_of[i] for i in its}) == 1 and all(len(touches[i]) == 1 for i in its):
            family_of[n] = (comp_of[its[0]], len(its))
    families: dict[tuple[tuple[int, ...], int], list[list[int]]] = {}  # (comp, r) -> items, constraint-major
    for n, fam in family_of.items():
        families.setdefault(fam, []).extend(items[i] for i in cons_items[n])
    others: dict[tuple[tuple[int, ...], tuple[Touch, ...]], list[list[int]]] = {}  # (comp, touches) -> items
    for i, g in enumerate(items):
        met = touches[i]
        if len(met) == 1 and next(iter(met)) in family_of:
            continue
        key = (comp_of[i], tuple(sorted((n, -1 if n in apart_cons else s) for n, s in met.items())))
        others.setdefault(key, []).append(g)
    constrained = np.zeros(problem.n_vms, np.bool_)
    if parent:
        constrained[np.fromiter(parent, np.int64)] = True
    free = np.flatnonzero(~constrained)
    comp_rows: list[tuple[int, ...]] = []
    counts: list[int] = []
    cap: list[int] = []
    stride: list[int] = []
    members: list[np.ndarray] = []
    touch_of: list[tuple[Touch, ...]] = []
    for t in range(n_types):  # the unconstrained VMs: one class per type, as in the plain model
        ids = free[vt[free] == t]
        if len(ids):
            comp_rows.append(tuple(int(t == u) for u in range(n_types)))
            counts.append(len(ids))
            cap.append(0)
            stride.append(1)
            members.append(ids[:, None])
            touch_of.append(())
    for (comp, r), gs in sorted(families.items()):
        n_cons = len(gs) // r
        comp_rows.append(comp)
        counts.append(len(gs))
        cap.append(n_cons)
        stride.append(n_cons)
        members.append(np.array(gs, np.int64))
        touch_of.append(())
    for (comp, tch), gs in sorted(others.items()):
        comp_rows.append(comp)
        counts.append(len(gs))
        cap.append(1 if any(s == -1 for _, s in tch) else 0)
        stride.append(1)
        members.append(np.array(gs, np.int64))
        touch_of.append(tch)
    apart: dict[int, list[int]] = {}
    choose: dict[int, dict[int, list[int]]] = {}
    for k, tch in enumerate(touch_of):
        for n, s in tch:
            if s == -1:
                apart.setdefault(n, []).append(k)
            else:
                choose.setdefault(n, {}).setdefault(s, []).append(k)
    return Items(
        np.array(comp_rows, np.int64).reshape(-1, n_types),
        tuple(counts),
        tuple(cap),
        tuple(stride),
        tuple(members),
        tuple(tuple(ks) for ks in apart.values() if len(ks) > 1),  # one class: its cap of 1 says it
        tuple(tuple(tuple(ks) for ks in sets.values()) for sets in choose.values() if len(sets) > 1),
    )
