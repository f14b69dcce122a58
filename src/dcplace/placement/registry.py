"""The placement-method registry and the one entry point, :func:`solve`.

A method is a function ``run(problem, stop, seed, params) -> Result`` with a frozen params dataclass (a
:class:`~dcplace.placement.params.Params`), registered under a name *for a problem type*: the registry is keyed by
(problem type, name), so the batch problem (:class:`~dcplace.placement.problem.Problem`, VMs with disks onto PMs
with disks) and the topology-aware NUMA batch (:class:`~dcplace.placement.numa_batch.NumaBatch`) each have their own
methods, and ``auto`` names a different method for each. :func:`solve` looks the method up by the problem's type
(its class, then its bases), builds or checks the params, runs it, and verifies the answer with the checker
registered for that problem type (:func:`register_verifier`). A :class:`Problem` with a current placement goes only
to methods registered with ``current=True``; the others are refused with their reason. The built-in methods are
registered by :mod:`dcplace.placement.solve`, which the package imports, so they are there once
``dcplace.placement`` is imported.

Imports go one way: ``stop``, ``result``, ``params`` <- ``registry`` <- the method modules <- ``solve``.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from dcplace.config import check_seed
from dcplace.errors import InputError, PolicyError, users_code
from dcplace.inputs import import_user_module
from dcplace.placement.params import Params, field_error
from dcplace.placement.problem import Problem, check_size
from dcplace.placement.result import Result
from dcplace.placement.stop import Stop, as_stop

Run = Callable[[Any, Stop, int, Any], Result]
"""``run(problem, stop, seed, params) -> Result``."""
Verify = Callable[[Any, Result], Result]
"""``verify(problem, result) -> result`` with ``verified`` and ``violations`` set by an independent checker."""


@dataclass(frozen=True)
class Method:
    """A registered placement method."""

    name: str
    """The name ``solve`` takes."""
    run: Run
    """``run(problem, stop, seed, params) -> Result``; must return by the time ``stop`` expires."""
    params: type[Params]
    """Its parameter dataclass; ``params()`` must give valid defaults."""
    problem: type
    """The problem type it solves."""
    constraints: bool
    """Whether it honours a :class:`Problem`'s placement constraints (colocation, anti-colocation, spread)."""
    doc: str
    """One line on what it does (the first line of ``run``'s docstring unless given)."""
    current: bool | str = False
    """True if it models a :class:`Problem`'s current placement (machine + migration cost, pinned VMs), else why
    not (a sentence, shown when such a problem is given to it)."""


_METHODS: dict[tuple[type, str], Method] = {}
_VERIFIERS: dict[type, Verify] = {}


def register_method(
    name: str,
    run: Run,
    params: type[Params],
    problem: type = Problem,
    *,
    constraints: bool = False,
    doc: str | None = None,
    replace: bool = False,
    current: bool | str = False,
) -> Method:
    """Register ``run`` as method ``name`` for ``problem`` instances, with parameters ``params``. An existing name
    for that problem type is an error unless ``replace``. Returns the registered :class:`Method`."""
    if not isinstance(params, type) or not issubclass(params, Params):
        raise TypeError(f"params must be a subclass of dcplace.placement.Params, got {params!r}")
    if (problem, name) in _METHODS and not replace:
        raise ValueError(f"method {name!r} is already registered for {problem.__name__}; pass replace=True")
    params()  # the defaults must be valid
    line = doc if doc is not None else (run.__doc__ or "").strip().split("\n")[0]
    method = Method(name, run, params, problem, constraints, line, current)
    _METHODS[(problem, name)] = method
    return method


def register_verifier(problem: type, verify: Verify) -> None:
    """The independent checker ``solve`` applies to every answer for ``problem`` instances."""
    _VERIFIERS[problem] = verify


def method_names(problem: type = Problem) -> list[str]:
    """Names of the methods registered for ``problem`` instances (registration order)."""
    return [name for (p, name) in _METHODS if p is problem]


def get_method(name: str, problem: type = Problem) -> Method:
    """The method ``name`` for ``problem`` instances (its class, then its bases). ``package.module:name`` imports
    the module first (where a user's method registers itself, :func:`register_method`), then looks ``name`` up, so
    ``dcplace solve --method mypackage.methods:ffd`` runs a method no dcplace module knows."""
    if ":" in name:
        name = _import_for(name)
    for klass in problem.__mro__:
        if (klass, name) in _METHODS:
            return _METHODS[(klass, name)]
    names = [n for klass in problem.__mro__ for n in method_names(klass)]
    raise field_error("method", f"be one of {', '.join(names) or '(none registered)'}", name)


def _import_for(ref: str) -> str:
    """Import ``ref``'s module (``package.module:name``) and return ``name``; a module that is missing or fails is
    one sentence naming the method."""
    module, _, name = ref.partition(":")
    if not module or not name:
        raise field_error("method", "look like package.module:name", ref)
    import_user_module(module, field="method")
    return name


def params_for(method: str, values: Mapping[str, Any] | None = None, problem: type = Problem) -> Params:
    """The params of ``method`` from a mapping (a TOML table); None gives the defaults."""
    return get_method(method, problem).params.from_dict(values or {})


def _run_method(entry: Method, problem: Any, stop: Stop, seed: int, params: Params) -> Result:
    """``entry.run(...)``; a user's method (one defined outside dcplace) that raises, or returns something other than
    a :class:`Result`, is a :class:`~dcplace.errors.PolicyError` naming it (one sentence, exit 2; it was a dcplace
    traceback). dcplace's own methods raise as they are: a traceback there is a bug."""
    module = getattr(entry.run, "__module__", None) or "?"
    label = f"{module}:{getattr(entry.run, '__qualname__', entry.name)}"
    users = users_code(module)
    try:
        res = entry.run(problem, stop, seed, params)
    except InputError:
        raise
    except (Exception, SystemExit) as e:
        if not users:
            raise
        raise PolicyError(f"the method {entry.name} ({label}) raised {type(e).__name__}: {e}") from e
    if not isinstance(res, Result):
        if not users:
            raise TypeError(f"method {entry.name} returned a {type(res).__name__}, not a Result")  # a dcplace bug
        raise PolicyError(f"the method {entry.name} ({label}) returned a {type(res).__name__}, not a "
                          "dcplace.placement.Result")  # fmt: skip
    return res


def solve(
    problem: Any,
    method: str = "auto",
    stop: Stop | float = 60.0,
    seed: int = 0,
    params: Params | Mapping[str, Any] | None = None,
) -> Result:
    """Solve ``problem`` with the registered ``method`` until ``stop`` (a :class:`~dcplace.placement.stop.Stop` or
    seconds), seeded by ``seed``, with ``params`` (the method's params dataclass, a mapping of its fields, or None
    for its defaults). The answer is verified by the problem type's checker; ``wall_s`` is the method's run time."""
    if isinstance(problem, str | Path):
        raise InputError(f"problem must be a problem object, got the name {str(problem)!r}: load it first "
                         "(load_problem, load_numa_batch)", field="problem")  # fmt: skip
    entry = get_method(method, type(problem))
    stop = as_stop(stop)
    if params is None:
        params = entry.params()
    elif isinstance(params, Mapping):
        params = entry.params.from_dict(params)
    elif not isinstance(params, entry.params):
        raise TypeError(f"method {method} takes {entry.params.__name__}, got {type(params).__name__}")
    if getattr(problem, "constraints", ()) and not entry.constraints:
        able = [m.name for (p, _), m in _METHODS.items() if p is entry.problem and m.constraints]
        raise InputError(f"method {method} does not model placement constraints; use {', '.join(able)}")
    if getattr(problem, "has_current", False) and entry.current is not True:
        able = [m.name for (p, _), m in _METHODS.items() if p is entry.problem and m.current is True]
        why = entry.current if isinstance(entry.current, str) and entry.current else "it places from scratch"
        raise InputError(f"method {method} does not start from a current placement ({why}); use {', '.join(able)}")
    if getattr(problem, "has_current", False) and getattr(problem, "constraints", ()):
        raise InputError("no method models placement constraints together with a current placement yet")
    check_seed(seed)
    if isinstance(problem, Problem):
        check_size(problem.n_vms, problem.n_pms)
    t0 = time.perf_counter()
    res = _run_method(entry, problem, stop, seed, params)
    res = replace(res, wall_s=time.perf_counter() - t0)
    seconds = getattr(stop, "seconds", None)
    if isinstance(seconds, int | float) and res.wall_s > seconds + 1.0:  # a method must return by its stop
        res = replace(res, stats={**res.stats, "over_time_s": round(res.wall_s - seconds, 3)})
    verify = next((_VERIFIERS[k] for k in type(problem).__mro__ if k in _VERIFIERS), None)
    return claims_checked(res if verify is None else verify(problem, res))


def claims_checked(res: Result) -> Result:
    """``res`` with what its numbers contradict added to its violations (``verified`` False then): a lower bound
    above the answer's cost, or ``optimal`` claimed with a bound below the cost (``optimal`` means the cost is proven
    equal to the bound). The problem's checker recounts the cost; this checks the method's claims about it. A
    verified ``feasible`` answer whose cost equals its bound is ``optimal`` (the bound proves it)."""
    if res.cost is None or res.bound is None:
        return res
    tol = 1e-6 + 1e-12 * abs(res.cost)  # costs are sums of whole numbers: well under 1 even at 4e7
    errs: list[str] = []
    if res.bound > res.cost + tol:
        errs.append(f"the method's lower bound {res.bound:g} is above its answer's cost {res.cost:g}")
    elif res.status == "optimal" and res.bound < res.cost - tol:
        errs.append(f"the method claims optimal, but its bound {res.bound:g} is below its cost {res.cost:g}")
    if errs:
        return replace(res, verified=False, violations=(*res.violations, *errs))
    if res.verified and res.status == "feasible" and res.cost - res.bound <= tol:
        return replace(res, status="optimal", stats={**res.stats, "optimal_by": "its cost equals its lower bound"})
    return res
