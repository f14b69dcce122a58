"""Online placement policies, registered by name."""

from dcplace.policies import numa_heuristics as _numa_heuristics  # noqa: F401  (registers the heuristics)
from dcplace.policies.registry import Policy, get_policy, policy_names, register

__all__ = ["Policy", "get_policy", "policy_names", "register"]
