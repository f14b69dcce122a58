"""What the environments share: the action check (Gymnasium's contract for ``Discrete`` spaces) and render_mode's."""

from __future__ import annotations

from typing import Any

import numpy as np
from gymnasium import spaces

from dcplace.errors import InputError


def checked_action(space: spaces.Discrete, action: Any) -> int:
    """``action`` as an int when it is an element of ``space`` (a Python or numpy integer, or a 0-d integer array,
    in ``start .. start + n - 1``); else ``ValueError``. A float such as 1.7, a string such as ``"3"`` or a bool is
    refused rather than truncated or converted."""
    if isinstance(action, bool | np.bool_) or not space.contains(action):
        raise ValueError(
            f"action must be an integer in {space.start}..{space.start + space.n - 1} ({space}), got {action!r}"
        )
    return int(action)


class RenderModeError(InputError, TypeError):
    """A ``render_mode`` the environments do not have: an :class:`InputError` (one sentence, exit 2 in the CLI) and a
    ``TypeError``, the class tools catch to retry without one (Stable-Baselines3's ``make_vec_env`` asks for
    ``"rgb_array"`` first and retried only on ``TypeError``: it failed on both environments)."""


def check_render_mode(render_mode: object) -> None:
    """The environments draw nothing (``metadata["render_modes"]`` is empty): ``render_mode`` must be None."""
    if render_mode is not None:
        raise RenderModeError(f"must be None (this environment has no render modes), got {render_mode!r}",
                              field="render_mode")  # fmt: skip
