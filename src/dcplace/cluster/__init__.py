"""The static datacenter: machines with NUMA nodes and resources."""

from dcplace.cluster.numa import NumaCluster
from dcplace.cluster.topology import Topology, fabric, from_networkx, load_topology, preset

__all__ = ["NumaCluster", "Topology", "fabric", "from_networkx", "load_topology", "preset"]
