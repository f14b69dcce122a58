"""The replay buffer of the Double DQN trainers: a ring of transitions stored as flat arrays, one per field.

Each algorithm names its fields (shape of one transition, dtype); every buffer also holds ``r`` (reward, float32)
and ``done`` (1.0 where the episode ended after this transition: no bootstrap). A variable-length field (a
decision's candidates) is zero-padded to the field's width.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from dcplace.errors import InputError

Layout = dict[str, tuple[tuple[int, ...], type[np.generic]]]
"""Field name -> (shape of one transition's value, dtype)."""


class Replay:
    """``cap`` transitions; ``add`` overwrites the oldest once full, ``sample`` returns tensors of a batch."""

    def __init__(self, cap: int, layout: Layout) -> None:
        self.cap, self.size, self.pos = cap, 0, 0
        self.arrays: dict[str, npt.NDArray[Any]] = {k: np.zeros((cap, *shape), dt) for k, (shape, dt) in layout.items()}
        self.arrays["r"] = np.zeros(cap, np.float32)
        self.arrays["done"] = np.zeros(cap, np.float32)

    def add(self, **fields: Any) -> None:
        i = self.pos
        for k, v in fields.items():
            arr = self.arrays[k]
            if arr.ndim >= 2 and np.ndim(v) >= 1 and np.shape(v)[0] < arr.shape[1]:
                arr[i] = 0
                arr[i, : np.shape(v)[0]] = v
            else:
                arr[i] = v
        self.pos = (i + 1) % self.cap
        self.size = min(self.size + 1, self.cap)

    def sample(self, idx: npt.NDArray[np.int64]) -> dict[str, torch.Tensor]:
        return {k: torch.from_numpy(v[idx]) for k, v in self.arrays.items()}

    def save(self, path: Path) -> None:
        """Write the buffer atomically (``np.savez``)."""
        tmp = path.with_name(path.stem + ".tmp.npz")
        arrays: dict[str, Any] = {"size": self.size, "pos": self.pos, **self.arrays}
        np.savez(tmp, **arrays)
        tmp.replace(path)

    def restore(self, path: Path) -> None:
        """Read back what :meth:`save` wrote (the buffer must have the same layout)."""
        if not path.is_file():
            raise InputError(
                f"{path}: the replay buffer of the run is missing (needed for an exact resume; train with "
                "--keep-replay to keep it)"
            )
        with np.load(path) as z:
            self.size, self.pos = int(z["size"]), int(z["pos"])
            for k in self.arrays:
                self.arrays[k][:] = z[k]
