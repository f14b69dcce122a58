"""The policy interface and its registry.

A policy answers one call: given the simulator waiting for a decision, return an action. Heuristics, learned
policies and optimisers all answer it, so every method runs on every scenario it applies to. Policies register
under a name (``register``) and are built by name (``get_policy``), which is how the CLI and benchmarks find them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol, runtime_checkable

from dcplace.errors import InputError
from dcplace.sim.numa import NumaSim


@runtime_checkable
class Policy(Protocol):
    """An online NUMA placement policy."""

    @property
    def name(self) -> str:
        """The registry name."""
        ...

    def act(self, sim: NumaSim) -> int:
        """The action (machine * numa + node) for the request ``sim`` is waiting on."""
        ...

    def run(self, sim: NumaSim) -> int:
        """Finish the episode deciding every request; return the final status."""
        ...


_REGISTRY: dict[str, Callable[[], Policy]] = {}
_DOCS: dict[str, str] = {}


def register(name: str, factory: Callable[[], Policy], doc: str) -> None:
    """Make ``factory`` available as ``name``; ``doc`` is the one-line rule shown by ``--help`` and the docs."""
    if name in _REGISTRY:
        raise ValueError(f"policy {name!r} is already registered")
    _REGISTRY[name] = factory
    _DOCS[name] = doc


def get_policy(name: str) -> Policy:
    """Build the policy registered as ``name``."""
    try:
        return _REGISTRY[name]()
    except KeyError:
        raise InputError(f"--policy must be one of {', '.join(sorted(_REGISTRY))}, got {name!r}") from None


def policy_names() -> list[str]:
    return sorted(_REGISTRY)


def policy_doc(name: str) -> str:
    return _DOCS[name]
