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

:class:`FabricRouting` enumerates the paths from rack and pod (no search, no cache needed); :class:`GraphRouting`
asks networkx for all shortest paths of any graph and caches them per server pair. ``tests/test_netalloc.py`` checks
that both return the same candidates on the fabric presets.
"""

from __future__ import annotations

import itertools
from typing import Protocol

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


def routing_for(topology: Topology, k: int = 3, generic: bool = False) -> Routing:
    """The structural routing for fabric topologies, the networkx one otherwise (or when ``generic``)."""
    if topology.fabric_shape is not None and not generic:
        return FabricRouting(topology, k)
    return GraphRouting(topology, k)
