"""The built-in learned policies, registered by ``module:attr`` reference.

Their code lives in :mod:`dcplace.learn` (torch networks, checkpoints), which sits above this layer; a reference
is resolved only when the policy is built, so listing policies or running a heuristic never imports torch, and the
``policies`` layer imports nothing from ``learn`` (the layer contract in ``pyproject.toml`` checks it).
"""

from __future__ import annotations

from dcplace.policies.registry import register

register(
    "cvd-rl",
    "dcplace.learn.numa_policies:CvdRl",
    "CVD-RL: per-machine look-ahead values, top-2 best-fit + top-3 industrial candidates (shipped checkpoint)",
    learned=True,
)
register(
    "cvd-rl-machine",
    "dcplace.learn.numa_policies:CvdRlMachine",
    "CVD-RL trained with a per-machine TD target (ours): r + gamma V(after) - V(now) among the same candidates",
    learned=True,
)
register(
    "hindsight",
    "dcplace.learn.numa_policies:Hindsight",
    "Hindsight Learning: CVD-RL's network imitating CP-SAT's hindsight plans (dcplace train hindsight; --checkpoint)",
    learned=True,
)
register(
    "padrl",
    "dcplace.learn.numa_policies:Padrl",
    "PADRL: CVD-RL's network with an LSTM demand forecast in every row (dcplace train padrl; --checkpoint)",
    learned=True,
)
register(
    "schedrl",
    "dcplace.learn.numa_policies:SchedRl",
    "SchedRL: whole-cluster Double DQN, 2N outputs (shipped checkpoint; its training machine count only)",
    learned=True,
)
register(
    "nara",
    "dcplace.learn.nara_policy:nara",
    "GraphSAGE-style GNN + PPO policy (learned; greedy), shipped checkpoint per request set or --checkpoint",
    setting="netalloc",
    learned=True,
)
register(
    "nalb-learned",
    "dcplace.policies.netalloc_scored:nalb_learned",
    "nalb-strict's search from a learned first server (a linear score, weights by the cross-entropy method; "
    "shipped rule file or --checkpoint)",
    setting="netalloc",
    learned=True,
)
