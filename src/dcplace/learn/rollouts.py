"""Rollout collection inside one training run, on any :mod:`dcplace.parallel` executor (this process, a local process
pool, or Ray).

A trainer that collects through :class:`Rollouts` plays each episode from that episode's own seed, so what an episode
produces depends only on the episode's index and the weights it was played with, never on which worker played it
or how many collected at once; the learner puts the episodes back in index order. One worker and many give the same
transitions, the same updates and the same weights (tests/learn/test_rollouts.py checks inline, a process pool and
Ray against each other).

How it works: the trainer names an episode method (``play``) and its arguments per episode. With the inline executor
the method runs on the trainer itself. Otherwise every job carries (a) the trainer's *actor state*: the trainer
pickled without what only the learner needs (optimiser, target network, replay buffer, curves; the class lists them
in ``actor_drops``), built once per run and cached by each worker process under the run's token, and (b) the
current weights as a state dict. The worker loads the weights into its copy (``load_actor_weights``), plays, and
returns what the episode produced. The actor state (the trainer with its trace: up to ~16 MB for CVD-RL on
Huawei-East-1) travels with the first round's jobs only; a worker meeting the run for the first time later asks for
it (:data:`MISSING`) and gets its jobs again with it.

    with executor(workers=2, ray_address="local") as ex:
        trainer.rollouts = Rollouts(trainer, ex)
        trainer.train(100)
"""

from __future__ import annotations

import io
import pickle
import uuid
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np
import torch

from dcplace.parallel import Executor, Inline


class Actor(Protocol):
    """What a trainer provides to collect through :class:`Rollouts`."""

    actor_drops: tuple[str, ...]
    """Attributes the actors do not need (left out of the actor state)."""

    def actor_weights(self) -> dict[str, torch.Tensor]:
        """The weights an actor plays with (a state dict)."""
        ...

    def load_actor_weights(self, weights: dict[str, torch.Tensor]) -> None:
        """Play with ``weights`` from now on."""
        ...


_ACTORS: dict[str, Any] = {}
"""Per process: run token -> that run's actor (the latest run only; a process serves one run at a time)."""


MISSING = "dcplace-rollouts: actor state missing"
"""What a worker answers to a job without the actor state when it has not met the run yet."""


def _play(job: tuple[str, bytes | None, bytes, str, tuple[Any, ...]]) -> Any:
    """One episode in a worker: the run's actor (unpickled once per process), the job's weights, the method."""
    token, state, weights, method, args = job
    actor = _ACTORS.get(token)
    if actor is None:
        if state is None:
            return MISSING
        _ACTORS.clear()
        actor = _ACTORS[token] = pickle.loads(state)
    actor.load_actor_weights(torch.load(io.BytesIO(weights), weights_only=True))
    return getattr(actor, method)(*args)


class Rollouts:
    """Plays a trainer's episodes on an executor; see the module docstring."""

    def __init__(self, trainer: Actor, executor: Executor | None = None) -> None:
        self.trainer = trainer
        self.executor: Executor = executor or Inline()
        self.token = uuid.uuid4().hex
        self._state: bytes | None = None
        self._rounds = 0

    @property
    def workers(self) -> int:
        """Episodes played at once."""
        return self.executor.workers

    def actor_state(self) -> bytes:
        """The trainer pickled without ``actor_drops`` (built once)."""
        if self._state is None:
            t = self.trainer
            drops = set(t.actor_drops)
            copy = object.__new__(type(t))
            copy.__dict__.update({k: v for k, v in vars(t).items() if k not in drops})
            self._state = pickle.dumps(copy, protocol=pickle.HIGHEST_PROTOCOL)
        return self._state

    def play(self, method: str, args: Sequence[tuple[Any, ...]]) -> list[Any]:
        """``[trainer.method(*a) for a in args]`` with the trainer's current weights, in the order of ``args``.

        The actor state goes with every job of the first round only; a worker that has not met the run since (a
        process replaced, a new Ray worker) answers :data:`MISSING` and its jobs are sent again with the state."""
        if self.executor.engine == "inline":
            return [getattr(self.trainer, method)(*a) for a in args]
        buf = io.BytesIO()
        torch.save(self.trainer.actor_weights(), buf)
        weights = buf.getvalue()
        state = None if self._rounds else self.actor_state()
        self._rounds += 1
        out = self.executor.map(_play, [(self.token, state, weights, method, tuple(a)) for a in args])
        again = [i for i, r in enumerate(out) if isinstance(r, str) and r == MISSING]
        if again:
            state = self.actor_state()
            redo = self.executor.map(_play, [(self.token, state, weights, method, tuple(args[i])) for i in again])
            for i, r in zip(again, redo, strict=True):
                out[i] = r
        return out


class Recorder:
    """Stands in for a replay buffer while an episode is played: keeps each ``add``'s fields (copied), in order, so
    the learner can replay them into its buffer (:meth:`into`) exactly as if they had been added there."""

    def __init__(self) -> None:
        self.rows: list[dict[str, Any]] = []

    def add(self, **fields: Any) -> None:
        self.rows.append({k: np.array(v, copy=True) for k, v in fields.items()})

    def into(self, buffer: Any) -> None:
        """Add the recorded transitions to ``buffer`` in the order they were recorded."""
        for row in self.rows:
            buffer.add(**row)
