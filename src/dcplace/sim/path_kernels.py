"""Compiled kernels of the counting routings (:class:`dcplace.sim.routing.LeafRouting`,
:class:`dcplace.sim.routing.CountingRouting`): shortest-path counts toward one node, the ``r``-th shortest path in
lexicographic node order, and the widest of a pair's candidates.

The graph is CSR: the neighbours of node ``x`` are ``nb_node[nb_start[x]:nb_start[x + 1]]`` in increasing id, each
reached over link ``nb_link[j]`` (one link per neighbour: parallel links collapse, as networkx's ``Graph`` does).
For a destination ``t``: ``dist[x]`` = hops from ``x`` to ``t`` (-1: unreachable) and ``count[x]`` = number of
shortest paths from ``x`` to ``t`` (``count[t] = 1``; ``count[x]`` = sum of ``count[y]`` over neighbours ``y`` with
``dist[y] = dist[x] - 1``; int64, wrapping past 2**63 like the numpy version it replaces). A path written out is its
link ids in order from ``s`` to ``t``, preceded by link ``pre`` and followed by link ``post`` where these are
``>= 0`` (a leaf server's link to its switch).
"""

from __future__ import annotations

import numba as nb
import numpy as np
import numpy.typing as npt

IntArray = npt.NDArray[np.int64]


@nb.njit(cache=True, nogil=True)
def bfs_counts(t: int, nb_start: IntArray, nb_node: IntArray, dist: IntArray, count: IntArray) -> None:
    """Fill ``dist`` and ``count`` (both ``(nodes,)``) toward node ``t`` by one breadth-first pass. A node's count is
    final when it leaves the queue: every node one hop closer to ``t`` left it before."""
    dist[:] = -1
    count[:] = 0
    dist[t] = 0
    count[t] = 1
    queue = np.empty(dist.shape[0], np.int64)
    queue[0] = t
    head, tail = 0, 1
    while head < tail:
        x = queue[head]
        head += 1
        dx = dist[x] + 1
        for j in range(nb_start[x], nb_start[x + 1]):
            y = nb_node[j]
            if dist[y] == -1:
                dist[y] = dx
                count[y] = count[x]
                queue[tail] = y
                tail += 1
            elif dist[y] == dx:
                count[y] += count[x]


@nb.njit(cache=True, nogil=True)
def unrank(
    s: int,
    t: int,
    pre: int,
    post: int,
    rank: int,
    dist: IntArray,
    count: IntArray,
    nb_start: IntArray,
    nb_node: IntArray,
    nb_link: IntArray,
    out: IntArray,
) -> int:
    """Write the ``rank``-th (0-based, ``rank < count[s]``) shortest ``s -> t`` path in lexicographic node order
    into ``out`` (links, with ``pre`` / ``post``); return its length. At each node the neighbours one hop closer are
    taken in increasing id, skipping whole subtrees of ``count[y]`` paths."""
    n = 0
    if pre >= 0:
        out[n] = pre
        n += 1
    x = s
    while x != t:
        dx = dist[x] - 1
        for j in range(nb_start[x], nb_start[x + 1]):
            y = nb_node[j]
            if dist[y] == dx:
                c = count[y]
                if rank < c:
                    out[n] = nb_link[j]
                    n += 1
                    x = y
                    break
                rank -= c
    if post >= 0:
        out[n] = post
        n += 1
    return n


@nb.njit(cache=True, nogil=True)
def widest_ranked(
    s: int,
    t: int,
    pre: int,
    post: int,
    start: int,
    m: int,
    dist: IntArray,
    count: IntArray,
    nb_start: IntArray,
    nb_node: IntArray,
    nb_link: IntArray,
    free_bw: IntArray,
    bw: int,
    out: IntArray,
    scratch: IntArray,
) -> int:
    """Among the shortest paths of ranks ``(start + i) mod count[s]``, ``i < m`` (the candidates, in order), the
    first whose tightest link has the most free bandwidth, if that is at least ``bw``: written into ``out``, its
    length returned; 0 when none qualifies. Same choice as :func:`dcplace.sim.routing.widest_of` on the list."""
    total = count[s]
    best_len = 0
    best = bw - 1
    for i in range(m):
        n = unrank(s, t, pre, post, (start + i) % total, dist, count, nb_start, nb_node, nb_link, scratch)
        tight = free_bw[scratch[0]]
        for j in range(1, n):
            f = free_bw[scratch[j]]
            if f < tight:
                tight = f
        if tight > best:
            best = tight
            best_len = n
            out[:n] = scratch[:n]
    return best_len


@nb.njit(cache=True, nogil=True)
def fabric_widest_all(
    us: IntArray,
    v: int,
    free_bw: IntArray,
    bw: int,
    k: int,
    rack: IntArray,
    pod: IntArray,
    n_servers: int,
    racks: int,
    planes: int,
    spines: int,
    used: npt.NDArray[np.bool_],
) -> int:
    """The widest candidate between server ``v`` and each server of ``us``, as the Fabric routing chooses it
    (:class:`dcplace.sim.routing.FabricRouting`) where no pair needs a longer path (every pod has at least ``k``
    planes, or equal-cost paths only): -1 where every pair has one of at least ``bw``, its links then marked in
    ``used``; otherwise the index in ``us`` of the first pair without one, and nothing marked.

    The candidates of a pair ``a < b`` in the routing's canonical order: one path within a rack (the two server
    links); within a pod, one per plane ``f`` (``a``, rack ``ra``'s link to plane ``f``, rack ``rb``'s, ``b``);
    across pods, one per plane and spine (``f * spines + sp``). Rotated by ``(a + b) mod n``, the first ``k`` kept,
    the first whose tightest link has the most free bandwidth is the pair's (:func:`dcplace.sim.routing.widest_of`).
    Link ids as :class:`dcplace.cluster.topology.FabricShape` numbers them: a server's link is its id."""
    m = len(us)
    chosen = np.empty(m, np.int64)  # the candidate's index in canonical order, -1 within a rack
    rf0 = n_servers  # rack-fabric links: rf0 + rack * planes + plane
    fs0 = n_servers + racks * planes  # fabric-spine links: fs0 + (pod * planes + plane) * spines + spine
    for i in range(m):
        a, b = us[i], v
        if a > b:
            a, b = b, a
        ends = min(free_bw[a], free_bw[b])
        ra, rb = rack[a], rack[b]
        if ra == rb:
            if ends < bw:
                return i
            chosen[i] = -1
            continue
        pa, pb = pod[a], pod[b]
        n = planes if pa == pb else planes * spines
        start = (a + b) % n
        best, best_tight = -1, bw - 1
        for j in range(min(k, n)):
            c = (start + j) % n
            if pa == pb:
                tight = min(ends, free_bw[rf0 + ra * planes + c], free_bw[rf0 + rb * planes + c])
            else:
                f, sp = c // spines, c % spines
                up_a, up_b = free_bw[rf0 + ra * planes + f], free_bw[rf0 + rb * planes + f]
                core_a = free_bw[fs0 + (pa * planes + f) * spines + sp]
                core_b = free_bw[fs0 + (pb * planes + f) * spines + sp]
                tight = min(ends, up_a, up_b, core_a, core_b)
            if tight > best_tight:
                best, best_tight = c, tight
        if best < 0:
            return i
        chosen[i] = best
    for i in range(m):
        a, b = us[i], v
        used[a] = True
        used[b] = True
        c = chosen[i]
        if c < 0:
            continue
        ra, rb, pa, pb = rack[a], rack[b], pod[a], pod[b]
        if pa == pb:
            used[rf0 + ra * planes + c] = True
            used[rf0 + rb * planes + c] = True
        else:
            f, sp = c // spines, c % spines
            used[rf0 + ra * planes + f] = True
            used[rf0 + rb * planes + f] = True
            used[fs0 + (pa * planes + f) * spines + sp] = True
            used[fs0 + (pb * planes + f) * spines + sp] = True
    return -1


@nb.njit(cache=True, nogil=True)
def counted_widest_all(
    s: IntArray,
    pre: IntArray,
    t: int,
    post: IntArray,
    uv: IntArray,
    k: int,
    ksp: bool,
    dist: IntArray,
    count: IntArray,
    nb_start: IntArray,
    nb_node: IntArray,
    nb_link: IntArray,
    free_bw: IntArray,
    bw: int,
    mark: npt.NDArray[np.bool_],
    general: npt.NDArray[np.bool_],
    out: IntArray,
    scratch: IntArray,
) -> int:
    """:func:`widest_ranked` for pairs that share their destination ``t`` (tables ``dist``, ``count`` toward it):
    pair ``i`` from ``s[i]`` (link ``pre[i]`` before it) to ``t`` (link ``post[i]`` after it), ranks rotated by
    ``uv[i] mod count[s[i]]``, as :meth:`dcplace.sim.routing._Counted.widest` chooses. Marks each chosen path's links
    in ``mark``; a pair with fewer than ``k`` shortest paths under ``ksp`` (longer ones follow: the general loop's)
    is flagged in ``general``, not decided. Returns the index of the first pair without a candidate of at least
    ``bw`` (what is marked then is to be dropped), else -1."""
    for i in range(len(s)):
        if s[i] == t:
            if min(free_bw[pre[i]], free_bw[post[i]]) < bw:
                return i
            mark[pre[i]] = True
            mark[post[i]] = True
            continue
        n = count[s[i]]
        if n == 0:
            return i
        if ksp and n < k:
            general[i] = True
            continue
        size = widest_ranked(s[i], t, pre[i], post[i], uv[i] % n, min(k, n), dist, count, nb_start, nb_node, nb_link,
                             free_bw, bw, out, scratch)  # fmt: skip
        if size == 0:
            return i
        for j in range(size):
            mark[out[j]] = True
    return -1


_warm = False


def warm() -> None:
    """Load (or compile) the kernels now, on a two-node graph, so that a routing's first decision does not pay it
    (numba loads a cached kernel at its first call: tenths of a second per process)."""
    global _warm
    if _warm:
        return
    one = np.ones(1, np.int64)
    start, node, link = np.array([0, 1, 2], np.int64), np.array([1, 0], np.int64), np.zeros(2, np.int64)
    dist, count = np.empty(2, np.int64), np.empty(2, np.int64)
    bfs_counts(1, start, node, dist, count)
    out, scratch = np.empty(4, np.int64), np.empty(4, np.int64)
    unrank(0, 1, -1, -1, 0, dist, count, start, node, link, out)
    widest_ranked(0, 1, -1, -1, 0, 1, dist, count, start, node, link, one, 1, out, scratch)
    zero = np.zeros(2, np.int64)
    fabric_widest_all(zero[:1], 1, np.ones(2, np.int64), 1, 1, zero, zero, 2, 1, 1, 1, np.zeros(2, np.bool_))
    counted_widest_all(zero[:1], zero[:1], 0, zero[:1], zero[:1], 1, True, dist, count, start, node, link,
                       np.ones(2, np.int64), 1, np.zeros(2, np.bool_), np.zeros(1, np.bool_), out, scratch)  # fmt: skip
    _warm = True
