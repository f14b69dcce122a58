"""The training skeleton shared by every trainer (Double DQN for CVD-RL and SchedRL, PPO for Nara).

An algorithm supplies one *step* of collecting and updating (:meth:`TrainingRun.advance`, returning the step's curve
row), a greedy *validation* score (:meth:`TrainingRun.validate`, higher is better) and what its checkpoints must
hold beyond the weights (:meth:`TrainingRun.meta`, :meth:`TrainingRun.training_state`). The skeleton owns the rest:

* the loop: ``train(total)`` runs steps until ``total`` are done (a resumed run counts what it already did), timing
  each step into ``wall_s`` and reporting each row to an optional callback (a progress bar);
* validation every ``eval_every`` steps and after the first; the best-validating weights are the run's policy,
  ``policy.pt`` (a policy checkpoint: weights + meta);
* ``curves.csv`` (one row per step, the algorithm's columns, then ``validation_<what>`` and ``wall_s``) and
  ``curves.png`` (drawn when a save follows a validation step, and at the end);
* ``checkpoint.pt`` (weights, ``training_state()``, curves, counters in meta) every ``save_every`` steps and at the
  end, read back by :meth:`TrainingRun.restore` so a resumed run continues bit for bit;
* **the checkpoint set is one unit**: ``checkpoint.pt``, the side files (``replay.npz``), ``curves.csv`` /
  ``curves.png`` and ``policy.pt`` are written together into a temporary folder that replaces ``out`` in one swap
  (:func:`dcplace.atomic.atomic_dir`, the folder's other files carried over), so they always describe the same
  step: a best policy found between two saves is held in memory until the next one. An interrupt (SIGINT, SIGTERM)
  or a crash at any moment leaves the previous set, from which ``--resume`` continues exactly;
* ``train.json`` (:meth:`TrainingRun.write_summary`): the command, the run's meta and the session's wall time.

Randomness is the algorithm's: it must draw from generators seeded by (seed, step) or (seed, episode), never from
global state, so that a resumed run is identical to an uninterrupted one.

Rollouts: an algorithm that plays its episodes through ``self.rollouts`` (:class:`dcplace.learn.rollouts.Rollouts`,
in this process by default) collects on a process pool or Ray when given one (``use_executor``), with the same
results; ``actor_drops`` lists what the actors do not need.
"""

from __future__ import annotations

import copy
import json
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, ClassVar, Generic, TypeVar

import torch

from dcplace.atomic import atomic_dir, write_text
from dcplace.errors import InputError
from dcplace.learn import checkpoint
from dcplace.learn.curves import write_csv
from dcplace.learn.rollouts import Rollouts
from dcplace.parallel import Executor

Row = dict[str, float]
Net = TypeVar("Net", bound=torch.nn.Module)


class TrainingRun(ABC, Generic[Net]):
    """One training run writing to ``out``. Subclasses set the class fields and implement the abstract methods."""

    fmt: ClassVar[str]
    """Checkpoint format tag of the model family (:mod:`dcplace.learn.checkpoint`)."""
    what: ClassVar[str]
    """The model family in error messages (``CVD-RL``, ``Nara``)."""
    unit: ClassVar[str]
    """What one step is called (``epoch``, ``iteration``): the curves' first column and meta's ``best_<unit>``."""
    score: ClassVar[str]
    """What validation measures (``length``, ``acceptance``): the curves' ``validation_<score>`` column."""
    save_every: ClassVar[int] = 1
    actor_drops: tuple[str, ...] = ("opt", "curves", "_best_policy", "rollouts")
    """What an actor playing episodes elsewhere does not need (:mod:`dcplace.learn.rollouts`)."""
    """Write ``checkpoint.pt`` every this many steps (and at the end)."""

    net: Net
    """The network being trained (what ``policy.pt`` holds)."""
    opt: torch.optim.Optimizer

    def __init__(self, out: Path, seed: int, eval_every: int) -> None:
        self.out, self.seed, self.eval_every = out, seed, eval_every
        self.done = 0
        """Steps done."""
        self.wall_s = 0.0
        """Seconds spent in steps (validation included, file writing not)."""
        self.best_validation = -1.0
        self.curves: list[Row] = []
        self._best_policy: tuple[torch.nn.Module, dict[str, Any]] | None = None
        """(a copy of the network, meta) of a best policy not yet written (it goes out with the next checkpoint set)."""
        self._plot_due = False
        self.rollouts = Rollouts(self)
        """Where episodes are played (this process until :meth:`use_executor`)."""

    def use_executor(self, executor: Executor) -> None:
        """Play episodes on ``executor`` from now on (same results as in this process)."""
        self.rollouts = Rollouts(self, executor)

    def actor_weights(self) -> dict[str, torch.Tensor]:
        """The weights an actor plays with."""
        return self.net.state_dict()

    def load_actor_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Play with ``weights`` (an actor's copy of the trainer)."""
        self.net.load_state_dict(weights)

    # --- what an algorithm supplies --------------------------------------------------------------------------------

    @abstractmethod
    def advance(self) -> Row:
        """Collect and update once; increment ``self.done``; return the step's curve row (first key: ``unit``)."""

    @abstractmethod
    def validate(self) -> float:
        """The greedy policy's validation score (higher is better)."""

    @abstractmethod
    def meta(self, **extra: Any) -> dict[str, Any]:
        """What a checkpoint records about the run (scenario, seed, counters, configuration)."""

    def training_state(self) -> dict[str, Any]:
        """What ``checkpoint.pt`` holds beyond the weights and curves (the optimiser by default)."""
        return {"optimizer": self.opt.state_dict()}

    def save_side_files(self, folder: Path) -> None:
        """Files beside ``checkpoint.pt`` in ``folder`` (the checkpoint set being written) that an exact resume needs
        (none by default)."""
        return None

    @abstractmethod
    def plot(self, path: Path) -> None:
        """Draw ``self.curves`` to ``path``."""

    # --- the loop --------------------------------------------------------------------------------------------------

    def step(self) -> Row:
        """One step (the algorithm's collect and update, then maybe validation); returns its curve row."""
        row = self.advance()
        row[f"validation_{self.score}"] = float("nan")
        if self.done % self.eval_every == 0 or self.done == 1:
            val = self.validate()
            row[f"validation_{self.score}"] = val
            if val > self.best_validation:
                self.best_validation = val
                meta = self.meta(**{f"best_{self.unit}": self.done})
                self._best_policy = (copy.deepcopy(self.net), meta)
        self.curves.append(row)
        return row

    def train(self, total: int, on_step: Callable[[Row], None] | None = None, save_every: int | None = None) -> None:
        """Run until ``total`` steps are done in total (a resumed run counts what it already did)."""
        every = save_every or self.save_every
        self.out.mkdir(parents=True, exist_ok=True)
        while self.done < total:
            t0 = time.perf_counter()
            row = self.step()
            self.wall_s += time.perf_counter() - t0
            row["wall_s"] = self.wall_s
            last = self.done == total
            self._plot_due = self._plot_due or last or self.done % self.eval_every == 0
            if last or self.done % every == 0:
                self.save_training()
            if on_step:
                on_step(row)

    # --- files -----------------------------------------------------------------------------------------------------

    def write_curves(self, folder: Path, plot: bool = True) -> None:
        """``curves.csv`` (and ``curves.png`` when ``plot``) into ``folder``."""
        if not self.curves:
            return
        write_csv(self.curves, folder / "curves.csv")
        if plot:
            self.plot(folder / "curves.png")

    def save_training(self) -> None:
        """The checkpoint set, as one unit (module docstring): ``checkpoint.pt`` (weights, training state, curves;
        counters in meta), the side files, the curves and a pending best ``policy.pt``."""
        extra = {**self.training_state(), "curves": self.curves}
        with atomic_dir(self.out, carry=True) as folder:
            self.save_side_files(folder)
            checkpoint.save(folder / "checkpoint.pt", self.net, self.meta(), extra=extra, fmt=self.fmt)
            self.write_curves(folder, plot=self._plot_due)
            if self._best_policy is not None:
                best, meta = self._best_policy
                checkpoint.save(folder / "policy.pt", best, meta, fmt=self.fmt)
        self._best_policy = None
        self._plot_due = False

    def write_summary(self, command: str, session_wall_s: float, **extra: Any) -> Path:
        """``train.json``: the command that ran, the run's meta, ``extra`` (reference scores) and the session's
        wall time (steps plus setup and files; ``wall_s`` in meta counts the steps of every session)."""
        path = self.out / "train.json"
        summary = {"command": command, **self.meta(), **extra, "session_wall_s": session_wall_s}
        write_text(path, json.dumps(summary, indent=2) + "\n")
        return path

    @classmethod
    def read_run(cls, out: Path, expect: Mapping[str, Any]) -> dict[str, Any]:
        """The run's ``checkpoint.pt``, refused unless its meta matches ``expect`` (scenario, seed, ...)."""
        path = out / "checkpoint.pt"
        blob = checkpoint.read(path, cls.fmt, cls.what)
        meta = blob["meta"]
        for key, want in expect.items():
            if meta.get(key) != want:
                raise InputError(f"{path}: field 'meta.{key}' is {meta.get(key)!r}, but this run asks for {want!r}")
        return blob

    def restore(self, blob: Mapping[str, Any], counters: Iterable[str] = ()) -> None:
        """Continue from a training checkpoint: weights, optimiser, curves, the skeleton's counters and the
        algorithm's ``counters`` (attribute names also stored in meta)."""
        meta = blob["meta"]
        self.net.load_state_dict(blob["model"])
        self.opt.load_state_dict(blob["optimizer"])
        self.done = meta[f"{self.unit}s"]
        self.wall_s = meta["wall_s"]
        self.best_validation = meta[f"validation_{self.score}"]
        for name in counters:
            setattr(self, name, meta[name])
        self.curves = list(blob["curves"])


def plot_curves(
    curves: list[Row],
    path: Path,
    title: str,
    unit: str,
    train: tuple[str, str],
    validation: tuple[str, str],
    panels: list[tuple[str, str, bool]],
) -> None:
    """A figure of ``curves`` against ``unit``: the training score ``train`` (column, label) with the validation
    points ``validation`` (column, label) in the first panel, then one panel per ``(column, label, log scale)``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    x = [r[unit] for r in curves]
    fig, axes = plt.subplots(1, 1 + len(panels), figsize=(3.6 + 3.7 * (1 + len(panels)), 3.6))
    axes[0].plot(x, [r[train[0]] for r in curves], alpha=0.5, label=train[1])
    val = [(r[unit], r[validation[0]]) for r in curves if r[validation[0]] == r[validation[0]]]
    if val:
        axes[0].plot(*zip(*val, strict=True), "o-", label=validation[1])
    axes[0].set_ylabel(train[0].removeprefix("train_").replace("_", " "))
    axes[0].legend()
    for ax, (col, label, log) in zip(axes[1:], panels, strict=True):
        ax.plot(x, [r[col] for r in curves])
        ax.set_ylabel(label)
        if log:
            ax.set_yscale("log")
    for ax in axes:
        ax.set_xlabel(unit)
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)
