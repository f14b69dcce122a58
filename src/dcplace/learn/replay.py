"""The replay buffer of the Double DQN trainers: a ring of transitions stored as flat arrays, one per field.

Each algorithm names its fields (shape of one transition, dtype); every buffer also holds ``r`` (reward, float32)
and ``done`` (1.0 where the episode ended after this transition: no bootstrap). A variable-length field (a
decision's candidates) is zero-padded to the field's width.
"""

from __future__ import annotations

import zipfile
from pathlib import Path
from typing import Any

import numpy as np
import numpy.typing as npt
import torch

from dcplace.atomic import atomic_path
from dcplace.errors import InputError
from dcplace.inputs import check_file

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
        arrays: dict[str, Any] = {"size": self.size, "pos": self.pos, **self.arrays}
        with atomic_path(path) as tmp, open(tmp, "wb") as fh:  # a file object: np.savez adds no ".npz" suffix
            np.savez(fh, **arrays)

    def restore(self, path: Path) -> None:
        """Read back what :meth:`save` wrote (the buffer must have the same layout)."""
        if not path.exists():
            raise InputError(
                f"{path}: the replay buffer of the run is missing (needed for an exact resume; train with "
                "--keep-replay to keep it)"
            )
        check_file(path, "replay buffer")
        try:
            with np.load(path) as z:
                size, pos = int(z["size"]), int(z["pos"])
                arrays = {k: z[k] for k in self.arrays}
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            raise InputError(f"not a readable replay buffer ({type(exc).__name__}): damaged or truncated",
                             path=path) from None  # fmt: skip
        for k, v in arrays.items():
            if v.shape != self.arrays[k].shape:
                raise InputError(f"array {k!r} has shape {v.shape}, the run needs {self.arrays[k].shape}", path=path)
            self.arrays[k][:] = v
        self.size, self.pos = size, pos
