"""The paper's hierarchical decomposition (sections III-C, V-D): VMs split into packs, PMs into swads; packs assigned
to swads by a small first-level model; each used swad's VMs placed on its PMs independently (in parallel).

Swad trees of any depth. ``split="random"`` is the paper's: one level of ``swads`` random equal swads.
``split="topology"`` takes the swads from the problem's racks and groups ``racks_per_pod`` racks into pods (a
PM -> rack -> pod -> datacenter tree, three levels of assignment): at every internal node the VMs that reached it
are cut into ``packs_per_child`` random packs per child and assigned to the children by the first-level model on
the children's aggregate capacities (with the margin ``beta`` on every resource when a child is split again, so
that it keeps room to re-pack, and on disk counts only above the leaves, as the paper); the leaves (racks) are
solved exactly. ``first_level="pattern"`` (ours) lets
the column-generation model choose the PMs and patterns for the whole problem and sends each VM to the swad that
holds its PM; each swad is then re-solved exactly, so the decomposition loses nothing against the pattern answer.

**Placement constraints** (PM-level ``colocate`` and ``anti-colocate``; the pattern first level only, anything else
is an input error): the pattern model runs over *items* (:mod:`.items`): a colocated group is one item, so it lands
on one PM and hence in one swad; anti-colocated items are counted per PM (replica sets as families with a cap, the
rest as rows), so the first level's answer meets every constraint and its LP bound stays a bound of the
constrained problem. Each swad's subproblem then states the constraints among its own VMs
(:func:`leaf_constraints`: a group wholly inside it, an anti-colocation restricted to its VMs where two of its sets
meet there) and is re-solved by ``compact`` (counts per class, exact) from the first level's answer; sets in
different swads are on different PMs already, so the swads' answers together meet every constraint. A first level
that proves the problem infeasible (an item apart from itself, or an LP bound above what all PMs cost) gives
status ``infeasible`` and no placement.

Infeasibility repair, in order: **pack moves** (a leaf whose subproblem is infeasible hands its largest pack to an
unused sibling leaf whose totals can take it, both are re-solved; up to ``moves`` times), then a **search on beta**
after the paper's footnote 10 (which suggests safety margins on all the stringent resources, their values found by
binary search; ours lowers the disk-count margin by 0.1 and assigns again).

First level (the paper's): minimise the number of swads used, such that per swad the packs' total vCPU, memory and
disk space fit the swad's totals, their total number of virtual disks is at most ``beta`` times the swad's number of
physical disks (the safety margin), and each pack's largest VM (vCPU, memory) fits the swad's largest PM.
``first_level="cost"`` minimises instead the summed cost of the cheapest PMs that could carry each swad's load (a
cost-aware first level, ours). Second level: the exact ``compact`` model per used swad, dispatched to workers
(:mod:`dcplace.parallel`: here one after the other with one worker, a local process pool with more, or Ray with
``ray_address``; the same subproblems and answers on each, one executor for the whole solve). If a
swad's subproblem is infeasible, ``beta`` is lowered by 0.1 and the first level is solved again (the paper's
"search on beta").
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
from ortools.sat.python import cp_model

from dcplace.config import check
from dcplace.parallel import Executor, check_ray_address, executor
from dcplace.placement.compact import CompactParams, Infeasible, solve_compact_from
from dcplace.placement.cpsat import run_cp
from dcplace.placement.greedy import cost_of
from dcplace.placement.items import constrained_items
from dcplace.placement.params import SolverParams, field_error
from dcplace.placement.pattern import PatternParams, solve_pattern_from
from dcplace.placement.problem import Constraint, Problem
from dcplace.placement.registry import solve
from dcplace.placement.result import Result
from dcplace.placement.stop import Deadline, Stop

FIRST_LEVELS = ("swads", "cost", "pattern")
SPLITS = ("random", "topology")


@dataclass(frozen=True)
class HierarchicalParams(SolverParams):
    """Parameters of the hierarchical decomposition (module docstring). ``workers``: processes solving swads (and
    the CP-SAT workers of the pattern first level)."""

    packs: int = 25
    """VM packs of the random split (random, equal size), between 1 and the problem's VMs."""
    swads: int = 25
    """PM swads of the random split (random, equal size), between 1 and the problem's PMs."""
    beta: float = 0.7
    """Safety margin on disk counts in (0, 1]: a swad takes packs with at most ``beta`` x its physical disks."""
    first_level: str = "swads"
    """swads (the paper's: fewest swads), cost (cheapest PMs' cost), or pattern (column generation)."""
    split: str = "random"
    """random (the paper's packs and swads) or topology (PMs -> racks -> pods, from the problem's racks)."""
    rack_size: int = 0
    """Topology split: shuffle the PMs into racks of this size first (seeded; 0: the problem's own racks)."""
    racks_per_pod: int = 5
    """Topology split: racks per pod, at least 1."""
    packs_per_child: int = 2
    """Topology split: random packs per child at every internal node, at least 1."""
    moves: int = 10
    """Rounds of pack moves (an infeasible leaf hands its largest pack to an unused sibling), at least 0."""
    swad_seconds: float = 0.0
    """At most this many seconds for each swad's exact solve, >= 0 (0: 80 % of the time left over the rounds the
    workers need); the paper's budget is 2 minutes per 100 x 100 subproblem."""
    ray_address: str = ""
    """Where the swads' subproblems run: '' a local process pool (default), 'local' a new Ray instance here,
    'auto' or 'HOST:PORT' / 'ray://HOST:PORT' an existing Ray cluster (the ray extra; dcplace.parallel)."""

    def check(self) -> None:
        super().check()
        for name in ("packs", "swads", "racks_per_pod", "packs_per_child"):
            check(getattr(self, name) >= 1, name, getattr(self, name), "at least 1")
        for name in ("rack_size", "moves", "swad_seconds"):
            check(getattr(self, name) >= 0, name, getattr(self, name), "at least 0")
        check(0 < self.beta <= 1, "beta", self.beta, "in (0, 1]")
        check(self.first_level in FIRST_LEVELS, "first_level", self.first_level, "swads, cost or pattern")
        check(self.split in SPLITS, "split", self.split, "random or topology")
        check_ray_address(self.ray_address)


def solve_hierarchical(problem: Problem, stop: Stop, seed: int, params: HierarchicalParams) -> Result:
    """The paper's two-level decomposition (packs onto swads, each swad solved exactly), or deeper by topology."""
    for name, value, most, what in (("packs", params.packs, problem.n_vms, "VMs"),
                                    ("swads", params.swads, problem.n_pms, "PMs")):  # fmt: skip
        if not 1 <= value <= most:
            if value == getattr(HierarchicalParams(), name):
                default = f"; {value} is the default, sized for the paper's 1,000 x 1,000 mixes"
            else:
                default = ""
            raise field_error(name, f"be between 1 and {most} (the problem's {what}{default})", value)
    if problem.constraints and params.first_level != "pattern":
        raise field_error("first_level", "be pattern for a problem with placement constraints", params.first_level)
    if params.rack_size:
        problem = with_racks(problem, params.rack_size, seed)
    stats: dict[str, Any]
    with executor(params.workers, params.ray_address) as ex:
        if params.first_level == "pattern":
            vm_pm, vm_disks, stats = _pattern_first_level(problem, stop, seed, params, ex)
        else:
            vm_pm, vm_disks, stats = _decompose(problem, stop, seed, params, ex)
    if vm_pm is None:
        status = "infeasible" if stats.get("infeasible") else "unknown"
        return Result(problem.name, "hierarchical", status, vms=problem.n_vms, stats=stats)
    bound = stats.get("pattern_bound") or None  # the pattern first level carries the LP bound
    return Result(problem.name, "hierarchical", "feasible", float(cost_of(problem, vm_pm)), bound, vms=problem.n_vms,
                  vm_pm=vm_pm, vm_disks=vm_disks, stats=stats)  # fmt: skip


@dataclass
class Split:
    packs: list[np.ndarray]  # global VM ids per pack
    swads: list[np.ndarray]  # global PM ids per swad


def random_split(problem: Problem, packs: int, swads: int, seed: int) -> Split:
    """The paper's random split into equal-size packs and swads (the problem's own packs when it declares them)."""
    rng = np.random.default_rng(seed)
    vm_packs = [np.sort(a) for a in np.array_split(rng.permutation(problem.n_vms), packs)]
    if problem.packs:
        vm_packs = [np.array(sorted(p), np.int64) for p in problem.packs]
    return Split(vm_packs, [np.sort(a) for a in np.array_split(rng.permutation(problem.n_pms), swads)])


def _sub(
    problem: Problem, vms: np.ndarray, pms: np.ndarray, vm_type: np.ndarray, pm_type: np.ndarray
) -> tuple[Problem, np.ndarray, np.ndarray]:
    """The subproblem of some VMs and PMs, and its type-major order mapped back to global ids (``vm_type``,
    ``pm_type``: the problem's ``vm_type_of()`` and ``pm_type_of()``, computed once per batch of subproblems)."""
    vt, pt = vm_type[vms], pm_type[pms]
    vm_order = vms[np.argsort(vt, kind="stable")]
    pm_order = pms[np.argsort(pt, kind="stable")]
    vcount = np.bincount(vt, minlength=len(problem.vm_types))
    pcount = np.bincount(pt, minlength=len(problem.pm_types))
    sub = Problem(
        "sub",
        tuple(t for t, c in zip(problem.vm_types, vcount, strict=True) if c),
        tuple(int(c) for c in vcount if c),
        tuple(t for t, c in zip(problem.pm_types, pcount, strict=True) if c),
        tuple(int(c) for c in pcount if c),
    )
    return sub, vm_order, pm_order


def first_level(
    problem: Problem, split: Split, beta: float, objective: str, stop: Stop, all_resources: bool = False,
    cut: list[int] | None = None,
) -> list[int] | None:  # fmt: skip
    """Swad of each pack, or None if the first level is infeasible. ``all_resources``: the margin ``beta`` applies to
    vCPU, memory and disk space too (for swads that are split again below, so they keep room to re-pack). ``cut``:
    its one entry counts the solves that stopped at their time limit without proving their answer best (the first
    level's share of the time is wall clock, so such an answer can differ on a slower or busier machine)."""
    vts = [t for t, c in zip(problem.vm_types, problem.vm_counts, strict=True) for _ in range(c)]
    pms = [t for t, c in zip(problem.pm_types, problem.pm_counts, strict=True) for _ in range(c)]

    def need(ids: np.ndarray) -> tuple[int, int, int, int, int, int]:
        vs = [vts[i] for i in ids]
        return (sum(v.vcpu for v in vs), sum(v.mem for v in vs), sum(len(v.disks) for v in vs),
                sum(sum(v.disks) for v in vs), max(v.vcpu for v in vs), max(v.mem for v in vs))  # fmt: skip

    def have(ids: np.ndarray) -> tuple[int, int, int, int, int, int]:
        ps = [pms[j] for j in ids]
        return (sum(p.vcpu for p in ps), sum(p.mem for p in ps), sum(len(p.disks) for p in ps),
                sum(sum(p.disks) for p in ps), max(p.vcpu for p in ps), max(p.mem for p in ps))  # fmt: skip

    needs = [need(p) for p in split.packs]
    haves = [have(s) for s in split.swads]
    m = cp_model.CpModel()
    a = {}
    for i, n in enumerate(needs):
        for s, h in enumerate(haves):
            if n[4] <= h[4] and n[5] <= h[5]:
                a[(i, s)] = m.new_bool_var(f"a{i}_{s}")
    for i in range(len(needs)):
        opts = [v for (ii, _), v in a.items() if ii == i]
        if not opts:
            return None
        m.add_exactly_one(opts)
    used = [m.new_bool_var(f"u{s}") for s in range(len(haves))]
    for s, h in enumerate(haves):
        on = [(i, v) for (i, ss), v in a.items() if ss == s]
        for _, v in on:
            m.add(v <= used[s])
        for r in (0, 1, 3):
            m.add(sum(needs[i][r] * v for i, v in on) <= (int(beta * h[r]) if all_resources else h[r]))
        m.add(sum(needs[i][2] * v for i, v in on) <= int(beta * h[2]))
    if objective == "cost":
        # Cost-aware: each swad pays for the cheapest set of its PMs whose vCPU covers its load (an LP-free proxy:
        # the swad's cost per vCPU, cheapest first, times the vCPU it must host).
        per_cpu = [min(pms[j].cost / pms[j].vcpu for j in sw) for sw in split.swads]
        m.minimize(sum(round(per_cpu[s] * needs[i][0]) * v for (i, s), v in a.items()))
    else:
        m.minimize(sum(used))
    ans = run_cp(m, stop)
    if cut is not None and ans.status in ("feasible", "unknown"):  # a proof of infeasibility is no cut
        cut[0] += 1
    if not ans.found:
        return None
    out = [0] * len(needs)
    for (i, s), v in a.items():
        if ans.solver.value(v):
            out[i] = s
    return out


SwadJob = tuple[Problem, float, np.ndarray | None, list[Sequence[int]] | None]
"""(subproblem, seconds, hint: PM of each VM in the subproblem's numbering or None, the hint's disks)."""


def _solve_swad(job: SwadJob) -> Result:
    """One swad's subproblem by the exact ``compact`` model, in ``seconds`` from when it starts: through the registry
    (verified) without a hint; with one, its search starts from the hint (the pattern first level's answer)."""
    sub, seconds, hint_pm, hint_disks = job
    if hint_pm is None:
        return solve(sub, "compact", Deadline(seconds), 0, CompactParams(workers=1))
    hint = Result(sub.name, "hint", "feasible", vms=sub.n_vms, vm_pm=hint_pm, vm_disks=hint_disks)
    t0 = time.perf_counter()
    res = solve_compact_from(sub, Deadline(seconds), 0, 1, hint)
    return replace(res, wall_s=time.perf_counter() - t0)  # the model's build included, as the registry counts it


Tree = list["Tree"] | np.ndarray
"""A swad tree: a leaf is an array of PM ids; an internal node is the list of its children."""


def leaf_pms(node: Tree) -> np.ndarray:
    if isinstance(node, np.ndarray):
        return node
    return np.concatenate([leaf_pms(c) for c in node])


def topology_tree(problem: Problem, racks_per_pod: int) -> Tree:
    """Datacenter -> pods of ``racks_per_pod`` racks -> racks (leaves: the PMs of each rack), from ``problem.racks``."""
    rack = problem.rack_of()
    racks = [np.flatnonzero(rack == r) for r in np.unique(rack)]
    pods: list[Tree] = [list(racks[i : i + racks_per_pod]) for i in range(0, len(racks), racks_per_pod)]
    return pods if len(pods) > 1 else pods[0]


def with_racks(problem: Problem, rack_size: int, seed: int) -> Problem:
    """The problem with its PMs shuffled into racks of ``rack_size`` (for instances that come without racks)."""
    order = np.random.default_rng(seed).permutation(problem.n_pms)
    rack = np.empty(problem.n_pms, np.int64)
    rack[order] = np.arange(problem.n_pms) // rack_size
    return replace(problem, racks=tuple(int(r) for r in rack))


@dataclass(eq=False)  # leaves compare by identity
class _Leaf:
    packs: list[np.ndarray]  # VM ids, one array per pack that reached this leaf
    pms: np.ndarray
    siblings: list[_Leaf]

    @property
    def vms(self) -> np.ndarray:
        return np.concatenate(self.packs) if self.packs else np.zeros(0, np.int64)


def _descend(
    problem: Problem, vms: np.ndarray, node: Tree, beta: float, objective: str, per_child: int,
    rng: np.random.Generator, stop: Stop, leaves: list[_Leaf], moves: list[int], cut: list[int] | None = None,
) -> bool:  # fmt: skip
    """Assign ``vms`` down the tree (random packs per child, first level per node); collect the leaves. A child whose
    own assignment fails hands its largest pack to an unused sibling that can take it (a pack move) and is retried."""
    if isinstance(node, np.ndarray):
        leaves.append(_Leaf([vms], node, []))
        return True
    n_packs = max(1, min(len(vms), per_child * len(node)))
    packs = [np.sort(p) for p in np.array_split(rng.permutation(vms), n_packs)]
    swads = [leaf_pms(c) for c in node]
    leaf_parent = all(isinstance(c, np.ndarray) for c in node)
    sub_stop = stop.share(0.25, least=0.125, most=10.0)  # a quarter of what is left (of at least 0.5 s), <= 10 s
    assign = first_level(problem, Split(packs, swads), beta, objective, sub_stop, not leaf_parent, cut)
    if assign is None:
        return False
    groups = [[packs[i] for i, s in enumerate(assign) if s == c] for c in range(len(node))]
    if leaf_parent:  # the children are leaves: keep their packs apart for the repair after solving
        kids = [_Leaf(groups[c], leaf_pms(node[c]), []) for c in range(len(node))]
        for k in kids:
            k.siblings = kids
        leaves.extend(kids)
        return True
    todo = [c for c in range(len(node)) if groups[c]]
    while todo:
        c = todo.pop(0)
        mark = len(leaves)
        if _descend(problem, np.concatenate(groups[c]), node[c], beta, objective, per_child, rng, stop, leaves,
                    moves, cut):  # fmt: skip
            continue
        del leaves[mark:]
        if len(groups[c]) < 2 or stop.expired():
            return False
        big = max(range(len(groups[c])), key=lambda k: len(groups[c][k]))
        target = next((d for d in range(len(node)) if not groups[d]
                       and _fits_totals(problem, groups[c][big], swads[d], beta)), None)  # fmt: skip
        if target is None:
            return False
        groups[target].append(groups[c].pop(big))
        moves[0] += 1
        todo += [c, target]
    return True


def _fits_totals(problem: Problem, vms: np.ndarray, pms: np.ndarray, beta: float) -> bool:
    vt = [problem.vm_types[t] for t in problem.vm_type_of()[vms]]
    pt = [problem.pm_types[t] for t in problem.pm_type_of()[pms]]
    return (
        sum(v.vcpu for v in vt) <= sum(p.vcpu for p in pt)
        and sum(v.mem for v in vt) <= sum(p.mem for p in pt)
        and sum(len(v.disks) for v in vt) <= beta * sum(len(p.disks) for p in pt)
        and max((v.vcpu for v in vt), default=0) <= max(p.vcpu for p in pt)
    )


SwadAnswer = tuple[str, np.ndarray | None, Sequence[Sequence[int]] | None, float]
"""(status, global PM of each VM in the subproblem's order or None, disks, seconds) of one swad."""


def _solve_leaves(
    problem: Problem, leaves: list[_Leaf], ex: Executor, stop: Stop, cap: float = 0.0,
    hint: tuple[np.ndarray, Sequence[Sequence[int]]] | None = None,
) -> list[SwadAnswer]:  # fmt: skip
    """Each leaf's subproblem solved exactly (``compact``) by the executor's workers; every swad gets 80 % of what is
    left divided by the rounds the workers need (at least 0.2 s), at most ``cap`` seconds when positive. ``hint``:
    (global PM of every VM, disks of every VM), a full answer each swad's search starts from. A constrained problem's
    leaves state the constraints among their own VMs (:func:`leaf_constraints`)."""
    jobs: list[SwadJob] = []
    maps = []
    vm_type, pm_type = problem.vm_type_of(), problem.pm_type_of()
    local = np.full(problem.n_pms, -1, np.int64)
    cons = leaf_constraints(problem, leaves)
    for leaf, leaf_cons in zip(leaves, cons, strict=True):
        sub, vm_order, pm_order = _sub(problem, leaf.vms, leaf.pms, vm_type, pm_type)
        if leaf_cons:
            number = {v: q for q, v in enumerate(vm_order.tolist())}
            sub = replace(sub, constraints=tuple(
                replace(c, sets=tuple(tuple(number[v] for v in st) for st in c.sets)) for c in leaf_cons))  # fmt: skip
        maps.append((vm_order, pm_order))
        if hint is None:
            jobs.append((sub, 0.0, None, None))
            continue
        local[pm_order] = np.arange(len(pm_order))
        jobs.append((sub, 0.0, local[hint[0][vm_order]], [hint[1][v] for v in vm_order.tolist()]))
    rounds = -(-len(jobs) // ex.workers)
    per_swad = max(0.8 * stop.remaining() / max(rounds, 1), 0.2)
    per_swad = min(per_swad, cap) if cap > 0 else per_swad
    results = ex.map(_solve_swad, [(j[0], per_swad, j[2], j[3]) for j in jobs])
    return [(r.status, None if r.vm_pm is None else maps[i][1][r.vm_pm], r.vm_disks, r.wall_s)
            for i, r in enumerate(results)]  # fmt: skip


def leaf_constraints(problem: Problem, leaves: list[_Leaf]) -> list[list[Constraint]]:
    """Per leaf, the constraints among its VMs (global VM numbers): a colocated group wholly in the leaf; an
    anti-colocation restricted to the leaf's VMs where two or more of its sets meet there. With every colocated
    group in one leaf (the pattern first level puts each on one PM), answers of the leaves that meet these meet every
    constraint: sets in different leaves are on different PMs."""
    out: list[list[Constraint]] = [[] for _ in leaves]
    if not problem.constraints:
        return out
    leaf_of = np.full(problem.n_vms, -1, np.int64)
    for k, leaf in enumerate(leaves):
        leaf_of[leaf.vms] = k
    for c in problem.constraints:
        where = leaf_of[np.asarray(c.vms, np.int64)]
        if c.kind == "colocate":
            if len(set(where.tolist())) > 1 or where[0] < 0:
                raise ValueError("a colocated group spans leaves")  # a bug: the first level keeps groups on one PM
            out[int(where[0])].append(c)
            continue
        for k in set(where.tolist()):
            sets = tuple(st for st in (tuple(v for v in st if leaf_of[v] == k) for st in c.sets) if st)
            if len(sets) >= 2:
                out[k].append(replace(c, sets=sets))
    return out


def _decompose(
    problem: Problem, stop: Stop, seed: int, params: HierarchicalParams, ex: Executor
) -> tuple[np.ndarray | None, list[Sequence[int]] | None, dict[str, Any]]:
    """(VM -> PM, disks, stats); None when no beta down to 0.1 gives feasible subproblems in time (``reason`` says
    which)."""
    beta, objective, split, moves = params.beta, params.first_level, params.split, params.moves
    packs, swads = params.packs, params.swads
    if split == "topology":
        tree: Tree = topology_tree(problem, params.racks_per_pod)
        per_child = params.packs_per_child
    else:
        rs = random_split(problem, packs, swads, seed)
        tree, per_child = list(rs.swads), -(-packs // swads)
    b = beta
    total_moves = 0
    cut = [0]
    while b >= 0.1 - 1e-9 and not stop.expired():
        rng = np.random.default_rng(seed)
        leaves: list[_Leaf] = []
        if split != "topology":  # the paper's one level: its random packs, as before
            assign = first_level(problem, rs, b, objective, stop.share(0.25, most=10.0), cut=cut)
            if assign is not None:
                kids = [_Leaf([rs.packs[i] for i, s in enumerate(assign) if s == c], rs.swads[c], [])
                        for c in range(len(rs.swads))]  # fmt: skip
                for k in kids:
                    k.siblings = kids
                leaves = kids
            ok = assign is not None
        else:
            moved = [0]
            ok = _descend(problem, np.arange(problem.n_vms), tree, b, objective, per_child, rng, stop, leaves, moved,
                          cut)  # fmt: skip
            total_moves += moved[0]
        if not ok:
            b = round(b - 0.1, 2)
            continue
        active = [leaf for leaf in leaves if len(leaf.vms)]
        results = dict(zip(map(id, active), _solve_leaves(problem, active, ex, stop), strict=True))
        # Pack moves: an infeasible leaf hands its largest pack to an unused sibling that can take it.
        for _ in range(moves):
            bad = [leaf for leaf in active if results[id(leaf)][1] is None and results[id(leaf)][0] == "infeasible"]
            if not bad or stop.expired():
                break
            changed: list[_Leaf] = []
            for leaf in bad:
                if len(leaf.packs) < 2:
                    continue
                big = max(range(len(leaf.packs)), key=lambda k: len(leaf.packs[k]))
                pack = leaf.packs[big]
                free = [s for s in leaf.siblings if not len(s.vms) and _fits_totals(problem, pack, s.pms, b)]
                if free:
                    leaf.packs.pop(big)
                    free[0].packs.append(pack)
                    changed += [leaf, free[0]]
                    total_moves += 1
            if not changed:
                break
            for leaf in changed:
                if all(leaf is not x for x in active):
                    active.append(leaf)
            results.update(zip(map(id, changed), _solve_leaves(problem, changed, ex, stop), strict=True))
        outs = [results[id(leaf)] for leaf in active]
        if any(r[1] is None for r in outs):
            if any(r[0] == "unknown" for r in outs):  # out of time, not infeasible: lowering beta won't help
                why = f"a swad's subproblem ran out of time at beta {b:g}; a longer --time-limit may find an answer"
                return None, None, {"beta": b, "pack_moves": float(total_moves), "reason": why}
            b = round(b - 0.1, 2)
            continue
        vm_pm = np.full(problem.n_vms, -1, dtype=np.int64)
        vm_disks: list[Sequence[int]] = [[] for _ in range(problem.n_vms)]
        vm_type = problem.vm_type_of()
        for leaf, (_, pm_glob, sub_disks, _) in zip(active, outs, strict=True):
            assert pm_glob is not None and sub_disks is not None
            vm_order = leaf.vms[np.argsort(vm_type[leaf.vms], kind="stable")]
            vm_pm[vm_order] = pm_glob
            for local, glob in enumerate(vm_order.tolist()):
                vm_disks[glob] = sub_disks[local]
        stats = {
            "beta": b,
            "swads_used": float(len(active)),
            "swad_seconds_sum": float(sum(r[3] for r in outs)),
            "swads_optimal": float(sum(r[0] == "optimal" for r in outs)),
            "pack_moves": float(total_moves),
            "levels": float(_depth(tree)),
            "first_level_cut": float(cut[0]),
        }
        return vm_pm, vm_disks, stats
    if stop.expired():
        why = f"time ran out at beta {b:g} before every swad's subproblem had an answer"
    else:
        why = (f"no beta from {beta:g} down to 0.1 gave subproblems that all have an answer ({packs} packs onto "
               f"{swads} swads of {problem.n_vms} VMs and {problem.n_pms} PMs); fewer packs and swads may")  # fmt: skip
    return None, None, {"beta": b, "pack_moves": float(total_moves), "reason": why}


def _depth(node: Tree) -> int:
    return 0 if isinstance(node, np.ndarray) else 1 + max(_depth(c) for c in node)


def _pattern_first_level(
    problem: Problem, stop: Stop, seed: int, params: HierarchicalParams, ex: Executor
) -> tuple[np.ndarray | None, list[Sequence[int]] | None, dict[str, Any]]:
    """The column-generation model (``pattern`` through the registry, half the time) decides which PMs carry which
    VMs; each swad then re-solves its own VMs on its own PMs exactly (never worse than the pattern answer inside the
    swad)."""
    workers, swads, split, racks_per_pod = params.workers, params.swads, params.split, params.racks_per_pod
    t0 = time.perf_counter()
    pattern = PatternParams(workers=workers, greedy_start=False)
    if problem.constraints:  # colocated VMs as one item, anti-colocated ones counted per PM (placement.items)
        try:
            items = constrained_items(problem)
        except Infeasible as exc:
            return None, None, {"beta": 0.0, "infeasible": 1.0, "reason": str(exc)}
        start = solve_pattern_from(problem, stop.share(0.5), seed, pattern, None, items)
    else:
        start = solve(problem, "pattern", stop.share(0.5), seed, pattern)
    if start.vm_pm is None:
        return None, None, {"beta": 0.0, "infeasible": float(start.status == "infeasible")}
    groups = (
        [leaf_pms(t) for t in _leaves(topology_tree(problem, racks_per_pod))]
        if split == "topology"
        else random_split(problem, 1, swads, seed).swads
    )
    # each group's VMs in increasing order, in one pass (a test of membership per group costs groups x VMs)
    group_of = np.full(problem.n_pms, -1, np.int64)
    for k, g in enumerate(groups):
        group_of[g] = k
    vm_group = np.where(start.vm_pm >= 0, group_of[start.vm_pm], -1)
    order = np.argsort(vm_group, kind="stable")
    cut = np.searchsorted(vm_group[order], np.arange(len(groups) + 1))
    leaves = [_Leaf([order[cut[k] : cut[k + 1]]], g, []) for k, g in enumerate(groups)]
    active = [leaf for leaf in leaves if len(leaf.vms)]
    vm_pm = start.vm_pm.copy()
    vm_disks: list[Sequence[int]] = list(start.vm_disks or [])
    t1 = time.perf_counter()
    outs = _solve_leaves(problem, active, ex, stop, params.swad_seconds, (vm_pm, vm_disks))
    t2 = time.perf_counter()
    improved = 0
    vm_type = problem.vm_type_of()
    pm_cost = np.array([t.cost for t in problem.pm_types], np.int64)[problem.pm_type_of()]
    for leaf, (_, pm_glob, sub_disks, _) in zip(active, outs, strict=True):
        if pm_glob is None or sub_disks is None:
            continue  # keep the pattern answer for this swad
        vm_order = leaf.vms[np.argsort(vm_type[leaf.vms], kind="stable")]
        old = vm_pm[vm_order].copy()
        if pm_cost[np.unique(pm_glob)].sum() > pm_cost[np.unique(old)].sum():
            continue  # the swad's search ran out of time above the pattern answer: keep that
        vm_pm[vm_order] = pm_glob
        for local, glob in enumerate(vm_order.tolist()):
            vm_disks[glob] = sub_disks[local]
        improved += int(len(set(pm_glob.tolist())) < len(set(old.tolist())))
    stats = {"beta": 1.0, "swads_used": float(len(active)), "swads_improved": float(improved),
             "pattern_bound": float(start.bound or 0), "swads_optimal": float(sum(r[0] == "optimal" for r in outs)),
             "first_level_seconds": t1 - t0, "swads_wall_seconds": t2 - t1,
             "swad_seconds_sum": float(sum(r[3] for r in outs)),
             "swad_seconds_max": float(max((r[3] for r in outs), default=0.0))}  # fmt: skip
    return vm_pm, vm_disks, stats


def _leaves(node: Tree) -> list[np.ndarray]:
    return [node] if isinstance(node, np.ndarray) else [x for c in node for x in _leaves(c)]
