"""Finding policies by name: the registry, ``module:Class`` references and the ``dcplace.policies`` entry points.

A policy is found from one string, the same everywhere (``--policy`` on the command line, the service, Python):

1. a registered name in the setting (``best-fit``, ``tetris``, ``cvd-rl``, ...);
2. ``package.module:ClassName`` (or ``package.module:factory``): imported and called;
3. a name in the ``dcplace.policies`` entry-point group of any installed package (``worst-fit =
   "mypackage.policies:WorstFit"`` in its ``pyproject.toml``).

The constructor (or factory) receives, by keyword, those of ``seed`` (int), ``dataset`` (the request set a learned
network-aware policy will see) and ``checkpoint`` (a weights file) that it accepts; a checkpoint given to a policy
that takes none is an error. Built-in learned policies are registered by ``module:attr`` reference too, so this
module imports nothing above the ``policies`` layer and torch loads only when a learned policy is built.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

from dcplace.errors import InputError, PolicyError, users_code
from dcplace.inputs import user_callable
from dcplace.policies.base import SETTINGS, NetPolicy, NumaPolicy

ENTRY_POINT_GROUP = "dcplace.policies"

Factory = Callable[..., object] | str


@dataclass(frozen=True)
class Entry:
    factory: Factory
    """A callable, or a ``module:attr`` reference resolved when the policy is first built."""
    doc: str
    learned: bool


_REGISTRY: dict[str, dict[str, Entry]] = {s: {} for s in SETTINGS}


def register(name: str, factory: Factory, doc: str, setting: str = "numa", learned: bool = False) -> None:
    """Make ``factory`` (a callable or a ``module:attr`` string) available as ``name`` in ``setting``; ``doc`` is the
    one-line rule shown by ``dcplace policies`` and the docs; ``learned`` marks policies that load weights."""
    if setting not in SETTINGS:
        raise ValueError(f"setting must be one of {', '.join(SETTINGS)}, got {setting!r}")
    if name in _REGISTRY[setting]:
        raise ValueError(f"policy {name!r} is already registered for {setting}")
    _REGISTRY[setting][name] = Entry(factory, doc, learned)


def _resolve(ref: str, what: str) -> Callable[..., object]:
    return user_callable(ref, what)


def _entry_point(name: str) -> Callable[..., object] | None:
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            return _resolve(ep.value, f"entry point {name!r}")
    return None


def _factory_for(spec: str, setting: str) -> tuple[Callable[..., object], bool]:
    entry = _REGISTRY[setting].get(spec)
    if entry is not None:
        f = entry.factory
        return (_resolve(f, f"policy {spec!r}") if isinstance(f, str) else f), entry.learned
    if ":" in spec:
        return _resolve(spec, "policy"), False
    found = _entry_point(spec)
    if found is not None:
        return found, False
    raise InputError(
        f"must be one of {', '.join(policy_names(setting))}, a package.module:ClassName, or a "
        f"'{ENTRY_POINT_GROUP}' entry point; got {spec!r}",
        field="policy",
    )


def _call(factory: Callable[..., object], spec: str, options: dict[str, Any]) -> object:
    try:
        params = inspect.signature(factory).parameters
    except (TypeError, ValueError):
        params = {}  # type: ignore[assignment]
    takes_any = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values())
    kwargs = {k: v for k, v in options.items() if takes_any or k in params}
    if options.get("checkpoint") is not None and "checkpoint" not in kwargs:
        raise InputError(f"applies to learned policies only, not to {spec!r}", field="checkpoint")
    try:
        return factory(**kwargs)
    except (InputError, TypeError):  # TypeError: build_policy names the arguments it lacks
        raise
    except (Exception, SystemExit) as e:  # a user's constructor that raises, or calls sys.exit, is its own fault
        if not users_code(getattr(factory, "__module__", None) or "?"):
            raise
        raise PolicyError(f"the policy {spec!r} raised {type(e).__name__} when built: {e}") from e


def build_policy(
    spec: str, setting: str = "numa", *, seed: int = 0, dataset: str | None = None, checkpoint: str | None = None
) -> NumaPolicy | NetPolicy:
    """The policy named by ``spec`` in ``setting`` (see the module docstring), built and checked."""
    if setting not in SETTINGS:
        raise InputError(f"setting must be one of {', '.join(SETTINGS)}, got {setting!r}")
    try:
        factory, _ = _factory_for(spec, setting)
        policy = _call(factory, spec, {"seed": seed, "dataset": dataset, "checkpoint": checkpoint})
        check_policy_object(policy, setting, spec)
    except InputError as e:
        if e.path is None and e.field is None:  # name the field it came from: the checkpoint file, or the reference
            about_file = checkpoint is not None and e.detail.startswith((f"{checkpoint}:", f"{Path(checkpoint)}:"))
            raise InputError(e.detail, field="checkpoint" if about_file else "policy") from None
        raise
    except TypeError as e:  # a user's class whose constructor needs arguments we do not have
        raise InputError(f"{spec!r} could not be built without arguments ({e})", field="policy") from None
    return policy  # type: ignore[return-value]


def check_policy_object(policy: object, setting: str, spec: str | None = None) -> None:
    """Refuse (InputError naming ``policy``, or ``spec`` that built it) an object given as a policy in ``setting``
    that cannot decide there: one without ``choose(view)``, or a policy of the other setting (its ``choose`` failed
    on this setting's view with an AttributeError, at the first decision rather than when it was given)."""
    kind = type(policy).__name__
    if not callable(getattr(policy, "choose", None)):
        said = (f"{spec!r} built a {kind}, which has no choose(view) method" if spec is not None
                else f"the {kind} given has no choose(view) method, so it is not a policy")  # fmt: skip
        raise InputError(said, field="policy")
    other = getattr(policy, "setting", setting)
    if other != setting:
        name = spec if spec is not None else getattr(policy, "name", kind)
        raise InputError(f"{name!r} is a {other} policy, not a {setting} one", field="policy")


def get_policy(spec: str, checkpoint: str | None = None, seed: int = 0) -> NumaPolicy:
    """Build the NUMA policy ``spec`` (``checkpoint``: weights for a learned one)."""
    return build_policy(spec, "numa", seed=seed, checkpoint=checkpoint)  # type: ignore[return-value]


def get_net_policy(spec: str, seed: int = 0, dataset: str | None = None, checkpoint: str | None = None) -> NetPolicy:
    """Build the netalloc policy ``spec``, seeded (random choices come from its own generator). ``dataset`` and
    ``checkpoint`` reach learned policies only; a checkpoint for a heuristic is an error."""
    return build_policy(spec, "netalloc", seed=seed, dataset=dataset, checkpoint=checkpoint)  # type: ignore[return-value]


def policy_names(setting: str = "numa") -> list[str]:
    """Registered names in ``setting`` (entry points of installed packages included)."""
    names = set(_REGISTRY[setting])
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception:  # a broken plugin must not hide the built-in policies; building it reports the error
            continue
        if getattr(obj, "setting", "numa") == setting:
            names.add(ep.name)
    return sorted(names)


def policy_doc(name: str, setting: str = "numa") -> str:
    entry = _REGISTRY[setting].get(name)
    if entry is not None:
        return entry.doc
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        if ep.name == name:
            try:
                line = ((ep.load().__doc__ or "").strip().splitlines() or [""])[0]
            except Exception:
                line = ""
            return f"{line} (plugin {ep.value})" if line else f"plugin {ep.value}"
    raise InputError(f"no policy {name!r} in {setting}")


def plugin_problems() -> list[str]:
    """One sentence per installed ``dcplace.policies`` entry point that cannot be used: one that fails to import
    (left out of :func:`policy_names`) or one named like a built-in policy of its setting, which wins (both were
    silent)."""
    out = []
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        try:
            obj = ep.load()
        except Exception as e:  # a plugin's own failure: reported, never raised here
            out.append(f"plugin {ep.name!r} ({ep.value}) fails to import: {type(e).__name__}: {e}")
            continue
        setting = getattr(obj, "setting", "numa")
        if setting in _REGISTRY and ep.name in _REGISTRY[setting]:
            out.append(f"plugin {ep.name!r} ({ep.value}) is shadowed by the built-in {setting} policy of that name")
    return out
