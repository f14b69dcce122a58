"""Episode seeding shared by every NUMA episode loop (evaluation, training, reproductions)."""

from __future__ import annotations

import numpy as np


def start_seed(seed: int, i: int) -> int:
    """The reset seed of episode ``i`` of a run with ``seed`` (the same starts for every policy)."""
    return int(np.random.default_rng([seed, i]).integers(2**63 - 1))
