"""Simulators: array state, presorted events, the allocation ledger, invariant checks."""

from dcplace.sim.episodes import prepare, run_episodes
from dcplace.sim.numa import (
    EpisodeResult,
    NumaSim,
    NumaView,
    PreparedTrace,
    PriceModel,
    Scenario,
)

__all__ = ["EpisodeResult", "NumaSim", "NumaView", "PreparedTrace", "PriceModel", "Scenario", "prepare", "run_episodes"]
