"""Simulators: array state, presorted events, the allocation ledger, invariant checks."""

from dcplace.sim.numa import (
    EpisodeResult,
    HeuristicWeights,
    NumaSim,
    PreparedTrace,
    PriceModel,
    Scenario,
)

__all__ = ["EpisodeResult", "HeuristicWeights", "NumaSim", "PreparedTrace", "PriceModel", "Scenario"]
