"""Gymnasium adapters over the simulators. Importing this package registers the environments."""

import gymnasium as gym

gym.register(id="dcplace/NumaVM-v0", entry_point="dcplace.envs.numa_vm:NumaVMEnv")
gym.register(id="dcplace/NetAlloc-v0", entry_point="dcplace.envs.net_alloc:NetAllocEnv")

__all__: list[str] = []
