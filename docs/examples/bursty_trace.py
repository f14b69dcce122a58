"""A user's own workload: a steady stream of small VMs with bursts of large double-NUMA ones.

A trace of your own is a function ``(seed) -> RequestTable``; name it ``module:function`` wherever dcplace takes a
trace. Without installing anything (from this folder, or with it on PYTHONPATH):
    dcplace simulate numa --trace bursty_trace:bursty --pms 20 --episodes 5 --policy best-fit
    dcplace simulate numa --trace bursty_trace:bursty --pms 20 --episodes 5 --policy first-fit
"""

import numpy as np

from dcplace.workload import RequestTable


def bursty(seed: int) -> RequestTable:
    """20,000 VMs over about 55 hours: Poisson arrivals (one every 10 s), 1-8 cores at 2 GB per core; every
    2,000 s a burst of 20 VMs of 32 cores / 128 GB (double-NUMA above the default 32 GB threshold); log-normal
    lifetimes (median 1 h)."""
    rng = np.random.default_rng(seed)
    n = 20_000
    arrival = np.cumsum(rng.exponential(10.0, n))
    cpu = rng.choice([1.0, 2.0, 4.0, 8.0], n, p=[0.4, 0.3, 0.2, 0.1])
    mem = 2.0 * cpu
    burst = (arrival // 2_000).astype(int)  # the 2,000 s window of each arrival
    first = np.flatnonzero(np.diff(burst, prepend=-1) > 0)  # the first arrival of each window starts its burst
    big = np.unique(np.minimum(first[:, None] + np.arange(20), n - 1))  # it and the next 19 arrivals
    cpu[big], mem[big] = 32.0, 128.0
    departure = arrival + rng.lognormal(np.log(3_600.0), 1.0, n)
    return RequestTable.from_arrays(arrival, departure, cpu, mem, source=f"bursty(seed={seed})")


if __name__ == "__main__":
    from dcplace.cluster import NumaCluster
    from dcplace.policies import get_policy
    from dcplace.sim import Scenario
    from dcplace.sim.episodes import prepare, run_episodes

    trace = prepare(bursty(0), 32.0)  # VMs above 32 GB span both NUMA nodes
    for name in ("first-fit", "best-fit"):
        results, _, _ = run_episodes(get_policy(name), NumaCluster.uniform(20), trace, Scenario(pms=20), 5, seed=0)
        print(name, np.mean([r.length for r in results]))
