"""Topology-aware batch placement on double-NUMA servers with placement constraints (the Huawei dataset in
``../shared/data/huawei-numa-placement/``; issue 6, part 4).

The problem. Servers have two NUMA nodes with given *free* CPU cores and RAM (``PM_res.csv``) and sit in racks.
A batch of VMs (``VM_data_C{1..4}.csv``) must all be placed, minimising the servers used:

* ``numa = 1``: the VM's CPU and RAM come from one node; ``numa = 2``: half of each from each node of one server;
* ``affinity`` (colocation at rack level): the VMs of a group share one rack. Server level is impossible here:
  most affinity groups need more than any server has free (C1's group 9 asks 8 x 32 cores / 128 GB = 960 GB; the
  largest server has 404 GB free), so the reading that fits the data is the rack;
* ``anti-affinity`` (anti-colocation at server level): the VMs of a group sit on distinct servers;
* ``fault_domain`` (anti-colocation at rack level, by domain): VMs of one group with *different* ``domain`` labels
  never share a rack, so one rack failure takes out at most one domain of the group. VMs of the same group and
  domain may share racks and servers. (The dataset does not define the fields; this is our reading, stated in
  docs/placement.md and tested.)
* server ``i`` of ``PM_res.csv`` is host ``host-i`` of ``topology.csv`` and lives in that host's rack (the dataset
  does not say how the 1,710 servers map onto its 17,387 hosts; the first 1,710 hosts span racks 0-99, 10-19 servers
  each).

Lower bound (the typed relaxation). VMs of equal (CPU, RAM, NUMA span) form a type; ``y[t, s, node]`` >= 0 is how
many VMs of type ``t`` go to a node of server ``s`` (both nodes, half each, for double-NUMA types), only where one
such VM fits; every type's count is covered; every node's CPU and RAM hold its load when its server is used
(``x[s]`` binary); at least as many servers as the largest anti-affinity group. Dropping integrality of ``y`` and
the group constraints makes it a relaxation, so its optimum is a lower bound; SCIP (through OR-Tools' linear
solver wrapper) proves it in seconds (~30,000 continuous variables, 1,710 binaries). It is far tighter than
covering the batch's CPU and RAM totals (C1: 714 against 577), because a node's CPU only counts with the RAM to
use it. Its choice of servers also guides the packing.

Solution (relaxation-guided packing, three phases):

A. Solve the relaxation again with the large VMs (64 GB or more) as whole VMs (integer ``y`` for their types) and
   place, largest first, every VM of 32 GB or more where the answer puts it (a whole-VM slot, else a node the answer
   gives a fraction of its type, rounding up), only where it really fits and its constraints allow; an affinity
   group only whole, inside one rack. Why: rounding a fractional answer strands large VMs (a 64-core VM split 0.6 /
   0.4 over two nodes fits neither), and small VMs are what fills the gaps rounding leaves.
B. Constraint-aware first-fit decreasing for everything left: affinity groups (largest first) into the rack where
   they open the fewest servers, then each VM by decreasing RAM into the open server where it fits, honours its
   constraints and leaves the least normalised room, else into the next unopened server (the relaxation's servers
   first, largest first).
C. Consolidation: try to empty the least-filled servers into the others.

From a current placement (:func:`with_current`: each VM's server and node now, per-VM migration cost in servers,
default RAM / the largest server's RAM, pinned VMs), method ``consolidate`` (:func:`solve_consolidate`, the
heuristic; with ``improve_s``, CP-SAT after it: :func:`dcplace.placement.numa_pattern.solve_consolidate_improved`)
lowers servers used + migration cost: it starts from the current placement, places the new VMs, and empties servers
only where that pays; the checker also verifies pinned VMs and recomputes the migration cost.

Every answer is re-checked by :func:`check`, which shares no code with the packing. Measured on C1-C4 in
``docs/benchmarks.md`` (all four within 5 % of the bound).
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dcplace.config import check as check_value
from dcplace.errors import InputError
from dcplace.inputs import MAX_QUANTITY, POSITIVE, Range, number, read_csv
from dcplace.placement.params import Params
from dcplace.placement.result import Result
from dcplace.placement.stop import Stop, interruptible

STRATEGIES = ("", "affinity", "anti-affinity", "fault_domain")


@dataclass(frozen=True)
class NumaBatch:
    """Servers (free capacity per node, rack) and VMs (demand, NUMA span, constraint labels)."""

    name: str
    node_free: npt.NDArray[np.float64]  # (S, 2 nodes, 2) cpu, ram
    rack: npt.NDArray[np.int64]  # (S,)
    cpu: npt.NDArray[np.float64]  # (n,)
    ram: npt.NDArray[np.float64]  # (n,)
    numa: npt.NDArray[np.int64]  # (n,) 1 or 2
    strategy: tuple[str, ...]  # (n,) one of STRATEGIES
    group: tuple[str, ...]  # (n,) group label ("" when no strategy)
    domain: tuple[str, ...]  # (n,) fault-domain label
    current_server: npt.NDArray[np.int64] | None = None
    """(n,) each VM's server now (-1: a new VM), or None: placed from scratch (see :func:`with_current`)."""
    current_node: npt.NDArray[np.int64] | None = None
    """(n,) each VM's node now (0 / 1; -1 for a double-NUMA VM or a new one)."""
    migration_cost: npt.NDArray[np.float64] | None = None
    """(n,) cost of moving each VM, in servers (None: :func:`default_numa_migration_cost`)."""
    pinned: npt.NDArray[np.bool_] | None = None
    """(n,) VMs that must keep their server and node."""

    def __post_init__(self) -> None:
        for name in ("cpu", "ram"):  # a zero-size VM sent column generation's knapsack into an endless loop
            values = np.asarray(getattr(self, name), np.float64)
            bad = np.flatnonzero(~(np.isfinite(values) & (values > 0)))
            if len(bad):
                raise InputError(f"{self.name}: VM {int(bad[0])} has {name} {values[bad[0]]:g}; every VM needs a "
                                 f"finite {name} > 0", field=name)  # fmt: skip

    @property
    def has_current(self) -> bool:
        """Whether the batch starts from a current placement (re-optimisation)."""
        return self.current_server is not None

    def migration_costs(self) -> npt.NDArray[np.float64]:
        """(n,) the cost of moving each VM, in servers (given or the default)."""
        return default_numa_migration_cost(self) if self.migration_cost is None else self.migration_cost

    @property
    def servers(self) -> int:
        return len(self.rack)

    @property
    def vms(self) -> int:
        return len(self.cpu)

    def groups(self, strategy: str) -> dict[str, list[int]]:
        """VM indices of each group of ``strategy``."""
        out: dict[str, list[int]] = defaultdict(list)
        for i, (s, g) in enumerate(zip(self.strategy, self.group, strict=True)):
            if s == strategy:
                out[g].append(i)
        return dict(out)


def _num(value: str, path: Path, line: int, name: str, integer: bool = False) -> float:
    rng = Range(0, MAX_QUANTITY, integer=integer)
    return number(value, rng, path=path, line=line, field=name)


def _rows(path: Path, need: tuple[str, ...]) -> list[tuple[int, dict[str, str]]]:
    """The data rows of a headed CSV (:func:`dcplace.inputs.read_csv`: encoding, field counts, at least one row),
    each with its file line."""
    table = read_csv(path, need)
    return [(line, dict(zip(table.header, cells, strict=True))) for line, cells in zip(table.lines, table.rows,
                                                                                      strict=True)]  # fmt: skip


def read_huawei(folder: Path, sequence: int, name: str | None = None, vm_path: Path | None = None) -> NumaBatch:
    """Sequence ``C{sequence}`` of the dataset in ``folder``, with its servers and racks, named ``name`` (default
    ``huawei-c{sequence}``; a user's file is named by its path, so errors about it name the file). ``vm_path``: a
    user's ``VM_data_C<n>.csv`` (any ``n``) in ``folder`` instead of the dataset's sequence."""
    if vm_path is None and sequence not in (1, 2, 3, 4, 5):
        raise InputError(f"the Huawei sequences are C1-C5, got C{sequence}")
    pm_path = folder / "PM_res.csv"
    node_free = []
    for line, row in _rows(pm_path, ("CPU1", "RAM1", "CPU2", "RAM2")):
        v = [_num(row[c], pm_path, line, c) for c in ("CPU1", "RAM1", "CPU2", "RAM2")]
        node_free.append([[v[0], v[1]], [v[2], v[3]]])
    topo_path = folder / "topology.csv"
    rack_of: dict[str, int] = {}
    first: dict[str, int] = {}
    for line, row in _rows(topo_path, ("host_id", "rack_id")):
        host = row["host_id"]
        if host in first:  # the last row won silently
            raise InputError(f"host {host!r} is listed twice (first on line {first[host]})", path=topo_path,
                             line=line, field="host_id")  # fmt: skip
        first[host] = line
        rack_of[host] = int(_num(row["rack_id"], topo_path, line, "rack_id", integer=True))
    racks = []
    for i in range(len(node_free)):
        if f"host-{i}" not in rack_of:
            raise InputError(f"no host-{i} for server {i} of {pm_path.name}", path=topo_path, field="host_id")
        racks.append(rack_of[f"host-{i}"])
    vm_path = vm_path or folder / f"VM_data_C{sequence}.csv"
    nodes = np.asarray(node_free, np.float64).reshape(-1, 2, 2)
    cpu, ram, numa, strat, group, domain = [], [], [], [], [], []
    for line, row in _rows(vm_path, ("flavor_vcpus", "flavor_ram", "numa", "strategy", "group", "domain")):
        cpu.append(number(row["flavor_vcpus"], POSITIVE, path=vm_path, line=line, field="flavor_vcpus"))
        ram.append(number(row["flavor_ram"], POSITIVE, path=vm_path, line=line, field="flavor_ram"))
        n = row["numa"].strip()
        if n not in ("1", "2"):
            raise InputError(f"numa must be 1 or 2, got {n!r}", path=vm_path, line=line, field="numa")
        numa.append(int(n))
        share = np.array([cpu[-1], ram[-1]]) / numa[-1]  # what each of its nodes must hold
        room = np.all(nodes >= share - 1e-9, axis=2)  # (servers, 2): the node can hold its share
        if not np.any(np.any(room, axis=1) if numa[-1] == 1 else np.all(room, axis=1)):
            where = "one NUMA node" if numa[-1] == 1 else "both NUMA nodes (half on each)"
            raise InputError(f"a VM of {cpu[-1]:g} vCPU and {ram[-1]:g} GB fits no server of {pm_path.name} on "
                             f"{where}", path=vm_path, line=line, field="flavor_vcpus")  # fmt: skip
        s = row["strategy"].strip()
        if s not in STRATEGIES:
            raise InputError(f"strategy must be empty, affinity, anti-affinity or fault_domain, got {s!r}",
                             path=vm_path, line=line, field="strategy")  # fmt: skip
        if s and not row["group"].strip():
            raise InputError(f"a {s} VM needs a group", path=vm_path, line=line, field="group")
        strat.append(s)
        group.append(row["group"].strip() if s else "")
        domain.append(row["domain"].strip() if s == "fault_domain" else "")
    return NumaBatch(
        name=name or f"huawei-c{sequence}",
        node_free=np.asarray(node_free, np.float64),
        rack=np.asarray(racks, np.int64),
        cpu=np.asarray(cpu),
        ram=np.asarray(ram),
        numa=np.asarray(numa, np.int64),
        strategy=tuple(strat),
        group=tuple(group),
        domain=tuple(domain),
    )


def huawei_folder(spec: str) -> Path:
    """The shared data folder of the Huawei topology-aware dataset (``$DCPLACE_DATA`` or ../shared/data), or an
    :class:`InputError` naming instance ``spec`` that needs it."""
    from dcplace.workload.traces import shared_data_dir

    root = shared_data_dir()
    folder = None if root is None else root / "huawei-numa-placement"
    if folder is None or not folder.is_dir():
        raise InputError(f"instance {spec} needs ../shared/data/huawei-numa-placement (or $DCPLACE_DATA)")
    return folder


# --- starting from a current placement -----------------------------------------------------------------------------


def default_numa_migration_cost(batch: NumaBatch) -> npt.NDArray[np.float64]:
    """(n,) the default cost of moving each VM, in servers: its RAM over the largest server's RAM (``node_free``
    summed over nodes), so moving a largest server's worth of memory costs as much as keeping one server. A live
    migration copies the memory, so its time and traffic grow with it."""
    return batch.ram / float(batch.node_free[:, :, 1].sum(axis=1).max())


def with_current(
    batch: NumaBatch,
    server: npt.ArrayLike,
    node: npt.ArrayLike,
    migration_cost: npt.ArrayLike | None = None,
    pinned: npt.ArrayLike | None = None,
) -> NumaBatch:
    """``batch`` starting from the placement ``server`` (-1: new VM) / ``node`` (0 / 1, -1: split over both), with
    per-VM migration costs in servers (None: the default) and pinned VMs (indices). ``node_free`` is then the
    capacity for all the batch's VMs, the current ones included. Raises :class:`InputError` naming the field for a
    malformed placement: wrong length, a server that does not exist, a node that does not match the VM's NUMA span,
    a node over capacity, a negative cost, a pinned VM without a current server."""
    n = batch.vms
    srv = np.asarray(server, np.int64)
    nd = np.asarray(node, np.int64)
    if srv.shape != (n,) or nd.shape != (n,):
        raise InputError(f"must hold {n} entries (one per VM)", field="current")
    bad = np.flatnonzero((srv < -1) | (srv >= batch.servers))
    if len(bad):
        raise InputError(f"VM {bad[0]} is on server {srv[bad[0]]}, which does not exist", field="current")
    placed = srv >= 0
    want = np.where(batch.numa == 2, -1, nd)
    wrong = np.flatnonzero(placed & ((nd != want) | ((batch.numa == 1) & ~np.isin(nd, (0, 1)))))
    if len(wrong):
        i = int(wrong[0])
        raise InputError(f"VM {i} (numa {batch.numa[i]}) cannot be on node {nd[i]}", field="current")
    load = np.zeros_like(batch.node_free)
    for k in (0, 1):
        share = np.where(batch.numa == 2, 0.5, (nd == k).astype(float)) * placed
        np.add.at(load[:, k, 0], srv[placed], (batch.cpu * share)[placed])
        np.add.at(load[:, k, 1], srv[placed], (batch.ram * share)[placed])
    over = np.argwhere(load > batch.node_free + 1e-9)
    if len(over):
        s, k, _ = over[0]
        raise InputError(f"the current placement puts {load[s, k].tolist()} on server {s} node {k}, capacity "
                         f"{batch.node_free[s, k].tolist()}", field="current")  # fmt: skip
    cost = None if migration_cost is None else np.asarray(migration_cost, np.float64)
    if cost is not None and (cost.shape != (n,) or not np.all(np.isfinite(cost)) or np.any(cost < 0)):
        raise InputError(f"must hold {n} finite costs >= 0", field="migration_cost")
    pin = np.zeros(n, np.bool_)
    ids = np.asarray([] if pinned is None else pinned, np.int64)
    if np.any((ids < 0) | (ids >= n)):
        raise InputError(f"must be VM numbers in 0..{n - 1}", field="pinned")
    pin[ids] = True
    if np.any(pin & ~placed):
        raise InputError(f"VM {int(np.flatnonzero(pin & ~placed)[0])} is pinned but has no current server",
                         field="pinned")  # fmt: skip
    return replace(batch, current_server=srv, current_node=np.where(placed, nd, -1), migration_cost=cost,
                   pinned=pin)  # fmt: skip


# --- the independent checker ---------------------------------------------------------------------------------------


def check(batch: NumaBatch, server: list[int], node: list[int]) -> list[str]:
    """Violations of an assignment (``server[i]``, ``node[i]`` = 0 / 1, or -1 for a split VM), by plain loops."""
    errs: list[str] = []
    if len(server) != batch.vms or len(node) != batch.vms:
        return [f"the assignment covers {len(server)} VMs, the batch has {batch.vms}"]
    use: dict[tuple[int, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    for i in range(batch.vms):
        s, k = server[i], node[i]
        if not 0 <= s < batch.servers:
            errs.append(f"VM {i} is on server {s}, which does not exist")
            continue
        if batch.numa[i] == 2:
            if k != -1:
                errs.append(f"VM {i} is double-NUMA but placed on node {k} only")
            for j in (0, 1):
                use[(s, j)][0] += batch.cpu[i] / 2
                use[(s, j)][1] += batch.ram[i] / 2
        else:
            if k not in (0, 1):
                errs.append(f"VM {i} is single-NUMA but its node is {k}")
                continue
            use[(s, k)][0] += batch.cpu[i]
            use[(s, k)][1] += batch.ram[i]
    for (s, j), (c, r) in use.items():
        if c > batch.node_free[s, j, 0] + 1e-9 or r > batch.node_free[s, j, 1] + 1e-9:
            errs.append(f"server {s} node {j} holds {c:g} CPU / {r:g} GB, free {batch.node_free[s, j].tolist()}")
    groups: dict[tuple[str, str], list[int]] = defaultdict(list)
    for i in range(batch.vms):
        if batch.strategy[i]:
            groups[(batch.strategy[i], batch.group[i])].append(i)
    for (strategy, g), members in groups.items():
        hosts = [server[i] for i in members]
        if strategy == "affinity":
            racks = {int(batch.rack[h]) for h in hosts if 0 <= h < batch.servers}
            if len(racks) > 1:
                errs.append(f"affinity group {g} spans racks {sorted(racks)}")
        if strategy == "anti-affinity" and len(set(hosts)) < len(hosts):
            errs.append(f"anti-affinity group {g} has two VMs on one server")
        if strategy == "fault_domain":
            rack_domains: dict[int, set[str]] = defaultdict(set)
            for i in members:
                if 0 <= server[i] < batch.servers:
                    rack_domains[int(batch.rack[server[i]])].add(batch.domain[i])
            for rk, doms in rack_domains.items():
                if len(doms) > 1:
                    errs.append(f"fault-domain group {g} has domains {sorted(doms)} in rack {rk}")
    return errs


# --- lower bound ---------------------------------------------------------------------------------------------------


def _relax(
    batch: NumaBatch,
    free: npt.NDArray[np.float64],
    vms: npt.NDArray[np.int64],
    opened: npt.NDArray[np.bool_],
    stop: Stop,
    whole_ram: float = np.inf,
) -> tuple[float, bool, list[int], dict[tuple[int, int, int], float], npt.NDArray[np.int64]]:
    """The typed relaxation for VMs ``vms`` on the free capacity ``free``; servers in ``opened`` cost nothing.
    Types with at least ``whole_ram`` GB are placed in whole VMs (integer ``y``; a restriction, not a relaxation).
    Returns (bound, proven, servers used, y values by (type, server, node), type of each of ``vms``)."""
    from ortools.linear_solver import pywraplp

    kinds, inverse, counts = np.unique(
        np.c_[batch.cpu[vms], batch.ram[vms], batch.numa[vms]], axis=0, return_inverse=True, return_counts=True
    )
    solver = pywraplp.Solver.CreateSolver("SCIP")
    x = [solver.BoolVar(f"x{s}") for s in range(batch.servers)]
    ys: dict[tuple[int, int, int], Any] = {}
    by_type: dict[int, list[Any]] = defaultdict(list)
    by_node: dict[tuple[int, int], list[tuple[Any, float, float]]] = defaultdict(list)
    for t, (c, r, n) in enumerate(kinds):
        for s in range(batch.servers):
            for j in (-1,) if n == 2 else (0, 1):
                share = 0.5 if j == -1 else 1.0
                nodes = (0, 1) if j == -1 else (j,)
                if all(free[s, q, 0] >= c * share - 1e-9 and free[s, q, 1] >= r * share - 1e-9 for q in nodes):
                    make = solver.IntVar if r >= whole_ram else solver.NumVar
                    v = make(0.0, float(counts[t]), f"y{t}_{s}_{j}")
                    ys[(t, s, j)] = v
                    by_type[t].append(v)
                    for q in nodes:
                        by_node[(s, q)].append((v, c * share, r * share))
    for t in range(len(kinds)):
        if not by_type[t]:
            c, r, n = kinds[t]
            raise InputError(f"{batch.name}: a {c:g}-core / {r:g} GB VM (numa {n:g}) fits no server (infeasible)")
        solver.Add(solver.Sum(by_type[t]) == float(counts[t]))
    for (s, q), terms in by_node.items():
        solver.Add(solver.Sum([c * v for v, c, _ in terms]) <= free[s, q, 0] * x[s])
        solver.Add(solver.Sum([r * v for v, _, r in terms]) <= free[s, q, 1] * x[s])
    anti = max((len(v) for v in batch.groups("anti-affinity").values()), default=0)
    solver.Add(solver.Sum(x) >= anti)
    solver.Minimize(solver.Sum([x[s] for s in range(batch.servers) if not opened[s]]))
    seconds = stop.remaining()
    if math.isfinite(seconds):
        solver.SetTimeLimit(int(max(seconds, 1.0) * 1000))
    solver.SetSolverSpecificParametersAsString("misc/catchctrlc = FALSE\n")  # an interrupt is ours (stop.py)
    status = interruptible(solver.Solve, solver.InterruptSolve)
    if status == pywraplp.Solver.INFEASIBLE:
        raise InputError(f"{batch.name}: the servers' free capacity cannot hold the batch (infeasible)")
    if status not in (pywraplp.Solver.OPTIMAL, pywraplp.Solver.FEASIBLE):
        raise InputError(f"{batch.name}: the relaxation found no answer in {seconds:g} s; raise the time limit")
    chosen = [s for s in range(batch.servers) if x[s].solution_value() > 0.5]
    y = {k: v.solution_value() for k, v in ys.items() if v.solution_value() > 1e-6}
    bound = float(solver.Objective().BestBound())
    return bound, status == pywraplp.Solver.OPTIMAL, chosen, y, np.asarray(inverse, np.int64).ravel()


def lower_bound(batch: NumaBatch, stop: Stop) -> tuple[int, bool, list[int]]:
    """(bound, proven, servers): the typed relaxation of the module docstring (SCIP through OR-Tools' linear
    solver wrapper) and the servers it uses."""
    anti = max((len(v) for v in batch.groups("anti-affinity").values()), default=0)
    bound, proven, chosen, _, _ = _relax(
        batch, batch.node_free, np.arange(batch.vms), np.zeros(batch.servers, bool), stop
    )
    return max(int(np.ceil(bound - 1e-6)), anti), proven, chosen


# --- the packing ---------------------------------------------------------------------------------------------------


@dataclass
class _State:
    free: npt.NDArray[np.float64]  # (S, 2, 2)
    opened: npt.NDArray[np.bool_]  # (S,)
    server: list[int]
    node: list[int]
    anti_hosts: dict[str, set[int]] = field(default_factory=lambda: defaultdict(set))
    fd: dict[str, dict[int, dict[str, int]]] = field(
        default_factory=lambda: defaultdict(lambda: defaultdict(lambda: defaultdict(int)))
    )  # fault-domain group -> rack -> domain -> VMs
    on: dict[int, set[int]] = field(default_factory=lambda: defaultdict(set))  # server -> VMs


def _node_for(free_s: npt.NDArray[np.float64], c: float, r: float, numa: int) -> int | None:
    """Node for one VM on a server (-1: split over both), best fit on RAM, or None when it does not fit."""
    if numa == 2:
        both = bool(np.all(free_s[:, 0] >= c / 2 - 1e-9) and np.all(free_s[:, 1] >= r / 2 - 1e-9))
        return -1 if both else None
    ok = [j for j in (0, 1) if free_s[j, 0] >= c - 1e-9 and free_s[j, 1] >= r - 1e-9]
    if not ok:
        return None
    return int(min(ok, key=lambda j: (float(free_s[j, 1] - r), j)))


def _take(free_s: npt.NDArray[np.float64], c: float, r: float, j: int) -> None:
    if j == -1:
        free_s[:, 0] -= c / 2
        free_s[:, 1] -= r / 2
    else:
        free_s[j, 0] -= c
        free_s[j, 1] -= r


class Packer:
    """First-fit decreasing with best-fit among open servers, constraint-aware (see the module docstring)."""

    def __init__(self, batch: NumaBatch, preferred: list[int] | None = None) -> None:
        """``preferred``: servers to open before any other (the relaxation's choice), each set largest first."""
        self.b = batch
        self.whole_ram = 64.0  # phase A places VMs of this much RAM or more as whole VMs (see _planned)
        self.filler_ram = 32.0  # VMs with less RAM are kept out of phase A: phase B fills the gaps with them
        tot = batch.node_free.sum(axis=(0, 1))
        size = batch.node_free.sum(axis=1) / np.maximum(tot, 1e-9)
        self.size = size[:, 0] + size[:, 1]
        pref = np.zeros(batch.servers, bool)
        pref[list(preferred or [])] = True
        self.order = np.lexsort((np.arange(batch.servers), -self.size, ~pref))  # preferred, then largest first
        self.scale = batch.node_free.sum(axis=1).max(axis=0)  # per-resource normaliser
        self.rack_servers = {int(r): [int(s) for s in self.order if batch.rack[s] == r] for r in np.unique(batch.rack)}
        aff = batch.groups("affinity")
        in_aff = {i for v in aff.values() for i in v}
        key = lambda i: (-batch.ram[i], -batch.cpu[i], i)  # noqa: E731
        self.groups = sorted((sorted(v, key=key) for v in aff.values()), key=lambda u: (-batch.ram[u].sum(), u[0]))
        self.singles = sorted((i for i in range(batch.vms) if i not in in_aff), key=key)

    def _allowed(self, st: _State, i: int, s: int) -> bool:
        b = self.b
        if b.strategy[i] == "anti-affinity":
            return s not in st.anti_hosts[b.group[i]]
        if b.strategy[i] == "fault_domain":
            here = st.fd[b.group[i]][int(b.rack[s])]
            return all(n == 0 or d == b.domain[i] for d, n in here.items())
        return True

    def _assign(self, st: _State, i: int, s: int, j: int) -> None:
        b = self.b
        st.server[i], st.node[i] = s, j
        _take(st.free[s], b.cpu[i], b.ram[i], j)
        st.opened[s] = True
        st.on[s].add(i)
        if b.strategy[i] == "anti-affinity":
            st.anti_hosts[b.group[i]].add(s)
        elif b.strategy[i] == "fault_domain":
            st.fd[b.group[i]][int(b.rack[s])][b.domain[i]] += 1

    def _unassign(self, st: _State, i: int) -> None:
        b = self.b
        s, j = st.server[i], st.node[i]
        _take(st.free[s], -b.cpu[i], -b.ram[i], j)
        st.on[s].discard(i)
        st.server[i] = -1
        if b.strategy[i] == "anti-affinity":
            st.anti_hosts[b.group[i]].discard(s)
        elif b.strategy[i] == "fault_domain":
            st.fd[b.group[i]][int(b.rack[s])][b.domain[i]] -= 1

    def _close(self, st: _State, s: int) -> bool:
        """Move every VM off server ``s`` into other open servers (best fit; an affinity VM within its rack); on
        success ``s`` is closed, otherwise nothing changes."""
        b = self.b
        moved: list[tuple[int, int, int]] = []  # (vm, old server, old node)
        vms = sorted(st.on[s], key=lambda i: (-b.ram[i], -b.cpu[i], i))
        old = [(i, s, st.node[i]) for i in vms]
        for i in vms:
            self._unassign(st, i)
        st.opened[s] = False
        ok = True
        for i in vms:
            c, r = b.cpu[i], b.ram[i]
            tot = st.free.sum(axis=1)
            room = st.opened & (tot[:, 0] >= c - 1e-9) & (tot[:, 1] >= r - 1e-9)
            if b.strategy[i] == "affinity":
                room &= b.rack == b.rack[s]
            cands = np.flatnonzero(room)
            left = ((tot[cands] - [c, r]) / self.scale).sum(axis=1)
            for t in cands[np.argsort(left, kind="stable")]:
                j = _node_for(st.free[t], c, r, int(b.numa[i]))
                if j is not None and self._allowed(st, i, int(t)):
                    self._assign(st, i, int(t), j)
                    moved.append((i, int(t), j))
                    break
            else:
                ok = False
                break
        if ok:
            return True
        for i, _, _ in moved:
            self._unassign(st, i)
        for i, sv, j in old:
            self._assign(st, i, sv, j)
        return False

    def consolidate(self, st: _State, stop: Stop) -> int:
        """Try to empty open servers, least filled first, until a full pass closes none; returns servers closed."""
        closed = 0
        cap = self.b.node_free.sum(axis=1)
        while not stop.expired():
            opened = np.flatnonzero(st.opened)
            fill = ((cap[opened] - st.free[opened].sum(axis=1)) / np.maximum(cap[opened], 1e-9)).mean(axis=1)
            before = closed
            for s in opened[np.argsort(fill, kind="stable")]:
                if stop.expired():
                    break
                if st.opened[s] and self._close(st, int(s)):
                    closed += 1
            if closed == before:
                break
        return closed

    def _fits_node(self, free_s: npt.NDArray[np.float64], i: int, j: int) -> bool:
        """Whether VM ``i`` fits on node ``j`` (-1: half on each node) of a server with ``free_s``."""
        c, r = self.b.cpu[i], self.b.ram[i]
        if j == -1:
            return bool(np.all(free_s[:, 0] >= c / 2 - 1e-9) and np.all(free_s[:, 1] >= r / 2 - 1e-9))
        return bool(free_s[j, 0] >= c - 1e-9 and free_s[j, 1] >= r - 1e-9)

    def _single(self, st: _State, i: int) -> None:
        """Best fit among open servers, else the largest unopened server that takes it."""
        b = self.b
        c, r = b.cpu[i], b.ram[i]
        tot = st.free.sum(axis=1)
        room = (tot[:, 0] >= c - 1e-9) & (tot[:, 1] >= r - 1e-9)
        cands = np.flatnonzero(room & st.opened)
        left = ((tot[cands] - [c, r]) / self.scale).sum(axis=1)
        for s in cands[np.argsort(left, kind="stable")]:
            j = _node_for(st.free[s], c, r, int(b.numa[i]))
            if j is not None and self._allowed(st, i, int(s)):
                self._assign(st, i, int(s), j)
                return
        for s in self.order[(room & ~st.opened)[self.order]]:
            j = _node_for(st.free[s], c, r, int(b.numa[i]))
            if j is not None and self._allowed(st, i, int(s)):
                self._assign(st, i, int(s), j)
                return
        raise InputError(f"{b.name}: VM {i} fits no server under its constraints (infeasible for this packing)")

    def _group(self, st: _State, vms: list[int]) -> None:
        """An affinity group goes whole into one rack: the rack where it opens the fewest servers (then the one it
        fills best); inside the rack, open servers first (best fit), then the largest unopened ones."""
        b = self.b
        best: tuple[tuple[int, float], list[tuple[int, int, int]]] | None = None
        for servers in self.rack_servers.values():
            free = {s: st.free[s].copy() for s in servers}
            opened = {s for s in servers if st.opened[s]}
            plan: list[tuple[int, int, int]] = []
            for i in vms:
                c, r = b.cpu[i], b.ram[i]
                pool = sorted(opened, key=lambda s: (free[s].sum(axis=0) / self.scale).sum())
                pool += [s for s in servers if s not in opened]
                for s in pool:
                    j = _node_for(free[s], c, r, int(b.numa[i]))
                    if j is not None:
                        _take(free[s], c, r, j)
                        opened.add(s)
                        plan.append((i, s, j))
                        break
                else:
                    break
            if len(plan) < len(vms):
                continue
            new = len(opened) - int(sum(st.opened[s] for s in servers))
            left = float(sum((free[s].sum(axis=0) / self.scale).sum() for s in opened))
            key = (new, left)
            if best is None or key < best[0]:
                best = (key, plan)
        if best is None:
            raise InputError(f"{b.name}: affinity group of VM {vms[0]} fits in no rack (infeasible for this packing)")
        for i, s, j in best[1]:
            self._assign(st, i, s, j)

    def _planned(self, st: _State, rounds: int, stop: Stop) -> None:
        """Phase A: solve the typed relaxation for the VMs not yet placed on what is still free (open servers cost
        nothing), place the whole VMs its answer puts on each node (rounded down, so they fit), largest first,
        where their constraints allow (an affinity group only whole, in one rack); repeat on what is left."""
        b = self.b
        for _ in range(rounds):
            todo = np.array([i for i in range(b.vms) if st.server[i] < 0], np.int64)
            if len(todo) == 0 or stop.remaining() < 5.0:
                return
            try:
                _, _, _, y, type_of = _relax(b, st.free, todo, st.opened, stop.share(0.8), self.whole_ram)
            except InputError:  # what is left no longer fits whole anywhere: phase B takes over
                return
            slots: dict[int, dict[tuple[int, int], int]] = defaultdict(dict)
            extra: dict[int, list[tuple[int, int]]] = defaultdict(list)  # nodes holding a fraction of a type
            for (t, sv, j), v in y.items():
                if int(np.floor(v + 1e-6)) > 0:
                    slots[t][(sv, j)] = int(np.floor(v + 1e-6))
                if v - np.floor(v + 1e-6) > 1e-6:
                    extra[t].append((sv, j))
            vm_type = dict(zip(todo.tolist(), type_of.tolist(), strict=True))
            placed = 0
            for g in self.groups:
                if st.server[g[0]] >= 0:
                    continue
                for servers in self.rack_servers.values():
                    rset = set(servers)
                    take: dict[tuple[int, int, int], int] = defaultdict(int)
                    picks = []
                    for i in g:
                        t = vm_type[i]
                        spot = next(((sv, j) for (sv, j), n in slots[t].items()
                                     if sv in rset and n - take[(t, sv, j)] > 0), None)  # fmt: skip
                        if spot is None:
                            break
                        take[(t, *spot)] += 1
                        picks.append((i, *spot))
                    if len(picks) == len(g):
                        for i, sv, j in picks:
                            slots[vm_type[i]][(sv, j)] -= 1
                            self._assign(st, i, sv, j)
                            placed += 1
                        break
            # Largest first: a whole-VM slot of the answer, else a node holding a fraction of this type (rounding
            # up), in both cases only where the VM really fits now. Rounding up the large VMs before the small ones
            # take their floors keeps a large VM from being stranded with no node that takes it whole.
            for i in self.singles:
                if st.server[i] >= 0 or b.ram[i] < self.filler_ram:
                    continue
                t = vm_type[i]
                spots = [(sv, j) for (sv, j), n in slots[t].items() if n > 0] + extra[t]
                for sv, j in spots:
                    if self._fits_node(st.free[sv], i, j) and self._allowed(st, i, sv):
                        if slots[t].get((sv, j), 0) > 0:
                            slots[t][(sv, j)] -= 1
                        self._assign(st, i, sv, j)
                        placed += 1
                        break
            if placed == 0:
                return

    def pack(self, rounds: int, stop: Stop) -> tuple[list[int], list[int]]:
        """Phase A (``rounds`` > 0): the relaxation's whole VMs, re-solved on what is left; phase B: first-fit
        decreasing for everything left; phase C: consolidation (empty the least-filled servers)."""
        b = self.b
        st = _State(b.node_free.copy(), np.zeros(b.servers, bool), [-1] * b.vms, [0] * b.vms)
        if rounds:
            self._planned(st, rounds, stop)
        for g in self.groups:
            if st.server[g[0]] < 0:
                self._group(st, g)
        for i in self.singles:
            if st.server[i] < 0:
                self._single(st, i)
        self.closed = self.consolidate(st, stop)
        return st.server, st.node


@dataclass(frozen=True)
class NumaBatchParams(Params):
    """Parameters of the relaxation-guided packing of a :class:`NumaBatch`."""

    rounds: int = 1
    """Phase A rounds (re-solve the relaxation for what is left, place its whole VMs), at least 0 (0: no phase A)."""
    bound_share: float = 1 / 3
    """Share of the time for the lower bound (the typed relaxation), in (0, 1)."""

    def check(self) -> None:
        check_value(self.rounds >= 0, "rounds", self.rounds, "at least 0")
        check_value(0 < self.bound_share < 1, "bound_share", self.bound_share, "in (0, 1)")


def solve_relaxation_guided(batch: NumaBatch, stop: Stop, seed: int, params: NumaBatchParams) -> Result:
    """Bound by the typed relaxation, pack guided by it (phases A-C of the module docstring); deterministic."""
    bound, proven, chosen = lower_bound(batch, stop.share(params.bound_share))
    server, node = Packer(batch, chosen).pack(params.rounds, stop)
    stats = {"bound_proven": proven, "constraints": {s: len(batch.groups(s)) for s in STRATEGIES[1:]}}
    return Result(batch.name, "relaxation-guided", "feasible", float(len(set(server))), float(bound), vms=batch.vms,
                  vm_pm=np.asarray(server), vm_node=np.asarray(node), stats=stats)  # fmt: skip


def verify(batch: NumaBatch, res: Result) -> Result:
    """``res`` with ``verified`` and ``violations`` from :func:`check` (servers used must be the reported cost). From
    a current placement also: every pinned VM on its server and node, and the reported cost equal to servers used +
    migration cost recomputed here (:func:`moves_cost`), which go into the stats."""
    if res.vm_pm is None or res.vm_node is None:
        return res
    server, node = res.vm_pm.tolist(), res.vm_node.tolist()
    errs = check(batch, server, node)
    stats = dict(res.stats)
    want = float(res.pms_used)
    if batch.current_server is not None and batch.current_node is not None:
        cur, cur_node = batch.current_server.tolist(), batch.current_node.tolist()
        pinned = [] if batch.pinned is None else [i for i, p in enumerate(batch.pinned.tolist()) if p]
        for i in pinned:
            if server[i] != cur[i] or node[i] != cur_node[i]:
                errs.append(f"pinned VM {i} moved from server {cur[i]} node {cur_node[i]} to server {server[i]} "
                            f"node {node[i]}")  # fmt: skip
        migration, migrations = moves_cost(batch, server)
        want += migration
        stats |= {"servers": res.pms_used, "migration_cost": migration, "migrations": migrations}
    if res.cost is not None and abs(res.cost - want) > 1e-6:
        errs.append(f"the method reported cost {res.cost}, the checker computes {want}")
    return replace(res, verified=not errs, violations=tuple(errs), stats=stats)


def moves_cost(batch: NumaBatch, server: list[int]) -> tuple[float, int]:
    """(migration cost, migrations) by plain loops: a VM with a current server migrates when its server changes (a
    node change on the same server does not count); its cost is ``migration_cost[i]``, by default its RAM over the
    largest server's RAM."""
    assert batch.current_server is not None
    biggest = max(float(batch.node_free[s, 0, 1] + batch.node_free[s, 1, 1]) for s in range(batch.servers))
    cost, count = 0.0, 0
    for i, (now, then) in enumerate(zip(server, batch.current_server.tolist(), strict=True)):
        if then >= 0 and now != then:
            count += 1
            cost += float(batch.migration_cost[i]) if batch.migration_cost is not None else batch.ram[i] / biggest
    return cost, count


@dataclass(frozen=True)
class ConsolidateParams(Params):
    """Parameters of ``consolidate`` (re-optimising a :class:`NumaBatch` from its current placement)."""

    bound_share: float = 1 / 3
    """Share of the time for the lower bound (the typed relaxation), in (0, 1)."""
    relaxation: bool = True
    """Prove the typed relaxation's bound (SCIP); False: the covering bound only (:func:`covering_bound`), for
    frequent re-optimisation events where the bound is not needed."""
    max_moves: int | None = None
    """Budget: at most this many VMs leave their current server (None: no limit). A server is emptied only when
    all of its moves fit in what is left of the budget, so every move the budget buys frees a server."""
    max_gb: float | None = None
    """Budget: at most this much RAM (the batch's unit, GB) leaves its current servers (None: no limit)."""
    improve_s: float = 0.0
    """Seconds of integer programming after the heuristic (0: none): CP-SAT closes one more server at a time where it
    finds room for that server's VMs (and may move VMs of the servers in its rack to make room), at the least
    migration cost, kept only when that lowers servers used + migration cost within the budget
    (:func:`~dcplace.placement.numa_pattern.close_by_cpsat`)."""

    def check(self) -> None:
        check_value(0 < self.bound_share < 1, "bound_share", self.bound_share, "in (0, 1)")
        check_value(self.improve_s >= 0, "improve_s", self.improve_s, "at least 0")
        check_value(self.max_moves is None or self.max_moves >= 0, "max_moves", self.max_moves, "at least 0")
        check_value(self.max_gb is None or self.max_gb >= 0, "max_gb", self.max_gb, "at least 0")


def covering_bound(batch: NumaBatch) -> int:
    """Servers needed to cover the batch's total CPU and RAM with the largest servers first (a valid lower bound
    on servers used, cheap and loose: it ignores NUMA nodes and fragmentation)."""
    need = 0
    for r, total in enumerate((float(batch.cpu.sum()), float(batch.ram.sum()))):
        cap = np.sort(batch.node_free[:, :, r].sum(axis=1))[::-1]
        need = max(need, int(np.searchsorted(np.cumsum(cap), total - 1e-9)) + 1 if total > 0 else 0)
    return need


def solve_consolidate(batch: NumaBatch, stop: Stop, seed: int, params: ConsolidateParams) -> Result:
    """From the current placement: new VMs by best fit, then empty servers into the others where that pays.

    Every VM with a current server starts there. New VMs go in as phase B places them (an affinity group of new
    VMs whole into one rack; a new VM joining a group that is already placed is refused). Then, in passes until
    none closes a server: the open servers without a pinned VM, least filled first, are each emptied into the
    other open servers by best fit (NUMA nodes, anti-affinity, fault domains, an affinity VM within its rack), and
    the move is kept only when it lowers servers used + migration cost (1 server against the migration cost the
    moves add) and the VMs away from their current servers stay within ``params.max_moves`` / ``max_gb``, else
    undone (so a budget buys whole emptied servers, never moves that free nothing). Pinned VMs are never moved.
    The cost is servers used + migration cost (in servers); the bound is the typed relaxation of placing the whole
    batch from scratch, which pinned VMs and migration costs can only raise. Deterministic (``seed`` unused)."""
    if not batch.has_current or batch.current_server is None or batch.current_node is None:
        raise InputError("consolidate starts from a current placement; this batch has none (use auto)")
    bound, proven = covering_bound(batch), False
    if params.relaxation:
        try:
            relaxed, proven, _ = lower_bound(batch, stop.share(params.bound_share))
            bound = max(bound, relaxed)  # cut short, the relaxation's best bound can be below the covering one
        except InputError:  # the relaxation found no answer in its share of the time: keep the covering bound
            pass
    packer = Packer(batch)
    st = _State(batch.node_free.copy(), np.zeros(batch.servers, bool), [-1] * batch.vms, [0] * batch.vms)
    cur = batch.current_server
    for i in np.flatnonzero(cur >= 0).tolist():
        packer._assign(st, i, int(cur[i]), int(batch.current_node[i]))
    for g in packer.groups:
        new = [i for i in g if cur[i] < 0]
        if new and len(new) < len(g):
            raise InputError(f"{batch.name}: new VM {new[0]} joins an affinity group already placed; consolidate "
                             "does not place such VMs yet")  # fmt: skip
        if new:
            packer._group(st, new)
    for i in packer.singles:
        if cur[i] < 0:
            packer._single(st, i)
    mig = batch.migration_costs()
    keep = set() if batch.pinned is None else {int(cur[i]) for i in np.flatnonzero(batch.pinned)}
    cap = batch.node_free.sum(axis=1)
    closed = tried = over_budget = 0

    while not stop.expired():
        opened = np.flatnonzero(st.opened)
        fill = ((cap[opened] - st.free[opened].sum(axis=1)) / np.maximum(cap[opened], 1e-9)).mean(axis=1)
        before = closed
        for s in opened[np.argsort(fill, kind="stable")].tolist():
            if stop.expired():
                break
            if s in keep or not st.opened[s]:
                continue
            was = {i: (st.server[i], st.node[i]) for i in st.on[s]}
            tried += 1
            if not packer._close(st, s):
                continue
            delta = -1.0 + sum(float(mig[i]) * (int(st.server[i] != cur[i]) - int(s != cur[i])) for i in was)
            if delta < 0 and within_budget(batch, params, st.server):
                closed += 1
                continue
            over_budget += delta < 0  # it paid, but the budget had no room for its moves
            for i, (sv, j) in was.items():
                packer._unassign(st, i)
                packer._assign(st, i, sv, j)
        if closed == before:
            break
    stats = {"bound_proven": proven, "closed": closed, "close_attempts": tried, "over_budget": over_budget,
             "constraints": {k: len(batch.groups(k)) for k in STRATEGIES[1:]}}  # fmt: skip
    return consolidated(batch, st.server, st.node, float(bound), stats)


def consolidated(batch: NumaBatch, server: list[int], node: list[int], bound: float, stats: dict[str, Any]) -> Result:
    """``consolidate``'s answer for a placement: servers used + the migration cost of the VMs away from their
    current servers."""
    where = np.asarray(server, np.int64)
    cur = batch.current_server
    moved = (cur >= 0) & (where != cur) if cur is not None else np.zeros(batch.vms, np.bool_)
    cost = float(len(set(server))) + float(batch.migration_costs()[moved].sum())
    return Result(batch.name, "consolidate", "feasible", cost, bound, vms=batch.vms, vm_pm=where,
                  vm_node=np.asarray(node), stats=stats)  # fmt: skip


def within_budget(batch: NumaBatch, params: ConsolidateParams, server: list[int]) -> bool:
    """Whether ``server`` (a placement of ``batch``) keeps ``params``' budget: at most ``max_moves`` VMs and
    ``max_gb`` of RAM away from their current servers."""
    if params.max_moves is None and params.max_gb is None:
        return True
    cur = batch.current_server
    assert cur is not None
    had = np.flatnonzero(cur >= 0)
    gone = had[np.asarray(server, np.int64)[had] != cur[had]]
    return (params.max_moves is None or len(gone) <= params.max_moves) and (
        params.max_gb is None or float(batch.ram[gone].sum()) <= params.max_gb + 1e-9
    )


def summary_of(res: Result) -> dict[str, Any]:
    """The record ``dcplace solve --json`` prints for a NUMA batch (servers as integers, at most 5 violations)."""
    used = res.pms_used
    bound = 0 if res.bound is None else int(res.bound)
    return {
        "instance": res.instance,
        "method": res.method,
        "status": res.status if res.verified else "invalid",
        "cost": used,
        "bound": bound,
        "bound_proven": res.stats.get("bound_proven", False),
        "gap": (used - bound) / used if used else 0.0,
        "wall_s": res.wall_s,
        "pms_used": used,
        "vms": res.vms,
        "verified": res.verified,
        "violations": list(res.violations[:5]),
        "constraints": res.stats.get("constraints", {}),
        **{k: res.stats[k] for k in ("migration_cost", "migrations") if k in res.stats},
    }
