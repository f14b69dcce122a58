"""A user's own network-aware policy: keep a request in one rack when it can, else the roomiest server.

Run it without installing anything (from this folder, or with it on PYTHONPATH):
    dcplace simulate netalloc --policy rack_first:RackFirst --topology alpha --dataset uniform --episodes 3
"""

import numpy as np

from dcplace.policies import NetPolicy
from dcplace.sim.netalloc import NetView


class RackFirst(NetPolicy):
    name = "rack-first"

    def choose(self, view: NetView) -> int:
        allowed = view.action_mask()  # servers that can still take part of the waiting request
        rack = view.topology.server_rack  # (servers,) rack index
        picked = view.picks  # servers already picked for this request, in order
        if picked:
            same = allowed & (rack == rack[picked[0]])  # stay in the first pick's rack while it has room
            if same.any():
                allowed = same
        return int(np.argmax(np.where(allowed, view.free_cpu, -1)))  # the most free CPU among them
