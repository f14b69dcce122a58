"""The index over free capacity decides exactly as the scan: every compiled heuristic, top-k, random traces with
departures, usability changes, prefixes (Expansion), heterogeneous machines, 2 and 3 NUMA nodes, and demands whose
floating-point sums round (tenths, thirds), through both of its structures (the frontier and the per-type trees)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dcplace.cluster import NumaCluster
from dcplace.policies import numa_heuristics as H
from dcplace.policies import numa_index as NI
from dcplace.policies.numa_index import HeuristicIndex
from dcplace.sim import NumaSim, Scenario
from dcplace.sim import numa_kernel as K
from dcplace.sim.numa import PreparedTrace
from dcplace.workload.table import RequestTable

CODES = [H.FIRST_FIT, H.BEST_FIT, H.INDUSTRIAL, H.VMAGENT_BEST_FIT]


def _cluster(rng: np.random.Generator, machines: int, numa: int) -> np.ndarray:
    kinds = np.array([[8.0, 16.0], [12.0, 20.0], [6.0, 24.0]])[:, None, :].repeat(numa, axis=1)
    return np.ascontiguousarray(kinds[rng.integers(0, 3 if rng.random() < 0.5 else 1, machines)])


def _demand(rng: np.random.Generator, grid: str) -> np.ndarray:
    cpu, mem = float(rng.integers(1, 7)), float(rng.integers(1, 13))
    if grid == "tenths":
        cpu, mem = cpu * 0.7 + 0.1, mem * 1.3 + 0.1
    return np.array([cpu, mem])


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    machines=st.integers(1, 40),
    numa=st.sampled_from([2, 3]),
    grid=st.sampled_from(["integers", "tenths"]),
    frontier_max=st.sampled_from([0, 3, 256]),
)
def test_index_decides_as_the_scan(seed: int, machines: int, numa: int, grid: str, frontier_max: int) -> None:
    rng = np.random.default_rng(seed)
    cap = _cluster(rng, machines, numa)
    free = cap.copy()
    vm_count = np.zeros(machines, np.int64)
    usable = np.ones(machines, np.bool_)
    used = np.zeros(2)
    ctr = np.zeros(K.N_CTR, np.int64)
    chg = K.change_log(machines)
    n = 300
    pm_of = np.full(n, -1, np.int64)
    node_of = np.full(n, -1, np.int64)
    demand = np.zeros((n, 2))
    w = H.DEFAULT_WEIGHTS
    indexes = {code: HeuristicIndex(code, w, max_types=4) for code in CODES}  # few trees: the scan fallback too
    for ix in indexes.values():
        ix.bind(free, cap, vm_count, usable, chg)
        ix.frm[2] = frontier_max
    live: list[int] = []
    out_s, out_i = np.zeros(3, np.int64), np.zeros(3, np.int64)
    keys_s, keys_i = np.zeros((3, 3)), np.zeros((3, 3))
    for r in range(n):
        u = rng.random()
        if u < 0.3 and live:  # a departure
            v = live.pop(int(rng.integers(0, len(live))))
            K.release(free, vm_count, used, pm_of, node_of, ctr, chg, demand, v)
            continue
        if u < 0.35:  # drain or restore a machine (the engine notes it in the log)
            m = int(rng.integers(0, machines))
            usable[m] = not usable[m]
            K.note_change(chg, m)
            continue
        demand[r] = _demand(rng, grid)
        multi = bool(rng.random() < 0.3)
        n_active = int(rng.integers(1, machines + 1)) if rng.random() < 0.3 else machines
        code = CODES[r % len(CODES)]
        ix = indexes[code]
        d = demand[r]
        want = int(H.choose(code, w, free, cap, vm_count, usable, d, multi, n_active))
        assert ix.choose(d, multi, n_active) == want
        k = int(rng.integers(1, 4))
        got_s = H.top_k(code, w, free, cap, vm_count, usable, d, multi, n_active, k, out_s, keys_s)
        got_i = ix.top_k(d, multi, n_active, k, out_i, keys_i)
        assert got_i == got_s
        assert np.array_equal(out_i[:got_i], out_s[:got_s])
        assert np.array_equal(keys_i[:got_i], keys_s[:got_s])
        if want >= 0:
            K.place(free, vm_count, used, pm_of, node_of, ctr, chg, d, multi, r, want)
            live.append(r)


def _trace(rng: np.random.Generator, n: int) -> PreparedTrace:
    arrival = np.sort(rng.uniform(0, 1000, n))
    life = rng.exponential(15, n)
    life[rng.random(n) < 0.1] = np.inf
    cpu = rng.choice([1.0, 2.0, 4.0, 8.0, 16.0], n)
    mem = cpu * rng.choice([1.0, 2.0, 4.0], n)
    table = RequestTable(
        vmid=np.arange(n, dtype=np.int64), arrival=arrival, departure=arrival + life, cpu=cpu, mem=mem,
        multi_numa=mem > 32, censored=np.zeros(n, bool), line=np.zeros(n, np.int64),
    )  # fmt: skip
    return PreparedTrace.build(table)


@pytest.mark.parametrize("policy", ["best-fit", "industrial", "vmagent-best-fit"])
@pytest.mark.parametrize("mode", ["non-expansion", "expansion"])
def test_indexed_episodes_equal_the_scan(policy: str, mode: str, monkeypatch: pytest.MonkeyPatch) -> None:
    rng = np.random.default_rng(7)
    trace = _trace(rng, 3000)
    sc = Scenario(pms=12, mode=mode, max_pms=40, expand_step=4, warm_start=0.3, start_range=(0, 50))  # type: ignore[arg-type]
    cluster = NumaCluster.uniform(40)
    results = []
    for threshold in (10**9, 1):
        monkeypatch.setattr(NI, "INDEX_MIN_MACHINES", threshold)
        h = H.Heuristic(policy)
        for frontier_max in (256, 0):  # the frontier, then the trees
            sim = NumaSim(cluster, trace, sc)
            sim.reset(3)
            if threshold == 1:
                ix = h.index()
                assert ix is not None
                ix.bind(sim.free, sim.cap, sim.vm_count, sim.usable, sim.chg)
                ix.frm[2] = frontier_max
            h.run(sim)
            sim.check_invariants()
            results.append((sim.result(), sim.pm_of.copy(), sim.node_of.copy()))
    base = results[0]
    assert base[0].length > 50
    for res in results[1:]:
        assert res[0] == base[0]
        assert np.array_equal(res[1], base[1]) and np.array_equal(res[2], base[2])


@pytest.mark.parametrize("policy", ["best-fit", "industrial", "vmagent-best-fit"])
def test_step_api_and_engine_with_the_index_decide_as_the_scan(policy: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """``Heuristic.choose`` on views (which carry the change log) and the engine's one-call path, both through the
    index, against the scan through the step API."""
    from dcplace.engine.stream import engine_for, run_stream

    trace = _trace(np.random.default_rng(5), 1500)
    pms = 20
    cluster = NumaCluster.uniform(pms)
    runs = []
    for threshold in (10**9, 1):
        monkeypatch.setattr(NI, "INDEX_MIN_MACHINES", threshold)
        sim = NumaSim(cluster, trace, Scenario(pms=pms, release=True, start_range=(0, 1)))
        h = H.Heuristic(policy)
        actions = np.full(len(trace.table), -3, np.int64)
        status = sim.reset(seed=1)
        while status == K.DECIDE:
            a = h.choose(sim.view())
            actions[sim.request] = a
            status = sim.step(a)
        runs.append(actions)
    assert np.array_equal(runs[0], runs[1])
    decided = int(np.sum(runs[0] >= 0))
    assert decided > 100
    engine = engine_for(cluster, policy)
    res = run_stream(engine, trace, max_requests=decided, samples=0)
    engine.check_invariants()
    got, want = res.actions[:decided].copy(), runs[0][:decided].copy()
    for out in (got, want):  # a multi-NUMA placement names its machine: any node of it is the same action
        out[trace.multi[:decided] & (out >= 0)] -= out[trace.multi[:decided] & (out >= 0)] % 2
    assert np.array_equal(got, want)


@pytest.mark.parametrize("policy", ["best-fit", "industrial"])
def test_engine_with_the_index_through_drains_failures_and_machine_changes(
    policy: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's indexed path against its scan, operation by operation: places, releases, drains, activations,
    machines added (other capacities) and removed: the index must follow usability and capacity-class changes."""
    from dcplace.engine.engine import Placement, PlacementEngine, VmRequest

    def replay(threshold: int) -> list[tuple[str, int | None] | None]:
        monkeypatch.setattr(NI, "INDEX_MIN_MACHINES", threshold)
        rng = np.random.default_rng(11)
        eng = PlacementEngine(2, policy)
        for m in range(12):
            eng.add_machine(f"pm-{m}", 16.0, 32.0)
        out: list[tuple[str, int | None] | None] = []
        live: list[str] = []
        for i in range(600):
            u = rng.random()
            if u < 0.3 and live:
                eng.release(live.pop(int(rng.integers(len(live)))))
            elif u < 0.34:
                m = f"pm-{int(rng.integers(12))}"
                if eng.machine(m).status == "active":
                    eng.drain(m)
                else:
                    eng.activate(m)
            elif u < 0.36:
                name = f"extra-{i}"
                eng.add_machine(name, float(rng.choice([8.0, 24.0])), 48.0)
            else:
                cpu, mem = float(rng.integers(1, 9)), float(rng.integers(1, 17))
                d = eng.place(VmRequest(f"vm-{i}", cpu, mem, bool(rng.random() < 0.2)), explain=False)
                if isinstance(d, Placement):
                    live.append(d.vm)
                    out.append((d.machine, d.node))
                else:
                    out.append(None)
        eng.check_invariants()
        return out

    scan, indexed = replay(10**9), replay(1)
    assert sum(x is not None for x in scan) > 200
    assert indexed == scan


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    seed=st.integers(0, 2**31 - 1),
    machines=st.integers(1, 30),
    policy=st.sampled_from(["best-fit", "industrial", "vmagent-best-fit", "first-fit"]),
    batch=st.integers(1, 40),
)
def test_engine_place_batch_on_the_index_decides_as_the_scan(seed: int, machines: int, policy: str, batch: int) -> None:
    """``place_batch`` (one compiled loop over a batch) with the index against the scan, batches of random requests
    (rejections inside a batch included) with releases between them; the same decisions, the same ledger."""
    from dcplace.engine.engine import Placement, PlacementEngine, VmRequest

    def replay(threshold: int) -> tuple[list[tuple[str, int | None] | None], object]:
        saved = NI.INDEX_MIN_MACHINES
        NI.INDEX_MIN_MACHINES = threshold
        try:
            rng = np.random.default_rng(seed)
            eng = PlacementEngine(2, policy)
            for m in range(machines):
                eng.add_machine(f"pm-{m}", float(rng.choice([8.0, 16.0])), 32.0)
            out: list[tuple[str, int | None] | None] = []
            live: list[str] = []
            for b in range(6):
                for _ in range(int(rng.integers(0, len(live) + 1))):
                    eng.release(live.pop(int(rng.integers(len(live)))))
                reqs = [VmRequest(f"vm-{b}-{i}", float(rng.integers(1, 9)), float(rng.integers(1, 17)),
                                  bool(rng.random() < 0.2)) for i in range(batch)]  # fmt: skip
                for d in eng.place_batch(reqs):
                    out.append((d.machine, d.node) if isinstance(d, Placement) else None)
                    if isinstance(d, Placement):
                        live.append(d.vm)
            eng.check_invariants()
            return out, eng.snapshot()
        finally:
            NI.INDEX_MIN_MACHINES = saved

    (scan, s1), (indexed, s2) = replay(10**9), replay(1)
    assert indexed == scan and s1 == s2


@settings(max_examples=50, deadline=None)
@given(rows=st.lists(st.tuples(st.sampled_from([0.5, 1.0, 2.0, 0.1 + 0.2, 0.3]), st.sampled_from([1.0, 4.0, 8.0]),
                               st.sampled_from([0.0, 1.0])), max_size=60))  # fmt: skip
def test_distinct_rows_is_numpy_unique(rows: list[tuple[float, float, float]]) -> None:
    a = np.array(rows, np.float64).reshape(-1, 3)
    kinds, inverse, counts = NI._distinct_rows(a)
    if len(a) == 0:
        assert len(kinds) == len(inverse) == len(counts) == 0
        return
    k2, i2, c2 = np.unique(a, axis=0, return_inverse=True, return_counts=True)
    assert np.array_equal(kinds, k2) and np.array_equal(inverse, i2.ravel()) and np.array_equal(counts, c2)
