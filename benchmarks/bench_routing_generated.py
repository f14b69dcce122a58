"""Routing on a generated (non-preset) tree-like fabric: the leaf routing against networkx, on one core.

The topology is delta with ``--scale`` times the racks (``--scale 4``: 10,240 servers), handed over as a plain graph
(networkx, then :func:`dcplace.cluster.topology.from_networkx`: no fabric shape, as a topology loaded from a file),
so :func:`dcplace.sim.routing.routing_for` picks :class:`~dcplace.sim.routing.LeafRouting`. One uniform episode of
``--requests`` requests with each policy, first with the leaf routing, then with networkx's all-shortest-paths
(:class:`~dcplace.sim.routing.GraphRouting`, what such a topology used before) on the first ``--graph-requests`` of
the same requests; decisions (server picks) per second of each, and whether the picks agree (on the shared prefix
with networkx; in full with the structural fabric routing of the same shape and with
:class:`~dcplace.sim.routing.CountingRouting`, the general graphs' path service: one table per destination switch
too, but over every node of the graph, servers included). Decisions per second are wall clock;
the leaf routing's are also given per CPU second of the process (``time.process_time``), the one-core rate when the
machine is shared (on an idle core the two agree).
Routing tables are built lazily inside the clock (nothing excluded but imports and loading the compiled kernels,
which the routing and the simulator do once per process when constructed, before the clock starts).

    python benchmarks/bench_routing_generated.py [--scale 4] [--requests 4000] [--graph-requests 300]
"""

from __future__ import annotations

import argparse
import os
import platform
import resource
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")

from dcplace.cluster.topology import from_networkx, scaled_delta
from dcplace.policies import get_net_policy
from dcplace.sim.netalloc import NetAllocSim
from dcplace.sim.netalloc_episodes import episode_requests
from dcplace.sim.routing import CountingRouting, FabricRouting, GraphRouting, LeafRouting, Routing, routing_for


def _episode(top, req, routing: Routing, policy: str, limit: int) -> tuple[float, int, list[int], float]:  # type: ignore[no-untyped-def]
    """(wall seconds, decisions, picks, CPU seconds of this process)."""
    pol = get_net_policy(policy, 0)
    sim = NetAllocSim(top, req, routing=routing, any_server=pol.any_server)  # nulb picks outside the mask
    picks: list[int] = []
    t0, c0 = time.perf_counter(), time.process_time()
    while not sim.done and sim.decisions < limit:
        v = pol.choose(sim.view())
        picks.append(int(v))
        sim.pick(v)
    return time.perf_counter() - t0, sim.decisions, picks, time.process_time() - c0


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scale", type=int, default=4)
    ap.add_argument("--requests", type=int, default=4000)
    ap.add_argument("--graph-requests", type=int, default=300, help="decisions replayed with networkx (slow)")
    ap.add_argument("--policies", nargs="+", default=["nalb", "random"])
    args = ap.parse_args()
    big = scaled_delta(args.scale)
    top = from_networkx(big.to_networkx(), name=f"generated-{big.name}")
    assert top.fabric_shape is None and isinstance(routing_for(top), LeafRouting)
    req = episode_requests(top, "uniform", args.requests, 0, 0)
    where = f"{platform.processor() or platform.machine()}, python {platform.python_version()}"
    print(f"{where}, {time.strftime('%Y-%m-%d %H:%M')}; {top.name}: {top.n_servers:,} servers, {top.n_links:,} links")
    print(
        "| policy | decisions | leaf decisions/s | leaf decisions per CPU s | fabric (preset shape) decisions/s "
        "| counting (whole graph) decisions/s | networkx decisions | networkx decisions/s | same picks |"
    )
    print("|---|---|---|---|---|---|---|---|---|")
    for pol in args.policies:
        wl, dl, pl, cl = _episode(top, req, LeafRouting(top), pol, 10**12)
        wf, df, pf, _ = _episode(big, req, FabricRouting(big), pol, 10**12)
        wc, dc, pc, _ = _episode(top, req, CountingRouting(top), pol, 10**12)
        wg, dg, pg, _ = _episode(top, req, GraphRouting(top), pol, args.graph_requests)
        same = pl[: len(pg)] == pg and pl == pf == pc
        rates = f"{dl / wl:,.0f} | {dl / cl:,.0f} | {df / wf:,.0f} | {dc / wc:,.0f}"
        print(f"| {pol} | {dl:,} | {rates} | {dg:,} | {dg / wg:,.0f} | {same} |", flush=True)
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"\npeak resident memory of the whole process: {peak:.0f} MB")


if __name__ == "__main__":
    main()
