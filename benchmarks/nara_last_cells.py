"""The last four Table 1 cells the ``paper-reject`` setting (``paper`` until 2026-11-27) misses (issue 16, item 4;
docs/netalloc.md, "The last four cells"): Tetris azure beta (ours 0.73, paper 0.67), NULB alibaba alpha (0.36 vs
0.20), Random alibaba alpha and beta (0.37 / 0.37 vs 0.29 / 0.31). Runs, in the ``paper-reject`` setting
(``--episodes`` x 128 test requests, ``--seed``):

* ``topology``: the four baselines on beta as shipped and on the other Fabric that Table 8's two ratios allow (one
  spine uplink per fabric switch gives 2 pods of 4 racks, ours; two give one pod of 8 racks whose spines lead nowhere),
  and Tetris on azure with Tetris's rejection reasons and locality, and with equal-cost paths only (no third path);
* ``random``: readings of section 4.1's "randomly select servers in the DCN until either the request is fully
  provisioned, or it picks a failing action" that the audit (``audit_nara_baselines.py``) did not run:
  ``random-fail-need`` any server not yet picked, one that gives nothing still needed fails (our mask as the failing
  action); ``random-fail-empty`` any server not yet picked, one with nothing left of any type fails (the paper's own
  mask, section 3.3.2); ``random-fail-all`` any server of the DCN, one already picked (section 3.2: v not in V_r) or
  with nothing left fails;
* ``nulb``: the shipped NULB (every server in hop order) where reaching an empty server (``nulb-fail-empty``) or one
  that gives nothing still needed (``nulb-fail-need``) fails the request;
* ``authors`` (not in the default parts): Tetris, Random, NALB and NULB as the authors' public ``PackingAgent`` runs
  them (``tetris-authors``: a non-local score times 9/10; ``random-authors``: any server with anything left;
  :class:`AuthorsSearch`: Tetris's first server, a depth-first walk), beside the shipped ones.

Each reading prints its acceptance and utilisation per set and topology against Tables 1-3 ("IN": within 0.05).

    OMP_NUM_THREADS=1 python benchmarks/nara_last_cells.py [topology random nulb authors] [--episodes 5] [--seed 0]
        [--setting paper-reject|paper]
"""

from __future__ import annotations

import argparse
import time
from typing import Any

import numpy as np

from dcplace.bench.nara_baselines import PAPER_ACCEPTANCE, PAPER_UTIL, TOPOLOGIES
from dcplace.bench.netalloc_runner import run_policy
from dcplace.cluster.topology import Topology, fabric, preset
from dcplace.policies.netalloc_heuristics import LocalityBased, RandomPick, Tetris, _Adjacency, uniform_pick
from dcplace.policies.registry import register
from dcplace.sim.netalloc import NetView
from dcplace.sim.netalloc_episodes import SETTINGS, NetSetting

DATASETS = ("uniform", "azure", "alibaba")
FAIL = -1  # an action the simulator rejects as invalid: the request fails


class RandomFail(RandomPick):
    """Random whose draw may be a failing action (module docstring: ``need``, ``empty``, ``all``)."""

    def __init__(self, seed: int = 0, mode: str = "need") -> None:
        super().__init__(seed, any_server=mode != "need")  # ``need``: the simulator's mask rejects the draw
        self.mode = mode

    @property
    def name(self) -> str:
        return f"random-fail-{self.mode}"

    def choose(self, view: NetView) -> int:
        if self.mode == "need":
            return uniform_pick(self.rng, ~view.selected)
        v = uniform_pick(self.rng, np.ones_like(view.selected) if self.mode == "all" else ~view.selected)
        if view.selected[v] or (view.free_cpu[v] == 0 and view.free_mem[v] == 0):
            return FAIL
        return v


class NulbFail(LocalityBased):
    """The shipped NULB whose next server in hop order fails the request if it is empty (``empty``) or gives nothing
    still needed (``need``)."""

    mode: str = "empty"

    def choose(self, view: NetView) -> int:
        v = super().choose(view)
        if not view.picks:
            return v
        gives = (view.need_cpu > 0 and view.free_cpu[v] > 0) or (view.need_mem > 0 and view.free_mem[v] > 0)
        empty = view.free_cpu[v] == 0 and view.free_mem[v] == 0
        return FAIL if (empty if self.mode == "empty" else not gives) else v


def _nulb_fail(mode: str) -> Any:
    def build(seed: int = 0) -> NulbFail:
        pol = NulbFail(False, seed, unpicked=True)
        pol.mode = mode
        return pol

    return build


class AuthorsSearch(LocalityBased):
    """NALB / NULB as the authors' public ``PackingAgent`` runs them (read in the search tool's code corpus, file
    29225749304, not copied; docs/netalloc.md, "The last four cells"): a walk from Tetris's choice, depth first
    over switches (a LIFO stack: the switch found last is expanded first), each node's neighbours
    in adjacency order (NULB) or by decreasing free bandwidth on the connecting link (NALB); every server met with
    anything left (CPU or memory, needed or not) joins until the request is covered. The whole list is made at the
    request's first pick and played last-found first."""

    def choose(self, view: NetView) -> int:
        if self._adj_of is not view.topology:
            self._adj, self._adj_of = _Adjacency.of(view.topology), view.topology
        if not view.picks or self._request != view.t:
            self._request = view.t
            self._series = self._walk(view, Tetris().choose(view))
        while self._series:
            v = self._series.pop()
            if not view.selected[v]:
                return v
        return uniform_pick(self.rng, view.action_mask())  # the walk ran out (never on a connected network)

    def _walk(self, view: NetView, first: int) -> list[int]:
        adj = self._adj
        assert adj is not None
        need = np.array([view.need_cpu, view.need_mem])
        free = np.stack([view.free_cpu, view.free_mem], axis=1)
        need = need - np.minimum(free[first], need)
        series, taken, stack, visited = [first], {first}, [first], set()
        while stack:
            x = stack.pop()
            visited.add(x)
            lo, hi = adj.start[x], adj.start[x + 1]
            nexts = adj.widest_first(x, view.free_bw, 0, False) if self.weighted else adj.nbr[lo:hi]
            for y in nexts:
                if not need.any():
                    return series
                if y < view.n_servers:
                    if y not in taken and free[y].sum() > 0:
                        need = need - np.minimum(free[y], need)
                        series.append(y)
                        taken.add(y)
                elif y not in visited and y not in stack:
                    stack.append(y)
        return series


class RandomAuthors(RandomPick):
    """Random as the authors' ``PackingAgent`` draws: uniformly among the servers their environment's mask allows (not
    yet picked, with any CPU or memory left), also one that gives nothing of what is still needed."""

    def __init__(self, seed: int = 0) -> None:
        super().__init__(seed, any_server=True)

    @property
    def name(self) -> str:
        return "random-authors"

    def choose(self, view: NetView) -> int:
        return uniform_pick(self.rng, ~view.selected & ((view.free_cpu > 0) | (view.free_mem > 0)))


register("random-authors", lambda seed=0: RandomAuthors(seed), "experiment", setting="netalloc")
register("tetris-authors", lambda seed=0: Tetris(seed, penalty=0.1), "experiment", setting="netalloc")  # x 0.9
register("nulb-authors", lambda seed=0: AuthorsSearch(False, seed, unpicked=True, label="nulb-authors"), "experiment",
         setting="netalloc")  # fmt: skip
register("nalb-authors", lambda seed=0: AuthorsSearch(True, seed, unpicked=True, label="nalb-authors"), "experiment",
         setting="netalloc")  # fmt: skip
for _m in ("need", "empty", "all"):
    register(f"random-fail-{_m}", (lambda m: lambda seed=0: RandomFail(seed, m))(_m), "experiment", setting="netalloc")
for _m in ("empty", "need"):
    register(f"nulb-fail-{_m}", _nulb_fail(_m), "experiment", setting="netalloc")
SETTINGS["paper-ecmp"] = NetSetting("paper-ecmp", "ecmp")  # ``paper-reject`` with equal-cost paths only


def cell(top: Topology, topo: str, dataset: str, policy: str, args: argparse.Namespace) -> str:
    s = run_policy(top, dataset, policy, 128, args.episodes, args.seed, setting=args.setting).summary()
    base = policy.split("-")[0]
    pa = PAPER_ACCEPTANCE[dataset][base][TOPOLOGIES.index(topo)]
    pu = PAPER_UTIL[topo][base][DATASETS.index(dataset)]
    assert pa is not None
    a, c, m = s["acceptance_mean"], s["cpu_util_mean"], s["mem_util_mean"]

    def tag(x: float, p: float) -> str:
        return " IN" if abs(x - p) <= 0.05 else ""

    return (
        f"{top.name} {a:.3f} ({pa:.2f}{tag(a, pa)}) cpu {c:.2f} ({pu[0]:.2f}{tag(c, pu[0])}) "
        f"mem {m:.2f} ({pu[1]:.2f}{tag(m, pu[1])})"
    )


def readings(names: list[str], args: argparse.Namespace) -> None:
    tops = {"alpha": preset("alpha"), "beta": preset("beta")}
    for d in DATASETS:
        for p in names:
            print(f"{d:8s} {p:18s} | " + " | ".join(cell(top, t, d, p, args) for t, top in tops.items()), flush=True)


def topology(args: argparse.Namespace) -> None:
    beta = preset("beta")
    one_pod = fabric(5, 8, 8, 2, 2, name="beta-1pod")  # two spine uplinks per fabric switch: p = 4 * 2 = 8 racks
    for t in (beta, one_pod):
        print(f"{t.name}: servers/rack-fabric oversubscription {t.tier_oversubscription()}")
    for d in DATASETS:
        for p in ("tetris", "nalb", "nulb", "random"):
            print(f"{d:8s} {p:18s} | " + " | ".join(cell(t, "beta", d, p, args) for t in (beta, one_pod)), flush=True)
    for t in ("alpha", "beta"):
        top = preset(t)
        for setting in ("paper-reject", "paper-ecmp"):
            s = run_policy(top, "azure", "tetris", 128, args.episodes, args.seed, setting=setting).summary()
            loc = ", ".join(f"{k} {v:.2f}" for k, v in s["locality"].items())
            print(
                f"tetris azure {t} ({setting}): acceptance {s['acceptance_mean']:.3f}, rejected {s['rejected']}, "
                f"locality {loc}, servers per allocation {s['servers_per_allocation_mean']:.2f}",
                flush=True,
            )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("parts", nargs="*", default=["topology", "random", "nulb"])
    ap.add_argument("--episodes", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--setting", default="paper-reject", choices=list(SETTINGS),
                    help="the environment (paper: a full cluster waits); the topology part runs paper-reject and "
                    "paper-ecmp whatever this says")  # fmt: skip
    args = ap.parse_args()
    t0 = time.perf_counter()
    for part in args.parts:
        print(f"## {part} (episodes {args.episodes}, seed {args.seed})")
        if part == "topology":
            topology(args)
        elif part == "random":
            readings(["random", "random-any", "random-fail-need", "random-fail-empty", "random-fail-all"], args)
        elif part == "nulb":
            readings(["nulb", "nulb-mask", "nulb-fail-empty", "nulb-fail-need"], args)
        elif part == "authors":
            readings(["tetris", "tetris-authors", "random", "random-authors", "nulb", "nulb-authors", "nalb",
                      "nalb-authors"], args)  # fmt: skip
        else:
            raise SystemExit(f"unknown part {part!r}: topology, random, nulb or authors")
    print(f"{time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
