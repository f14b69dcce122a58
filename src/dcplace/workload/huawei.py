"""Readers for the Huawei-East-1 VM trace (Sheng et al., VMAgent, IJCAI 2022; CC BY-NC 4.0).

Two forms:

* lifetime form ``vmid,cpu,mem,at,lt`` (``../shared/data/huawei-east-1/Huawei-East-1-lt.csv``): one row per VM,
  arrival ``at`` and lifetime ``lt`` in seconds;
* the original event log ``vmid,cpu,memory,time,type`` with type 0 = create, 1 = delete. A VM that is never
  deleted gets ``departure = inf``.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import numpy as np

from dcplace.errors import InputError
from dcplace.inputs import ID, MAX_QUANTITY, SECONDS, Range
from dcplace.workload.csvio import read_numeric_csv, require
from dcplace.workload.table import RequestTable

SIZE = Range(0, MAX_QUANTITY)
"""cpu and memory of any row (a creation's must also be > 0, checked apart: deletions may carry 0)."""


def _check_common(
    path: Path, vmid: np.ndarray, cpu: np.ndarray, mem: np.ndarray, line_of: np.ndarray, mem_field: str
) -> None:
    for name, col in (("cpu", cpu), (mem_field, mem)):
        i = np.flatnonzero(col <= 0)
        if len(i):
            raise InputError(f"must be positive, got {col[i[0]]:g}", path=path, line=int(line_of[i[0]]), field=name)
    i = np.flatnonzero(vmid < 0)
    if len(i):
        raise InputError("must be non-negative", path=path, line=int(line_of[i[0]]), field="vmid")


def read_huawei_lifetime(path: str | Path) -> RequestTable:
    """Read the lifetime form ``vmid,cpu,mem,at,lt``.

    Checks (:mod:`dcplace.inputs`): every column present and a number in range (``vmid`` a whole number >= 0,
    ``cpu, mem > 0``, ``at`` and ``lt`` seconds in ``[0, MAX_SECONDS]``), ``at`` non-decreasing, ``vmid`` unique.
    """
    p = Path(path)
    cols = read_numeric_csv(p, {"vmid": ID, "cpu": SIZE, "mem": SIZE, "at": SECONDS, "lt": SECONDS})
    line = cols.lines
    vmid = cols["vmid"].astype(np.int64)
    _check_common(p, vmid, cols["cpu"], cols["mem"], line, "mem")
    require(np.r_[True, np.diff(cols["at"]) >= 0], p, "at", "arrival times must be non-decreasing (unsorted)", line)
    _check_unique_ids(p, vmid, line)
    return RequestTable.from_arrays(
        arrival=cols["at"],
        departure=cols["at"] + cols["lt"],
        cpu=cols["cpu"],
        mem=cols["mem"],
        vmid=vmid,
        line=line,
        source=str(p),
    )


def _check_unique_ids(path: Path, vmid: np.ndarray, line: np.ndarray) -> None:
    order = np.argsort(vmid, kind="stable")
    dup = np.flatnonzero(np.diff(vmid[order]) == 0)
    if len(dup):
        second = order[dup + 1]
        i = int(second[np.argmin(line[second])])
        raise InputError(f"duplicate vmid {vmid[i]}", path=path, line=int(line[i]), field="vmid")


def read_huawei_events(path: str | Path) -> RequestTable:
    """Read the event-log form ``vmid,cpu,memory,time,type`` (type 0 create, 1 delete), with an optional ``multi``
    column (1: the VM spans every NUMA node of its machine; the table then says each VM's span, ``numa_given``, and
    a double-NUMA threshold does not decide it).

    Checks: columns present and numeric, type in {0, 1}, times non-decreasing, one creation per vmid, every
    deletion preceded by the creation of the same vmid and of its size. VMs never deleted depart at ``inf``.
    """
    p = Path(path)
    kinds = Range(0, 1, integer=True)
    cols = read_numeric_csv(p, {"vmid": ID, "cpu": SIZE, "memory": SIZE, "time": SECONDS, "type": kinds},
                            optional={"multi": kinds})  # fmt: skip
    spans = "multi" in cols
    line = cols.lines
    kind = cols["type"]
    require(np.r_[True, np.diff(cols["time"]) >= 0], p, "time", "times must be non-decreasing (unsorted)", line)
    vmid = cols["vmid"].astype(np.int64)
    create = kind == 0
    _check_common(p, vmid[create], cols["cpu"][create], cols["memory"][create], line[create], "memory")
    c_ids, c_line, c_time = vmid[create], line[create], cols["time"][create]
    if len(c_ids) == 0:
        raise InputError("the trace has no creation events (type 0)", path=p, line=2, field="type")
    _check_unique_ids(p, c_ids, c_line)
    d_ids, d_line, d_time = vmid[~create], line[~create], cols["time"][~create]
    # Match deletions to creations by id (sorted search, no Python loop over rows).
    order = np.argsort(c_ids, kind="stable")
    pos = np.searchsorted(c_ids[order], d_ids)
    pos_c = np.minimum(pos, len(c_ids) - 1)
    found = c_ids[order][pos_c] == d_ids
    bad = np.flatnonzero(~found)
    if len(bad):
        i = int(bad[0])
        raise InputError(f"delete of vmid {d_ids[i]} that was never created", path=p, line=int(d_line[i]), field="vmid")
    idx = order[pos_c]
    late = np.flatnonzero(c_line[idx] > d_line)
    if len(late):
        i = int(late[0])
        raise InputError(f"delete of vmid {d_ids[i]} before its creation", path=p, line=int(d_line[i]), field="vmid")
    twice = np.flatnonzero(np.bincount(idx, minlength=len(c_ids)) > 1)
    if len(twice):
        j = int(twice[0])
        i = int(np.flatnonzero(idx == j)[1])
        raise InputError(f"vmid {c_ids[j]} is deleted twice", path=p, line=int(d_line[i]), field="vmid")
    for name in ("cpu", "memory"):  # a delete frees what was created: a different size is a damaged row
        said, made = cols[name][~create], cols[name][create][idx]
        off = np.flatnonzero(said != made)
        if len(off):
            i = int(off[0])
            raise InputError(
                f"delete of vmid {d_ids[i]} frees {name} {said[i]:g}, but its creation on line {c_line[idx[i]]} "
                f"asked for {made[i]:g}",
                path=p,
                line=int(d_line[i]),
                field=name,
            )
    departure = np.full(len(c_ids), np.inf)
    departure[idx] = d_time
    return RequestTable.from_arrays(
        arrival=c_time,
        departure=departure,
        cpu=cols["cpu"][create],
        mem=cols["memory"][create],
        multi_numa=cols["multi"][create].astype(bool) if spans else None,
        vmid=c_ids,
        line=c_line,
        source=str(p),
        numa_given=spans,
    )


def write_huawei_events(table: RequestTable, path: str | Path, names: Sequence[str] | None = None) -> None:
    """Write a table as an event log (create at arrival, delete at departure unless it is ``inf``), with a
    ``multi`` column where the table says each VM's NUMA span (``numa_given``), so that a replay keeps it, and a
    ``name`` column where ``names`` gives each table row's own id (the form's ``vmid`` is a number; readers pass the
    column by, quoted as CSV quotes).

    Events are sorted by time; at equal times deletions come first, then creations in table order.
    """
    fin = np.isfinite(table.departure)
    times = np.concatenate([table.departure[fin], table.arrival])
    kinds = np.concatenate([np.ones(int(fin.sum()), np.int64), np.zeros(len(table), np.int64)])
    rows = np.concatenate([np.flatnonzero(fin), np.arange(len(table))])
    order = np.lexsort((np.arange(len(times)), -kinds, times))
    if names is not None and len(names) != len(table):
        raise ValueError(f"{len(names)} names for {len(table)} requests")
    with open(path, "w", encoding="utf-8", newline="") as fh:
        spans = table.numa_given
        fh.write("vmid,cpu,memory,time,type" + (",multi" if spans else "") + (",name\n" if names is not None else "\n"))
        for j in order:
            r = rows[j]
            fh.write(f"{table.vmid[r]},{table.cpu[r]:.17g},{table.mem[r]:.17g},{times[j]:.17g},{kinds[j]}"
                     + (f",{int(table.multi_numa[r])}" if spans else "")
                     + (',"' + names[r].replace('"', '""') + '"\n' if names is not None else "\n"))  # fmt: skip
