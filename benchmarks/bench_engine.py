"""The live engine in process: decisions per second, the cost of explanations and of durability, memory at 10,000
machines and 100,000 live VMs, and (``--check``) the full Huawei-East-1 replay against the simulator for every
heuristic.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_engine.py [--requests 40000] [--batch-repeats 1]
        [--check]

Rates are for :meth:`PlacementEngine.place` / ``release`` called from Python one request at a time (what a caller
does), Huawei-East-1 from its first request with releases (synthetic when the data is absent), best-fit.

Compilation is excluded, and a first run with an empty numba cache measures what a cached run does: before any clock
starts, a child process runs every timed path (``place`` with and without an explanation, ``release``,
``place_batch``, ``place_arrays``, a durable engine, ``run_stream``) untimed on a few hundred requests at both sizes,
which compiles them into numba's cache; this process then does the same and only loads them. (Compiling in the
timing process itself left the compiler's objects and memory behind: even after ``gc.freeze()``, ``place_batch``
ran 20-40 % slower in a first run than in a cached one.)
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from dcplace.cluster.numa import NumaCluster
from dcplace.engine import PlacementEngine, VmRequest
from dcplace.engine.stream import engine_for, run_stream
from dcplace.policies.numa_heuristics import CODES, warm_up_jit
from dcplace.sim.episodes import prepare
from dcplace.sim.numa import PreparedTrace
from dcplace.workload.synthetic import synthetic_trace
from dcplace.workload.traces import load_trace, trace_available


def rss_mb() -> float:
    for line in Path("/proc/self/status").read_text(encoding="utf-8").splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def replay_rate(engine: PlacementEngine, trace: PreparedTrace, limit: int, explain: bool) -> dict[str, float]:
    """Replay ``limit`` creations (and the departures between them); time the place and release calls only."""
    placed: set[int] = set()
    t_place = t_release = 0.0
    n_place = n_release = 0
    lat: list[float] = []
    for e in range(len(trace.ev_req)):
        r = int(trace.ev_req[e])
        if trace.ev_dep[e]:
            if r in placed:
                t0 = time.perf_counter()
                engine.release(str(r))
                t_release += time.perf_counter() - t0
                n_release += 1
                placed.discard(r)
            continue
        if n_place >= limit:
            break
        q = VmRequest(str(r), float(trace.demand[r, 0]), float(trace.demand[r, 1]), bool(trace.multi[r]))
        t0 = time.perf_counter()
        d = engine.place(q, explain=explain)
        dt = time.perf_counter() - t0
        t_place += dt
        lat.append(dt)
        n_place += 1
        if d.accepted:
            placed.add(r)
    return {
        "placements": n_place,
        "place_per_s": n_place / t_place,
        "releases": n_release,
        "release_per_s": n_release / max(t_release, 1e-12),
        "place_p50_us": float(np.percentile(lat, 50) * 1e6),
        "place_p99_us": float(np.percentile(lat, 99) * 1e6),
    }


def memory_figure(machines: int, vms: int) -> dict[str, float]:
    """Memory of an engine holding ``machines`` machines and ``vms`` live VMs (no releases): what it allocated
    (``tracemalloc``, numpy's arrays included; an RSS difference is not usable this late in the process, whose freed
    memory the engine reuses), and the process's resident memory after."""
    import tracemalloc

    before = rss_mb()
    tracemalloc.start()
    engine = PlacementEngine(2, "first-fit")
    for m in range(machines):
        engine.add_machine(f"pm-{m:05d}", 40, 90)
    t = synthetic_trace(n=vms, seed=1).with_double_numa_threshold(32.0)
    for i in range(vms):
        engine.place(VmRequest(f"vm-{i:06d}", float(t.cpu[i]), float(t.mem[i]), bool(t.multi_numa[i])), explain=False)
    live = engine.stats()["vms"]
    allocated = tracemalloc.get_traced_memory()[0] / 2**20
    tracemalloc.stop()
    after = rss_mb()
    s = engine.state
    arrays = sum(a.nbytes for a in (s.cap, s.free, s.vm_count, s.status, s.usable, s.pm_of, s.node_of, s.demand,
                                    s.multi))  # fmt: skip
    engine.check_invariants()
    return {"machines": machines, "vms_live": live, "rss_before_mb": before, "rss_after_mb": after,
            "engine_rss_mb": after - before, "engine_allocated_mb": allocated,
            "engine_arrays_mb": arrays / 2**20}  # fmt: skip


def warm_up(trace: PreparedTrace, sizes: tuple[int, ...], n: int = 300) -> None:
    """Run every timed path untimed on ``n`` requests at each size (see the module docstring), then collect and
    freeze the garbage collector's generations."""
    warm_up_jit()
    reqs = [VmRequest(f"w{r}", float(trace.demand[r, 0]), float(trace.demand[r, 1]), bool(trace.multi[r]))
            for r in range(n)]  # fmt: skip
    for machines in sizes:
        for explain in (False, True):
            engine = engine_for(NumaCluster.uniform(machines), "best-fit")
            replay_rate(engine, trace, n, explain)
        engine = engine_for(NumaCluster.uniform(machines), "best-fit")
        engine.place_batch(reqs)
        for q in reqs:
            engine.release(q.id)
        engine.place_arrays([q.id for q in reqs], np.array([q.cpu for q in reqs]), np.array([q.mem for q in reqs]),
                            np.array([q.multi for q in reqs]))  # fmt: skip
    run_stream(engine_for(NumaCluster.uniform(sizes[0]), "best-fit"), trace, max_requests=n, samples=0)
    engine = PlacementEngine(2, "first-fit")  # the memory figure's engine
    engine.add_machine("pm-0", 40, 90)
    engine.place(reqs[0], explain=False)
    with tempfile.TemporaryDirectory() as tmp:
        engine = PlacementEngine.open(Path(tmp) / "warm.db")
        for m in range(10):
            engine.add_machine(f"pm-{m}", 40, 90)
        replay_rate(engine, trace, 20, False)
        engine.close()
    gc.collect()
    gc.freeze()


def check_replay(trace: PreparedTrace, pms: int) -> dict[str, bool]:
    """The whole trace through the engine against the simulator, decision by decision, for every heuristic."""
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "engine"))
    from test_equivalence import check_equivalent  # the test's own comparison

    out = {}
    for name in sorted(CODES):
        check_equivalent(trace, pms, name)
        out[name] = True
        print(f"  {name}: identical on all {len(trace.table):,} requests", flush=True)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--requests", type=int, default=40_000)
    ap.add_argument("--durable-requests", type=int, default=1_000)
    ap.add_argument("--batch-repeats", type=int, default=1, help="times the bulk-call section is timed at each size")
    ap.add_argument("--check", action="store_true", help="replay the whole trace against the simulator too")
    ap.add_argument("--out", type=Path, default=Path("results/bench_engine.json"))
    ap.add_argument("--warm-up-only", action="store_true", help=argparse.SUPPRESS)  # the child that fills the cache
    args = ap.parse_args()
    name = "huawei-east-1" if trace_available("huawei-east-1") else "synthetic"
    trace = prepare(load_trace(name), 32.0)
    if args.warm_up_only:
        warm_up(trace, (1_000, 10_000))
        return
    subprocess.run([sys.executable, __file__, *sys.argv[1:], "--warm-up-only"], check=True)
    rec: dict[str, object] = {"trace": name, "host": platform.node(), "python": platform.python_version(),
                              "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
                              "load_before": os.getloadavg()[0]}  # fmt: skip
    print(f"{rec['date']}, load average {os.getloadavg()[0]:.2f}", flush=True)
    warm_up(trace, (1_000, 10_000))
    for machines in (1_000, 10_000):
        for explain in (False, True):
            engine = engine_for(NumaCluster.uniform(machines), "best-fit")
            engine.place(VmRequest("warm", 1.0, 1.0), explain=explain)  # compile outside the timing
            engine.release("warm")
            r = replay_rate(engine, trace, args.requests // 4 if explain else args.requests, explain)
            engine.check_invariants()
            rec[f"in_process_{machines}_explain_{explain}"] = r
            print(f"{machines} machines, explain={explain}: {r['place_per_s']:,.0f} placements/s "
                  f"(p50 {r['place_p50_us']:.0f} us, p99 {r['place_p99_us']:.0f} us), "
                  f"{r['release_per_s']:,.0f} releases/s", flush=True)  # fmt: skip
    reqs = [VmRequest(f"b{r}", float(trace.demand[r, 0]), float(trace.demand[r, 1]), bool(trace.multi[r]))
            for r in range(min(args.requests, 20_000))]  # fmt: skip
    for machines in (1_000, 10_000):
        for rep in range(args.batch_repeats):
            engine = engine_for(NumaCluster.uniform(machines), "best-fit")
            gc.collect()
            t0 = time.perf_counter()
            got = engine.place_batch(reqs)
            wall = time.perf_counter() - t0
            engine.check_invariants()
            one = engine_for(NumaCluster.uniform(machines), "best-fit")
            gc.collect()
            t0 = time.perf_counter()
            for q in reqs:
                one.place(q, explain=False)
            wall_one = time.perf_counter() - t0
            assert one.snapshot() == engine.snapshot()  # the same decisions
            arrays = engine_for(NumaCluster.uniform(machines), "best-fit")
            ids = [q.id for q in reqs]
            cpu = np.array([q.cpu for q in reqs])
            mem = np.array([q.mem for q in reqs])
            multi = np.array([q.multi for q in reqs])
            gc.collect()
            t0 = time.perf_counter()
            arrays.place_arrays(ids, cpu, mem, multi)
            wall_arrays = time.perf_counter() - t0
            assert arrays.snapshot() == engine.snapshot()  # the same decisions
            key = f"batch_{machines}" if rep == 0 else f"batch_{machines}_repeat_{rep + 1}"
            rec[key] = {"requests": len(reqs), "accepted": sum(d.accepted for d in got), "wall_s": wall,
                        "per_call_wall_s": wall_one, "arrays_wall_s": wall_arrays}  # fmt: skip
            print(f"{machines} machines, {len(reqs):,} requests without releases (repeat {rep + 1}): place_arrays "
                  f"{len(reqs) / wall_arrays:,.0f} decisions/s, place_batch {len(reqs) / wall:,.0f}/s, one place() "
                  f"each {len(reqs) / wall_one:,.0f}/s", flush=True)  # fmt: skip
    with tempfile.TemporaryDirectory() as tmp:
        engine = PlacementEngine.open(Path(tmp) / "bench.db")
        for m in range(1_000):
            engine.add_machine(f"pm-{m}", 40, 90)
        r = replay_rate(engine, trace, args.durable_requests, False)
        engine.close()
        rec["durable_1000_one_caller"] = r
        print(f"1000 machines, SQLite synchronous=FULL, one caller (one fsync per call): "
              f"{r['place_per_s']:,.0f} placements/s (p50 {r['place_p50_us'] / 1e3:.1f} ms)", flush=True)  # fmt: skip
    stream = run_stream(engine_for(NumaCluster.uniform(1_000), "best-fit"), trace, samples=0)
    rec["stream_1000"] = {"requests": stream.requests, "accepted": stream.accepted, "wall_s": stream.wall_s}
    print(f"stream (place + release, whole trace, 1000 machines): {stream.requests / stream.wall_s:,.0f} "
          f"requests/s, acceptance {stream.acceptance:.4f}", flush=True)  # fmt: skip
    mem = memory_figure(10_000, 100_000)
    rec["memory"] = mem
    print(f"memory: {mem['vms_live']:,} live VMs on {mem['machines']:,} machines: engine allocated "
          f"{mem['engine_allocated_mb']:.1f} MB (its arrays {mem['engine_arrays_mb']:.1f} MB), "
          f"process {mem['rss_after_mb']:.0f} MB resident", flush=True)  # fmt: skip
    rec["load_after"] = os.getloadavg()[0]
    print(f"load average {os.getloadavg()[0]:.2f}", flush=True)
    if args.check:
        rec["replay_identical"] = check_replay(trace, 400)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(rec, indent=1) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
