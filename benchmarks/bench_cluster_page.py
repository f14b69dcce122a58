"""The cluster page (``/ui/``) at scale: a live ``dcplace serve`` engine with N double-NUMA machines in racks of 40,
filled to about half by best-fit, opened in headless chromium; what one refresh costs the page (reading the three
API answers, and drawing: building the tiles plus the layout) and what ``GET /machines`` weighs.

    OMP_NUM_THREADS=1 NUMBA_NUM_THREADS=1 python benchmarks/bench_cluster_page.py [--machines 1000 5000 20000]
        [--refreshes 5]

Each size: the page is opened once (the tiles made), then refreshed ``--refreshes`` times as it is (a tile whose
machine did not change is left alone) and as many times with every tile to be drawn again (as if every machine had
changed); the medians of the page's own timings (``performance.now()``, in its status line too: the three API
answers read and parsed; the page built and laid out, painting not included). Needs chromium.
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "service"))

from browser import CHROMIUM, Browser

from conftest import server_thread
from dcplace.engine import MachineSpec, PlacementEngine


def _engine(path: Path, machines: int) -> PlacementEngine:
    import numpy as np

    engine = PlacementEngine.open(path)
    engine.add_machines([MachineSpec(f"pm-{i}", 40, 90, f"rack-{i // 40}") for i in range(machines)])
    rng = np.random.default_rng(0)
    n = machines * 8  # about half the cores: 8 VMs of 5 cores on average per 80-core machine
    cpu = rng.integers(1, 10, n).astype(float)
    mem = cpu * rng.uniform(1.0, 3.0, n)
    engine.place_arrays([f"vm-{i}" for i in range(n)], cpu, mem, np.zeros(n, dtype=bool))
    return engine


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--machines", type=int, nargs="+", default=[1000, 5000, 20000])
    ap.add_argument("--refreshes", type=int, default=5)
    args = ap.parse_args()
    if CHROMIUM is None:
        sys.exit("error: no chromium here (apt-get install chromium)")
    when = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    print(f"# {when}, {platform.node()}, {platform.processor() or platform.machine()}")
    print("| machines | VMs | GET /machines, MB | first draw, ms | refresh: read, ms | draw, nothing changed, ms "
          "| draw, every tile changed, ms |")  # fmt: skip
    print("|---|---|---|---|---|---|---|")
    for n in args.machines:
        with tempfile.TemporaryDirectory() as tmp:
            engine = _engine(Path(tmp) / "c.db", n)
            vms = engine.stats()["vms"]
            with server_thread(engine) as url, Browser() as b:
                size = len(urllib.request.urlopen(f"{url}/machines").read()) / 1e6
                b.open(f"{url}/ui/?every=3600")
                b.wait_for("document.body.dataset.loaded === 'yes'", timeout_s=300)
                first = float(b.js("document.body.dataset.drawMs"))
                times: dict[str, list[float]] = {"read": [], "same": [], "changed": []}
                for _ in range(args.refreshes):
                    for kind in ("same", "changed"):
                        forget = "for (const t of tiles.values()) delete t.dataset.key;" if kind == "changed" else ""
                        # pause, then resume: one refresh now
                        b.js(f"{forget} document.body.dataset.loaded = ''; document.getElementById('pause').click();"
                             "document.getElementById('pause').click()")  # fmt: skip
                        b.wait_for("document.body.dataset.loaded === 'yes'", timeout_s=300)
                        times["read"].append(float(b.js("document.body.dataset.readMs")))
                        times[kind].append(float(b.js("document.body.dataset.drawMs")))
                assert b.js("document.querySelectorAll('#map .m').length") == n
            engine.close()
        med = {k: statistics.median(v) for k, v in times.items()}
        print(
            f"| {n:,} | {vms:,} | {size:.2f} | {first:.0f} | {med['read']:.0f} | {med['same']:.0f} | "
            f"{med['changed']:.0f} |",
            flush=True,
        )


if __name__ == "__main__":
    main()
