"""Files the commands write for other tools: the assignment of ``solve --out FILE`` and the per-episode records of
``simulate --out FILE``. Every file is written atomically (:mod:`dcplace.atomic`).

``--out`` keeps its old meaning for a folder (``result.json`` + ``config.toml``, now with the file below beside
them); a path ending in one of the suffixes below writes that one file instead.

Assignment (``solve``): one row per VM, ``vm`` (index in the instance), ``machine`` (index of its PM / server),
then ``disks`` (the physical disk of each virtual disk, ``;``-separated in CSV; problems with disks) or
``numa_node`` (0 or 1, -1 for a VM split over both nodes; topology-aware batches).

Episodes (``simulate``): one row per episode, ``episode`` first, then every scalar metric of the episode (numa:
:class:`~dcplace.sim.numa.EpisodeResult`; netalloc: ``acceptance`` and :class:`~dcplace.sim.netalloc.NetResult`'s
counts, with ``bw_util_<tier>`` and ``rejected_<reason>`` columns). Units are in :data:`UNITS`.
"""

from __future__ import annotations

import csv
import dataclasses
import io
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from dcplace.atomic import atomic_path, write_text
from dcplace.errors import InputError

ASSIGNMENT_SUFFIXES = (".json", ".csv")
EPISODE_SUFFIXES = (".csv", ".parquet")

UNITS = {
    "length": "requests placed in the scored phase",
    "income": "price units: 0.04 per vCPU-hour + 0.005 per GB-hour of the placed VMs' lifetimes",
    "cpu_alloc_mean": "share 0-1 of active CPU allocated, mean over scored placements",
    "mem_alloc_mean": "share 0-1 of active memory allocated, mean over scored placements",
    "pms_in_use_mean": "machines",
    "acceptance": "share 0-1 of requests placed",
    "cpu_util": "share 0-1 of CPU in use, mean over steps",
    "mem_util": "share 0-1 of memory in use, mean over steps",
    "bw_util_*": "share 0-1 of the tier's link bandwidth in use, mean over steps",
    "waited": "clock ticks requests spent waiting for room (the paper setting; 0 where a full cluster rejects)",
    "wall_s": "seconds (wall clock)",
    "cost": "the instance's cost unit (PM and disk prices; servers for topology-aware batches)",
}
"""Metric -> unit, for the docs and ``--help`` of the commands that write them."""


def is_file_target(path: Path, suffixes: Sequence[str]) -> bool:
    """Whether ``--out path`` names one file (by its suffix) rather than a folder."""
    return path.suffix.lower() in suffixes


def _csv_text(rows: list[dict[str, Any]]) -> str:
    buf = io.StringIO()
    fields = list(dict.fromkeys(k for r in rows for k in r))
    w = csv.DictWriter(buf, fieldnames=fields, lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue()


def assignment_rows(vm_pm: Any, vm_disks: Any = None, vm_node: Any = None) -> list[dict[str, Any]]:
    """One row per VM: ``vm``, ``machine``, then ``disks`` (a list) or ``numa_node`` where the answer has them."""
    if vm_pm is None:
        return []
    rows: list[dict[str, Any]] = []
    for i, pm in enumerate(vm_pm):
        row: dict[str, Any] = {"vm": i, "machine": int(pm)}
        if vm_disks is not None:
            row["disks"] = [int(d) for d in vm_disks[i]]
        if vm_node is not None:
            row["numa_node"] = int(vm_node[i])
        rows.append(row)
    return rows


def write_assignment(path: Path, summary: dict[str, Any], rows: list[dict[str, Any]], third: str = "disks") -> None:
    """``path`` (.json: the summary with an ``assignment`` list; .csv: one row per VM). No answer: an empty
    assignment (the summary's ``status`` says why) with the columns an answer would have (``third``: ``disks`` or
    ``numa_node``)."""
    if path.suffix.lower() == ".json":
        write_text(path, json.dumps({**summary, "assignment": rows}) + "\n")
        return
    flat = [{**r, "disks": ";".join(map(str, r["disks"]))} if "disks" in r else r for r in rows]
    write_text(path, _csv_text(flat) if flat else f"vm,machine,{third}\n")


def episode_rows(results: Sequence[Any]) -> list[dict[str, Any]]:
    """One flat row per episode result (a dataclass): scalars kept, dicts flattened (``<field>_<key>``), lists
    dropped; a numeric ``acceptance`` property is added where the result has one."""
    rows = []
    for i, r in enumerate(results):
        row: dict[str, Any] = {"episode": i}
        if hasattr(r, "acceptance"):
            row["acceptance"] = float(r.acceptance)
        for f in dataclasses.fields(r):
            v = getattr(r, f.name)
            if isinstance(v, dict):
                prefix = "bw_util" if f.name == "bw_util_by_tier" else f.name
                row.update({f"{prefix}_{k}": x for k, x in v.items()})
            elif isinstance(v, (int, float, str, bool)):
                row[f.name] = v
        rows.append(row)
    return rows


def write_episodes(path: Path, rows: list[dict[str, Any]]) -> None:
    """``path``: .csv, or .parquet (needs pandas' Parquet engine, pyarrow)."""
    if path.suffix.lower() == ".parquet":
        import pandas as pd

        try:
            with atomic_path(path) as tmp:
                pd.DataFrame(rows).to_parquet(tmp, index=False)
        except ImportError:
            raise InputError(
                f"{path}: writing Parquet needs pyarrow (pip install pyarrow); write a .csv instead"
            ) from None
        return
    write_text(path, _csv_text(rows))
