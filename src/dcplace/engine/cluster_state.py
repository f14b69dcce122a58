"""The live cluster's state: machines with NUMA nodes, the allocation ledger, as growable arrays.

The arrays have the shapes the simulator's kernel (:mod:`dcplace.sim.numa_kernel`) works on, so the engine places
and releases with the simulator's own ``place`` / ``release`` and a policy sees the same
:class:`~dcplace.sim.numa.NumaView`:

* machines, by slot ``m`` (``M`` slots, doubled when full; slot order is the machines' order for every policy):

  * ``cap``: ``(M, K, 2)`` float64, CPU cores and memory GB of each NUMA node (zero for an empty slot);
  * ``free``: ``(M, K, 2)`` float64, what is left of it;
  * ``vm_count``: ``(M,)`` int64, VMs on the machine;
  * ``status``: ``(M,)`` int8, :data:`ABSENT` / :data:`ACTIVE` / :data:`DRAINED` / :data:`FAILED`;
  * ``usable``: ``(M,)`` bool, ``status == ACTIVE`` (what a policy may choose);
  * ``machine_ids``: the string id of each slot (``""`` when absent), ``rack``: an optional label;

* the ledger, by VM slot ``v`` (``V`` slots, doubled when full; released slots are reused):

  * ``pm_of``: ``(V,)`` int64, the machine slot holding VM ``v`` (-1 unused slot, -2 just released);
  * ``node_of``: ``(V,)`` int64, its NUMA node (-1: split evenly over all ``K`` nodes);
  * ``demand``: ``(V, 2)`` float64, its CPU and memory; ``multi``: ``(V,)`` bool, spans every node;
  * ``vm_ids``: the string id of each slot;

* ``used``: ``(2,)`` float64 allocated totals and ``ctr``: the kernel's counters (machines in use, departures).

``active`` (the view's "machines 0 .. active-1 exist") is the highest occupied machine slot + 1. No locking here:
:class:`~dcplace.engine.engine.PlacementEngine` serialises every change.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt

from dcplace.policies import numa_index as NI
from dcplace.policies.numa_heuristics import choose as heuristic_choose
from dcplace.policies.numa_index import HeuristicIndex
from dcplace.sim import numa_kernel as K
from dcplace.sim.arrays import read_only
from dcplace.sim.numa import NumaView

#: How far a node's free capacity may be below 0 or above its total, and the ledger's sum from it, before
#: :meth:`ClusterState.check_invariants` fails: twice :data:`~dcplace.sim.numa_kernel.FIT_TOL`. A placement that the
#: fit check admits leaves free at ``-FIT_TOL`` less the rounding of one subtraction, so a database holding it is
#: loaded to this tolerance too (at ``-FIT_TOL`` a state the engine had accepted and committed refused to open).
INVARIANT_TOL = 1e-9

ABSENT = 0
ACTIVE = 1
DRAINED = 2
FAILED = 3
STATUS_NAMES = {ABSENT: "absent", ACTIVE: "active", DRAINED: "drained", FAILED: "failed"}
STATUS_CODES = {v: k for k, v in STATUS_NAMES.items()}

F64 = npt.NDArray[np.float64]


@nb.njit(cache=True, nogil=True)
def place_by_heuristic(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    chg: np.ndarray,
    demand: np.ndarray,
    multi: np.ndarray,
    v: int,
    cpu: float,
    mem: float,
    is_multi: bool,
    n_active: int,
) -> int:
    """One compiled call for a compiled heuristic's decision: write the request into ledger slot ``v``, let
    heuristic ``code`` choose (:func:`dcplace.policies.numa_heuristics.choose`, what ``Heuristic.choose`` calls)
    and, when the action is feasible, apply the kernel's ``place``. Returns the action, or -1 (nothing applied).
    The same decisions as choose-then-place in three calls, with one dispatch instead of three."""
    demand[v, 0] = cpu
    demand[v, 1] = mem
    multi[v] = is_multi
    d = demand[v]
    a = heuristic_choose(code, w, free, cap, vm_count, usable, d, is_multi, n_active)
    if a < 0:
        return -1
    K_ = free.shape[1]
    m = a // K_
    if m >= n_active or not usable[m] or not K.fits(free, d, is_multi, m, a % K_):
        return -1
    K.place(free, vm_count, used, pm_of, node_of, ctr, chg, d, is_multi, v, a)
    return a


@nb.njit(cache=True, nogil=True)
def place_all(
    free: np.ndarray,
    vm_count: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    chg: np.ndarray,
    demand: np.ndarray,
    multi: np.ndarray,
    slots: np.ndarray,
    actions: np.ndarray,
) -> None:
    """The kernel's ``place`` of ledger slot ``slots[i]`` (its demand already recorded) at ``actions[i]``, in order,
    without fit checks: a database's VMs at load (:meth:`ClusterState.load_placed`), which checks after."""
    for i in range(len(slots)):
        v = slots[i]
        K.place(free, vm_count, used, pm_of, node_of, ctr, chg, demand[v], multi[v], v, actions[i])


@nb.njit(cache=True, nogil=True)
def place_many_by_heuristic(
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    chg: np.ndarray,
    demand: np.ndarray,
    multi: np.ndarray,
    slots: np.ndarray,
    cpu: np.ndarray,
    mem: np.ndarray,
    is_multi: np.ndarray,
    n_active: int,
    start: int,
    actions: np.ndarray,
) -> int:
    """:func:`place_by_heuristic` for requests ``start, start+1, ...`` in order, request ``i`` into ledger slot
    ``slots[i]``, actions into ``actions[i]``; stops after the first rejection and returns the index after the last
    request handled."""
    n = len(cpu)
    for i in range(start, n):
        a = place_by_heuristic(code, w, free, cap, vm_count, usable, used, pm_of, node_of, ctr, chg, demand, multi,
                               slots[i], cpu[i], mem[i], is_multi[i], n_active)  # fmt: skip
        actions[i] = a
        if a < 0:
            return i + 1
    return n


@nb.njit(cache=True, nogil=True)
def place_many_indexed(
    tkey: np.ndarray,
    tact: np.ndarray,
    tdem: np.ndarray,
    tmulti: np.ndarray,
    tseen: np.ndarray,
    fr: np.ndarray,
    frc: np.ndarray,
    frm: np.ndarray,
    types: np.ndarray,
    code: int,
    w: np.ndarray,
    free: np.ndarray,
    cap: np.ndarray,
    vm_count: np.ndarray,
    usable: np.ndarray,
    used: np.ndarray,
    pm_of: np.ndarray,
    node_of: np.ndarray,
    ctr: np.ndarray,
    chg: np.ndarray,
    demand: np.ndarray,
    multi: np.ndarray,
    slots: np.ndarray,
    cpu: np.ndarray,
    mem: np.ndarray,
    is_multi: np.ndarray,
    n_active: int,
    start: int,
    actions: np.ndarray,
) -> int:
    """:func:`place_many_by_heuristic` with the heuristic's index deciding (request ``i`` of index type
    ``types[i]``): the action :meth:`HeuristicIndex.choose` gives, applied by the kernel's ``place``, request after
    request in one compiled loop. Stops after the first rejection; returns the index after the last request
    handled."""
    n = len(cpu)
    for i in range(start, n):
        v = slots[i]
        demand[v, 0] = cpu[i]
        demand[v, 1] = mem[i]
        multi[v] = is_multi[i]
        a = NI.index_choose(tkey, tact, tdem, tmulti, tseen, fr, frc, frm, types[i], code, w, free, cap, vm_count,
                            usable, chg, demand[v], is_multi[i], n_active)  # fmt: skip
        actions[i] = a
        if a < 0:
            return i + 1
        K.place(free, vm_count, used, pm_of, node_of, ctr, chg, demand[v], is_multi[i], v, a)
    return n


def _grow(a: npt.NDArray[Any], n: int, fill: Any) -> npt.NDArray[Any]:
    out = np.full((n, *a.shape[1:]), fill, a.dtype)
    out[: len(a)] = a
    return out


@dataclass(frozen=True)
class VmRecord:
    """One placed VM as the ledger holds it."""

    id: str
    machine: str
    node: int | None
    """The NUMA node, or None when the VM spans every node of its machine."""
    cpu: float
    mem: float
    multi: bool


class ClusterState:
    """Machines and the ledger as arrays (see the module docstring); the transitions are the kernel's."""

    def __init__(self, numa: int = 2, machines: int = 16, vms: int = 64) -> None:
        if numa < 1:
            raise ValueError("a machine needs at least one NUMA node")
        self.numa = numa
        m, v = max(1, machines), max(1, vms)
        self.cap = np.zeros((m, numa, 2))  # (M, K, 2) cores, GB
        self.free = np.zeros((m, numa, 2))  # (M, K, 2)
        self.vm_count = np.zeros(m, np.int64)  # (M,)
        self.status = np.zeros(m, np.int8)  # (M,) ABSENT/ACTIVE/DRAINED/FAILED
        self.usable = np.zeros(m, np.bool_)  # (M,) status == ACTIVE
        self.machine_ids: list[str] = [""] * m
        self.rack: list[str | None] = [None] * m
        self.slot_of_machine: dict[str, int] = {}
        self.active = 0  # highest occupied machine slot + 1
        self.pm_of = np.full(v, -1, np.int64)  # (V,)
        self.node_of = np.full(v, -1, np.int64)  # (V,)
        self.demand = np.zeros((v, 2))  # (V, 2)
        self.multi = np.zeros(v, np.bool_)  # (V,)
        self.vm_ids: list[str] = [""] * v
        self.slot_of_vm: dict[str, int] = {}
        self._free_vm_slots: list[int] = list(range(v - 1, -1, -1))  # a stack: lowest slot on top
        self.used = np.zeros(2)  # (2,)
        self.ctr = np.zeros(K.N_CTR, np.int64)
        self.chg = K.change_log(m)  # (1 + L,) machines whose capacity or usability changed (indexes read it)
        self._capacities_changed = False  # a machine was added or removed since the log was made

    def __deepcopy__(self, memo: dict[int, object]) -> ClusterState:
        """An independent copy: arrays copied, lists and dicts copied one level (they hold only strings, ints and
        None). ``copy.deepcopy`` walked every element of the id lists and dicts: a failure or an evacuation, which
        keep a copy to undo a half-done change, spent seconds on it at a million VMs with the lock held."""
        out = object.__new__(type(self))
        for name, value in vars(self).items():
            if isinstance(value, np.ndarray | list | dict):
                value = value.copy()
            elif not isinstance(value, int | float | bool | str):  # a new kind of attribute: copy it the slow way
                value = copy.deepcopy(value, memo)
            setattr(out, name, value)
        return out

    # -- machines -------------------------------------------------------------------------------------------
    @property
    def machine_slots(self) -> int:
        return len(self.vm_count)

    @property
    def machines_in_use(self) -> int:
        """Machines hosting at least one VM (the kernel's counter, kept by ``place`` / ``release``)."""
        return int(self.ctr[K.C_IN_USE])

    def free_machine_slot(self) -> int:
        """The lowest empty machine slot (growing the arrays by doubling when none is left)."""
        empty = np.flatnonzero(self.status == ABSENT)
        if len(empty):
            return int(empty[0])
        n = self.machine_slots
        self._grow_machines(2 * n)
        return n

    def free_machine_slots(self, n: int) -> list[int]:
        """The ``n`` lowest empty machine slots, growing the arrays (by doubling) until there are as many: what
        :meth:`free_machine_slot` gives ``n`` machines added one after the other, with one scan."""
        empty = np.flatnonzero(self.status == ABSENT)
        while len(empty) < n:
            old = self.machine_slots
            self._grow_machines(max(2 * old, 1))
            empty = np.concatenate([empty, np.arange(old, self.machine_slots)])
        return [int(k) for k in empty[:n]]

    def _grow_machines(self, n: int) -> None:
        self.cap = _grow(self.cap, n, 0.0)
        self.free = _grow(self.free, n, 0.0)
        self.vm_count = _grow(self.vm_count, n, 0)
        self.status = _grow(self.status, n, ABSENT)
        self.usable = _grow(self.usable, n, False)
        extra = n - len(self.machine_ids)
        self.machine_ids += [""] * extra
        self.rack += [None] * extra

    def add_machine(self, machine_id: str, capacity: F64, rack: str | None, slot: int, status: int = ACTIVE) -> None:
        """Put a machine with ``capacity`` ``(K, 2)`` into empty ``slot`` (validated by the caller)."""
        while slot >= self.machine_slots:
            self._grow_machines(2 * self.machine_slots)
        self.cap[slot] = capacity
        self.free[slot] = capacity
        self.vm_count[slot] = 0
        self.set_status(slot, status)
        self.machine_ids[slot] = machine_id
        self.rack[slot] = rack
        self.slot_of_machine[machine_id] = slot
        self.active = max(self.active, slot + 1)
        self._capacities_changed = True

    def change_machine(self, slot: int, capacity: F64, rack: str | None) -> None:
        """Give the machine at ``slot`` a new ``capacity`` ``(K, 2)`` (each node at least what its VMs take: checked
        by the caller) and ``rack``; what its VMs take stays taken."""
        used = self.cap[slot] - self.free[slot]
        self.cap[slot] = capacity
        self.free[slot] = np.maximum(capacity - used, 0.0)
        self.rack[slot] = rack
        self._capacities_changed = True  # the indexes' capacity classes change: a new log rebuilds them
        K.note_change(self.chg, slot)

    def remove_machine(self, slot: int) -> None:
        """Empty ``slot`` (the machine must host no VM)."""
        del self.slot_of_machine[self.machine_ids[slot]]
        self.cap[slot] = 0.0
        self.free[slot] = 0.0
        self.set_status(slot, ABSENT)
        self.machine_ids[slot] = ""
        self.rack[slot] = None
        occupied = np.flatnonzero(self.status[: self.active] != ABSENT)
        self.active = int(occupied[-1]) + 1 if len(occupied) else 0
        self._capacities_changed = True

    def changes(self) -> npt.NDArray[np.int64]:
        """The change log as an index should see it: a new log (a new state for every index, which then rebuilds
        with the new capacity classes) once machines were added or removed since the last one was handed out.
        Made on demand, so that registering many machines costs no log per machine."""
        if self._capacities_changed:
            self.chg = K.change_log(self.machine_slots)
            self._capacities_changed = False
        return self.chg

    def set_status(self, slot: int, status: int) -> None:
        self.status[slot] = status
        self.usable[slot] = status == ACTIVE
        K.note_change(self.chg, slot)

    # -- the ledger -----------------------------------------------------------------------------------------
    def vm_slot(self) -> int:
        """A free ledger slot (growing the ledger by doubling when none is left); not yet taken."""
        if not self._free_vm_slots:
            self._grow_ledger()
        return self._free_vm_slots[-1]

    def _grow_ledger(self) -> None:
        n = len(self.pm_of)
        self.pm_of = _grow(self.pm_of, 2 * n, -1)
        self.node_of = _grow(self.node_of, 2 * n, -1)
        self.demand = _grow(self.demand, 2 * n, 0.0)
        self.multi = _grow(self.multi, 2 * n, False)
        self.vm_ids += [""] * n
        self._free_vm_slots = list(range(2 * n - 1, n - 1, -1)) + self._free_vm_slots  # lowest free slot on top

    def reserve_slots(self, n: int) -> npt.NDArray[np.int64]:
        """``n`` free ledger slots, lowest first (not yet taken), growing the ledger as needed."""
        while len(self._free_vm_slots) < n:
            self._grow_ledger()
        return np.array(self._free_vm_slots[len(self._free_vm_slots) - n :][::-1], np.int64)

    def load_placed(
        self, ids: list[str], cpu: npt.NDArray[np.float64], mem: npt.NDArray[np.float64],
        multi: npt.NDArray[np.bool_], actions: npt.NDArray[np.int64],
    ) -> bool:  # fmt: skip
        """Record VMs already placed (a database's, at load): ``ids[i]`` at ``actions[i]``, in order into the lowest
        free ledger slots, as :meth:`place` one by one would, in one compiled loop. The caller has checked the ids
        (new, distinct) and the actions (machines and nodes that exist). Returns False when a node ends over its
        capacity by more than :data:`INVARIANT_TOL` (the tolerance its states were accepted under: the order of the
        rows is not the order they were placed in, so the per-VM fit check is not repeated); the state is then
        half-changed and the caller discards it."""
        n = len(ids)
        slots = self.reserve_slots(n)
        self.demand[slots, 0] = cpu
        self.demand[slots, 1] = mem
        self.multi[slots] = multi
        place_all(self.free, self.vm_count, self.used, self.pm_of, self.node_of, self.ctr, self.chg, self.demand,
                  self.multi, slots, actions)  # fmt: skip
        self.take_slots(ids, slots, np.ones(n, np.bool_))
        return bool((self.free >= -INVARIANT_TOL).all())

    def place(self, vm_id: str, v: int, cpu: float, mem: float, multi: bool, action: int) -> None:
        """Record VM ``vm_id`` in ledger slot ``v`` (from :meth:`vm_slot`) at a feasible ``action``: the kernel's
        ``place``."""
        self.demand[v, 0] = cpu
        self.demand[v, 1] = mem
        self.multi[v] = multi
        K.place(
            self.free, self.vm_count, self.used, self.pm_of, self.node_of, self.ctr, self.chg, self.demand[v], multi, v,
            action,
        )  # fmt: skip
        self.take_slot(vm_id, v)

    def place_by_heuristic(
        self, vm_id: str, code: int, w: F64, cpu: float, mem: float, multi: bool, index: HeuristicIndex | None = None
    ) -> int:
        """Decide with compiled heuristic ``code`` and place in one call (:func:`place_by_heuristic`); return the
        action or -1 (nothing changed). With ``index`` (that heuristic's index over free capacity) and at least
        :data:`~dcplace.policies.numa_index.INDEX_MIN_MACHINES` machine slots, the index decides (the same
        action) and the kernel's ``place`` applies it."""
        v = self.vm_slot()
        if index is not None and self.machine_slots >= NI.INDEX_MIN_MACHINES:
            index.bind(self.free, self.cap, self.vm_count, self.usable, self.changes())
            a = index.choose(np.array([cpu, mem]), multi, self.active)
            if a < 0:
                return -1
            self.place(vm_id, v, cpu, mem, multi, a)
            return a
        a = int(
            place_by_heuristic(
                code, w, self.free, self.cap, self.vm_count, self.usable, self.used, self.pm_of, self.node_of,
                self.ctr, self.chg, self.demand, self.multi, v, cpu, mem, multi, self.active,
            )
        )  # fmt: skip
        if a >= 0:
            self.take_slot(vm_id, v)
        return a

    def place_many_by_heuristic(
        self,
        code: int,
        w: F64,
        slots: npt.NDArray[np.int64],
        cpu: F64,
        mem: F64,
        multi: npt.NDArray[np.bool_],
        start: int,
        actions: npt.NDArray[np.int64],
        index: HeuristicIndex | None = None,
        types: npt.NDArray[np.int64] | None = None,
    ) -> int:
        """:meth:`place_by_heuristic` for requests ``start, start+1, ...`` in one compiled loop (request ``i`` into
        ledger slot ``slots[i]``, its action into ``actions[i]``), stopping after the first rejection; returns the
        index after the last request handled. The ledger's id maps are the caller's (:meth:`take_slot`). With
        ``index`` (bound, as :meth:`place_many_types` leaves it) and ``types`` (its types of the requests), the
        index decides, else the scan."""
        if index is not None and types is not None:
            return int(
                place_many_indexed(
                    *index.arrays(), types, code, w, self.free, self.cap, self.vm_count, self.usable, self.used,
                    self.pm_of, self.node_of, self.ctr, self.chg, self.demand, self.multi, slots, cpu, mem, multi,
                    self.active, start, actions,
                )
            )  # fmt: skip
        return int(
            place_many_by_heuristic(
                code, w, self.free, self.cap, self.vm_count, self.usable, self.used, self.pm_of, self.node_of,
                self.ctr, self.chg, self.demand, self.multi, slots, cpu, mem, multi, self.active, start, actions,
            )
        )  # fmt: skip

    def place_many_types(
        self, index: HeuristicIndex | None, cpu: F64, mem: F64, multi: npt.NDArray[np.bool_]
    ) -> npt.NDArray[np.int64] | None:
        """Bind ``index`` to this state and return its request types for a batch, or None where the scan decides
        (no index, or fewer machine slots than :data:`~dcplace.policies.numa_index.INDEX_MIN_MACHINES`)."""
        if index is None or self.machine_slots < NI.INDEX_MIN_MACHINES:
            return None
        index.bind(self.free, self.cap, self.vm_count, self.usable, self.changes())
        return index.types_for(np.stack([cpu, mem], axis=1), multi)

    def take_slots(self, ids: list[str], slots: npt.NDArray[np.int64], taken: npt.NDArray[np.bool_]) -> None:
        """After a batch: mark ``slots[taken]`` (from :meth:`reserve_slots`, all of them, in order) as the VMs ``ids``
        (one per taken slot, in order) and give the others back, lowest on top. :meth:`take_slot` for a whole batch
        in a few list operations."""
        stack = self._free_vm_slots
        n = len(slots)
        if n == 0:
            return
        del stack[-n:]
        stack.extend(slots[~taken][::-1].tolist())
        got = slots[taken].tolist()
        vm_ids = self.vm_ids
        for vid, v in zip(ids, got, strict=True):
            vm_ids[v] = vid
        self.slot_of_vm.update(zip(ids, got, strict=True))

    def take_slot(self, vm_id: str, v: int) -> None:
        """Mark ledger slot ``v`` (from :meth:`vm_slot`) as VM ``vm_id``'s."""
        if self._free_vm_slots[-1] == v:
            self._free_vm_slots.pop()
        else:
            self._free_vm_slots.remove(v)
        self.vm_ids[v] = vm_id
        self.slot_of_vm[vm_id] = v

    def release(self, v: int) -> None:
        """Return what the ledger says VM slot ``v`` took (the kernel's ``release``) and free the slot. A machine
        left empty gets exactly its capacity back, and an empty cluster exactly nothing in use: amounts that are
        not binary fractions (0.1 cores) leave float rounding of about 1e-15 per operation in ``x - d + d``, which
        must not outlive the VMs that made it (the fit tolerance absorbs it while they run)."""
        m = int(self.pm_of[v])
        K.release(self.free, self.vm_count, self.used, self.pm_of, self.node_of, self.ctr, self.chg, self.demand, v)
        if m >= 0 and self.vm_count[m] == 0:
            self.free[m] = self.cap[m]
        del self.slot_of_vm[self.vm_ids[v]]
        if not self.slot_of_vm:
            self.used[:] = 0.0
        self.pm_of[v] = -1
        self.node_of[v] = -1
        self.vm_ids[v] = ""
        self._free_vm_slots.append(v)

    def record(self, v: int) -> VmRecord:
        k = int(self.node_of[v])
        return VmRecord(
            id=self.vm_ids[v],
            machine=self.machine_ids[int(self.pm_of[v])],
            node=None if k < 0 else k,
            cpu=float(self.demand[v, 0]),
            mem=float(self.demand[v, 1]),
            multi=bool(self.multi[v]),
        )

    def vms_on(self, slot: int) -> list[int]:
        """Ledger slots of the VMs on machine ``slot``, in slot order."""
        return [int(v) for v in np.flatnonzero(self.pm_of == slot)]

    # -- what a policy sees ---------------------------------------------------------------------------------
    def view(self, cpu: float, mem: float, multi: bool, request: int = -1) -> NumaView:
        """A read-only :class:`NumaView` of the state with the request ``(cpu, mem, multi)`` waiting."""
        return NumaView(
            free=read_only(self.free),
            capacity=read_only(self.cap),
            vm_count=read_only(self.vm_count),
            usable=read_only(self.usable),
            active=self.active,
            demand=np.array([cpu, mem]),
            multi=multi,
            request=request,
            changes=read_only(self.changes()),
        )

    def fits(self, slot: int, node: int, cpu: float, mem: float, multi: bool) -> bool:
        return bool(K.fits(self.free, np.array([cpu, mem]), multi, slot, node))

    # -- invariants -----------------------------------------------------------------------------------------
    def check_invariants(self) -> None:
        """Recompute the allocation from the ledger alone (plain numpy, independent of the kernel) and compare
        with the state; raise AssertionError on the first difference.

        Checks: no node negative or above its capacity; capacity - free equals the ledger's sum per node; VM counts
        per machine, the allocated totals and the machines-in-use counter match the ledger; no VM sits on an absent
        slot; ids and slots map one-to-one; an absent slot has no capacity.
        """
        live = np.flatnonzero(self.pm_of >= 0)
        kk = self.numa
        m = self.pm_of[live]
        node = self.node_of[live]
        d = self.demand[live]
        single = node >= 0
        expect = np.zeros_like(self.cap)
        np.add.at(expect, (m[single], node[single]), d[single])
        for j in range(kk):
            np.add.at(expect, (m[~single], np.full(int((~single).sum()), j)), d[~single] / kk)
        if np.any(self.free < -INVARIANT_TOL):
            raise AssertionError("a NUMA node has negative free capacity")
        if np.any(self.free > self.cap + INVARIANT_TOL):
            raise AssertionError("a NUMA node has more free capacity than its total")
        if not np.allclose(self.cap - self.free, expect, rtol=0, atol=INVARIANT_TOL):
            raise AssertionError("the ledger does not match the allocated capacity")
        if not np.array_equal(np.bincount(m, minlength=self.machine_slots), self.vm_count):
            raise AssertionError("VM counts per machine do not match the ledger")
        if not np.allclose(self.used, d.sum(axis=0), rtol=0, atol=1e-6):
            raise AssertionError("allocated totals do not match the ledger")
        if int(self.ctr[K.C_IN_USE]) != int(np.count_nonzero(self.vm_count)):
            raise AssertionError("machines-in-use counter does not match")
        if np.any(self.status[m] == ABSENT):
            raise AssertionError("a VM sits on an absent machine slot")
        if np.any(self.multi[live] == single):
            raise AssertionError("a VM's NUMA span in the ledger differs from its request")
        if np.any(self.cap[self.status == ABSENT] != 0) or not np.array_equal(self.usable, self.status == ACTIVE):
            raise AssertionError("an absent slot has capacity, or usable differs from the status")
        if {self.vm_ids[v]: int(v) for v in live} != self.slot_of_vm:
            raise AssertionError("the VM id index does not match the ledger")
        present = np.flatnonzero(self.status != ABSENT)
        if {self.machine_ids[s]: int(s) for s in present} != self.slot_of_machine:
            raise AssertionError("the machine id index does not match the slots")
        if self.active != (int(present[-1]) + 1 if len(present) else 0):
            raise AssertionError("active does not match the highest occupied slot")
