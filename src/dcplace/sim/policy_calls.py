"""Calling a policy from the library's loops (the simulators, the live engine): a user's policy that raises, or
returns something that is not an action, is reported as a :class:`~dcplace.errors.PolicyError` naming the policy,
one sentence like any bad input, instead of a dcplace traceback (or, for 1.5, a silently truncated action)."""

from __future__ import annotations

import operator
from typing import Any

from dcplace.errors import InputError, PolicyError, users_code


def _users(policy: Any) -> bool:
    """Whether ``policy`` is a user's (its class defined outside dcplace): its failures are its own."""
    return users_code(type(policy).__module__)


def _label(policy: Any) -> str:
    cls = type(policy)
    return f"{cls.__module__}:{cls.__qualname__}"


def decide(policy: Any, view: Any, method: str = "choose", *args: Any) -> Any:
    """``policy.<method>(view, *args)``, where an exception from a user's policy becomes a :class:`PolicyError`
    naming the policy and the exception (dcplace's own policies raise as they are: a traceback there is a bug)."""
    try:
        return getattr(policy, method)(view, *args)
    except InputError:
        raise
    except (Exception, SystemExit) as e:
        if not _users(policy):
            raise
        raise PolicyError(f"the policy {_label(policy)} raised {type(e).__name__}: {e}") from e


def ranked(policy: Any, view: Any, n: int) -> list[tuple[int, tuple[float, ...]]]:
    """``policy.rank(view, n)`` checked like :func:`decide` and :func:`as_action`: (action, scores) pairs, or a
    :class:`PolicyError` naming the policy when it gives something else."""
    out = decide(policy, view, "rank", n)
    try:
        pairs = [(a, tuple(sc)) for a, sc in out]
    except (TypeError, ValueError):
        raise PolicyError(f"the policy {_label(policy)} ranked {out!r:.80}: rank must give (action, scores) "
                          "pairs") from None  # fmt: skip
    return [(as_action(policy, a), sc) for a, sc in pairs]


def as_action(policy: Any, action: Any) -> int:
    """``action`` as an int, or a :class:`PolicyError` when it is not a whole number (a float such as 1.5 was
    truncated to a machine the policy did not choose). Any whole number is an action: one outside the cluster is
    an infeasible action, which the simulators and the engine treat as such."""
    try:
        if isinstance(action, bool):  # True is 1 to Python, not an action (the Gymnasium envs refuse it too)
            raise TypeError
        return operator.index(action)
    except TypeError:
        raise PolicyError(
            f"the policy {_label(policy)} returned {action!r} ({type(action).__name__}), not an action: an action is a "
            "whole number (-1 rejects)"
        ) from None
