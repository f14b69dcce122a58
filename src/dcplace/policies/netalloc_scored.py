"""``nalb-learned``: NALB-strict's search with a learned first server (issue 16, item 6).

``nalb-strict`` (:mod:`.netalloc_heuristics`) draws a request's first server at random among those whose links carry
its bandwidth, then takes the servers of a bandwidth-weighted breadth-first search from it, crossing only links with
that bandwidth free. On gamma and delta it was the strongest allocator we had until ``tetris-bw`` (the paper's Nara
architecture stays 3-20 points below it with uniform and Azure requests: docs/nara.md). What it leaves to chance is
where a request starts, which decides which rack it fills and what room it leaves for the next ones. This policy
scores every candidate first server by ``s = w . phi`` and starts from the best (exact ties: uniformly at random from
the policy's own generator, so ``w = 0`` *is* ``nalb-strict``, draw for draw: tested); the rest of the request is
nalb-strict's search. The features, all relative to what the request still needs (``need`` CPU and memory, ``bw``
bandwidth):

====  ===============  ================================================================================================
 i    name             phi_i(server s in rack r)
====  ===============  ================================================================================================
 0    ``rack_fits``    1 if the pickable servers of rack r together have the request's CPU and memory free
 1    ``rack_room``    ``log1p(min(rack free CPU / need CPU, rack free memory / need memory))``
 2    ``srv_cover``    ``min(1, server free CPU / need CPU, server free memory / need memory)``: the share of the
                       request server s alone could take
 3    ``srv_room``     ``log1p(min(server free CPU / need CPU, server free memory / need memory))``
 4    ``uplink``       ``log1p(tightest free bandwidth on s's links / bw)``
 5    ``rack_free``    share of rack r's servers that are pickable and hold nothing yet (an untouched server)
====  ===============  ================================================================================================

A server without a rack (a general graph) is its own rack. The weights are learned by the cross-entropy method on
acceptance over training episodes of several topologies and request sets (:mod:`dcplace.learn.nalb_search`,
``dcplace train nalb-learned``) and stored in a rule file (JSON: format, feature names, weights, how they were
found); the shipped one is ``dcplace/data/nara/nalb-learned.json``. No torch: the policy is numpy only.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt

from dcplace.errors import InputError
from dcplace.inputs import read_text
from dcplace.jsonio import json_problem
from dcplace.policies.netalloc_heuristics import LocalityBased, _Adjacency
from dcplace.sim.netalloc import NetView

FEATURES = ("rack_fits", "rack_room", "srv_cover", "srv_room", "uplink", "rack_free")
FORMAT = "dcplace-nalb-learned"
SHIPPED = Path(__file__).resolve().parent.parent / "data" / "nara" / "nalb-learned.json"


def first_pick_features(view: NetView, adj: _Adjacency) -> npt.NDArray[np.float64]:
    """``(servers, len(FEATURES))``: the features above for every server of ``view`` (used where pickable)."""
    n = view.n_servers
    mask = view.action_mask()
    fc = np.where(mask, view.free_cpu, 0).astype(np.float64)
    fm = np.where(mask, view.free_mem, 0).astype(np.float64)
    top = view.topology
    rack = top.server_rack[:n]
    own = rack.max(initial=-1) + 1 + np.arange(n)
    rack = np.where(rack >= 0, rack, own)  # rackless servers: their own rack
    n_racks = int(rack.max(initial=-1)) + 1
    nc, nm = max(view.need_cpu, 1), max(view.need_mem, 1)
    rc = np.bincount(rack, fc, n_racks)[rack]
    rm = np.bincount(rack, fm, n_racks)[rack]
    rack_ratio = np.minimum(rc / nc, rm / nm)
    srv_ratio = np.minimum(fc / nc, fm / nm)
    tightest = adj.tightest_bandwidth(n, view.free_bw).astype(np.float64)
    bw = max(view.request[2], 1)
    untouched = mask & (view.free_cpu == top.server_cpu[:n]) & (view.free_mem == top.server_mem[:n])
    size = np.maximum(np.bincount(rack, minlength=n_racks), 1).astype(np.float64)
    out = np.empty((n, len(FEATURES)))
    out[:, 0] = (rc >= nc) & (rm >= nm)
    out[:, 1] = np.log1p(rack_ratio)
    out[:, 2] = np.minimum(srv_ratio, 1.0)
    out[:, 3] = np.log1p(srv_ratio)
    out[:, 4] = np.log1p(np.minimum(tightest, 1e15) / bw)
    out[:, 5] = (np.bincount(rack, untouched.astype(np.float64), n_racks) / size)[rack]
    return out


@dataclass
class LearnedNalb(LocalityBased):
    """nalb-strict with the first server picked by ``argmax w . phi`` (module docstring)."""

    weights: tuple[float, ...] = (0.0,) * len(FEATURES)
    w: npt.NDArray[np.float64] = field(init=False)

    def __post_init__(self) -> None:
        super().__post_init__()
        if len(self.weights) != len(FEATURES):
            raise InputError(
                f"weights must have {len(FEATURES)} entries ({', '.join(FEATURES)}), got {len(self.weights)}"
            )
        self.w = np.asarray(self.weights, np.float64)

    def first_candidates(self, view: NetView, candidates: npt.NDArray[np.bool_]) -> npt.NDArray[np.bool_]:
        """nalb-strict's candidates narrowed to the best-scored (all of them when ``w = 0``)."""
        if not self.w.any():
            return candidates
        assert self._adj is not None
        score = np.where(candidates, first_pick_features(view, self._adj) @ self.w, -np.inf)
        best: npt.NDArray[np.bool_] = candidates & (score >= score.max())
        return best


def learned_nalb(seed: int, weights: tuple[float, ...]) -> LearnedNalb:
    """nalb-strict's settings (bandwidth-aware first pick, pruned search, the simulator's routing) with ``weights``."""
    return LearnedNalb(True, seed, True, True, "nalb-learned", own_routing=False, weights=weights)


def rule_json(weights: npt.ArrayLike, search: dict[str, Any] | None = None) -> str:
    """A rule file's text: the weights by feature name, and how they were found."""
    w = [float(x) for x in np.asarray(weights, np.float64)]
    return json.dumps({"format": FORMAT, "features": list(FEATURES), "weights": w, "search": search or {}}, indent=1)


def load_weights(path: str | Path) -> tuple[float, ...]:
    """The weights of a rule file (an InputError naming the file and field when it is not one)."""
    p = Path(path)
    try:
        data = json.loads(read_text(p, "nalb-learned rule file (JSON)"))  # a binary file (a .pt) is one sentence
    except InputError as e:
        raise InputError(str(e), field="checkpoint") from None
    except (json.JSONDecodeError, RecursionError) as e:
        line = f" line {e.lineno}:" if isinstance(e, json.JSONDecodeError) else ""
        raise InputError(f"{p}:{line} not JSON ({json_problem(e)})", field="checkpoint") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise InputError(f"{p}: field format must be {FORMAT!r}", field="checkpoint")
    if data.get("features") != list(FEATURES):
        raise InputError(f"{p}: field features must be {list(FEATURES)}", field="checkpoint")
    w = data.get("weights")
    if not isinstance(w, list) or len(w) != len(FEATURES) or not all(isinstance(x, int | float) for x in w):
        raise InputError(f"{p}: field weights must be {len(FEATURES)} numbers", field="checkpoint")
    return tuple(float(x) for x in w)


def nalb_learned(seed: int = 0, dataset: str | None = None, checkpoint: str | None = None) -> LearnedNalb:
    """The ``nalb-learned`` policy: the rule file ``checkpoint``, else the shipped one (one rule for every request
    set and topology)."""
    del dataset
    return learned_nalb(seed, load_weights(checkpoint if checkpoint is not None else SHIPPED))
