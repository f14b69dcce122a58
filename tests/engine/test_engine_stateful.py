"""A durable engine driven by hypothesis through every operation that changes it (machines come and go, drain,
activate and fail; VMs are placed, released, pinned, imported, evacuated and moved by re-optimisation), with the
database closed and reopened now and then. After every step the ledger balances (:meth:`check_invariants`), the VMs
are exactly those the answers said are there, and a reopen loads the state that was there before it. Before this,
the random-operations test ran in memory only, without re-optimisation, evacuation, pins or imports, and reloading
was checked on one hand-written scenario."""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from dcplace.engine import Conflict, NotFound, PlacementEngine, ReoptPolicy, VmRequest

MACHINES = [f"pm{i}" for i in range(5)]
FAST = ReoptPolicy(time_limit_s=2.0, migration_weight=0.01)  # cheap moves: re-optimisation moves VMs often


class DurableEngine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="dcplace-stateful-"))
        self.db = self.dir / "e.db"
        self.engine = PlacementEngine.open(self.db)
        self.live: set[str] = set()  # the VMs the answers say are placed
        self.n = 0

    def teardown(self) -> None:
        self.engine.close()
        shutil.rmtree(self.dir, ignore_errors=True)

    @initialize(k=st.integers(2, 5), vms=st.integers(0, 12))
    def some_machines_in_use(self, k: int, vms: int) -> None:
        for m in MACHINES[:k]:
            self.add_machine(m, 16.0, 40.0)
        for i in range(vms):
            self.place(1.0 + i % 7, 2.0 + i % 5, i % 4 == 0, False)

    def _fresh(self) -> str:
        self.n += 1
        return f"v{self.n}"

    @rule(m=st.sampled_from(MACHINES), cpu=st.sampled_from([8.0, 16.0, 24.5]), mem=st.sampled_from([16.0, 40.0]))
    def add_machine(self, m: str, cpu: float, mem: float) -> None:
        try:
            self.engine.add_machine(m, [cpu, cpu], [mem, mem], rack=f"r{int(m[2:]) % 2}")
        except Conflict:
            pass

    @rule(m=st.sampled_from(MACHINES), op=st.sampled_from(["drain", "activate", "fail", "remove"]))
    def machine_state(self, m: str, op: str) -> None:
        try:
            if op == "fail":
                report = self.engine.fail(m)
                self.live -= {r.vm for r in report.dropped}
                event(f"fail replaced {bool(report.replaced)}, dropped {bool(report.dropped)}")
            elif op == "remove":
                self.engine.remove_machine(m)
            else:
                getattr(self.engine, op)(m)
        except (NotFound, Conflict):
            pass

    @rule(cpu=st.floats(0.5, 20), mem=st.floats(0.5, 30), multi=st.booleans(), pinned=st.booleans())
    def place(self, cpu: float, mem: float, multi: bool, pinned: bool) -> None:
        vm = self._fresh()
        if self.engine.place(VmRequest(vm, cpu, mem, multi, pinned), explain=False).accepted:
            self.live.add(vm)

    @rule(k=st.integers(1, 6), cpu=st.floats(0.5, 10))
    def place_batch(self, k: int, cpu: float) -> None:
        reqs = [VmRequest(self._fresh(), cpu, cpu * 1.5) for _ in range(k)]
        for r, d in zip(reqs, self.engine.place_batch(reqs), strict=True):
            if d.accepted:
                self.live.add(r.id)

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 10**6))
    def release(self, i: int) -> None:
        vm = sorted(self.live)[i % len(self.live)]
        self.engine.release(vm)
        self.live.discard(vm)

    @precondition(lambda self: self.live)
    @rule(i=st.integers(0, 10**6), pinned=st.booleans())
    def pin(self, i: int, pinned: bool) -> None:
        self.engine.pin(sorted(self.live)[i % len(self.live)], pinned)

    @rule(m=st.sampled_from(MACHINES), node=st.sampled_from([0, 1, None]), cpu=st.sampled_from([1.0, 3.5, 30.0]))
    def import_allocation(self, m: str, node: int | None, cpu: float) -> None:
        vm = self._fresh()
        try:
            if self.engine.import_allocations([{"vm": vm, "machine": m, "node": node, "cpu": cpu, "mem": 2.0}]):
                self.live.add(vm)
                event("import recorded a VM")
        except (NotFound, Conflict):
            pass

    @rule(m=st.sampled_from(MACHINES))
    def evacuate(self, m: str) -> None:
        try:
            event(f"evacuate moved VMs: {bool(self.engine.evacuate(m).moves)}")
        except (NotFound, Conflict):
            pass

    @rule()
    def reoptimise(self) -> None:
        try:
            event(f"reoptimise moved VMs: {bool(self.engine.reoptimise(FAST).moves)}")
        except Conflict:
            pass

    @rule()
    def reopen(self) -> None:
        before = self.engine.snapshot()
        self.engine.close()
        self.engine = PlacementEngine.open(self.db)
        assert self.engine.snapshot() == before

    @invariant()
    def ledger_balances_and_matches_the_answers(self) -> None:
        self.engine.check_invariants()
        assert {r.id for r in self.engine.vms()} == self.live
        for m in self.engine.machines():
            for free, total in zip(m.free_cpu + m.free_mem, m.cpu + m.mem, strict=True):
                assert -1e-9 <= free <= total + 1e-9, (m.id, free, total)


TestDurableEngine = DurableEngine.TestCase
TestDurableEngine.settings = settings(
    max_examples=50, stateful_step_count=40, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
