"""Online placement policies: the public API (:mod:`dcplace.policies.base`), the built-in heuristics and the
registry that finds a policy by name, ``module:Class`` or entry point (:mod:`dcplace.policies.registry`)."""

from dcplace.policies import learned as _learned  # noqa: F401  (registers CVD-RL, SchedRL, Nara by reference)
from dcplace.policies import netalloc_heuristics as _netalloc_heuristics  # noqa: F401  (registers the baselines)
from dcplace.policies import numa_heuristics as _numa_heuristics  # noqa: F401  (registers the heuristics)
from dcplace.policies.base import NetPolicy, NumaPolicy, ScoredNumaPolicy
from dcplace.policies.numa_heuristics import Heuristic, IndustrialWeights
from dcplace.policies.registry import build_policy, get_net_policy, get_policy, policy_names, register
from dcplace.sim.netalloc import NetView
from dcplace.sim.numa import NumaView

__all__ = [
    "Heuristic",
    "IndustrialWeights",
    "NetPolicy",
    "NetView",
    "NumaPolicy",
    "NumaView",
    "ScoredNumaPolicy",
    "build_policy",
    "get_net_policy",
    "get_policy",
    "policy_names",
    "register",
]
