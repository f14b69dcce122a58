"""A user's own NUMA policy in ten lines: worst-fit (the machine with the most CPU left after placement).

Run it without installing anything (from this folder, or with it on PYTHONPATH):
    dcplace simulate numa --policy worst_fit:WorstFit --pms 50 --episodes 3
"""

import numpy as np

from dcplace.policies import NumaView, ScoredNumaPolicy


class WorstFit(ScoredNumaPolicy):
    name = "worst-fit"

    def score(self, view: NumaView) -> np.ndarray:
        left = view.free[:, :, 0].sum(axis=1) - view.demand[0]  # (machines,) CPU left after placement
        return np.repeat(left, view.numa)  # one score per action (machine * numa + node); higher wins
