"""Rebuild the shipped request-size tables ``src/dcplace/data/netalloc_{azure,alibaba}[-max,-v1].csv`` from
../shared/data.

Run: ``python scripts/build_netalloc_tables.py [DATA_DIR]``. The tables are derived, scaled counts, small enough to
ship; the traces themselves stay outside the repository.
"""

from __future__ import annotations

import sys
from pathlib import Path

from dcplace.workload.netreq import SCALE, build_tables, write_table_csv
from dcplace.workload.traces import shared_data_dir

ATTRIBUTION = {
    "azure": (
        "Derived from the Azure public dataset V1 (Cortez et al., Resource Central, SOSP 2017), CC BY 4.0:\n"
        "counts of (cpu, mem) request units of the train split's 1,200,998 VMs, vCPU x{c:g} and GB x{m:g}\n"
        "(fractions of an 8 vCPU / 24 GB machine, x50), rounded up; records split 20/80 into train/test.\n"
        "Built by scripts/build_netalloc_tables.py."
    ),
    "azure-max": (
        "Derived from the Azure public dataset V1 (Cortez et al., Resource Central, SOSP 2017), CC BY 4.0:\n"
        "counts of (cpu, mem) request units of the train split's 1,200,998 VMs, vCPU x{c:g} and GB x{m:g}\n"
        "(fractions of an 8 vCPU / 56 GB machine, x50), rounded up; records split 20/80 into train/test.\n"
        "Built by scripts/build_netalloc_tables.py."
    ),
    "azure-v1": (
        "Derived from the Azure public dataset V1 (Cortez et al., Resource Central, SOSP 2017), CC BY 4.0:\n"
        "counts of (cpu, mem) request units of the train split's 1,200,998 VMs, vCPU and GB each x{c:g},\n"
        "rounded up, capped at 100; records split 80/20 into train/test. Built by scripts/build_netalloc_tables.py."
    ),
    "alibaba": (
        "Derived from the Alibaba GPU cluster trace 2023 (Weng et al., Beware of Fragmentation, USENIX ATC 2023),\n"
        "research or study use only: counts of (cpu, mem) request units of its 8,152 pods, CPU cores x{c:g} and\n"
        "memory GiB x{m:g}, rounded up, 1..100; records split 20/80 into train/test. Built by\n"
        "scripts/build_netalloc_tables.py."
    ),
    "alibaba-max": (
        "Derived from the Alibaba GPU cluster trace 2023 (Weng et al., Beware of Fragmentation, USENIX ATC 2023),\n"
        "research or study use only: counts of (cpu, mem) request units of its 8,152 pods, CPU cores x{c:g} and\n"
        "memory GiB x{m:g}, rounded up, 1..100; records split 20/80 into train/test. Built by\n"
        "scripts/build_netalloc_tables.py."
    ),
    "alibaba-v1": (
        "Derived from the Alibaba GPU cluster trace 2023 (Weng et al., Beware of Fragmentation, USENIX ATC 2023),\n"
        "research or study use only: counts of (cpu, mem) request units of its 8,152 pods, CPU cores x{c:g} and\n"
        "memory GiB x{m:g}, rounded up, 1..100; records split 80/20 into train/test. Built by\n"
        "scripts/build_netalloc_tables.py."
    ),
}


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] in ("-h", "--help"):
        print(__doc__)
        return
    data = Path(sys.argv[1]) if len(sys.argv) > 1 else shared_data_dir()
    if data is None:
        raise SystemExit("no shared data directory found; pass its path")
    out = Path(__file__).resolve().parents[1] / "src" / "dcplace" / "data"
    out.mkdir(exist_ok=True)
    for name in SCALE:
        c, m = SCALE[name]
        tables = build_tables(name, data)
        write_table_csv(tables, out / f"netalloc_{name}.csv", ATTRIBUTION[name].format(c=c, m=m))
        for split, t in tables.items():
            print(name, split, "pairs", len(t.cpu), "records", int(t.count.sum()), "mean (cpu, mem)", t.mean())


if __name__ == "__main__":
    main()
