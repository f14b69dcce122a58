"""Candidate paths between two servers: the k shortest (equal-cost, hop count) paths, as tuples of link ids.

Semantics, shared by both routines so that they agree exactly:

1. All shortest paths (fewest hops) between the two servers, in canonical order: lexicographic by the sequence of
   node ids along the path.
2. Rotated by ``(u + v) mod n`` (``n`` = number of shortest paths) and cut to the first ``k``. The rotation is a
   deterministic stand-in for ECMP hashing: without it every pair would try the same ``k`` of gamma's four planes
   and one plane's links would never carry traffic.

Only equal-cost paths are candidates: in a Fabric network a longer path turns back down through another rack switch,
which datacenter routing never does. The simulator then reserves, among the candidates, the one with the most free
bandwidth on its tightest link ("bandwidth-weighted k-shortest paths", shared by every policy).

:class:`FabricRouting` enumerates the paths from rack and pod (no search, no cache needed); :class:`LeafRouting`
serves any graph whose servers are leaves (one link each, to their rack switch: every tree-like fabric, generated or
loaded from a file): the shortest paths between two servers are those between their switches with the two server
links at the ends, so it keeps, per destination switch, the hop distance and the number of shortest paths from every
node (one breadth-first pass over the edge arrays), and unranks the ``k`` paths it needs in lexicographic order
directly (no enumeration of the others); :class:`GraphRouting` asks networkx for all shortest paths of any graph
and caches them per server pair. ``tests/sim/test_netalloc.py`` checks that all return the same candidates.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import Protocol

import numpy as np
import numpy.typing as npt

from dcplace.cluster.topology import Topology

Path = tuple[int, ...]


class Routing(Protocol):
    k: int

    def candidates(self, u: int, v: int) -> list[Path]:
        """At most ``k`` link-id paths between servers ``u != v``."""
        ...


def select(paths: list[Path], u: int, v: int, k: int) -> list[Path]:
    """Rotate canonical-order ``paths`` by ``(u + v) mod n`` and keep the first ``k``."""
    n = len(paths)
    if n == 0:
        return []
    start = (u + v) % n
    return [paths[(start + i) % n] for i in range(min(k, n))]


class FabricRouting:
    """Paths from the Fabric structure: 1 path inside a rack, one per plane inside a pod, one per (plane, spine)
    across pods."""

    def __init__(self, topology: Topology, k: int = 3) -> None:
        shape = topology.fabric_shape
        if shape is None:
            raise ValueError("FabricRouting needs a topology built by dcplace.cluster.topology.fabric")
        self.shape = shape
        self.k = k
        self._rack = topology.server_rack.tolist()
        self._pod = topology.server_pod.tolist()

    def candidates(self, u: int, v: int) -> list[Path]:
        s = self.shape
        ru, rv = self._rack[u], self._rack[v]
        if ru == rv:
            return [(u, v)]
        # Canonical (node-id) order: the server endpoints are fixed, then fabric switch ids grow with the plane,
        # then spine ids with (plane, spine). Link ids are written in path order u -> v.
        pu, pv = self._pod[u], self._pod[v]
        paths: list[Path]
        if pu == pv:
            paths = [(u, s.rack_fabric_link(ru, f), s.rack_fabric_link(rv, f), v) for f in range(s.planes)]
        else:
            paths = [
                (
                    u,
                    s.rack_fabric_link(ru, f),
                    s.fabric_spine_link(pu, f, sp),
                    s.fabric_spine_link(pv, f, sp),
                    s.rack_fabric_link(rv, f),
                    v,
                )
                for f in range(s.planes)
                for sp in range(s.spines_per_plane)
            ]
        return select(paths, u, v, self.k)


class GraphRouting:
    """Paths of any graph from networkx's all-shortest-paths search, cached per server pair."""

    def __init__(self, topology: Topology, k: int = 3) -> None:
        self.graph = topology.to_networkx()
        self.k = k
        self._cache: dict[tuple[int, int], list[Path]] = {}

    def candidates(self, u: int, v: int) -> list[Path]:
        key = (u, v)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        import networkx as nx

        node_paths = sorted(nx.all_shortest_paths(self.graph, u, v))
        paths = [tuple(int(self.graph.edges[a, b]["link"]) for a, b in itertools.pairwise(p)) for p in node_paths]
        out = select(paths, u, v, self.k)
        self._cache[key] = out
        return out


class LeafRouting:
    """Paths of any graph whose servers are leaves (:func:`servers_are_leaves`), by counting and unranking.

    For a destination switch ``t``: ``dist[x]`` hops from node ``x`` to ``t`` and ``count[x]`` shortest paths from
    ``x`` to ``t`` (``count[t] = 1``, ``count[x]`` = the sum of ``count[y]`` over neighbours ``y`` one hop closer).
    The ``r``-th shortest path from ``s`` in lexicographic node order follows, at each node, the neighbours one hop
    closer in increasing id, skipping whole subtrees of ``count[y]`` paths. Per pair: O(k x hops x degree); per new
    destination switch: O(links x hops) numpy work; the last ``cache`` destinations are kept (each ``(nodes,)``
    int64 twice)."""

    def __init__(self, topology: Topology, k: int = 3, cache: int = 4096) -> None:
        if not servers_are_leaves(topology):
            raise ValueError("LeafRouting needs every server to have exactly one link (to its switch)")
        self.k = k
        n_nodes = topology.n_nodes
        ns = topology.n_servers
        lu = topology.link_u.astype(np.int64)
        lv = topology.link_v.astype(np.int64)
        link_of: dict[tuple[int, int], int] = {}
        for e, (a, b) in enumerate(zip(lu.tolist(), lv.tolist(), strict=True)):  # parallel links: the last one, as
            link_of[(a, b)] = link_of[(b, a)] = e  # networkx's Graph keeps it
        self._link_of = link_of
        self._uplink = np.zeros(ns, np.int64)  # (servers,) the server's link
        self._switch = np.zeros(ns, np.int64)  # (servers,) the node at its other end
        for (a, b), e in link_of.items():
            if a < ns:
                self._uplink[a] = e
                self._switch[a] = b
        self._uplink_l = self._uplink.tolist()
        self._switch_l = self._switch.tolist()
        nbrs: list[list[int]] = [[] for _ in range(n_nodes)]
        for a, b in link_of:
            nbrs[a].append(b)
        self._nbrs = [sorted(set(x)) for x in nbrs]
        pairs = np.array(sorted({(min(a, b), max(a, b)) for a, b in link_of}), np.int64).reshape(-1, 2)
        self._ea = np.concatenate([pairs[:, 0], pairs[:, 1]])  # (2 x edges,) both directions
        self._eb = np.concatenate([pairs[:, 1], pairs[:, 0]])
        self._n_nodes = n_nodes
        self._cache: OrderedDict[int, tuple[list[int], list[int]]] = OrderedDict()
        self._cache_size = cache

    def _tables(self, t: int) -> tuple[list[int], list[int]]:
        """(dist, count) toward node ``t``, as lists (fast to index from Python)."""
        hit = self._cache.get(t)
        if hit is not None:
            self._cache.move_to_end(t)
            return hit
        dist: npt.NDArray[np.int64] = np.full(self._n_nodes, -1, np.int64)
        count: npt.NDArray[np.int64] = np.zeros(self._n_nodes, np.int64)
        dist[t] = 0
        count[t] = 1
        level = 0
        ea, eb = self._ea, self._eb
        while True:
            grow = (dist[eb] == level) & ((dist[ea] == -1) | (dist[ea] == level + 1))
            if not grow.any():
                break
            a = ea[grow]
            dist[a] = level + 1
            np.add.at(count, a, count[eb[grow]])
            level += 1
        out = (dist.tolist(), count.tolist())
        self._cache[t] = out
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return out

    def candidates(self, u: int, v: int) -> list[Path]:
        su, sv = self._switch_l[u], self._switch_l[v]
        if su == sv:
            return [(self._uplink_l[u], self._uplink_l[v])]
        dist, count = self._tables(sv)
        n = count[su]
        if n == 0:
            return []
        start = (u + v) % n
        out = []
        for i in range(min(self.k, n)):
            rank = (start + i) % n
            links = [self._uplink_l[u]]
            x = su
            while x != sv:
                for y in self._nbrs[x]:
                    if dist[y] == dist[x] - 1:
                        c = count[y]
                        if rank < c:
                            links.append(self._link_of[(x, y)])
                            x = y
                            break
                        rank -= c
            links.append(self._uplink_l[v])
            out.append(tuple(links))
        return out


def servers_are_leaves(topology: Topology) -> bool:
    """Whether every server has exactly one neighbour and it is not a server (a tree-like fabric's hosts)."""
    ns = topology.n_servers
    ends = np.concatenate([topology.link_u, topology.link_v])
    others = np.concatenate([topology.link_v, topology.link_u])
    server_end = ends < ns
    if np.any(others[server_end] < ns):
        return False
    pairs = np.unique(np.c_[ends[server_end], others[server_end]], axis=0)
    return len(pairs) == ns and np.array_equal(pairs[:, 0], np.arange(ns))


def routing_for(topology: Topology, k: int = 3, generic: bool = False) -> Routing:
    """The structural routing for fabric topologies, the leaf routing for other graphs whose servers are leaves,
    networkx otherwise (or when ``generic``). All give the same candidates."""
    if generic:
        return GraphRouting(topology, k)
    if topology.fabric_shape is not None:
        return FabricRouting(topology, k)
    if servers_are_leaves(topology):
        return LeafRouting(topology, k)
    return GraphRouting(topology, k)
