"""The public policy API: what a placement policy is, for each setting.

A policy answers one call, ``choose(view) -> action``, over a read-only view of the state with one request waiting.
The episode loop, the ledger and feasibility live in the library (the simulators and the live engine), never in a
policy, so the same object decides in a trace replay, a benchmark, a reproduction and behind the service.

NUMA setting (online VM scheduling on NUMA machines, :class:`~dcplace.sim.numa.NumaView`):

* subclass :class:`NumaPolicy` and write ``choose(view) -> int`` (``machine * numa + node``, or -1 to reject); or
* subclass :class:`ScoredNumaPolicy` and write only ``score(view) -> (machines * numa,) array`` (higher is better):
  the library filters (feasible and usable actions only) and picks (the best, ties to the lower index). This is the
  Kubernetes scheduler's filter -> score -> pick, and how every built-in heuristic is shaped.

Network-aware setting (multi-server requests with bandwidth, :class:`~dcplace.sim.netalloc.NetView`): subclass
:class:`NetPolicy` and write ``choose(view) -> server``; the simulator routes and keeps the bandwidth ledger.

A worked example (``docs/policies.md``, run by ``tests/policies/test_user_policy.py``)::

    import numpy as np
    from dcplace.policies import NumaView, ScoredNumaPolicy

    class WorstFit(ScoredNumaPolicy):
        '''The machine with the most CPU left after placement.'''
        name = "worst-fit"

        def score(self, view: NumaView) -> np.ndarray:
            left = view.free[:, :, 0].sum(axis=1) - view.demand[0]   # (machines,)
            return np.repeat(left, view.numa)                       # (machines * numa,)

Load it with ``dcplace simulate numa --policy mypackage.policies:WorstFit``, or register it for every command in
your package's ``pyproject.toml``::

    [project.entry-points."dcplace.policies"]
    worst-fit = "mypackage.policies:WorstFit"
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import TYPE_CHECKING, ClassVar

import numpy as np
import numpy.typing as npt

from dcplace.sim.policy_calls import as_action, decide

if TYPE_CHECKING:
    from dcplace.sim.netalloc import NetView
    from dcplace.sim.numa import NumaSim, NumaView

#: The settings a policy can act in.
SETTINGS = ("numa", "netalloc")


class NumaPolicy(ABC):
    """An online NUMA placement policy. Required: ``name`` and :meth:`choose`."""

    setting: ClassVar[str] = "numa"
    numa: int | None = None
    """The NUMA nodes per machine this policy can act on; None (the default): any. A learned policy's network fixes
    it (its inputs are laid out per node), and the live engine refuses a policy whose number is not its own."""

    @property
    def name(self) -> str:
        """The name shown in results; override with a class attribute (``name = "worst-fit"``) or a property."""
        return type(self).__name__

    @abstractmethod
    def choose(self, view: NumaView) -> int:
        """The action for the waiting request: ``machine * view.numa + node`` (for a multi-NUMA request any node of
        the machine means the machine), or -1 to reject it. An infeasible action is a rejection too: the simulator
        ends the episode as ``invalid``, the engine answers with the reason."""

    def rank(self, view: NumaView, n: int) -> list[tuple[int, tuple[float, ...]]]:
        """Up to ``n`` candidate actions, best first, each with the policy's score (for explanations). The default
        gives the chosen action only, with an empty score."""
        a = self.choose(view)
        return [] if a < 0 else [(a, ())]

    def run(self, sim: NumaSim) -> int:
        """Finish a simulator episode, deciding every request; return the final status. The loop is the library's:
        override only to go faster with the same decisions (the compiled heuristics do)."""
        from dcplace.sim.numa_kernel import DECIDE

        status = sim.status
        while status == DECIDE:
            status = sim.step(as_action(self, decide(self, sim.view())))
        return status


class ScoredNumaPolicy(NumaPolicy):
    """Filter -> score -> pick: write :meth:`score`; the library keeps feasible, usable actions and takes the best
    (ties: the lower action index, i.e. machine first, then node)."""

    @abstractmethod
    def score(self, view: NumaView) -> npt.NDArray[np.float64]:
        """``(machines * numa,)`` scores, higher is better; entries of infeasible actions are ignored."""

    def _feasible_scores(self, view: NumaView) -> tuple[npt.NDArray[np.int64], npt.NDArray[np.float64]]:
        """The feasible actions (ascending) and their scores; a score of the wrong shape, or NaN for a feasible
        action, is the policy's error (NaN compares false with everything, so it silently ranked as first-fit)."""
        mask = view.feasible()
        if not mask.any():  # nothing to score: the request is rejected without asking the policy
            return np.zeros(0, np.int64), np.zeros(0)
        s = np.asarray(self.score(view), np.float64)
        if s.shape != mask.shape:
            raise ValueError(f"{type(self).__name__}.score returned shape {s.shape}, expected {mask.shape}")
        actions = np.flatnonzero(mask)
        scores = s[actions]
        nan = np.flatnonzero(np.isnan(scores))
        if len(nan):
            raise ValueError(f"{type(self).__name__}.score returned NaN for feasible action {actions[nan[0]]}")
        return actions, scores

    def choose(self, view: NumaView) -> int:
        actions, scores = self._feasible_scores(view)
        # among feasible actions only: where every feasible score is -inf, np.argmax over the masked array picked
        # action 0 even when infeasible
        return int(actions[np.argmax(scores)]) if len(actions) else -1

    def rank(self, view: NumaView, n: int) -> list[tuple[int, tuple[float, ...]]]:
        actions, scores = self._feasible_scores(view)
        order = np.argsort(-scores, kind="stable")[:n]
        return [(int(actions[i]), (float(scores[i]),)) for i in order]


class NetPolicy(ABC):
    """A network-aware allocation policy: picks one server at a time for the waiting multi-server request."""

    setting: ClassVar[str] = "netalloc"

    @property
    def routing(self) -> str:
        """Whose paths connect this policy's servers: ``simulator`` (the simulator's k shortest paths, the paper's
        environment) or ``weighted`` (its own bandwidth-weighted k shortest paths, NALB's and NULB's, appendix D.2;
        :class:`dcplace.sim.routing.WeightedRouting`)."""
        return "simulator"

    @property
    def any_server(self) -> bool:
        """Whether this policy may pick any server not yet picked for the request (the paper's action space, section
        3.2), not only one of ``view.action_mask()``; the episode loop then builds the simulator with
        ``any_server=True`` so that such a pick is valid (``nulb``, ``random-any``)."""
        return False

    @property
    def name(self) -> str:
        """The name shown in results; override with a class attribute or a property."""
        return type(self).__name__

    @abstractmethod
    def choose(self, view: NetView) -> int:
        """The next server for the waiting request (one of ``view.action_mask()``, or of the servers not yet picked
        where :attr:`any_server` is true)."""
