"""Learning ``nalb-learned``'s weights (:mod:`dcplace.policies.netalloc_scored`) by the cross-entropy method.

The objective of a weight vector ``w`` on a generation's episodes is the mean over *cells* (topology x request set)
of ``acceptance(w) / acceptance(nalb-strict)``, both on the same training requests (``split="train"``; the test
requests are never seen). CEM (Rubinstein 1999; the policy-search baseline of continuous-control RL): a Gaussian over
the weights, its mean starting at ``w = 0`` (which *is* nalb-strict, so the search starts from the heuristic it must
beat); every generation draws ``pop`` weight vectors (the mean itself among them), scores them on that generation's
episodes (``seed``-derived, new every generation), and refits mean and standard deviation to the ``elite`` best
(smoothed 0.7 new / 0.3 old). After the last generation every generation's mean and the best draw seen are scored
on validation episodes (training requests, episodes no generation used) and the best there is the answer. Same seed,
same weights: episodes are deterministic and the draws come from one seeded generator; the population is scored by
any executor (:mod:`dcplace.parallel`) with the same result. Episodes run in ``SearchConfig.setting`` (default
``paper``, where a full cluster makes a request wait; the shipped rule was searched where it was rejected, on the
sets that are now ``paper-max``'s).

Why CEM and not PPO here: the policy has six numbers and acts once per request; episodes of the real objective
(acceptance) are cheap (under a second on alpha), so scoring whole episodes is both simpler and less noisy than a
per-pick policy gradient, and it cannot end below its start on the training objective.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from dcplace.cluster.topology import load_topology
from dcplace.config import check, check_types
from dcplace.learn.cem import CEM
from dcplace.parallel import executor
from dcplace.policies import get_net_policy
from dcplace.policies.netalloc_scored import FEATURES, learned_nalb
from dcplace.sim.netalloc_episodes import (
    Routings,
    SettingName,
    default_requests,
    episode_requests,
    episode_seed,
    get_setting,
    new_sim,
    run_episode,
)

VALIDATION_SEED = 999_999


@dataclass(frozen=True)
class SearchConfig:
    """The search's settings (``dcplace train nalb-learned`` flags)."""

    topologies: str = "alpha,beta,gamma"
    """topologies trained on, comma-separated (presets or files)"""
    datasets: str = "uniform,azure,alibaba"
    """request sets trained on, comma-separated"""
    generations: int = 8
    """CEM generations"""
    pop: int = 12
    """weight vectors per generation (the mean among them)"""
    elite: int = 3
    """best vectors the Gaussian is refitted to"""
    episodes: int = 2
    """training episodes per cell and generation"""
    val_episodes: int = 4
    """validation episodes per cell (training requests no generation used)"""
    requests: int = 0
    """requests per episode (0: each topology's paper length: 128 alpha/beta, 896 gamma, 4,096 delta)"""
    sigma: float = 1.0
    """initial standard deviation of every weight"""
    seed: int = 0
    """same seed, same weights"""
    workers: int = 1
    """weight vectors scored at once (a process pool; same result)"""
    setting: SettingName = "paper"
    """the environment's reading (docs/netalloc.md, Settings); the shipped rule was searched in what is now
    paper-max"""

    def __post_init__(self) -> None:
        check_types(self)
        for name in ("generations", "pop", "elite", "episodes", "val_episodes", "workers"):
            check(getattr(self, name) >= 1, name, getattr(self, name), "at least 1")
        check(self.elite <= self.pop, "elite", self.elite, f"at most pop ({self.pop})")
        check(self.requests >= 0, "requests", self.requests, "at least 0")
        check(0 < self.sigma < math.inf, "sigma", self.sigma, "a positive finite number")
        check(bool(self.cells()), "topologies", self.topologies, "at least one topology and request set")

    def cells(self) -> list[tuple[str, str]]:
        tops = [t for t in self.topologies.split(",") if t]
        sets = [d for d in self.datasets.split(",") if d]
        return [(t, d) for t in tops for d in sets]


Job = tuple[tuple[float, ...] | None, str, str, int, int, int, str, str]
"""(weights or None for nalb-strict, topology, request set, requests (0: default), episodes, seed, split, setting)."""


def acceptance(job: Job) -> float:
    """Mean acceptance of ``nalb-learned`` with the job's weights (``None``: nalb-strict) over its episodes, in the
    job's setting (``paper`` is what ``dcplace simulate netalloc`` runs by default), seeded as ``run_policy`` seeds a
    named policy: episode ``e`` from ``episode_seed(seed, e)``."""
    weights, top_name, dataset, requests, episodes, seed, split, setting = job
    top = load_topology(top_name)
    env = get_setting(setting)
    routings = Routings(top, env)
    n = requests or default_requests(top)
    acc = []
    for e in range(episodes):
        s = episode_seed(seed, e)
        pol = get_net_policy("nalb-strict", s) if weights is None else learned_nalb(s, weights)
        req = episode_requests(top, env.dataset(dataset), n, seed, e, split)
        acc.append(run_episode(new_sim(top, req, routings, pol), pol).acceptance)
    return float(np.mean(acc))


@dataclass
class SearchResult:
    weights: tuple[float, ...]
    picked: str  # "mean G" or "best draw"
    validation: dict[str, float]  # candidate -> objective on the validation episodes
    curve: list[dict[str, float]]  # one row per generation
    wall_s: float

    def summary(self, cfg: SearchConfig, command: str) -> dict[str, Any]:
        return {"command": command, "config": asdict(cfg), "picked": self.picked, "validation": self.validation,
                "curve": self.curve, "wall_s": round(self.wall_s, 1)}  # fmt: skip


def _objective(
    weights: Sequence[tuple[float, ...]], cfg: SearchConfig, episodes: int, seed: int, map_: Callable[..., list[float]]
) -> npt.NDArray[np.float64]:
    """Each weight vector's mean over cells of acceptance / nalb-strict's, on the same episodes."""
    cells = cfg.cells()
    jobs: list[Job] = [(None, t, d, cfg.requests, episodes, seed, "train", cfg.setting) for t, d in cells]
    jobs += [(w, t, d, cfg.requests, episodes, seed, "train", cfg.setting) for w in weights for t, d in cells]
    acc = np.array(map_(acceptance, jobs), np.float64)
    ref = np.maximum(acc[: len(cells)], 1e-9)
    out: npt.NDArray[np.float64] = (acc[len(cells) :].reshape(len(weights), len(cells)) / ref).mean(axis=1)
    return out


def search(cfg: SearchConfig, on_generation: Callable[[dict[str, float]], None] | None = None) -> SearchResult:
    """CEM over the weights (module docstring)."""
    t0 = time.perf_counter()
    rng = np.random.default_rng(cfg.seed)
    cem = CEM(np.zeros(len(FEATURES)), np.full(len(FEATURES), cfg.sigma), cfg.pop, cfg.elite)
    means = [cem.mean.copy()]
    curve: list[dict[str, float]] = []
    with executor(cfg.workers) as ex:
        for g in range(cfg.generations):
            draws = cem.ask(rng)
            fit = _objective([tuple(map(float, w)) for w in draws], cfg, cfg.episodes, 1000 * (cfg.seed + 1) + g,
                             ex.map)  # fmt: skip
            order = cem.tell(draws, fit)
            means.append(cem.mean.copy())
            row = {"generation": float(g + 1), "mean_weights": float(fit[0]), "best": float(fit[order[0]]),
                   "elite": float(fit[order[: cfg.elite]].mean()), "wall_s": time.perf_counter() - t0}  # fmt: skip
            curve.append(row)
            if on_generation is not None:
                on_generation(row)
        cands = {f"mean {g}": w for g, w in enumerate(means)} | {"best draw": cem.best_w}
        labels = list(cands)
        val = _objective([tuple(map(float, cands[c])) for c in labels], cfg, cfg.val_episodes,
                         VALIDATION_SEED + cfg.seed, ex.map)  # fmt: skip
    scores = {c: float(v) for c, v in zip(labels, val, strict=True)}
    pick = max(labels, key=lambda c: scores[c])  # first of equals: the earliest mean (nalb-strict itself first)
    return SearchResult(tuple(float(x) for x in cands[pick]), pick, scores, curve, time.perf_counter() - t0)
