"""The network engine's reconcile (``POST /network/reconcile``, ``cluster reconcile --db NET.db``) at scale.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_network_reconcile.py [--topologies gamma delta]
        [--runs 3] [--share 0.1]

Per topology: an engine in SQLite (``tetris-bw``) is filled with the ``uniform`` set's jobs (the paper's episode
length, none released), its ``GET /jobs`` listing taken as the inventory, and then, each ``--runs`` times: (a) the
same inventory (nothing changes: every row checked against its record); (b) the inventory without ``--share`` of
the jobs (they are released, ``force``); (c) the whole inventory again, those jobs without their links (recorded,
routed as a placement is), the engine's jobs checked to equal the inventory's servers after it; then, untimed, the
inventory once more, so that each run starts from the same links. Medians, with the
cost of one placement in the same engine (the fill's median) to compare with, date, machine and load.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import tempfile
import time
from pathlib import Path

from dcplace.cluster.topology import BW_SCALE, preset
from dcplace.engine import NetJob, NetworkEngine
from dcplace.sim.netalloc_episodes import default_requests, episode_requests


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--topologies", nargs="+", default=["gamma", "delta"])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--share", type=float, default=0.1)
    args = ap.parse_args()
    print(f"# {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {platform.processor() or platform.machine()}, "
          f"{os.cpu_count()} cores, load {os.getloadavg()[0]:.1f}")  # fmt: skip
    print("| topology | jobs running | a placement, ms | (a) nothing changed, ms | (b) a share released, ms | "
          "(c) recorded again, routed, ms |")  # fmt: skip
    print("|---|---|---|---|---|---|")
    for name in args.topologies:
        top = preset(name)
        req = episode_requests(top, "uniform", default_requests(top), 0, 0)
        with tempfile.TemporaryDirectory() as tmp:
            engine = NetworkEngine.open(Path(tmp) / "n.db", top, "tetris-bw", hold_max=req.hold_max)
            place = []
            for i in range(len(req.cpu)):
                t = time.perf_counter()
                engine.place(NetJob(f"j{i}", int(req.cpu[i]), int(req.mem[i]), max(int(req.bw[i]), 1) / BW_SCALE,
                                    int(req.hold[i])))  # fmt: skip
                place.append(time.perf_counter() - t)
            inventory = [j.as_dict() for j in engine.jobs()]
            n = len(inventory)
            step = max(1, round(1 / args.share))
            kept = [row for i, row in enumerate(inventory) if i % step]
            again = [row if i % step else {**row, "links": None} for i, row in enumerate(inventory)]
            times: dict[str, list[float]] = {"same": [], "released": [], "recorded": []}
            for _ in range(args.runs):
                for key, rows in (("same", inventory), ("released", kept), ("recorded", again)):
                    t = time.perf_counter()
                    engine.reconcile(rows, force=True)
                    times[key].append(time.perf_counter() - t)
                assert [j.servers for j in engine.jobs()] != [] and len(engine.jobs()) == n
                assert {j.id: list(j.servers) for j in engine.jobs()} == {r["id"]: r["servers"] for r in inventory}
                engine.check_invariants()
                engine.reconcile(inventory)  # the links as they were (rerouting may have chosen others): (a) again
                # changes nothing
            engine.close()
        med = {k: statistics.median(v) * 1e3 for k, v in times.items()}
        print(f"| {name} | {n:,} | {statistics.median(place) * 1e3:.2f} | {med['same']:.1f} | {med['released']:.1f} "
              f"| {med['recorded']:.1f} |")  # fmt: skip


if __name__ == "__main__":
    main()
