"""The policy interfaces and their registry.

A policy answers one call: given the simulator waiting for a decision, return an action. Heuristics, learned
policies and optimisers all answer it, so every method runs on every scenario it applies to. Policies register
under a name and a *setting* (``numa``: online VM scheduling on NUMA machines; ``netalloc``: network-aware
multi-server allocation) and are built by name, which is how the CLI and benchmarks find them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Protocol, cast, runtime_checkable

from dcplace.errors import InputError

if TYPE_CHECKING:
    from dcplace.sim.netalloc import NetAllocSim
    from dcplace.sim.numa import NumaSim

SETTINGS = ("numa", "netalloc")


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


@runtime_checkable
class NetPolicy(Protocol):
    """A network-aware allocation policy: picks one server at a time for the waiting request."""

    @property
    def name(self) -> str:
        """The registry name."""
        ...

    def choose(self, sim: NetAllocSim) -> int:
        """The next server for the request ``sim`` is waiting on (one of ``sim.action_mask()``)."""
        ...


_REGISTRY: dict[str, dict[str, Callable[..., object]]] = {s: {} for s in SETTINGS}
_DOCS: dict[str, dict[str, str]] = {s: {} for s in SETTINGS}
_LEARNED: set[tuple[str, str]] = set()


def register(name: str, factory: Callable[..., object], doc: str, setting: str = "numa", learned: bool = False) -> None:
    """Make ``factory`` available as ``name`` in ``setting``; ``doc`` is the one-line rule shown by ``--help`` and
    the docs. NUMA factories take no argument, netalloc factories take a seed. A ``learned`` policy's factory also
    takes keyword options (``dataset``: the request set it will see, to pick a shipped checkpoint; ``checkpoint``: a
    file to load instead)."""
    if name in _REGISTRY[setting]:
        raise ValueError(f"policy {name!r} is already registered for {setting}")
    _REGISTRY[setting][name] = factory
    _DOCS[setting][name] = doc
    if learned:
        _LEARNED.add((setting, name))


def is_learned(name: str, setting: str = "netalloc") -> bool:
    return (setting, name) in _LEARNED


def _factory(name: str, setting: str) -> Callable[..., object]:
    try:
        return _REGISTRY[setting][name]
    except KeyError:
        raise InputError(f"--policy must be one of {', '.join(sorted(_REGISTRY[setting]))}, got {name!r}") from None


def get_policy(name: str, checkpoint: str | None = None) -> Policy:
    """Build the NUMA policy registered as ``name`` (``checkpoint``: weights for a learned one)."""
    factory = _factory(name, "numa")
    if not is_learned(name, "numa"):
        if checkpoint is not None:
            raise InputError(f"--checkpoint applies to learned policies only, not to {name!r}")
        return cast(Policy, factory())
    return cast(Policy, factory(checkpoint=checkpoint))


def get_net_policy(name: str, seed: int = 0, dataset: str | None = None, checkpoint: str | None = None) -> NetPolicy:
    """Build the netalloc policy registered as ``name``, seeded (random choices come from its own generator).
    ``dataset`` and ``checkpoint`` reach learned policies only; a checkpoint for a heuristic is an error."""
    factory = _factory(name, "netalloc")
    if not is_learned(name):
        if checkpoint is not None:
            raise InputError(f"--checkpoint applies to learned policies only, not to {name!r}")
        return cast(NetPolicy, factory(seed))
    return cast(NetPolicy, factory(seed, dataset=dataset, checkpoint=checkpoint))


def policy_names(setting: str = "numa") -> list[str]:
    return sorted(_REGISTRY[setting])


def policy_doc(name: str, setting: str = "numa") -> str:
    return _DOCS[setting][name]
