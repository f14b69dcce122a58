"""Migration plans at scale (issue 14's targets) and the greedy's quality on tiny instances.

(a) Re-optimising 10,000 live VMs on 1,000 machines (2 NUMA nodes of 44 cores / 128 GB). The live state: a synthetic
    Huawei-shaped trace placed first-fit (the simulator's rule) in arrival order until the first VM that does not
    fit (the load peak), after which a random 10,000 of the placed VMs remain (the others departed); VMs above
    32 GB span both NUMA nodes (VMAgent's rule). Targets: ``consolidate``, best-fit decreasing of the same VMs onto
    an empty cluster (the kind of answer a re-optimiser gives: fewer machines); ``shuffle``, the consolidated
    placement with the machines in use relabelled by a random permutation among themselves (every VM moves, nearly
    full machines exchange their VMs: the cycle-heavy worst case; the machines not in use are the staging room).
    Target: a verified plan in <= 30 s.
(b) Evacuating one machine of the consolidated state (drain: live migrations; failure: placements from nowhere):
    the machine with the most VMs and the one with the fewest VMs at or above 40, with the 765 empty machines
    usable, or with only the 235 machines in use after a random 10 % of the VMs departed (the VMs must fit into
    fragmented holes, evicting others where needed). Target: a verified plan in <= 1 s; ``evacuate_s`` is the
    whole call (targets, plan, check).
(c) ``--quality N``: N random tiny instances (the tests' generator, up to 6 VMs), the greedy alone (no exact
    fallback) against the brute-force optimum: how often it finds a plan when one exists, and with the fewest moves.

    OMP_NUM_THREADS=1 python benchmarks/bench_migration.py [--seed 0] [--quality 500] [--json records.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import time
from typing import Any

import numpy as np

from dcplace.cluster.numa import NumaCluster
from dcplace.placement.migration import ClusterPlacement, Placement, best_fit, evacuate, plan_migrations
from dcplace.placement.plan_check import check_plan, min_moves
from dcplace.sim.numa_kernel import first_feasible
from dcplace.workload.synthetic import synthetic_trace

LIVE = 10_000
MACHINES = 1_000


def live_state(seed: int) -> tuple[ClusterPlacement, int]:
    """(the state, VMs placed at the peak) described in the module docstring."""
    cluster = NumaCluster.uniform(MACHINES, 2, cpu=44.0, mem=128.0)
    trace = synthetic_trace(60_000, seed=seed).with_double_numa_threshold(32.0)
    cap = cluster.capacity
    k_nodes = cluster.numa
    free = cap.copy()
    demand = np.ascontiguousarray(np.stack([trace.cpu, trace.mem], axis=1))
    multi = trace.multi_numa.copy()
    mach, node = np.full(len(trace), -1), np.full(len(trace), -1)
    for r in range(len(trace)):
        a = int(first_feasible(free, demand[r], bool(multi[r]), MACHINES))  # the simulator's first-fit
        if a < 0:
            break  # the cluster is full: the load peak
        m = a // k_nodes
        if multi[r]:
            free[m] -= demand[r] / k_nodes
        else:
            mach_k = a % k_nodes
            free[m, mach_k] -= demand[r]
            node[r] = mach_k
        mach[r] = m
    placed = np.flatnonzero(mach >= 0)
    keep = np.sort(np.random.default_rng(seed).choice(placed, size=LIVE, replace=False))
    state = ClusterPlacement.build(cap, demand[keep], multi[keep], mach[keep], node[keep])
    return state, len(placed)


def consolidate(state: ClusterPlacement) -> Placement:
    """Best-fit decreasing of every VM onto an empty copy of the cluster (of identical machines: the candidates are
    the machines opened so far and the next empty one, which is what best-fit over all of them would pick)."""
    free = state.capacity.copy()
    size = (state.demand / state.capacity.reshape(-1, 2).max(axis=0)).max(axis=1)
    m_out, k_out = np.full(state.vms, -1), np.full(state.vms, -1)
    opened = 0
    for v in np.argsort(-size, kind="stable"):
        n = min(opened + 1, state.machines)
        p = best_fit(free[:n], state.usable[:n], state.demand[v], bool(state.multi[v]))
        assert p is not None, "the consolidation must place every VM"
        m_out[v], k_out[v] = p
        opened = max(opened, p[0] + 1)
        if state.multi[v]:
            free[p[0]] -= state.demand[v] / state.numa
        else:
            free[p[0], p[1]] -= state.demand[v]
    return Placement(m_out, k_out)


def shuffle(state: ClusterPlacement, seed: int) -> tuple[Placement, int]:
    """(the machines in use relabelled by a random permutation among themselves, its cycles of length >= 2)."""
    rng = np.random.default_rng(seed + 1)
    in_use = np.unique(state.current.machine[state.current.machine >= 0])
    relabel = np.arange(state.machines)
    relabel[in_use] = in_use[rng.permutation(len(in_use))]
    seen, cycles = set(), 0
    for m in in_use.tolist():
        if m in seen or relabel[m] == m:
            continue
        cycles += 1
        while m not in seen:
            seen.add(m)
            m = int(relabel[m])
    return Placement(relabel[state.current.machine], state.current.node), cycles


def _record(scenario: str, state: ClusterPlacement, plan: Any, extra: dict[str, Any] | None = None) -> dict[str, Any]:
    used_now = len(np.unique(state.current.machine[state.current.machine >= 0]))
    rec = {
        "scenario": scenario,
        "vms_placed": int(np.count_nonzero(state.current.machine >= 0)),
        "machines": state.machines,
        "machines_in_use_now": used_now,
        "moving": plan.moving,
        "moves": plan.n_moves,
        "staging_moves": plan.staging_moves,
        "gb_moved": round(plan.gb_moved, 1),
        "complete": plan.complete,
        "stuck": len(plan.stuck),
        "method": plan.method,
        "plan_s": round(plan.plan_s, 4),
        "check_s": round(plan.check_s, 4),
        "total_s": round(plan.plan_s + plan.check_s, 4),
        "verified": plan.verified,
    }
    rec.update(extra or {})
    return rec


def _print(rec: dict[str, Any]) -> None:
    print(" | ".join(f"{k}={v}" for k, v in rec.items()), flush=True)


def at_scale(seed: int) -> list[dict[str, Any]]:
    t0 = time.perf_counter()
    state, peak = live_state(seed)
    print(f"live state: {state.vms} of the {peak} VMs placed at the peak ({time.perf_counter() - t0:.1f} s to build)")
    recs = []
    target = consolidate(state)
    used_after = len(np.unique(target.machine))
    gc.collect()
    plan = plan_migrations(state, target)
    recs.append(_record("consolidate", state, plan, {"machines_in_use_target": used_after}))
    _print(recs[-1])
    # The cycle-heavy case: the consolidated (dense) placement with its machines exchanging their contents.
    dense = state.replace_current(target)
    shuffled, cycles = shuffle(dense, seed)
    gc.collect()
    plan = plan_migrations(dense, shuffled)
    recs.append(_record("shuffle", dense, plan, {"permutation_cycles": cycles}))
    _print(recs[-1])
    # (b) evacuations, from the consolidated placement (dense: the hard case for finding room).
    counts = np.bincount(dense.current.machine, minlength=dense.machines)
    # Without spare machines: only the machines in use may receive (the rest are absent) and a random 10 % of the
    # VMs have departed, so the evacuated VMs must fit into the fragmented holes left on nearly full machines.
    gone = np.random.default_rng(seed + 2).random(dense.vms) < 0.1
    tight = dense.replace_current(
        Placement(np.where(gone, -1, dense.current.machine), np.where(gone, -1, dense.current.node)),
        usable=counts > 0,
    )
    near40 = int(np.argmin(np.where(counts >= 40, counts, 10**9)))  # the machine with the fewest VMs >= 40
    for room, st in (("spare machines", dense), ("no spare machine", tight)):
        for label, m in (("most VMs", int(np.argmax(counts))), ("~40 VMs", near40)):
            for failed in (False, True):
                gc.collect()  # time the call, not the collection of the previous scenarios' garbage
                t1 = time.perf_counter()
                ev = evacuate(st, [m], failed=failed)
                wall = time.perf_counter() - t1
                name = f"evacuate {'failed' if failed else 'drained'} machine ({label}, {room})"
                on = int(np.count_nonzero(st.current.machine == m))
                recs.append(_record(name, ev.state, ev.plan, {"vms_on_machine": on,
                                    "evicted": len(ev.evicted), "unplaced": len(ev.unplaced),
                                    "evacuate_s": round(wall, 4)}))  # fmt: skip
                _print(recs[-1])
    return recs


def quality(n: int) -> dict[str, Any]:
    """Part (c): ``n`` examples of the tests' generator (derandomised: the same examples on every run)."""
    import sys
    from pathlib import Path

    from hypothesis import Phase, given, settings

    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "placement"))
    from test_migration import instances  # the tests' generator

    stats = {"instances": 0, "with_moves": 0, "solvable": 0, "greedy_found": 0, "greedy_optimal": 0,
             "needed_staging": 0, "greedy_staging_optimal": 0}  # fmt: skip

    @settings(max_examples=n, derandomize=True, database=None, phases=[Phase.generate], deadline=None)
    @given(instances(max_vms=6))
    def one(inst: Any) -> None:
        if inst is None:
            return
        state, target = inst
        for max_staging in (0, 1, 2):
            stats["instances"] += 1
            greedy = plan_migrations(state, target, max_staging=max_staging, exact_limit=0)
            assert check_plan(state, target, greedy).ok
            best = min_moves(state, target, max_staging)
            stats["with_moves"] += greedy.moving > 0
            if best is None:
                continue
            stats["solvable"] += 1
            stats["greedy_found"] += greedy.complete
            stats["greedy_optimal"] += greedy.complete and greedy.n_moves == best
            if best > greedy.moving:
                stats["needed_staging"] += 1
                stats["greedy_staging_optimal"] += greedy.complete and greedy.n_moves == best

    one()
    return {"scenario": "quality (tiny random instances x max_staging 0/1/2)", **stats}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quality", type=int, default=0, help="tiny random instances for (c); 0: skip")
    ap.add_argument("--json", default="", help="write the records here")
    args = ap.parse_args()
    print(f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"Python {platform.python_version()}")  # fmt: skip
    recs = at_scale(args.seed)
    if args.quality:
        recs.append(quality(args.quality))
        _print(recs[-1])
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump(recs, f, indent=1)


if __name__ == "__main__":
    main()
