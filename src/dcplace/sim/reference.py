"""A deliberately plain reference simulator: one Python object per machine, as VMAgent is written.

It shares no code with the compiled kernel and exists for two reasons: tests cross-check the kernel's decisions
against it (First-Fit and Best-Fit, Non-Expansion, releases on or off, no warm start), and the throughput
benchmark measures the kernel against this object-per-server design in the same run.
"""

from __future__ import annotations

import heapq

from dcplace.workload.table import RequestTable

# The kernel's feasibility tolerance (dcplace.sim.numa_kernel.FIT_TOL), restated rather than imported: this module
# shares no code with the kernel.
_FIT_TOL = 5e-10


class _Machine:
    def __init__(self, cpu: float, mem: float, numa: int) -> None:
        self.cap = [[cpu, mem] for _ in range(numa)]
        self.free = [[cpu, mem] for _ in range(numa)]
        self.vms: dict[int, int] = {}  # request -> node (-1 = all nodes)

    def fits(self, cpu: float, mem: float, multi: bool, node: int) -> bool:
        k = len(self.free)
        if multi:
            return all(f[0] >= cpu / k - _FIT_TOL and f[1] >= mem / k - _FIT_TOL for f in self.free)
        return self.free[node][0] >= cpu - _FIT_TOL and self.free[node][1] >= mem - _FIT_TOL

    def add(self, r: int, cpu: float, mem: float, multi: bool, node: int) -> None:
        k = len(self.free)
        if multi:
            for f in self.free:
                f[0] -= cpu / k
                f[1] -= mem / k
            self.vms[r] = -1
        else:
            self.free[node][0] -= cpu
            self.free[node][1] -= mem
            self.vms[r] = node

    def remove(self, r: int, cpu: float, mem: float) -> None:
        node = self.vms.pop(r)
        k = len(self.free)
        if node < 0:
            for f in self.free:
                f[0] += cpu / k
                f[1] += mem / k
        else:
            self.free[node][0] += cpu
            self.free[node][1] += mem


def reference_episode(
    table: RequestTable,
    machines: int,
    policy: str,
    *,
    start: int = 0,
    release: bool = True,
    numa: int = 2,
    cpu: float = 40.0,
    mem: float = 90.0,
    limit: int = 0,
    vmagent_checks: bool = False,
) -> list[tuple[int, int]]:
    """Replay ``table`` from request ``start``; return ``(request, action)`` for each placement until the first
    request that fits nowhere (or ``limit`` placements, if > 0). With ``vmagent_checks`` it also
    computes every machine's usability before each decision, as VMAgent's step does (its termination check and
    action mask), which is what the throughput benchmark compares against. ``policy`` is ``"first-fit"`` or
    ``"best-fit"`` (same rules and tie-breaks as dcplace.policies.numa_heuristics). Deletions at a time
    come before creations at that time."""
    ms = [_Machine(cpu, mem, numa) for _ in range(machines)]
    where: dict[int, _Machine] = {}
    pending: list[tuple[float, int]] = []  # (departure, request) heap
    out: list[tuple[int, int]] = []
    for r in range(start, len(table)):
        t = float(table.arrival[r])
        while release and pending and (pending[0][0] <= t):
            d, q = heapq.heappop(pending)
            if d == t and q >= r:  # a zero-lifetime VM created later at this time: not yet
                heapq.heappush(pending, (d, q))
                break
            where.pop(q).remove(q, float(table.cpu[q]), float(table.mem[q]))
        c, m_, multi = float(table.cpu[r]), float(table.mem[r]), bool(table.multi_numa[r])
        if vmagent_checks:  # VMAgent computes every server's usability each step (termination + mask)
            usable = [mach.fits(c, m_, multi, node) for mach in ms for node in range(numa)]
            if not any(usable):
                return out
        best = None
        best_key: tuple[float, float, float] | None = None
        for i, mach in enumerate(ms):
            for node in range(1 if multi else numa):
                if not mach.fits(c, m_, multi, node):
                    continue
                a = i * numa + node
                if policy == "first-fit":
                    best = a
                    break
                pm_cpu = sum(f[0] for f in mach.free) - c
                pm_mem = sum(f[1] for f in mach.free) - m_
                node_cpu = pm_cpu / numa if multi else mach.free[node][0] - c
                key = (pm_cpu, node_cpu, pm_mem)
                if best_key is None or key < best_key:
                    best, best_key = a, key
            if policy == "first-fit" and best is not None:
                break
        if best is None:
            return out
        mach = ms[best // numa]
        mach.add(r, c, m_, multi, best % numa)
        where[r] = mach
        heapq.heappush(pending, (float(table.departure[r]), r))
        out.append((r, best))
        if limit and len(out) >= limit:
            break
    return out
