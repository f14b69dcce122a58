"""Readings of a trace for the CVD-RL regime study: long-lived VMs restored, shared CPU (seeded, documented).

**Never-deleted VMs of Huawei-East-1** (:func:`restore_never_deleted`). The official log has 125,430 creations and
116,313 deletions (``README-official.md``); our copy (``Huawei-East-1-lt.csv``) holds the 116,313 VMs that are
deleted, so the 9,117 VMs that are never deleted are missing. With releases on, they are what makes the official
log's live population grow "from 0 to more than 8000" over the month; without them ours stays between ~300 and
~1,600. They are re-added as follows (seed ``seed``):

* **count**: ``125,430 - 116,313 = 9,117`` (:data:`HUAWEI_NEVER_DELETED`);
* **types** (CPU, memory): drawn with replacement from the VMs of the copy that lived at least
  ``long_lived_days`` (10 days: 281 VMs), i.e. the observed tail of the lifetime distribution, the VMs most like
  those whose lifetime exceeds the window. Their mean is 3.67 cores / 7.27 GB; the official dataset page's
  "Allocated Resources" figure ends the month at about 33,700 cores and 71,500 GB for its ~9,100 live VMs, 3.7 cores /
  7.8 GB each, against 2.0 / 4.2 for the whole trace. (VMs living at least 1 day average 3.0 / 6.1.)
* **arrival times**: drawn with replacement from the arrival times of the copy's VMs, i.e. the never-deleted VMs
  arrive as the trace's requests do; each is inserted after the copy's creations at the same second. Checked
  against the official "Alive Virtual Machines" figure (read by eye at 25 times, :data:`OFFICIAL_ALIVE`): the
  official live count minus ours, over 9,117, and the share of the copy's arrivals so far differ by at most 0.14
  and by 0.056 on average; the restored trace's live count is within 13 % of the figure on average, 34 % at worst
  (days 9-15, where the figure's growth pauses and ours does not; a test holds these numbers).
* never deleted: ``departure = inf``, ``censored = True``, ``line = 0``, ids after the copy's.

**Shared CPU** (:func:`share_cpu`). ``README-official.md``: "some small-sized hosts in the dataset are virtual
machine instances for internal and special users. These virtual machines share CPU resources, and the sharing ratio
is between 1/4 and 1/2", with a proportion per type (2U4G 65 %, 4U8G 75 %, 8U16G 60 %, the other six small types
90 %), and "VMAgent finally uses the middle value of 1/3 for simulation". Each VM of a listed type is shared with its
type's proportion (seeded Bernoulli draw); a shared VM takes 1/3 of its cores.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from dcplace.config import check
from dcplace.workload.table import RequestTable

HUAWEI_CREATIONS = 125_430
"""Creation requests of the official Huawei-East-1 log (README-official.md)."""
HUAWEI_DELETIONS = 116_313
"""Deletion requests of the official log, and the rows of our copy."""
HUAWEI_NEVER_DELETED = HUAWEI_CREATIONS - HUAWEI_DELETIONS
"""9,117 VMs created and never deleted, absent from our copy."""
LONG_LIVED_DAYS = 10.0
"""VMs of the copy living at least this long give the types of the restored never-deleted VMs."""

#: The official dataset page's "Alive Virtual Machines" figure, read by eye: (time in seconds, live VMs). Used only
#: to check the arrival rule (tests and docs), never to generate.
OFFICIAL_ALIVE: tuple[tuple[float, float], ...] = (
    (0.1e6, 1200), (0.2e6, 1400), (0.3e6, 1650), (0.4e6, 1400), (0.5e6, 2000), (0.7e6, 3800), (0.8e6, 3900),
    (0.9e6, 3700), (1.0e6, 3800), (1.2e6, 4600), (1.3e6, 4300), (1.4e6, 4800), (1.5e6, 4850), (1.6e6, 4950),
    (1.7e6, 5150), (1.8e6, 5400), (1.9e6, 5900), (2.0e6, 7000), (2.1e6, 7200), (2.2e6, 7400), (2.3e6, 7700),
    (2.4e6, 8300), (2.5e6, 8800), (2.6e6, 9100), (2.68e6, 9100),
)  # fmt: skip

#: README-official.md: (cores, GB) -> proportion of VMs of that type that share CPU.
SHARED_PROPORTION: dict[tuple[float, float], float] = {
    (2.0, 4.0): 0.65, (4.0, 8.0): 0.75, (8.0, 16.0): 0.60, (1.0, 2.0): 0.90, (4.0, 16.0): 0.90,
    (1.0, 1.0): 0.90, (2.0, 8.0): 0.90, (8.0, 32.0): 0.90, (1.0, 4.0): 0.90,
}  # fmt: skip
SHARED_RATIO = 1.0 / 3.0
"""CPU taken by a shared VM per vCPU (VMAgent's middle value)."""


def restore_never_deleted(
    table: RequestTable,
    seed: int = 0,
    count: int = HUAWEI_NEVER_DELETED,
    long_lived_days: float = LONG_LIVED_DAYS,
) -> RequestTable:
    """``table`` with ``count`` never-deleted VMs added (the rule in the module docstring; same seed, same table).

    Raises InputError when no VM of ``table`` lived ``long_lived_days`` (nothing to draw types from).
    """
    check(count >= 0, "count", count, "non-negative")
    check(long_lived_days > 0, "long_lived_days", long_lived_days, "positive")
    life = table.lifetime
    donors = np.flatnonzero(np.isfinite(life) & (life >= long_lived_days * 86_400.0))
    check(len(donors) > 0, "long_lived_days", long_lived_days, f"a lifetime some VM of {table.source} reaches")
    rng = np.random.default_rng([seed, 0x4C4F4E47])  # "LONG": a stream of its own
    kind = donors[rng.integers(0, len(donors), count)]
    at = np.sort(table.arrival[rng.integers(0, len(table), count)])
    first_id = int(table.vmid.max()) + 1 if len(table) else 0
    return RequestTable.from_arrays(
        arrival=np.r_[table.arrival, at],
        departure=np.r_[table.departure, np.full(count, np.inf)],
        cpu=np.r_[table.cpu, table.cpu[kind]],
        mem=np.r_[table.mem, table.mem[kind]],
        multi_numa=np.r_[table.multi_numa, table.multi_numa[kind]],
        censored=np.r_[table.censored, np.ones(count, bool)],
        vmid=np.r_[table.vmid, np.arange(first_id, first_id + count, dtype=np.int64)],
        line=np.r_[table.line, np.zeros(count, np.int64)],
        source=f"{table.source} + {count} never-deleted (seed {seed})",
        numa_given=table.numa_given,
    )


def share_cpu(table: RequestTable, seed: int = 0, ratio: float = SHARED_RATIO) -> RequestTable:
    """``table`` with the README's shared small VMs taking ``ratio`` of their cores (seeded per VM)."""
    check(0 < ratio <= 1, "ratio", ratio, "in (0, 1]")
    p = np.zeros(len(table))
    for (cpu, mem), share in SHARED_PROPORTION.items():
        p[(table.cpu == cpu) & (table.mem == mem)] = share
    rng = np.random.default_rng([seed, 0x53484152])  # "SHAR"
    shared = rng.random(len(table)) < p
    return replace(
        table,
        cpu=np.where(shared, table.cpu * ratio, table.cpu),
        source=f"{table.source} (shared CPU x{ratio:.3g}, seed {seed})",
    )
