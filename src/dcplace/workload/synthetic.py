"""A seeded synthetic VM trace, shaped like Huawei-East-1, for tests and for running without the shared data.

Flavours and their frequencies are the 15 VM types of Huawei-East-1 counted in the public trace (VMAgent,
Sheng et al. 2022; derived facts, CC BY-NC 4.0). Arrivals are Poisson (the trace: 0.043 VMs/s on average);
lifetimes are log-normal with the trace's median (2,592 s) and log-spread (sigma 2.35).
"""

from __future__ import annotations

import numpy as np

from dcplace.config import check_seed, is_whole
from dcplace.errors import InputError
from dcplace.workload.table import RequestTable

#: (cpu cores, mem GB, count): Huawei-East-1's VM types and how often each occurs in the lifetime-form trace.
HUAWEI_FLAVOURS: tuple[tuple[float, float, float], ...] = (
    (1, 1, 25447),
    (1, 2, 53934),
    (1, 4, 3339),
    (2, 4, 14918),
    (2, 8, 2273),
    (4, 8, 9360),
    (4, 16, 1962),
    (8, 16, 2029),
    (8, 32, 1023),
    (12, 24, 638),
    (16, 32, 1002),
    (24, 48, 3),
    (32, 64, 131),
    (48, 96, 2),
    (64, 128, 252),
)


def synthetic_trace(
    n: int = 20_000,
    seed: int = 0,
    *,
    rate_per_s: float = 0.0434,
    median_lifetime_s: float = 2592.0,
    lifetime_sigma: float = 2.35,
) -> RequestTable:
    """``n`` requests drawn from a ``numpy.random.Generator(seed)``: same seed, same table."""
    if not is_whole(n) or n < 1:
        raise InputError(f"must be a whole number of requests >= 1, got {n!r}", field="n")
    check_seed(seed)
    rng = np.random.default_rng(seed)
    fl = np.asarray(HUAWEI_FLAVOURS)
    p = fl[:, 2] / fl[:, 2].sum()
    kind = rng.choice(len(fl), size=n, p=p)
    arrival = np.cumsum(rng.exponential(1.0 / rate_per_s, size=n))
    arrival = np.round(arrival)  # whole seconds, as in the trace
    life = np.maximum(1.0, np.round(rng.lognormal(np.log(median_lifetime_s), lifetime_sigma, size=n)))
    return RequestTable.from_arrays(
        arrival=arrival,
        departure=arrival + life,
        cpu=fl[kind, 0],
        mem=fl[kind, 1],
        source=f"synthetic(n={n}, seed={seed})",
    )
