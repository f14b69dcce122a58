"""Online placement policies, registered by name and setting (numa, netalloc)."""

from dcplace.policies import cvd as _cvd  # noqa: F401  (registers CVD-RL and SchedRL; torch loads lazily)
from dcplace.policies import nara as _nara  # noqa: F401  (registers the learned allocator; torch loads lazily)
from dcplace.policies import netalloc_heuristics as _netalloc_heuristics  # noqa: F401  (registers the baselines)
from dcplace.policies import numa_heuristics as _numa_heuristics  # noqa: F401  (registers the heuristics)
from dcplace.policies.registry import NetPolicy, Policy, get_net_policy, get_policy, policy_names, register

__all__ = ["NetPolicy", "Policy", "get_net_policy", "get_policy", "policy_names", "register"]
