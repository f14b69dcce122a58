"""Datacenter network topologies: servers with CPU and memory, switches, links with bandwidth capacity and tier.

A :class:`Topology` is immutable arrays. Node ids put the servers first (``0 .. n_servers - 1``) so that server ids
index the per-server arrays directly; switches follow. Bandwidth is held in integer micro-units
(``BW_SCALE`` per unit of link capacity) so that reserving and releasing bandwidth is exact: a ledger that balances
in floating point only up to rounding cannot be checked for "everything is free after all departures".

Two ways to build one:

* :func:`fabric` / :func:`fabric_from_oversubscription` / :func:`preset`: the 3-tier Fabric design of the Nara paper
  (servers -> rack switch -> fabric switches -> spine switches). Racks in the same *pod* share the pod's fabric
  switches ("neighbouring racks"); fabric switch ``f`` of every pod connects to the spines of *plane* ``f``. The
  structure is kept (:class:`FabricShape`) so that routing can enumerate paths from rack and pod directly.
* :func:`from_networkx` / :func:`load_topology`: any graph whose server nodes carry CPU and memory and whose edges
  carry a capacity (and optionally a tier). Routing then falls back to a generic k-shortest-paths search.

Deriving the presets (the paper's Table 8 gives servers per rack, racks and two oversubscription ratios, not the
switch counts). With ``s`` servers per rack, link capacities ``c_sr``, ``c_rf``, ``c_fs`` per tier:

* server-rack oversubscription ``o_sr = s * c_sr / (F * c_rf)`` fixes ``F``, the fabric uplinks of a rack (= fabric
  switches per pod = planes): alpha ``10*1/(F*1) = 5 -> F = 2``; beta ``5*1/(F*1) = 5/2 -> F = 2``; gamma and delta
  ``40*1/(F*2) = 5 -> F = 4``.
* rack-fabric oversubscription ``o_rf = p * c_rf / (S * c_fs)`` per fabric switch with ``p`` racks per pod and ``S``
  spine uplinks per fabric switch. We take ``S = 1`` (the fewest spines: one spine per plane) which fixes
  ``p = o_rf * c_fs / c_rf``: alpha ``2``, beta ``4``, gamma and delta ``2``.

So alpha has 2 pods of 2 racks, 2 fabric switches per pod and 2 spines; beta 2 pods of 4 racks (twice alpha's
rack-fabric oversubscription, as the paper says), 2 spines; gamma 8 pods, 4 spines; delta 32 pods, 4 spines.
``tier_oversubscription`` recomputes both ratios from the built links, and the tests check them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.inputs import COUNT, MAX_BANDWIDTH, MIN_BANDWIDTH, Range, json_number, number, read_csv
from dcplace.jsonio import read_json_object

CAPACITY = Range(MIN_BANDWIDTH, MAX_BANDWIDTH)
"""A link capacity in bandwidth units."""
TIER = Range(-1, 2, integer=True)

if TYPE_CHECKING:
    import networkx as nx

BW_SCALE = 1_000_000
"""Integer bandwidth units per unit of link capacity."""

TIER_NAMES = ("server-rack", "rack-fabric", "fabric-spine")
"""Link tiers of a Fabric topology, indexed by the ``link_tier`` code; -1 means not known (generic graphs)."""

IntArray = npt.NDArray[np.int64]


@dataclass(frozen=True)
class FabricShape:
    """The structure of a Fabric topology, enough to enumerate paths without searching."""

    servers_per_rack: int
    racks: int
    racks_per_pod: int
    planes: int  # fabric switches per pod = fabric uplinks per rack
    spines_per_plane: int

    @property
    def pods(self) -> int:
        return self.racks // self.racks_per_pod

    @property
    def n_servers(self) -> int:
        return self.servers_per_rack * self.racks

    def rack_node(self, rack: int) -> int:
        """Node id of a rack switch (servers first, then racks)."""
        return self.n_servers + rack

    # Link ids: server-rack links first (id = server), then rack-fabric, then fabric-spine.
    def rack_fabric_link(self, rack: int, plane: int) -> int:
        return self.n_servers + rack * self.planes + plane

    def fabric_spine_link(self, pod: int, plane: int, spine: int) -> int:
        return self.n_servers + self.racks * self.planes + (pod * self.planes + plane) * self.spines_per_plane + spine


@dataclass(frozen=True, eq=False)
class Topology:
    """A datacenter network. Servers are nodes ``0 .. n_servers - 1``; links are undirected."""

    name: str
    node_names: tuple[str, ...]  # (nodes,)
    server_cpu: IntArray  # (servers,) int64 CPU units
    server_mem: IntArray  # (servers,) int64 memory units
    link_u: IntArray  # (links,) int64 node id
    link_v: IntArray  # (links,) int64 node id
    link_cap: IntArray  # (links,) int64 bandwidth in micro-units (BW_SCALE per unit)
    link_tier: IntArray  # (links,) int64 index into TIER_NAMES, -1 if unknown
    server_rack: IntArray  # (servers,) int64 rack index, -1 if unknown
    server_pod: IntArray  # (servers,) int64 pod index (racks sharing fabric switches), -1 if unknown
    fabric_shape: FabricShape | None = None
    _graph_cache: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    @property
    def n_servers(self) -> int:
        return int(self.server_cpu.shape[0])

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_links(self) -> int:
        return int(self.link_u.shape[0])

    @property
    def edge_index(self) -> IntArray:
        """(2, 2 * links) int64: every link in both directions (link ``i`` is columns ``i`` and ``links + i``)."""
        return np.stack([np.concatenate([self.link_u, self.link_v]), np.concatenate([self.link_v, self.link_u])])

    def summary(self) -> str:
        tiers = ", ".join(
            f"{TIER_NAMES[t]} {int((self.link_tier == t).sum())}" for t in range(3) if (self.link_tier == t).any()
        )
        return (
            f"{self.name}: {self.n_servers} servers, {self.n_nodes - self.n_servers} switches, {self.n_links} links"
            + (f" ({tiers})" if tiers else "")
        )

    def to_networkx(self) -> nx.Graph:
        """The graph with node attributes ``server, cpu, mem`` and edge attributes ``capacity`` (units), ``tier``,
        ``link`` (link id). Built once and cached."""
        if "nx" not in self._graph_cache:
            import networkx as nx

            g = nx.Graph()
            for i, name in enumerate(self.node_names):
                is_server = i < self.n_servers
                g.add_node(
                    i,
                    name=name,
                    server=is_server,
                    cpu=int(self.server_cpu[i]) if is_server else 0,
                    mem=int(self.server_mem[i]) if is_server else 0,
                )
            for e in range(self.n_links):
                g.add_edge(
                    int(self.link_u[e]),
                    int(self.link_v[e]),
                    capacity=self.link_cap[e] / BW_SCALE,
                    tier=int(self.link_tier[e]),
                    link=e,
                )
            self._graph_cache["nx"] = g
        graph: nx.Graph = self._graph_cache["nx"]
        return graph

    def tier_oversubscription(self) -> tuple[Fraction, Fraction]:
        """(server-rack, rack-fabric) oversubscription recomputed from the links: for each switch of the upper tier,
        capacity flowing up into it over capacity flowing further up out of it. Raises ValueError unless every
        switch of a tier has the same ratio."""
        ratios = []
        for lower, upper in ((0, 1), (1, 2)):
            per_switch: dict[int, list[int]] = {}
            for e in range(self.n_links):
                tier = int(self.link_tier[e])
                if tier not in (lower, upper):
                    continue
                # The switch of this tier: the link's endpoint shared by both tiers (the higher node id of a
                # down-link, the lower node id of an up-link, by construction of the fabric builder).
                u, v = int(self.link_u[e]), int(self.link_v[e])
                switch = max(u, v) if tier == lower else min(u, v)
                down_up = per_switch.setdefault(switch, [0, 0])
                down_up[0 if tier == lower else 1] += int(self.link_cap[e])
            values = {Fraction(d, u) for d, u in per_switch.values() if u}
            if len(values) != 1:
                raise ValueError(f"tiers {lower}/{upper} have no single oversubscription ratio: {sorted(values)}")
            ratios.append(values.pop())
        return ratios[0], ratios[1]


def fabric(
    servers_per_rack: int,
    racks: int,
    racks_per_pod: int,
    planes: int,
    spines_per_plane: int = 1,
    *,
    capacity: tuple[float, float, float] = (1.0, 1.0, 1.0),
    server_cpu: int = 10,
    server_mem: int = 10,
    name: str = "fabric",
) -> Topology:
    """A Fabric topology from its switch counts. ``capacity`` is the link capacity of the server-rack, rack-fabric
    and fabric-spine tiers in bandwidth units."""
    for value, what in (
        (servers_per_rack, "servers per rack"),
        (racks, "racks"),
        (racks_per_pod, "racks per pod"),
        (planes, "fabric switches per pod"),
        (spines_per_plane, "spines per plane"),
        (server_cpu, "server CPU"),
        (server_mem, "server memory"),
    ):
        if value < 1:
            raise InputError(f"{what} must be at least 1, got {value}")
    if racks % racks_per_pod:
        raise InputError(f"{racks} racks do not split into pods of {racks_per_pod}")
    if min(capacity) <= 0:
        raise InputError(f"link capacities must be positive, got {capacity}")
    shape = FabricShape(servers_per_rack, racks, racks_per_pod, planes, spines_per_plane)
    n = shape.n_servers
    pods = shape.pods
    rack0 = n
    fabric0 = rack0 + racks
    spine0 = fabric0 + pods * planes
    names = (
        [f"s{i}" for i in range(n)]
        + [f"r{r}" for r in range(racks)]
        + [f"f{p}.{f}" for p in range(pods) for f in range(planes)]
        + [f"sp{f}.{s}" for f in range(planes) for s in range(spines_per_plane)]
    )
    server_rack = np.arange(n, dtype=np.int64) // servers_per_rack
    u: list[int] = list(range(n))
    v: list[int] = [rack0 + int(r) for r in server_rack]
    tier = [0] * n
    for r in range(racks):
        for f in range(planes):
            u.append(rack0 + r)
            v.append(fabric0 + (r // racks_per_pod) * planes + f)
            tier.append(1)
    for p in range(pods):
        for f in range(planes):
            for s in range(spines_per_plane):
                u.append(fabric0 + p * planes + f)
                v.append(spine0 + f * spines_per_plane + s)
                tier.append(2)
    tiers = np.array(tier, dtype=np.int64)
    caps = np.array([round(c * BW_SCALE) for c in capacity], dtype=np.int64)[tiers]
    return Topology(
        name=name,
        node_names=tuple(names),
        server_cpu=np.full(n, server_cpu, dtype=np.int64),
        server_mem=np.full(n, server_mem, dtype=np.int64),
        link_u=np.array(u, dtype=np.int64),
        link_v=np.array(v, dtype=np.int64),
        link_cap=caps,
        link_tier=tiers,
        server_rack=server_rack,
        server_pod=server_rack // racks_per_pod,
        fabric_shape=shape,
    )


def fabric_from_oversubscription(
    servers_per_rack: int,
    racks: int,
    server_rack_oversubscription: Fraction,
    rack_fabric_oversubscription: Fraction,
    *,
    capacity: tuple[float, float, float] = (1.0, 1.0, 1.0),
    server_cpu: int = 10,
    server_mem: int = 10,
    name: str = "fabric",
) -> Topology:
    """A Fabric topology with one spine uplink per fabric switch whose switch counts follow from the two
    oversubscription ratios (see the module docstring for the derivation)."""
    c_sr, c_rf, c_fs = (Fraction(c).limit_denominator(10**6) for c in capacity)
    planes = servers_per_rack * c_sr / (Fraction(server_rack_oversubscription) * c_rf)
    racks_per_pod = Fraction(rack_fabric_oversubscription) * c_fs / c_rf
    if planes.denominator != 1 or racks_per_pod.denominator != 1:
        raise InputError(
            f"no whole number of fabric switches ({planes}) or racks per pod ({racks_per_pod}) gives "
            f"oversubscription {server_rack_oversubscription} and {rack_fabric_oversubscription}"
        )
    return fabric(
        servers_per_rack,
        racks,
        int(racks_per_pod),
        int(planes),
        1,
        capacity=capacity,
        server_cpu=server_cpu,
        server_mem=server_mem,
        name=name,
    )


@dataclass(frozen=True)
class PresetSpec:
    """One column of the Nara paper's Table 8 (plus appendix G's link capacities)."""

    servers_per_rack: int
    racks: int
    rack_fabric: Fraction
    server_rack: Fraction
    capacity: tuple[float, float, float]
    episode_requests: int  # the paper's test episode length on this topology


PRESETS: dict[str, PresetSpec] = {
    "alpha": PresetSpec(10, 4, Fraction(2), Fraction(5), (1.0, 1.0, 1.0), 128),
    "beta": PresetSpec(5, 8, Fraction(4), Fraction(5, 2), (1.0, 1.0, 1.0), 128),
    "gamma": PresetSpec(40, 16, Fraction(2), Fraction(5), (1.0, 2.0, 2.0), 896),
    "delta": PresetSpec(40, 64, Fraction(2), Fraction(5), (1.0, 2.0, 2.0), 4096),
}


def preset(name: str) -> Topology:
    """The paper's topology ``alpha``, ``beta``, ``gamma`` or ``delta``."""
    try:
        spec = PRESETS[name]
    except KeyError:
        raise InputError(
            f"topology must be one of {', '.join(PRESETS)} or a file, got {name!r}", field="topology"
        ) from None
    return fabric_from_oversubscription(
        spec.servers_per_rack, spec.racks, spec.server_rack, spec.rack_fabric, capacity=spec.capacity, name=name
    )


def scaled_delta(factor: int) -> Topology:
    """delta with ``factor`` times as many racks (same oversubscription): the scale benchmarks' topology."""
    spec = PRESETS["delta"]
    return fabric_from_oversubscription(
        spec.servers_per_rack,
        spec.racks * factor,
        spec.server_rack,
        spec.rack_fabric,
        capacity=spec.capacity,
        name=f"delta-x{factor}",
    )


# --- generic graphs ------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _NodeSpec:
    name: str
    cpu: int
    mem: int


@dataclass(frozen=True)
class _LinkSpec:
    u: str
    v: str
    capacity: float
    tier: int
    where: tuple[int | None, str]  # (line, field prefix) for error messages


def _build_generic(nodes: list[_NodeSpec], links: list[_LinkSpec], name: str, path: str | None) -> Topology:
    servers = [n for n in nodes if n.cpu > 0 or n.mem > 0]
    switches = [n for n in nodes if not (n.cpu > 0 or n.mem > 0)]
    if not servers:
        raise InputError("the topology has no server (a node with cpu or mem above 0)", path=path)
    order = servers + switches
    index = {n.name: i for i, n in enumerate(order)}
    u, v, cap, tier = [], [], [], []
    pairs: set[frozenset[str]] = set()
    for link in links:
        line, prefix = link.where
        pair = frozenset((link.u, link.v))
        if pair in pairs:  # a second link would make a server a switch (CSV) or double a pair's bandwidth
            raise InputError(f"a second link between {link.u!r} and {link.v!r}; give one link with their capacity",
                             path=path, line=line, field=f"{prefix}target")  # fmt: skip
        pairs.add(pair)
        for end, fld in ((link.u, "source"), (link.v, "target")):
            if end not in index:
                raise InputError(f"unknown node {end!r}", path=path, line=line, field=f"{prefix}{fld}")
        if link.u == link.v:
            raise InputError(f"a link from {link.u!r} to itself", path=path, line=line, field=f"{prefix}target")
        if not CAPACITY.ok(np.array([link.capacity]))[0]:
            raise InputError(
                f"must be {CAPACITY.rule()}, got {link.capacity}", path=path, line=line, field=f"{prefix}capacity"
            )
        if link.tier not in (-1, 0, 1, 2):
            raise InputError(
                f"tier must be 0, 1, 2 or -1, got {link.tier}", path=path, line=line, field=f"{prefix}tier"
            )
        u.append(index[link.u])
        v.append(index[link.v])
        cap.append(round(link.capacity * BW_SCALE))
        tier.append(link.tier)
    n = len(servers)
    # Connectivity: every server must reach server 0 (union-find over the links).
    parent = list(range(len(order)))

    def find(x: int) -> int:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    for a, b in zip(u, v, strict=True):
        parent[find(a)] = find(b)
    for i in range(1, n):
        if find(i) != find(0):
            raise InputError(f"server {order[i].name!r} has no path to server {order[0].name!r}", path=path)
    # A server's rack is the switch it hangs from when it has exactly one link; pods are not known.
    server_rack = np.full(n, -1, dtype=np.int64)
    degree: dict[int, list[int]] = {}
    for a, b in zip(u, v, strict=True):
        degree.setdefault(a, []).append(b)
        degree.setdefault(b, []).append(a)
    racks: dict[int, int] = {}
    for i in range(n):
        nbrs = degree.get(i, [])
        if len(nbrs) == 1 and nbrs[0] >= n:
            server_rack[i] = racks.setdefault(nbrs[0], len(racks))
    return Topology(
        name=name,
        node_names=tuple(x.name for x in order),
        server_cpu=np.array([x.cpu for x in servers], dtype=np.int64),
        server_mem=np.array([x.mem for x in servers], dtype=np.int64),
        link_u=np.array(u, dtype=np.int64),
        link_v=np.array(v, dtype=np.int64),
        link_cap=np.array(cap, dtype=np.int64),
        link_tier=np.array(tier, dtype=np.int64),
        server_rack=server_rack,
        server_pod=np.full(n, -1, dtype=np.int64),
    )


def from_networkx(graph: nx.Graph, name: str = "graph") -> Topology:
    """A topology from a networkx graph: nodes with ``cpu`` / ``mem`` attributes above 0 are servers, every edge
    needs a ``capacity`` (bandwidth units) and may have a ``tier`` (0 server-rack, 1 rack-fabric, 2 fabric-spine)."""
    nodes = []
    for n, data in graph.nodes(data=True):
        cpu, mem = (int(json_number(data.get(k, 0), COUNT, path=None, field=f"{n}.{k}")) for k in ("cpu", "mem"))
        nodes.append(_NodeSpec(str(n), cpu, mem))
    links = []
    for i, (a, b, data) in enumerate(graph.edges(data=True)):
        if "capacity" not in data:
            raise InputError(f"edge ({a!r}, {b!r}) has no 'capacity' attribute", field="capacity")
        where = f"edges[{i}]."
        cap = json_number(data["capacity"], CAPACITY, path=None, field=f"{where}capacity")
        tier = int(json_number(data.get("tier", -1), TIER, path=None, field=f"{where}tier"))
        links.append(_LinkSpec(str(a), str(b), cap, tier, (None, where)))
    return _build_generic(nodes, links, name, None)


def load_topology(spec: str) -> Topology:
    """A preset name, or a file: ``.json`` (``{"nodes": [{"name", "cpu", "mem"}], "links": [{"source", "target",
    "capacity", "tier"?}]}``) or ``.csv`` (header ``source,target,capacity[,tier]``; leaf nodes are servers with 10
    CPU and 10 memory units). See docs/netalloc.md."""
    if spec in PRESETS:
        return preset(spec)
    path = Path(spec)
    if not path.exists() and not path.is_symlink():
        raise InputError(
            f"topology must be one of {', '.join(PRESETS)} or an existing file, got {spec!r}", field="topology"
        )
    if path.suffix.lower() == ".json":
        return _load_json(path)
    if path.suffix.lower() == ".csv":
        return _load_csv(path)
    raise InputError("a topology file must end in .json or .csv", path=path)


def _load_json(path: Path) -> Topology:
    doc = read_json_object(path, ("nodes", "links"))
    nodes: list[_NodeSpec] = []
    seen: set[str] = set()
    for i, item in enumerate(doc["nodes"]):
        where = f"nodes[{i}]"
        if not isinstance(item, dict) or "name" not in item:
            raise InputError("each node needs a 'name'", path=path, field=f"{where}.name")
        values = []
        for key in ("cpu", "mem"):
            values.append(int(json_number(item.get(key, 0), COUNT, path=path, field=f"{where}.{key}")))
        nm = str(item["name"])
        if not nm.strip():
            raise InputError("a node's name must not be empty", path=path, field=f"{where}.name")
        if (values[0] > 0) != (values[1] > 0):  # a server with no memory or no CPU: utilisation divided by 0
            raise InputError(f"node {nm!r} has cpu {values[0]} and mem {values[1]}: a server needs both above 0, a "
                             "switch neither", path=path, field=f"{where}.{'mem' if values[0] else 'cpu'}")  # fmt: skip
        if nm in seen:
            raise InputError(f"duplicate node name {nm!r}", path=path, field=f"{where}.name")
        seen.add(nm)
        nodes.append(_NodeSpec(nm, values[0], values[1]))
    links: list[_LinkSpec] = []
    for i, item in enumerate(doc["links"]):
        where = f"links[{i}]."
        if not isinstance(item, dict):
            raise InputError("each link must be an object", path=path, field=f"links[{i}]")
        for key in ("source", "target", "capacity"):
            if key not in item:
                raise InputError("missing", path=path, field=f"{where}{key}")
        capacity = json_number(item["capacity"], CAPACITY, path=path, field=f"{where}capacity")
        tier = int(json_number(item.get("tier", -1), TIER, path=path, field=f"{where}tier"))
        links.append(_LinkSpec(str(item["source"]), str(item["target"]), capacity, tier, (None, where)))
    return _build_generic(nodes, links, path.stem, str(path))


def _load_csv(path: Path) -> Topology:
    table = read_csv(path, ("source", "target", "capacity"), "topology file")
    col = {h: i for i, h in enumerate(table.header)}
    links: list[_LinkSpec] = []
    degree: dict[str, int] = {}
    order: list[str] = []
    for lineno, cells in zip(table.lines, table.rows, strict=True):
        capacity = number(cells[col["capacity"]], CAPACITY, path=path, line=lineno, field="capacity")
        tier = int(number(cells[col["tier"]], TIER, path=path, line=lineno, field="tier")) if "tier" in col else -1
        a, b = cells[col["source"]].strip(), cells[col["target"]].strip()
        for end, fld in ((a, "source"), (b, "target")):
            if not end:
                raise InputError("a node's name must not be empty", path=path, line=lineno, field=fld)
        for end in (a, b):
            if end not in degree:
                order.append(end)
            degree[end] = degree.get(end, 0) + 1
        links.append(_LinkSpec(a, b, capacity, tier, (lineno, "")))
    nodes = [_NodeSpec(nm, 10, 10) if degree[nm] == 1 else _NodeSpec(nm, 0, 0) for nm in order]
    return _build_generic(nodes, links, path.stem, str(path))
