"""CVD-RL's Q-network and decision rule, and SchedRL's (``../shared/papers/002_0cf75b9bf5d3860a.txt``, 3-4).

CVD-RL (all three operators on): Q(s, a) = sum over machines i of V(row_i), one network V shared by all machines
(decomposition, eq. 7), ``row_i`` the machine's state after the placement (look-ahead, eq. 9); only the top-k
candidates of two heuristics are considered (filter, eq. 10). Since only the chosen machine's row changes, the
argmax of eq. 11 is the two-step selection of section 4.1: each candidate's benefit
``V(row after) - V(row now)`` of its machine, the best benefit wins. The cost of a decision is the filter's
compiled scan plus one forward pass over at most ``k`` + ``k`` rows, whatever the number of machines.

Greedy decisions (:meth:`CvdAgent.act`) run that forward pass compiled, in one call with the rows and the argmax
(:func:`dcplace.learn.cvd_features.guarded_best`), and keep numpy's decisions: the compiled sums run in another
order than numpy's BLAS, so values may differ in the last bits; the compiled pass carries a rigorous bound on that
difference and answers only when the best candidate leads by more than the bounds (about 1e-10 for these
networks, while the differences are about 1e-16), leaving near-ties to numpy's forward: mostly exact ties between
candidates whose rows are the same, and for a nearly flat network (``cvd-rl-50pm-paper.pt``) leads below the bound.

Each operator can be switched off for the ablations (Figure 10):

* ``decompose=False``: one network over the concatenated rows of all machines (fixed machine count);
* ``lookahead=False``: rows are (current machine state, request, action on this machine one-hot);
* ``filter_k=()``: every feasible action is a candidate.

SchedRL (the scalability contrast): one network over the whole cluster state and the request with 2N outputs, a
masked argmax over the feasible actions, no decomposition, no look-ahead, no filter; it only runs at the machine
count it was trained for.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import numpy.typing as npt
import torch
from torch import nn

from dcplace.errors import InputError
from dcplace.learn import cvd_features as F
from dcplace.learn import forecast as FC
from dcplace.policies import numa_heuristics as H
from dcplace.policies.numa_index import HeuristicIndex
from dcplace.sim.numa import NumaSim, NumaView

FILTER_CODES = {"best-fit": H.BEST_FIT, "industrial": H.INDUSTRIAL, "first-fit": H.FIRST_FIT}


@dataclass(frozen=True)
class CvdConfig:
    """Architecture and operators (everything needed to rebuild the network from a checkpoint)."""

    kind: str = "cvd"
    """``cvd`` (per-machine value network) or ``schedrl`` (whole-cluster network, 2N outputs)."""
    numa: int = 2
    hidden: int = 64
    layers: int = 6
    """Linear layers of the MLP (the paper's 6-layer MLP with ReLU)."""
    decompose: bool = True
    lookahead: bool = True
    filter_k: tuple[tuple[str, int], ...] = (("best-fit", 2), ("industrial", 3))
    """Top-k filter: (heuristic, k) pairs whose union is the candidate set; empty = every feasible action."""
    machines: int = 0
    """Machine count the network is tied to (SchedRL, or ``decompose=False``); 0 = any."""
    machine_td: bool = False
    """Ours, beyond the paper: V(row) is the discounted reward still to come *from this machine* (trained by a
    per-machine TD target, :mod:`dcplace.learn.cvd_rl` ``MachineTD``); a candidate's value is then
    ``r + machine_gamma * V(after) - V(now)``, with ``r`` the delta reward."""
    machine_gamma: float = 0.97
    slots_feature: bool = True
    """Append the machine's slots fraction to its row (see :mod:`dcplace.learn.cvd_features`)."""
    probes: tuple[tuple[float, float, bool, float], ...] = ()
    """Probe request types (CPU, memory, multi-NUMA, frequency) of the capacity measure; set from the training
    trace and stored with the weights, so the features mean the same on any trace."""
    forecast_hidden: int = 0
    """PADRL (:mod:`dcplace.learn.forecast`): hidden units of the demand-forecast LSTM whose ``F_OUT`` outputs are
    appended to every row as context; 0 = no forecast (CVD-RL)."""

    def __post_init__(self) -> None:
        if self.kind not in ("cvd", "schedrl"):
            raise InputError(f"model kind must be cvd or schedrl, got {self.kind!r}")
        for name, k in self.filter_k:
            if name not in FILTER_CODES or k < 1:
                raise InputError(
                    f"entry {name}:{k} needs a heuristic among {', '.join(FILTER_CODES)} and k >= 1", field="filter_k"
                )
        if (self.kind == "schedrl" or not self.decompose) and self.machines < 1:
            raise InputError("a whole-cluster network needs its machine count")
        if self.layers < 2 or self.hidden < 1:
            raise InputError("the MLP needs at least 2 layers and 1 hidden unit")
        if self.forecast_hidden < 0 or (self.forecast_hidden and self.kind != "cvd"):
            raise InputError(f"forecast_hidden must be 0, or positive for kind cvd, got {self.forecast_hidden}")

    @property
    def row_width(self) -> int:
        k = self.numa
        state = 2 * k + (1 if self.slots_feature else 0)
        return (state if self.lookahead else state + 3 + k + 1) + self.context_width

    @property
    def context_width(self) -> int:
        """Numbers at the end of every row that describe the decision, not the machine (PADRL's forecast)."""
        return FC.F_OUT if self.forecast_hidden else 0

    def probe_arrays(self) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_], npt.NDArray[np.float64]]:
        """(types (T, 2), multi (T,), weight (T,)) of the capacity measure."""
        p = self.probes
        return (
            np.array([[c, m] for c, m, _, _ in p], np.float64).reshape(-1, 2),
            np.array([mu for _, _, mu, _ in p], bool),
            np.array([w for _, _, _, w in p], np.float64),
        )

    @property
    def candidate_cap(self) -> int:
        """Most candidates a decision can have (filter size, or every action)."""
        return sum(k for _, k in self.filter_k) if self.filter_k else self.numa * max(self.machines, 1)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["filter_k"] = [list(p) for p in self.filter_k]
        d["probes"] = [list(p) for p in self.probes]
        return d

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> CvdConfig:
        d = dict(d)
        d["filter_k"] = tuple((str(n), int(k)) for n, k in d.get("filter_k", ()))
        d["probes"] = tuple((float(c), float(m), bool(mu), float(w)) for c, m, mu, w in d.get("probes", ()))
        return cls(**d)


def mlp(inp: int, hidden: int, layers: int, out: int) -> nn.Sequential:
    mods: list[nn.Module] = []
    width = inp
    for _ in range(layers - 1):
        mods += [nn.Linear(width, hidden), nn.ReLU()]
        width = hidden
    mods.append(nn.Linear(width, out))
    return nn.Sequential(*mods)


class CvdNet(nn.Module):
    """CVD-RL: V(row) per machine (``decompose``) or W(all rows) per cluster; SchedRL: Q(cluster, request)."""

    def __init__(self, cfg: CvdConfig) -> None:
        super().__init__()
        self.cfg = cfg
        if cfg.kind == "schedrl":
            n = cfg.machines
            self.net = mlp(2 * cfg.numa * n + 3, cfg.hidden, cfg.layers, cfg.numa * n)
        elif cfg.decompose:
            self.net = mlp(cfg.row_width, cfg.hidden, cfg.layers, 1)
        else:
            self.net = mlp(cfg.row_width * cfg.machines, cfg.hidden, cfg.layers, 1)
        if cfg.forecast_hidden:
            self.forecast = FC.DemandLSTM(cfg.forecast_hidden)
            """PADRL's demand forecast (trained apart and frozen; saved with the weights)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.net(x)
        return out.squeeze(-1) if out.shape[-1] == 1 else out

    def cluster_value(self, rows: torch.Tensor) -> torch.Tensor:
        """Q of a cluster given all its rows ``(B, N, F)`` -> ``(B,)`` (decomposed: a sum of per-machine values)."""
        out: torch.Tensor = self(rows).sum(-1) if self.cfg.decompose else self(rows.flatten(-2))
        return out

    def candidate_values(self, base: torch.Tensor, cand: torch.Tensor, pm: torch.Tensor) -> torch.Tensor:
        """Q of each candidate: ``base`` (B, N, F) rows with no placement, ``cand`` (B, C, F) the candidates' rows,
        ``pm`` (B, C) their machines -> (B, C). Decomposed: sum(V(base)) + V(cand) - V(base[pm])."""
        out: torch.Tensor
        if self.cfg.decompose:
            vb: torch.Tensor = self(base)  # (B, N)
            out = vb.sum(-1, keepdim=True) + self(cand) - vb.gather(1, pm)
            return out
        b, c = pm.shape
        rows = base.unsqueeze(1).expand(b, c, *base.shape[1:]).clone()
        rows[torch.arange(b)[:, None], torch.arange(c)[None, :], pm] = cand
        out = self(rows.flatten(-2))
        return out


F64 = npt.NDArray[np.float64]
Packed = tuple[F64, F64, F64, F64, F64, float, F64, F64]


class NumpyMLP:
    """The same MLP evaluated with numpy (a decision is a handful of rows: torch's per-call overhead dominates).

    For a one-output network (the decomposed value V) the weights are also packed for the compiled forward
    :func:`dcplace.learn.cvd_features.mlp_values`: ``packed`` = (w0 (F, H), b0 (H,), wh (L-2, H, H), bh (L-2, H),
    wl (H,), bl, amp (L,), bmax (L,)), float64; ``None`` for other networks."""

    def __init__(self, net: CvdNet) -> None:
        lin = [m for m in net.net if isinstance(m, nn.Linear)]
        self.w = [m.weight.detach().numpy().T.astype(np.float64).copy() for m in lin]
        self.b = [m.bias.detach().numpy().astype(np.float64).copy() for m in lin]
        self.packed: Packed | None = None
        if self.w[-1].shape[1] == 1:
            hid = self.w[0].shape[1]
            self.packed = (
                self.w[0], self.b[0],
                np.array(self.w[1:-1], np.float64).reshape(-1, hid, hid), np.array(self.b[1:-1]).reshape(-1, hid),
                np.ascontiguousarray(self.w[-1][:, 0]), float(self.b[-1][0]),
                np.array([np.abs(w).sum(0).max() for w in self.w]), np.array([np.abs(b).max() for b in self.b]),
            )  # fmt: skip

    def __call__(self, x: npt.NDArray[np.float64]) -> npt.NDArray[np.float64]:
        for i, (w, b) in enumerate(zip(self.w, self.b, strict=True)):
            x = x @ w + b
            if i < len(self.w) - 1:
                np.maximum(x, 0.0, out=x)
        return x


@dataclass
class Decision:
    """What the agent saw and chose at one step (the trainer stores these as transitions)."""

    base: npt.NDArray[np.float64]  # (N, F) rows with no placement
    cand: npt.NDArray[np.float64]  # (n, F) candidate rows
    cand_pm: npt.NDArray[np.int64]  # (n,)
    actions: npt.NDArray[np.int64]  # (n,) simulator actions of the candidates
    q: npt.NDArray[np.float64] = field(default_factory=lambda: np.zeros(0))


State = NumaView | NumaSim
"""The agent acts on a policy's view; a simulator is accepted too (its view is taken), for the trainers."""


def as_view(state: State) -> NumaView:
    return state.view() if isinstance(state, NumaSim) else state


class CvdAgent:
    """Turns the simulator's state into candidates and rows, and picks the best (or an epsilon-random) candidate."""

    def __init__(self, net: CvdNet) -> None:
        self.cfg = net.cfg
        if net.cfg.kind == "cvd" and net.cfg.slots_feature and not net.cfg.probes:
            raise InputError("config field 'probes' is empty, but the slots feature needs the probe request types")
        types, tmulti, weight = net.cfg.probe_arrays()
        self._reward_probes = (types, tmulti, weight)  # built once: rewards() runs at every decision
        if not net.cfg.slots_feature:
            types, tmulti, weight = types[:0], tmulti[:0], weight[:0]
        self._probes = (types, tmulti, weight)
        self.sync(net)
        self._tmp = np.zeros(16, np.int64)
        self._keys = np.zeros((16, 3))
        self._indexes: dict[int, HeuristicIndex] = {}  # filter heuristic code -> its index over free capacity
        self._forecast = FC.ForecastState(net.forecast) if net.cfg.forecast_hidden else None
        self._no_context = np.zeros(0)
        self.compiled = True
        """Greedy decisions of the decomposed network try the compiled forward first (:meth:`certain_best`; same
        decisions); False: numpy's forward only (for measurements)."""
        self.certain = 0
        """Greedy decisions the compiled forward settled (:meth:`act`)."""
        self.uncertain = 0
        """Greedy decisions within the error bounds, settled by the numpy forward (:meth:`act`)."""

    def sync(self, net: CvdNet) -> None:
        self.np_net = NumpyMLP(net)
        self._grow_scratch(min(self.cfg.candidate_cap, 64))

    def _grow_scratch(self, n: int) -> None:
        """Scratch of :func:`dcplace.learn.cvd_features.guarded_best` for ``n`` candidates."""
        w, hid = self.cfg.row_width, self.cfg.hidden
        self._scratch = (
            np.empty((n, w)),
            np.empty((n, w)),
            np.empty((2, n)),
            np.empty((2, n)),
            np.empty((n, hid)),
            np.empty((n, hid)),
        )

    def _check_numa(self, v: NumaView) -> None:
        """A network's inputs and its compiled features are laid out for ``cfg.numa`` nodes per machine: on machines
        with another number its compiled code read and wrote past its arrays (a 4-NUMA cluster crashed the process
        with heap corruption, a review of ``compare cluster``)."""
        if v.numa != self.cfg.numa:
            raise InputError(f"this checkpoint was trained for machines of {self.cfg.numa} NUMA nodes and cannot act "
                             f"on machines of {v.numa}; give a checkpoint trained for {v.numa}")  # fmt: skip

    def _sized(self, v: NumaView) -> tuple[NumaView, npt.NDArray[np.int64] | None]:
        """The view a network of a fixed machine count acts on, and the slot of each of its machines where they are
        not ``0..n-1`` (None: the same): ``v`` at that count (any, for the decomposed network); a live engine's view,
        whose slots grow by doubling (50 machines sit in 64 slots; SchedRL could never act in the engine) and keep
        the holes of removed machines, gathered to its machines where it holds exactly that many (drained and
        failed ones count); else InputError."""
        n = self.cfg.machines
        if not n:
            return v, None
        held = np.flatnonzero(v.capacity.reshape(v.machines, -1).any(axis=1))
        if len(held) == n and v.machines == n:  # the simulator's (Expansion's machines not yet added included)
            return v, None
        if len(held) == n and held[-1] < v.active:  # the engine's: n machines, every one of them added
            slots = None if held[-1] == n - 1 else held.astype(np.int64)
            pick = slice(0, n) if slots is None else slots
            return v._replace(free=v.free[pick], capacity=v.capacity[pick], vm_count=v.vm_count[pick],
                              usable=v.usable[pick], active=n, changes=None), slots  # fmt: skip
        what = "SchedRL" if self.cfg.kind == "schedrl" else "a whole-cluster CVD network"
        added = int(np.count_nonzero(held < v.active))
        here = f"{len(held)}" if added == len(held) else f"{len(held)} of which {added} are added yet"
        raise InputError(
            f"this {what} checkpoint was trained for {n} machines and cannot act on {here}: run it on {n} "
            f"machines (drained and failed ones count) or give a checkpoint trained for {len(held)} (only the "
            "decomposed CVD-RL network runs at any machine count)"
        )

    @staticmethod
    def _unsized(action: int, slots: npt.NDArray[np.int64] | None, k: int) -> int:
        """An action on a gathered view (:meth:`_sized`) as one on the engine's slots."""
        return action if slots is None or action < 0 else int(slots[action // k]) * k + action % k

    def candidates(self, state: State) -> npt.NDArray[np.int64]:
        """The filtered action set (union of each heuristic's top-k, duplicates removed, in filter order)."""
        v = as_view(state)
        self._check_numa(v)
        if not self.cfg.filter_k:
            mask = v.feasible()
            if v.multi:  # one action per machine: its node-0 action
                mask = mask & (np.arange(len(mask)) % v.numa == 0)
            return np.flatnonzero(mask).astype(np.int64)
        out: list[int] = []
        for name, k in self.cfg.filter_k:
            if len(self._tmp) < k:
                self._tmp = np.zeros(k, np.int64)
                self._keys = np.zeros((k, 3))
            code = FILTER_CODES[name]
            index = self._indexes.get(code)
            if index is None and code != H.RANDOM:
                index = self._indexes[code] = HeuristicIndex(code, H.DEFAULT_WEIGHTS)
            if index is not None and index.usable_for(v):  # the index over free capacity: the same top-k
                n = index.top_k(v.demand, v.multi, v.active, k, self._tmp, self._keys)
            else:
                n = H.top_k(
                    code, H.DEFAULT_WEIGHTS, v.free, v.capacity, v.vm_count, v.usable, v.demand, v.multi, v.active,
                    k, self._tmp, self._keys,
                )  # fmt: skip
            for a in self._tmp[:n].tolist():  # Python ints (no numpy scalar per element)
                if a not in out:
                    out.append(a)
        return np.asarray(out, np.int64)

    def observe(self, state: State) -> Decision:
        """Rows and candidates for the waiting request (CVD kinds)."""
        v = as_view(state)
        acts = self.candidates(v)
        base = np.zeros((v.machines, self.cfg.row_width))
        cand = np.zeros((len(acts), self.cfg.row_width))
        pm = np.zeros(len(acts), np.int64)
        F.fill_rows(
            v.free, v.capacity, v.active, v.demand, v.multi, self.cfg.lookahead,
            *self._probes, base, cand, pm, acts, len(acts),
        )  # fmt: skip
        self.add_context(v, base[: v.active], cand)
        return Decision(base, cand, pm, acts)

    def context(self, state: State) -> npt.NDArray[np.float64]:
        """The decision's context (PADRL's forecast, :attr:`CvdConfig.context_width` numbers; empty without a
        forecast). The forecast steps once per new request."""
        if self._forecast is None:
            return self._no_context
        v = as_view(state)
        x = FC.request_features(v.demand[None], np.array([v.multi]), v.capacity[0, 0])[0]
        return self._forecast.see(v.request, x)

    def add_context(self, state: State, *rows: npt.NDArray[np.float64]) -> None:
        """Write :meth:`context` at the end of every row of each ``rows`` array; nothing without a forecast."""
        if self._forecast is None:
            return
        ctx = self.context(state)
        for r in rows:
            r[:, -len(ctx) :] = ctx

    def pair_rows(
        self, state: State, acts: npt.NDArray[np.int64]
    ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]:
        """``(now, cand)``, each ``(len(acts), F)``: each candidate machine's row as it is and under the candidate
        (only the candidates' machines: O(k) at any cluster size)."""
        v = as_view(state)
        w = self.cfg.row_width
        now = np.empty((len(acts), w))
        cand = np.empty((len(acts), w))
        F.fill_pair_rows(
            v.free, v.capacity, v.demand, v.multi, self.cfg.lookahead, *self._probes, acts, len(acts), now, cand,
        )  # fmt: skip
        self.add_context(v, now, cand)
        return now, cand

    def schedrl_obs(self, state: State) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.bool_]]:
        """SchedRL's input (every machine's row, then the request) and its feasible-action mask."""
        v, _ = self._sized(as_view(state))
        k = v.numa
        rows = np.zeros((v.machines, 2 * k))
        for i in range(v.active):
            F.state_row(v.free[i], v.capacity[i], rows[i])
        share = v.demand / k if v.multi else v.demand
        cap = v.capacity
        x = np.concatenate([rows.ravel(), [share[0] / cap[0, 0, 0], share[1] / cap[0, 0, 1], float(v.multi)]])
        return x, v.feasible()

    def rewards(self, state: State, acts: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """The delta reward of each candidate (for the per-machine value, which leaves it out of V)."""
        v = as_view(state)
        return np.array(
            [F.delta_reward(v.free, v.capacity, v.demand, v.multi, int(a), *self._reward_probes) for a in acts]
        )

    def q_values(self, dec: Decision, state: State | None = None) -> npt.NDArray[np.float64]:
        """Q of each candidate, up to a constant shared by all candidates (the two-step selection of 4.1); with
        ``machine_td`` (needs the state for the rewards) ``r + gamma V(after) - V(now)`` of the candidate's
        machine."""
        if self.cfg.decompose:
            v_cand = self.np_net(dec.cand)[:, 0]
            v_now = self.np_net(dec.base[dec.cand_pm])[:, 0]
            if self.cfg.machine_td:
                assert state is not None
                return np.asarray(self.rewards(state, dec.actions) + self.cfg.machine_gamma * v_cand - v_now)
            return np.asarray(v_cand - v_now)
        rows = np.repeat(dec.base[None], len(dec.actions), axis=0)
        rows[np.arange(len(dec.actions)), dec.cand_pm] = dec.cand
        return np.asarray(self.np_net(rows.reshape(len(dec.actions), -1))[:, 0])

    def act(self, state: State, rng: np.random.Generator | None = None, epsilon: float = 0.0) -> int:
        """Greedy (or epsilon-greedy inside the candidate set) action for the waiting request."""
        v = as_view(state)
        self._check_numa(v)
        v, slots = self._sized(v)
        k = v.numa
        if self.cfg.kind == "schedrl":
            x, mask = self.schedrl_obs(v)
            feas = np.flatnonzero(mask)
            if len(feas) == 0:  # fits nowhere: the simulator never asks then, the live engine does
                return -1
            if rng is not None and epsilon > 0 and rng.random() < epsilon:
                return self._unsized(int(rng.choice(feas)), slots, k)
            q = self.np_net(x[None])[0]
            return self._unsized(int(feas[np.argmax(q[feas])]), slots, k)
        if not self.cfg.decompose:
            dec = self.observe(v)
            if len(dec.actions) == 0:
                return -1
            if rng is not None and epsilon > 0 and rng.random() < epsilon:
                return self._unsized(int(dec.actions[rng.integers(len(dec.actions))]), slots, k)
            return self._unsized(int(dec.actions[int(np.argmax(self.q_values(dec)))]), slots, k)
        acts = self.candidates(v)
        if len(acts) == 0:
            return -1
        if rng is not None and epsilon > 0 and rng.random() < epsilon:
            return int(acts[rng.integers(len(acts))])
        c = self.certain_best(v, acts) if self.compiled else -1
        if c < 0:
            c = int(np.argmax(self.benefits(v, acts)))
        return int(acts[c])

    def certain_best(self, state: State, acts: npt.NDArray[np.int64]) -> int:
        """Index into ``acts`` of the best benefit when the compiled forward is certain of it, else -1.

        The compiled forward (:func:`dcplace.learn.cvd_features.guarded_best`) sums in its own order, so its values
        may differ from numpy's (:meth:`benefits`) in the last bits; it answers only when the best candidate leads
        every other by more than both evaluations' error bounds, so its answer is numpy's argmax (the greedy
        decision of every checkpoint is the same as with :meth:`benefits` alone); near-ties (-1) are left to
        :meth:`benefits`. Counted in :attr:`certain` / :attr:`uncertain`."""
        v = as_view(state)
        packed = self.np_net.packed
        n = len(acts)
        if packed is None:
            self.uncertain += 1
            return -1
        if n > self._scratch[0].shape[0]:
            self._grow_scratch(n)
        types, tmulti, weight = self._probes
        rtypes, rtmulti, rweight = self._reward_probes
        c = int(
            F.guarded_best(
                v.free, v.capacity, v.demand, v.multi, self.cfg.lookahead, types, tmulti, weight,
                rtypes, rtmulti, rweight, self.cfg.machine_td, self.cfg.machine_gamma, self.context(v), acts, n,
                *packed, *self._scratch,
            )
        )  # fmt: skip
        if c < 0:
            self.uncertain += 1
        else:
            self.certain += 1
        return c

    def benefits(self, state: State, acts: npt.NDArray[np.int64]) -> npt.NDArray[np.float64]:
        """Decomposed network: each candidate's V(machine after) - V(machine now), from the candidates' machines
        only (O(k), whatever the cluster size; equal to :meth:`q_values` up to a shared constant, tested)."""
        v = as_view(state)
        now, cand = self.pair_rows(v, acts)
        if self.cfg.machine_td:
            return np.asarray(
                self.rewards(v, acts) + self.cfg.machine_gamma * self.np_net(cand)[:, 0] - self.np_net(now)[:, 0]
            )
        return np.asarray(self.np_net(cand)[:, 0] - self.np_net(now)[:, 0])
