"""``dcplace/NumaVM-v0``: online VM placement on machines with NUMA nodes (CVD-RL's setting, VMAgent's semantics).

Specification (``M`` = machines after any expansion, i.e. ``max_pms`` in Expansion mode, else ``pms``; ``K`` = NUMA
nodes per machine, 2 by default):

Observation, a ``Dict``:
    * ``machines``: ``(M, K, 2)`` float32, free CPU cores and GB of memory of every NUMA node; machines not (yet)
      in the cluster read 0.
    * ``request``: ``(3,)`` float32, the waiting VM: ``[cpu cores, memory GB, 1 if multi-NUMA else 0]`` (all 0 once
      the episode is over; requests larger than a machine are skipped and counted, never shown).
    * ``action_mask``: ``(M * K,)`` int8, 1 where the action can host the request.
Action:
    ``Discrete(M * K)``. Action ``a`` = machine ``a // K``, NUMA node ``a % K`` (the paper's encoding). For a
    multi-NUMA VM every action of a machine means that machine (it takes ``1/K`` from each node). The mask is also
    returned by :meth:`NumaVMEnv.action_masks` and in ``info["action_mask"]``.
Reward:
    1.0 for each VM placed, else 0.0 (the return is the scheduled length; VMAgent's reward).
Reset:
    Draws an episode start (seeded by ``reset(seed=...)``); a start whose episode would be over before its first
    decision (e.g. a warm start that fills 4 machines) is drawn again, up to ``RESET_DRAWS`` times, then refused with
    an :class:`~dcplace.errors.InputError` saying why. So ``reset`` never returns a finished episode.
    Options: ``episode`` (with ``seed=s``): episode ``i`` of ``dcplace simulate numa --seed s``, exactly (its start
    and its random stream; :func:`dcplace.sim.episodes.start_seed`), on the same trace: the CLI draws ``synthetic``
    and a user's trace function with ``--seed``, so give ``trace=load_trace("synthetic", seed=s)`` for those (a
    file or a named real trace is the same for every seed); ``start_event``: start the episode at this event of the
    trace (0 .. events - 1). Another key, or both, is an InputError.
Action validity:
    An action outside ``Discrete(M * K)`` (not an integer, e.g. 1.7 or ``"3"``, or out of range) raises
    ``ValueError``, as Gymnasium expects; a masked (infeasible) action in range ends the episode as below.
Termination:
    ``terminated`` when the next request fits nowhere (after expansion to ``max_pms`` in Expansion mode), or when
    an infeasible (masked) action is taken: that request fails, ``info["invalid_action"]`` is True, reward 0.
    ``truncated`` at the end of the trace or after ``max_requests`` placements.
Dynamics:
    Departures, warm start, expansion and episode starts as documented in :mod:`dcplace.sim.numa`. The environment
    never asks for a decision that no action can satisfy.
Info:
    ``action_mask``, ``request`` (index in the trace), ``length``, ``active_pms``, and at the end ``result`` (the
    :class:`~dcplace.sim.numa.EpisodeResult` fields). It was ``episode`` before, the key Gymnasium's
    ``RecordEpisodeStatistics`` wrappers reserve (they failed at the first episode end).
Settings:
    Checked when the environment is made: a bad one is an :class:`~dcplace.errors.InputError` naming it.
    ``step`` before ``reset`` raises ``RuntimeError``.
"""

from __future__ import annotations

import math
from dataclasses import asdict
from typing import Any

import gymnasium as gym
import numpy as np
import numpy.typing as npt
from gymnasium import spaces

from dcplace.cluster.numa import VMAGENT_NODE_CPU, VMAGENT_NODE_MEM, NumaCluster
from dcplace.config import check, is_whole
from dcplace.envs.actions import check_render_mode, checked_action
from dcplace.errors import InputError
from dcplace.sim import numa_kernel as K
from dcplace.sim.numa import Mode, NumaSim, PreparedTrace, Scenario
from dcplace.workload.table import RequestTable
from dcplace.workload.traces import load_trace

RESET_DRAWS = 100
"""Episode starts :meth:`NumaVMEnv.reset` draws, at most, to find one that is not over before its first decision."""


class NumaVMEnv(gym.Env[dict[str, npt.NDArray[Any]], int]):
    """See the module docstring: it is this environment's specification."""

    metadata = {"render_modes": []}  # noqa: RUF012

    def render(self) -> None:
        """Nothing to draw (no render modes): None, as Gymnasium's environments return with ``render_mode`` None
        (the base class raised ``NotImplementedError``)."""
        return None

    def __init__(
        self,
        trace: str | RequestTable = "synthetic",
        pms: int = 50,
        mode: Mode = "non-expansion",
        max_pms: int = 110,
        expand_step: int = 10,
        warm_start: float = 0.0,
        release: bool = True,
        double_threshold: float = 32.0,
        max_requests: int = 0,
        start_range: tuple[int, int] = (1000, 10000),
        numa: int = 2,
        node_cpu: float = VMAGENT_NODE_CPU,
        node_mem: float = VMAGENT_NODE_MEM,
        render_mode: str | None = None,
    ) -> None:
        check_render_mode(render_mode)
        if not isinstance(trace, str | RequestTable):
            raise InputError(f"must be a trace name, a trace file or a RequestTable, got {trace!r}", field="trace")
        check(is_whole(numa) and numa >= 1, "numa", numa, "a whole number >= 1")
        for name, value, zero in (("node_cpu", node_cpu, False), ("node_mem", node_mem, False),
                                  ("double_threshold", double_threshold, True)):  # fmt: skip
            number = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)
            check(number and (value >= 0 if zero else value > 0), name, value,
                  f"a finite number {'>=' if zero else '>'} 0")  # fmt: skip
        table = load_trace(trace) if isinstance(trace, str) else trace
        self.scenario = Scenario(
            pms=pms, mode=mode, max_pms=max_pms, expand_step=expand_step, release=release,
            warm_start=warm_start, max_requests=max_requests, start_range=start_range,
        )  # fmt: skip
        self.cluster = NumaCluster.uniform(self.scenario.machines, numa=numa, cpu=node_cpu, mem=node_mem)
        self.sim = NumaSim(self.cluster, PreparedTrace.build(table.with_double_numa_threshold(double_threshold)),
                           self.scenario)  # fmt: skip
        m, k = self.cluster.machines, self.cluster.numa
        high = float(max(node_cpu, node_mem))
        self._high = high
        self.observation_space: spaces.Dict = spaces.Dict(  # type: ignore[assignment]
            {
                "machines": spaces.Box(0.0, high, shape=(m, k, 2), dtype=np.float32),
                "request": spaces.Box(0.0, k * high, shape=(3,), dtype=np.float32),
                "action_mask": spaces.MultiBinary(m * k),
            }
        )
        self.action_space: spaces.Discrete = spaces.Discrete(m * k)  # type: ignore[assignment]
        self._mask = np.zeros(m * k, np.int8)
        self._started = False

    # -- gymnasium API --------------------------------------------------------------------------------------
    def reset(
        self, *, seed: int | None = None, options: dict[str, Any] | None = None
    ) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
        super().reset(seed=seed)
        opts = dict(options or {})
        unknown = sorted(set(opts) - {"start_event", "episode"})
        if unknown or len(opts) > 1:
            what = f"unknown reset option {unknown[0]!r}" if unknown else "start_event and episode together"
            raise InputError(f"{what}: NumaVM takes start_event or episode", field="options")
        self._started = True
        if "episode" in opts:
            return self._cli_episode(seed, opts["episode"])
        start = opts.get("start_event")
        for _ in range(1 if start is not None else RESET_DRAWS):
            self.sim.reset(seed=int(self.np_random.integers(2**63 - 1)), start_event=start)
            if self.sim.status == K.DECIDE:
                return self._obs(), self._info()
        sc = self.scenario
        where = f"starting at event {start}" if start is not None else f"of {RESET_DRAWS} drawn"
        raise InputError(
            f"every episode {where} is over before its first decision (pms {sc.pms}, warm start {sc.warm_start:g}, "
            f"mode {sc.mode}): the warm start or the cluster leaves no room for the next request",
            field="warm_start",
        )

    def _cli_episode(self, seed: int | None, episode: object) -> tuple[dict[str, npt.NDArray[Any]], dict[str, Any]]:
        """``reset(seed=s, options={"episode": i})``: episode ``i`` of ``dcplace simulate numa --seed s``."""
        from dcplace.sim.episodes import start_seed

        check(is_whole(episode) and episode >= 0, "episode", episode, "a whole number >= 0")  # type: ignore[operator]
        if seed is None:
            raise InputError(
                "the episode option needs reset(seed=...): episode i of a run is its seed's", field="options"
            )
        if self.sim.reset(seed=start_seed(seed, int(episode))) != K.DECIDE:  # type: ignore[call-overload]
            why = "the CLI records it as it is; an environment cannot return a finished episode"
            raise InputError(
                f"episode {episode} of seed {seed} is over before its first decision ({why})", field="options"
            )
        return self._obs(), self._info()

    def step(self, action: int) -> tuple[dict[str, npt.NDArray[Any]], float, bool, bool, dict[str, Any]]:
        if not self._started:
            raise RuntimeError("call reset() first")
        before = int(self.sim.ctr[K.C_LENGTH])
        status = self.sim.step(checked_action(self.action_space, action))
        placed = int(self.sim.ctr[K.C_LENGTH]) > before
        terminated = status in (K.TERMINATED, K.INVALID)
        truncated = status == K.TRUNCATED
        obs = self._obs()  # refreshes the mask that _info reports
        info = self._info()
        info["invalid_action"] = status == K.INVALID
        if terminated or truncated:
            info["result"] = asdict(self.sim.result())
        return obs, 1.0 if placed else 0.0, terminated, truncated, info

    def action_masks(self) -> npt.NDArray[np.bool_]:
        """``(M * K,)`` bool: the feasible actions for the waiting request (all False once the episode is over)."""
        return self.sim.feasible_mask()

    # -- helpers --------------------------------------------------------------------------------------------
    def _obs(self) -> dict[str, npt.NDArray[Any]]:
        # free capacity is a float64 running sum: VMs of a third of a core leave -7e-15 on a node they filled, which
        # is outside the observation space's Box(low=0) (the fit tolerance admits it); the space's bounds hold now
        machines = np.clip(self.sim.free, 0.0, self._high).astype(np.float32)
        machines[self.sim.n_active :] = 0.0
        self._mask[:] = self.sim.feasible_mask()
        req = np.zeros(3, np.float32)
        if self.sim.status == K.DECIDE:
            r = self.sim.request
            req[:] = (*self.sim.trace.demand[r], float(self.sim.trace.multi[r]))
        return {"machines": machines, "request": req, "action_mask": self._mask.copy()}

    def _info(self) -> dict[str, Any]:
        return {
            "action_mask": self._mask.astype(bool),
            "request": self.sim.request if self.sim.status == K.DECIDE else -1,
            "length": int(self.sim.ctr[K.C_LENGTH]),
            "active_pms": self.sim.n_active,
        }
