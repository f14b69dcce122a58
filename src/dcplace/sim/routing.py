"""Candidate paths between two servers: the k shortest simple paths (hop count), as tuples of link ids.

Semantics, shared by every routine so that they agree exactly (``paths="ksp"``, the default, the paper's: "k-shortest
paths", K = 3, appendix G):

1. All shortest paths (fewest hops) between the two servers, in canonical order: lexicographic by the sequence of
   node ids along the path.
2. Rotated by ``(u + v) mod n`` (``n`` = number of shortest paths) and cut to the first ``k``. The rotation is a
   deterministic stand-in for ECMP hashing: without it every pair would try the same ``k`` of gamma's four planes
   and one plane's links would never carry traffic.
3. When there are fewer than ``k`` shortest paths, the next shortest *simple* paths follow, ordered by (hops, node
   order), until there are ``k`` (or no more simple paths). On alpha and beta (two planes) a pair in one pod gets its
   two 4-hop paths and one 8-hop path through the other pod; two servers of one rack have one simple path only (a
   server is a leaf: any other route would pass its rack switch twice). Gamma and delta have four planes, so step 3
   never applies there.

``paths="ecmp"`` (dcplace's first reading, kept as a named variant) stops after step 2: only equal-cost paths. The
simulator then reserves, among the candidates, the one with the most free bandwidth on its tightest link.
:class:`WeightedRouting` is NALB's and NULB's own bandwidth-weighted k-shortest paths (appendix D.2), state-dependent.

:class:`FabricRouting` enumerates the paths from rack and pod (no search, no cache needed); :class:`LeafRouting`
serves any graph whose servers are leaves (one link each, to their rack switch: every tree-like fabric, generated or
loaded from a file): the shortest paths between two servers are those between their switches with the two server
links at the ends, so it keeps, per destination switch, the hop distance and the number of shortest paths from every
switch (one compiled breadth-first pass, :mod:`dcplace.sim.path_kernels`), and unranks the ``k`` paths it needs in
lexicographic order directly (no enumeration of the others); :class:`CountingRouting` does the same on the whole
graph, per destination server, for any other graph (the cached path service for general graphs);
:class:`GraphRouting` asks networkx for all shortest paths of any graph and caches them per server pair (the
reference, ``routing_for(..., generic=True)``). Step 3 runs Yen's algorithm (``networkx.shortest_simple_paths``) on
the switch graph (the whole graph for :class:`CountingRouting`), once per pair (cached). ``tests/sim/test_netalloc.py``
and ``tests/sim/test_routing_ksp.py`` check that all return the same candidates, and against every simple path
networkx lists.

The simulator asks for the widest candidate (:meth:`_Static.widest`, :func:`widest_of`): the first candidate whose
tightest link has the most free bandwidth, if that is at least the request's. The counting routings answer it inside
their kernel, building only the chosen path.
"""

from __future__ import annotations

import itertools
from collections import OrderedDict
from typing import TYPE_CHECKING, Literal, Protocol

import numpy as np
import numpy.typing as npt

from dcplace.cluster.topology import BW_SCALE, Topology
from dcplace.sim.path_kernels import bfs_counts, counted_widest_all, fabric_widest_all, unrank, warm, widest_ranked

if TYPE_CHECKING:
    import networkx as nx

Path = tuple[int, ...]
PathRule = Literal["ksp", "ecmp"]
PATH_RULES: tuple[PathRule, ...] = ("ksp", "ecmp")


class Routing(Protocol):
    k: int

    def candidates(self, u: int, v: int) -> list[Path]:
        """At most ``k`` link-id paths between servers ``u != v`` (the static candidates)."""
        ...

    def paths(self, u: int, v: int, free_bw: npt.NDArray[np.int64], bw: int) -> list[Path]:
        """The candidates the simulator checks now, given the free bandwidth (micro-units per link) and the
        request's ``bw``; static routings return :meth:`candidates`."""
        ...


def widest_of(paths: list[Path], free_bw: npt.NDArray[np.int64], bw: int) -> Path | None:
    """The first of ``paths`` whose tightest link has the most free bandwidth, if that is at least ``bw``; None
    otherwise (the simulator's choice among a pair's candidates)."""
    best: Path | None = None
    best_bottleneck = bw - 1
    for path in paths:
        bottleneck = min(int(free_bw[link]) for link in path)
        if bottleneck > best_bottleneck:
            best, best_bottleneck = path, bottleneck
    return best


class _Static:
    """Routing whose candidates do not depend on the network's state."""

    def candidates(self, u: int, v: int) -> list[Path]:
        raise NotImplementedError

    def paths(self, u: int, v: int, free_bw: npt.NDArray[np.int64], bw: int) -> list[Path]:
        return self.candidates(u, v)

    def widest(self, u: int, v: int, free_bw: npt.NDArray[np.int64], bw: int) -> Path | None:
        """:func:`widest_of` :meth:`paths` (the counting routings do it without building the candidates)."""
        return widest_of(self.paths(u, v, free_bw, bw), free_bw, bw)


def _node_links(graph: nx.Graph, nodes: list[int]) -> Path:
    return tuple(int(graph.edges[a, b]["link"]) for a, b in itertools.pairwise(nodes))


def longer_simple_paths(graph: nx.Graph, s: int, t: int, shortest_hops: int, need: int) -> list[list[int]]:
    """Up to ``need`` simple node paths from ``s`` to ``t`` with more than ``shortest_hops`` hops, the shortest first,
    ties in node order (step 3 of the module docstring). Yen's algorithm yields paths in non-decreasing hop count, so
    it stops at the first path longer than the ``need``-th kept one."""
    import networkx as nx

    kept: list[list[int]] = []
    for p in nx.shortest_simple_paths(graph, s, t):
        hops = len(p) - 1
        if hops <= shortest_hops:
            continue
        if len(kept) >= need and hops > len(kept[need - 1]) - 1:
            break
        kept.append(p)
    kept.sort(key=lambda p: (len(p), p))
    return kept[:need]


class _SwitchPaths:
    """Step 3 for graphs whose servers are leaves: longer simple paths between two switches, on the graph without
    its servers (a leaf is never inside a path), cached per (switch, switch, count)."""

    def __init__(self, topology: Topology) -> None:
        full = topology.to_networkx()
        self.graph = full.subgraph(range(topology.n_servers, topology.n_nodes)).copy()
        self._cache: dict[tuple[int, int, int, int], list[Path]] = {}

    def links(self, su: int, sv: int, shortest_hops: int, need: int) -> list[Path]:
        key = (su, sv, shortest_hops, need)
        hit = self._cache.get(key)
        if hit is None:
            hit = [_node_links(self.graph, p) for p in longer_simple_paths(self.graph, su, sv, shortest_hops, need)]
            self._cache[key] = hit
        return hit


def select(paths: list[Path], u: int, v: int, k: int) -> list[Path]:
    """Rotate canonical-order ``paths`` by ``(u + v) mod n`` and keep the first ``k``."""
    n = len(paths)
    if n == 0:
        return []
    start = (u + v) % n
    return [paths[(start + i) % n] for i in range(min(k, n))]


class FabricRouting(_Static):
    """Paths from the Fabric structure: 1 path inside a rack, one per plane inside a pod, one per (plane, spine)
    across pods; with ``paths="ksp"``, longer ones where these are fewer than ``k`` (:class:`_SwitchPaths`)."""

    def __init__(self, topology: Topology, k: int = 3, paths: PathRule = "ksp") -> None:
        shape = topology.fabric_shape
        if shape is None:
            raise ValueError("FabricRouting needs a topology built by dcplace.cluster.topology.fabric")
        self.shape = shape
        self.k = k
        self.rule = paths
        self._rack = topology.server_rack.tolist()
        self._pod = topology.server_pod.tolist()
        self._rack_node = [shape.rack_node(r) for r in range(shape.racks)] if paths == "ksp" else []
        self._longer = _SwitchPaths(topology) if paths == "ksp" else None
        self._racks, self._pods = topology.server_rack, topology.server_pod
        self.widest_all = self._widest_all if paths == "ecmp" or shape.planes >= k else None
        """The widest candidate of every pair of a new server and those picked before it, in one compiled pass
        (:func:`dcplace.sim.path_kernels.fabric_widest_all`), where no pair needs a longer path; None otherwise
        (alpha and beta under ``ksp``: two planes, k = 3), where the simulator asks :meth:`widest` pair by pair. A
        request over the whole of delta (2,560 servers, 3.3 million pairs) was decided in 29 s pair by pair. The
        pass enumerates the Fabric's own paths: a subclass that changes :meth:`candidates` sets this to None."""
        if self.widest_all is not None:
            warm()

    def _widest_all(self, us: npt.NDArray[np.int64], v: int, free_bw: npt.NDArray[np.int64], bw: int,
                    used: npt.NDArray[np.bool_]) -> int:  # fmt: skip
        """:func:`~dcplace.sim.path_kernels.fabric_widest_all` on this fabric: -1 where every pair of ``v`` and a
        server of ``us`` has a candidate of at least ``bw`` (their links marked in ``used``), else the first that
        has none (nothing marked)."""
        s = self.shape
        return int(fabric_widest_all(us, v, free_bw, bw, self.k, self._racks, self._pods, s.n_servers, s.racks,
                                     s.planes, s.spines_per_plane, used))  # fmt: skip

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
        out = select(paths, u, v, self.k)
        if self._longer is not None and len(out) < self.k:
            hops = 2 if pu == pv else 4  # between the rack switches
            middle = self._longer.links(self._rack_node[ru], self._rack_node[rv], hops, self.k - len(out))
            out += [(u, *m, v) for m in middle]
        return out


class GraphRouting(_Static):
    """Paths of any graph from networkx's all-shortest-paths search (and Yen's for step 3), cached per server
    pair."""

    def __init__(self, topology: Topology, k: int = 3, paths: PathRule = "ksp") -> None:
        self.graph = topology.to_networkx()
        self.k = k
        self.rule = paths
        self._cache: dict[tuple[int, int], list[Path]] = {}

    def candidates(self, u: int, v: int) -> list[Path]:
        key = (u, v)
        hit = self._cache.get(key)
        if hit is not None:
            return hit
        import networkx as nx

        node_paths = sorted(nx.all_shortest_paths(self.graph, u, v))
        paths = [_node_links(self.graph, p) for p in node_paths]
        out = select(paths, u, v, self.k)
        if self.rule == "ksp" and len(out) < self.k:
            more = longer_simple_paths(self.graph, u, v, len(node_paths[0]) - 1, self.k - len(out))
            out += [_node_links(self.graph, p) for p in more]
        self._cache[key] = out
        return out


BATCH_FROM = 8
"""Pairs from which the simulator checks a pick's pairs at once (a routing's ``widest_all``) rather than one by one:
below it the arrays and passes cost more than they save (the paper's requests mostly take a few servers, and ran
2-6 % slower with every pick batched)."""

TABLE_BYTES = 256 * 2**20
"""Memory the counting routings' tables may take (one routing): the cache holds fewer destinations on big graphs."""


class _Counted(_Static):
    """Counting and unranking on a graph (the module docstring's steps 1-2 without enumerating paths), compiled
    (:mod:`dcplace.sim.path_kernels`).

    For a destination node ``t``: ``dist[x]`` hops from node ``x`` to ``t`` and ``count[x]`` shortest paths from
    ``x`` to ``t`` (``count[t] = 1``, ``count[x]`` = the sum of ``count[y]`` over neighbours ``y`` one hop closer),
    one breadth-first pass, kept for the last ``cache`` destinations (``(nodes,)`` int64 twice each; fewer where
    that would pass :data:`TABLE_BYTES`, but at least 16). The
    ``r``-th shortest path from ``s`` in lexicographic node order follows, at each node, the neighbours one hop
    closer in increasing id, skipping whole subtrees of ``count[y]`` paths: per pair O(k x hops x degree), no
    Python object per path; :meth:`widest` checks the candidates' free bandwidth in the same pass and builds only
    the chosen path. Subclasses say which graph (by calling ``_build(n_nodes, link_of, cache)`` over its node
    indices) and how a server pair maps onto it (:meth:`_ends`)."""

    k: int
    rule: PathRule

    def _build(self, n_nodes: int, link_of: dict[tuple[int, int], int], cache: int) -> None:
        """CSR of the graph on ``n_nodes`` nodes, ``link_of[(a, b)]`` the link between nodes ``a`` and ``b`` (both
        orders; one per pair)."""
        nbrs: list[list[tuple[int, int]]] = [[] for _ in range(n_nodes)]
        for (a, b), e in link_of.items():
            nbrs[a].append((b, e))
        for x in nbrs:
            x.sort()
        start = np.zeros(n_nodes + 1, np.int64)
        start[1:] = np.cumsum([len(x) for x in nbrs])
        self._nb_start = start
        self._nb_node = np.array([y for x in nbrs for y, _ in x], np.int64)
        self._nb_link = np.array([e for x in nbrs for _, e in x], np.int64)
        self._n_nodes = n_nodes
        self._cache: OrderedDict[int, tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]] = OrderedDict()
        self._cache_size = min(cache, max(16, TABLE_BYTES // (16 * max(n_nodes, 1))))
        self._out = np.zeros(n_nodes + 2, np.int64)  # a path's links: at most nodes - 1, plus the two ends
        self._scratch = np.zeros(n_nodes + 2, np.int64)
        warm()

    def _tables(self, t: int) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.int64]]:
        """(dist, count) toward graph node ``t``."""
        hit = self._cache.get(t)
        if hit is not None:
            self._cache.move_to_end(t)
            return hit
        dist = np.empty(self._n_nodes, np.int64)
        count = np.empty(self._n_nodes, np.int64)
        bfs_counts(t, self._nb_start, self._nb_node, dist, count)
        self._cache[t] = (dist, count)
        if len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)
        return dist, count

    def _ends(self, u: int, v: int) -> tuple[int, int, int, int]:
        """(s, t, pre, post): the pair's graph nodes and the links before / after (-1: none)."""
        raise NotImplementedError

    def _longer(self, s: int, t: int, hops: int, need: int) -> list[Path]:
        """Step 3: up to ``need`` longer simple ``s -> t`` paths (links, without ``pre`` / ``post``)."""
        raise NotImplementedError

    def candidates(self, u: int, v: int) -> list[Path]:
        s, t, pre, post = self._ends(u, v)
        if s == t:
            return [(pre, post)]
        dist, count = self._tables(t)
        n = int(count[s])
        if n == 0:
            return []
        start = (u + v) % n
        out = []
        buf, csr = self._out, (self._nb_start, self._nb_node, self._nb_link)
        for i in range(min(self.k, n)):
            size = unrank(s, t, pre, post, (start + i) % n, dist, count, *csr, buf)
            out.append(tuple(buf[:size].tolist()))
        if self.rule == "ksp" and len(out) < self.k:
            ends = ((pre,) if pre >= 0 else (), (post,) if post >= 0 else ())
            out += [(*ends[0], *m, *ends[1]) for m in self._longer(s, t, int(dist[s]), self.k - len(out))]
        return out

    def widest(self, u: int, v: int, free_bw: npt.NDArray[np.int64], bw: int) -> Path | None:
        """:func:`widest_of` the candidates, without building them: the same path."""
        s, t, pre, post = self._ends(u, v)
        if s == t:
            return (pre, post) if min(int(free_bw[pre]), int(free_bw[post])) >= bw else None
        dist, count = self._tables(t)
        n = int(count[s])
        if n == 0:
            return None
        if self.rule == "ksp" and n < self.k:  # longer paths follow: the general loop (rare on wide fabrics)
            return widest_of(self.candidates(u, v), free_bw, bw)
        size = widest_ranked(
            s,
            t,
            pre,
            post,
            (u + v) % n,
            min(self.k, n),
            dist,
            count,
            self._nb_start,
            self._nb_node,
            self._nb_link,
            free_bw,
            bw,
            self._out,
            self._scratch,
        )
        return tuple(self._out[:size].tolist()) if size else None


def _link_table(topology: Topology) -> dict[tuple[int, int], int]:
    """(node, node) -> link, both orders; of parallel links the last one, as networkx's Graph keeps it."""
    link_of: dict[tuple[int, int], int] = {}
    for e, (a, b) in enumerate(zip(topology.link_u.tolist(), topology.link_v.tolist(), strict=True)):
        link_of[(a, b)] = link_of[(b, a)] = e
    return link_of


class LeafRouting(_Counted):
    """Paths of any graph whose servers are leaves (:func:`servers_are_leaves`): the shortest paths between two
    servers are those between their switches with the two server links at the ends, so the counting runs on the
    switch graph (nodes ``n_servers ..``, numbered from 0 there), one table per destination switch, shared by every
    server pair of the two racks."""

    def __init__(self, topology: Topology, k: int = 3, cache: int = 4096, paths: PathRule = "ksp") -> None:
        if not servers_are_leaves(topology):
            raise ValueError("LeafRouting needs every server to have exactly one link (to its switch)")
        self.k = k
        self.rule = paths
        self._switch_paths = _SwitchPaths(topology) if paths == "ksp" else None
        ns = topology.n_servers
        self._ns = ns
        link_of = _link_table(topology)
        uplink = [0] * ns
        switch = [0] * ns
        for (a, b), e in link_of.items():
            if a < ns:
                uplink[a], switch[a] = e, b - ns
        self._uplink_l, self._switch_l = uplink, switch
        self._uplink, self._switch = np.array(uplink, np.int64), np.array(switch, np.int64)
        between = {(a - ns, b - ns): e for (a, b), e in link_of.items() if a >= ns and b >= ns}
        self._build(topology.n_nodes - ns, between, cache)

    def _ends(self, u: int, v: int) -> tuple[int, int, int, int]:
        return self._switch_l[u], self._switch_l[v], self._uplink_l[u], self._uplink_l[v]

    def widest_all(self, us: npt.NDArray[np.int64], v: int, free_bw: npt.NDArray[np.int64], bw: int,
                   used: npt.NDArray[np.bool_]) -> int:  # fmt: skip
        """:meth:`widest` of every pair of server ``v`` and a server of ``us``: -1 where each has a candidate of at
        least ``bw``, their links then marked in ``used``; otherwise the index of a pair without one, nothing marked.
        The pairs sharing a destination switch go through one compiled pass
        (:func:`~dcplace.sim.path_kernels.counted_widest_all`), those with fewer shortest paths than k under ksp
        through :meth:`widest`. The passes unrank the counted shortest paths, not :meth:`candidates`: a subclass
        that changes those overrides this too. (The simulator asks from :data:`BATCH_FROM` pairs on.)"""
        low = us < v  # the pair (a, b) with a < b is routed from a's switch to b's, as widest(a, b) routes it
        s = np.where(low, self._switch[us], self._switch_l[v])
        pre = np.where(low, self._uplink[us], self._uplink_l[v])
        t = np.where(low, self._switch_l[v], self._switch[us])
        post = np.where(low, self._uplink_l[v], self._uplink[us])
        uv = us + v
        mark = np.zeros_like(used)
        general = np.zeros(len(us), np.bool_)
        for dest in np.unique(t).tolist():
            at = np.flatnonzero(t == dest)
            dist, count = self._tables(dest)
            flagged = np.zeros(len(at), np.bool_)
            failed = counted_widest_all(s[at], pre[at], dest, post[at], uv[at], self.k, self.rule == "ksp", dist,
                                        count, self._nb_start, self._nb_node, self._nb_link, free_bw, bw, mark,
                                        flagged, self._out, self._scratch)  # fmt: skip
            if failed >= 0:
                return int(at[failed])
            general[at] = flagged
        for i in np.flatnonzero(general).tolist():  # fewer shortest paths than k: longer ones too, the general loop
            u = int(us[i])
            path = self.widest(u, v, free_bw, bw) if u < v else self.widest(v, u, free_bw, bw)
            if path is None:
                return i
            mark[list(path)] = True
        used |= mark
        return -1

    def _longer(self, s: int, t: int, hops: int, need: int) -> list[Path]:
        assert self._switch_paths is not None
        return self._switch_paths.links(s + self._ns, t + self._ns, hops, need)


class CountingRouting(_Counted):
    """Paths of any graph (servers may have several links, or forward), by counting and unranking on the whole
    graph: the cached path service for general graphs (step 3 by Yen's algorithm on the whole graph, cached per
    pair). Same candidates as :class:`GraphRouting`.

    A server with one neighbour ``a`` (other than the pair's other server) is a leaf: every path from it starts with
    its link to ``a``, so the pair is routed from ``a`` with that link in front (to: ``b``, the link at the end).
    Tables are therefore kept per destination attachment node (the last ``cache``): one per rack switch on a
    tree-like fabric, one per multi-homed server."""

    def __init__(self, topology: Topology, k: int = 3, cache: int = 1024, paths: PathRule = "ksp") -> None:
        self.k = k
        self.rule = paths
        self._topology = topology
        self._graph: nx.Graph | None = None
        self._longer_cache: dict[tuple[int, int, int, int], list[Path]] = {}
        self._build(topology.n_nodes, _link_table(topology), cache)
        ns = topology.n_servers
        start, node, link = self._nb_start[: ns + 1], self._nb_node, self._nb_link
        leaf = (start[1:] - start[:-1]) == 1
        first = start[:-1].clip(max=max(len(node) - 1, 0))
        self._att = np.where(leaf, node[first] if len(node) else -1, -1).tolist()  # (servers,) sole neighbour or -1
        self._att_link = np.where(leaf, link[first] if len(link) else -1, -1).tolist()

    def _ends(self, u: int, v: int) -> tuple[int, int, int, int]:
        s, pre, t, post = u, -1, v, -1
        a, b = self._att[u], self._att[v]
        if a >= 0 and a != v:
            s, pre = a, self._att_link[u]
        if b >= 0 and b != u:
            t, post = b, self._att_link[v]
        return s, t, pre, post

    def _longer(self, s: int, t: int, hops: int, need: int) -> list[Path]:
        key = (s, t, hops, need)
        hit = self._longer_cache.get(key)
        if hit is None:
            if self._graph is None:
                self._graph = self._topology.to_networkx()
            g = self._graph
            hit = [_node_links(g, p) for p in longer_simple_paths(g, s, t, hops, need)]
            self._longer_cache[key] = hit
        return hit


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


def routing_for(topology: Topology, k: int = 3, generic: bool = False, paths: PathRule = "ksp") -> Routing:
    """The structural routing for fabric topologies, the leaf routing for other graphs whose servers are leaves,
    the counting routing on the whole graph otherwise; networkx when ``generic``. All give the same candidates.
    ``paths``: ``ksp`` (k shortest simple paths, the paper's) or ``ecmp`` (equal-cost only, dcplace's first
    reading)."""
    if paths not in PATH_RULES:
        raise ValueError(f"paths must be one of {PATH_RULES}, got {paths!r}")
    if generic:
        return GraphRouting(topology, k, paths)
    if topology.fabric_shape is not None:
        return FabricRouting(topology, k, paths)
    if servers_are_leaves(topology):
        return LeafRouting(topology, k, paths=paths)
    return CountingRouting(topology, k, paths=paths)


class WeightedRouting:
    """NALB's and NULB's own routing (appendix D.2, after Zervas et al. 2018): the ``k`` shortest simple paths when
    each link weighs ``1 / free bandwidth`` (in link units; "k-shortest path routing with bandwidth weighting only",
    the paper leaves latency out), over the links that still have the request's bandwidth free. Recomputed at every
    check (it depends on the state). Two servers of one rack have their one path; otherwise Yen's algorithm runs on
    the switch graph when the servers are leaves, on the whole graph when not. Free bandwidth changes only when a
    request is accepted or leaves, so the searches are memoised per (switch, switch, bandwidth) until it changes
    (one array comparison per call): a request's servers in the same two racks share one search."""

    def __init__(self, topology: Topology, k: int = 3) -> None:
        self.k = k
        self._leaves = servers_are_leaves(topology)
        full = topology.to_networkx()
        self.graph = full.subgraph(range(topology.n_servers, topology.n_nodes)).copy() if self._leaves else full
        self._switch: list[int] = []
        self._uplink: list[int] = []
        self._seen: npt.NDArray[np.int64] | None = None  # the free bandwidth the memo was computed on
        self._memo: dict[tuple[int, int, int], list[Path]] = {}  # (from, to, bw) -> paths, while it holds
        if self._leaves:
            for sv in range(topology.n_servers):
                (nbr,) = full.neighbors(sv)
                self._switch.append(int(nbr))
                self._uplink.append(int(full.edges[sv, nbr]["link"]))

    def candidates(self, u: int, v: int) -> list[Path]:
        """The candidates of an idle network (every link at capacity: hop count decides)."""
        raise NotImplementedError("WeightedRouting depends on the free bandwidth: use paths()")

    def widest(self, u: int, v: int, free_bw: npt.NDArray[np.int64], bw: int) -> Path | None:
        """:func:`widest_of` :meth:`paths`."""
        return widest_of(self.paths(u, v, free_bw, bw), free_bw, bw)

    def paths(self, u: int, v: int, free_bw: npt.NDArray[np.int64], bw: int) -> list[Path]:
        import networkx as nx

        fb = free_bw
        if self._leaves:
            if fb[self._uplink[u]] < bw or fb[self._uplink[v]] < bw:
                return []
            if self._switch[u] == self._switch[v]:
                return [(self._uplink[u], self._uplink[v])]
            s, t = self._switch[u], self._switch[v]
        else:
            s, t = u, v

        if self._seen is None or not np.array_equal(self._seen, fb):  # bandwidth changed: forget the searches
            self._seen = fb.copy()
            self._memo.clear()
        key = (s, t, bw)
        out = self._memo.get(key)
        if out is None:
            free = fb.tolist()

            def weight(a: int, b: int, d: dict[str, int]) -> float | None:
                f = free[d["link"]]
                return BW_SCALE / f if f >= bw and f > 0 else None  # None hides the link (networkx's convention)

            try:
                nodes = list(itertools.islice(nx.shortest_simple_paths(self.graph, s, t, weight=weight), self.k))
            except nx.NetworkXNoPath:
                nodes = []
            out = self._memo[key] = [_node_links(self.graph, p) for p in nodes]
        if self._leaves:
            out = [(self._uplink[u], *m, self._uplink[v]) for m in out]
        return out
