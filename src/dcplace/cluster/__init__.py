"""The static datacenter: machines with NUMA nodes and resources."""

from dcplace.cluster.numa import NumaCluster

__all__ = ["NumaCluster"]
