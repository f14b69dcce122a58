"""Nara's policy network at inference, compiled for one topology: the logits of
:class:`dcplace.learn.nara_model.NaraPolicyNet` to float32 rounding, in one numba call per choice and without
torch.

Why: at batch one the torch forward pays per-operator dispatch and a sparse-product setup on every stage (about 20
tensor operations per choice: 0.5 ms on delta on a quiet core, 3-7 ms under load), which made a delta episode
(8,000-20,000 choices) take over a minute. Incremental message passing does not help here: features are scaled to
the request's *remaining* needs, so a pick changes the inputs of most servers (87 % of delta's between two picks of
one request, measured on the shipped uniform agent). What does help:

* **Distinct servers only.** Where every server's one neighbour is its rack switch (every preset), a server's
  embedding at every stage is a function of its own inputs (4 features, edge mean) and its switch's values, so
  servers with bit-identical inputs under one switch are computed once (:func:`_dedupe`, a hash table): on delta
  a quarter to a half of the servers are distinct at a time.
* **Only what the logits read** (:func:`_plan`): with ``L`` stages, the last two need only servers that may be
  picked or are selected, and the switches.
* **One compiled pass per stage** (:func:`_forward`), the dense part transposed so the loops run over rows.

The computation, for one observation (``nodes`` (V, 4), ``edges`` (E,), ``state`` (3,), ``mask`` (S,)) and stage
weights ``W_i`` (out, in), ``b_i`` (out,), ``We_i`` (out,) (the edge part, one edge feature):

* ``e_mean_v = sum_{e into v} e / (deg(v) + 1)``; ``z_i = h_{i-1} W_i^T + b_i``;
* ``h_i[v] = ReLU(sum_{u in {v} ∪ N(v)} z_i[u] / (deg(v) + 1) + e_mean_v We_i)``; with ``relu_per_message``
  (the other reading of appendix E.1), ``h_i[v] = sum_{u in {v} ∪ N(v)} ReLU(z_i[u] + e_uv We_i) / (deg(v) + 1)``,
  ``e_vv = 0``;
* ``m = sum_{v selected} h_L[v] / max(#selected, 1)``, ``s = P1(state)``;
* linear P2 (the paper): ``logit_v = w_h · h_L[v] + (w_s · s + w_m · m + b)``; with a hidden layer
  (``p2_hidden > 0``): ``logit_v = w_2 · ReLU(A_h h_L[v] + (A_s s + A_m m + a)) + b_2``;
* servers outside the mask get :data:`~dcplace.learn.nara_model.MASKED_LOGIT`.

Equality: the deduplicated plan gives the same bits as computing every node (every row gets the same instructions
wherever it sits). Against torch the float32 sums run in another order, so logits agree to about 1e-6 relative and
identical servers tie exactly in both (the first wins, torch's and numpy's ``argmax`` rule); two servers that are
equal in exact arithmetic but not bit-identical (other racks with other rack-mates) may be rounded apart by an ulp
differently, and then the greedy choice differs between two tied servers (tests/learn/test_nara_fast.py counts
these: under 1 % of choices).
"""

from __future__ import annotations

from typing import Any

import numba as nb
import numpy as np
import numpy.typing as npt
from torch import nn

from dcplace.cluster.topology import Topology
from dcplace.learn.nara_model import MASKED_LOGIT, NaraPolicyNet

F32 = npt.NDArray[np.float32]


@nb.njit(cache=True, nogil=True)
def _dense(w: Any, x: Any) -> Any:  # pragma: no cover - compiled
    """``w @ x`` for a small (out, in) matrix, without BLAS."""
    out = np.zeros(w.shape[0], dtype=np.float32)
    for o in range(w.shape[0]):
        for i in range(w.shape[1]):
            out[o] += w[o, i] * x[i]
    return out


@nb.njit(cache=True, nogil=True)
def _dense_relu(w: Any, b: Any, x: Any) -> Any:  # pragma: no cover - compiled
    return np.maximum(_dense(w, x) + b, np.float32(0.0))


@nb.njit(cache=True, nogil=True)
def _e_mean(edges: Any, e_indptr: Any, e_ids: Any, inv: Any) -> Any:  # pragma: no cover - compiled
    """(V,) ``sum_{e into v} e / (deg(v) + 1)``: the edge part of every stage's mean."""
    v_all = inv.shape[0]
    e_mean = np.empty(v_all, dtype=np.float32)
    for v in range(v_all):
        acc = np.float32(0.0)
        for k in range(e_indptr[v], e_indptr[v + 1]):
            acc += edges[e_ids[k]]
        e_mean[v] = acc * inv[v]
    return e_mean


@nb.njit(cache=True, nogil=True)
def _head(
    nodes: Any,
    state: Any,
    mask: Any,
    h: Any,
    row: Any,
    p1: Any,
    head_h: Any,
    head_c: Any,
    head_out: Any,
    masked: float,
) -> Any:  # pragma: no cover - compiled
    """Masked logits (S,) from the last stage's server embeddings: server ``v``'s is row ``row[v]`` of ``h`` (read
    only for servers that may be picked or are selected)."""
    s_count = mask.shape[0]
    embed = h.shape[1]
    # Mean embedding of the selected servers.
    m = np.zeros(embed, dtype=np.float32)
    count = 0
    for v in range(s_count):
        if nodes[v, 3] != 0:
            count += 1
            hv = h[row[v]]
            for o in range(embed):
                m[o] += nodes[v, 3] * hv[o]
    m /= np.float32(max(count, 1))
    # P1 on the state.
    w1, b1, w2, b2 = p1
    s = _dense_relu(w2, b2, _dense_relu(w1, b1, state))
    ctx = np.concatenate((s, m, np.ones(1, dtype=np.float32)))
    c = _dense(head_c, ctx)  # (H,): the part of the head every server shares
    n_hidden = head_h.shape[0]
    out = np.empty(s_count, dtype=np.float32)
    for v in range(s_count):
        if not mask[v]:
            out[v] = masked
            continue
        hv = h[row[v]]
        if head_out.shape[0] == 0:
            acc = c[0]
            for o in range(embed):
                acc += head_h[0, o] * hv[o]
            out[v] = acc
        else:
            logit = head_out[n_hidden]
            for j in range(n_hidden):
                acc = c[j]
                for o in range(embed):
                    acc += head_h[j, o] * hv[o]
                if acc > 0:
                    logit += head_out[j] * acc
            out[v] = logit
    return out


_PRIME = 1099511628211  # FNV-1a, in wrapping int64 arithmetic


@nb.njit(cache=True, nogil=True)
def _dedupe(bits: Any, e_bits: Any, parent: Any) -> Any:  # pragma: no cover - compiled
    """(S,) ``rep[v]``: the first server with exactly ``v``'s input bits (4 features, edge mean) under the same
    switch, found through an open-addressing hash table. Such servers have the same embedding at every stage."""
    s_count = parent.shape[0]
    size = 1
    while size < 2 * s_count:
        size *= 2
    table = np.full(size, -1, dtype=np.int64)
    rep = np.empty(s_count, dtype=np.int64)
    for v in range(s_count):
        key = np.int64(-3750763034362895579)
        for j in range(4):
            key = (key ^ np.int64(bits[v, j])) * _PRIME
        key = (key ^ np.int64(e_bits[v])) * _PRIME
        key = (key ^ parent[v]) * _PRIME
        slot = key & (size - 1)
        while True:
            u = table[slot]
            if u < 0:
                table[slot] = v
                rep[v] = v
                break
            if (
                parent[u] == parent[v]
                and e_bits[u] == e_bits[v]
                and bits[u, 0] == bits[v, 0]
                and bits[u, 1] == bits[v, 1]
                and bits[u, 2] == bits[v, 2]
                and bits[u, 3] == bits[v, 3]
            ):
                rep[v] = u
                break
            slot = (slot + 1) & (size - 1)
    return rep


@nb.njit(cache=True, nogil=True)
def _plan(rep: Any, mask: Any, selected: Any, n_nodes: int) -> tuple[Any, int, int]:  # pragma: no cover - compiled
    """The rows to compute, in the order ``[wanted servers, switches, other distinct servers]``: ``order`` (node
    ids), ``n_wanted`` (wanted servers and switches: a prefix) and ``n_servers`` (wanted servers: a prefix). A
    server is wanted when it is distinct (``rep[v] == v``) and a server it stands for may be picked or is
    selected."""
    s_count = rep.shape[0]
    need = np.zeros(s_count, dtype=np.bool_)
    for v in range(s_count):
        if mask[v] or selected[v] != 0:
            need[rep[v]] = True
    n_distinct = 0
    n_need = 0
    for v in range(s_count):
        if rep[v] == v:
            n_distinct += 1
            if need[v]:
                n_need += 1
    n_sw = n_nodes - s_count
    order = np.empty(n_distinct + n_sw, dtype=np.int64)
    a = 0
    c = n_need + n_sw
    for v in range(s_count):
        if rep[v] == v:
            if need[v]:
                order[a] = v
                a += 1
            else:
                order[c] = v
                c += 1
    for v in range(s_count, n_nodes):
        order[a] = v
        a += 1
    return order, n_need + n_sw, n_need


@nb.njit(cache=True, nogil=True)
def _forward(
    nodes: Any,
    e_mean: Any,
    rep: Any,
    order: Any,
    n_wanted: int,
    n_servers: int,
    indptr: Any,
    indices: Any,
    inv: Any,
    ws: Any,
    bs: Any,
    wes: Any,
    edges: Any,
    k_edge: Any,
    per_message: bool,
) -> tuple[Any, Any]:  # pragma: no cover - compiled
    """Every message-passing stage on the rows of ``order`` (:func:`_plan`): returns the last stage's embeddings of
    the wanted servers (``n_servers``, embed) and ``pos`` (V,), each computed node's row in ``order``.

    With ``L`` stages, stage ``i`` computes ``z`` on all rows for ``i < L - 1``, else on the wanted prefix, and
    ``h`` on all rows for ``i < L - 2``, the wanted prefix for ``i = L - 2`` and the wanted servers for ``i = L - 1``:
    a server's ``z`` feeds only its own next stage and its switch's, and the logits read the last stage of wanted
    servers. ``z`` is computed transposed, (out, rows), so the inner loop runs over contiguous rows; each row gets the
    same instructions (``b`` then ``W[:, j] h[j]`` in order ``j``, no fused multiply-add) wherever it sits, so
    bit-identical inputs give bit-identical outputs and ties between identical servers stay exact, as in torch. The
    mean sums each node's CSR row in order, reading a server's ``z`` at its representative ``rep[u]``. With
    ``per_message`` (``NaraConfig.relu_per_message``) each term is ``ReLU(z[u] + e_uv We)`` (``k_edge[k]``: the
    edge of CSR entry ``k``, -1 for the node itself, whose edge vector is zero) and no ReLU follows the mean."""
    s_count = rep.shape[0]
    n = order.shape[0]
    pos = np.full(nodes.shape[0], -1, dtype=np.int64)
    for r in range(n):
        pos[order[r]] = r
    ht = np.empty((nodes.shape[1], n), dtype=np.float32)
    for r in range(n):
        for j in range(nodes.shape[1]):
            ht[j, r] = nodes[order[r], j]
    n_stages = len(ws)
    h = np.empty((0, 0), dtype=np.float32)
    for i in range(n_stages):
        wt, b, we = ws[i], bs[i], wes[i]
        d_in, d_out = wt.shape
        nz = n if i < n_stages - 1 else n_wanted
        nh = n if i < n_stages - 2 else (n_wanted if i == n_stages - 2 else n_servers)
        zt = np.empty((d_out, nz), dtype=np.float32)
        for o in range(d_out):
            zo = zt[o]
            bo = b[o]
            for r in range(nz):
                zo[r] = bo
            for j in range(d_in):
                w = wt[j, o]
                hj = ht[j]
                for r in range(nz):
                    zo[r] += w * hj[r]
        z = np.ascontiguousarray(zt.T)
        h = np.zeros((nh, d_out), dtype=np.float32)
        for r in range(nh):
            v = order[r]
            hv = h[r]
            for k in range(indptr[v], indptr[v + 1]):
                u = indices[k]
                zu = z[pos[rep[u] if u < s_count else u]]
                if per_message:
                    ek = edges[k_edge[k]] if k_edge[k] >= 0 else np.float32(0.0)
                    for o in range(d_out):
                        x = zu[o] + ek * we[o]
                        if x > 0:
                            hv[o] += x
                else:
                    for o in range(d_out):
                        hv[o] += zu[o]
            iv, ev = inv[v], e_mean[v]
            if per_message:
                for o in range(d_out):
                    hv[o] *= iv
            else:
                for o in range(d_out):
                    x = hv[o] * iv + ev * we[o]
                    hv[o] = x if x > 0 else np.float32(0.0)
        ht = np.ascontiguousarray(h.T)
    return h, pos


@nb.njit(cache=True, nogil=True)
def _logits(
    nodes: Any,
    edges: Any,
    state: Any,
    mask: Any,
    parent: Any,
    indptr: Any,
    indices: Any,
    inv: Any,
    e_indptr: Any,
    e_ids: Any,
    ws: Any,
    bs: Any,
    wes: Any,
    p1: Any,
    head_h: Any,
    head_c: Any,
    head_out: Any,
    masked: float,
    k_edge: Any,
    per_message: bool,
) -> Any:  # pragma: no cover - compiled
    """The whole choice in one call: edge means, the row plan (deduplicated under ``parent``, the servers' switches;
    every node when ``parent`` is empty), the stages and the head."""
    s_count = mask.shape[0]
    n_nodes = nodes.shape[0]
    e_mean = _e_mean(edges, e_indptr, e_ids, inv)
    if parent.shape[0] == s_count and s_count > 0:
        rep = _dedupe(nodes.view(np.int32), e_mean[:s_count].view(np.int32), parent)
        order, n_wanted, n_servers = _plan(rep, mask, nodes[:s_count, 3], n_nodes)
    else:
        rep = np.arange(s_count)
        order, n_wanted, n_servers = np.arange(n_nodes), n_nodes, s_count
    h, pos = _forward(nodes, e_mean, rep, order, n_wanted, n_servers, indptr, indices, inv, ws, bs, wes, edges,
                      k_edge, per_message)  # fmt: skip
    row = pos[rep]  # each server's row in h (its representative's)
    return _head(nodes, state, mask, h, row, p1, head_h, head_c, head_out, masked)


def _np(t: Any) -> F32:
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float32)


class FastPolicy:
    """``net``'s logits on ``topology`` without torch (module docstring): :meth:`logits` takes one
    :class:`~dcplace.envs.net_alloc.NetObserver` observation. The weights are copied when built: rebuild after
    training changes them."""

    def __init__(self, net: NaraPolicyNet, topology: Topology) -> None:
        ei = np.asarray(topology.edge_index)
        src, dst = ei[0].astype(np.int64), ei[1].astype(np.int64)
        v = topology.n_nodes
        self.n_nodes, self.n_servers = v, topology.n_servers
        deg = np.bincount(dst, minlength=v)
        self.inv = (1.0 / (deg.astype(np.float32) + np.float32(1.0))).astype(np.float32)
        # Rows {v} ∪ N(v), as in GraphIndex.adj; and each node's incoming edges, as in GraphIndex.edge_mean.
        rows = np.concatenate([dst, np.arange(v)])
        cols = np.concatenate([src, np.arange(v)])
        order = np.lexsort((cols, rows))
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=v))]).astype(np.int64)
        self.indices = cols[order].astype(np.int64)
        self.k_edge = np.concatenate([np.arange(len(src)), np.full(v, -1)])[order].astype(np.int64)
        self.e_indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
        self.e_ids = np.argsort(dst, kind="stable").astype(np.int64)
        # Servers whose one neighbour is a switch: their CSR row is [v, switch] (columns sorted, servers first).
        s = self.n_servers
        first_nbr = self.indices[self.indptr[:s] + 1] if s else np.zeros(0, np.int64)
        leaf = bool((deg[:s] == 1).all() and (first_nbr >= s).all())
        self.parent = np.ascontiguousarray(first_nbr, dtype=np.int64) if leaf else None
        self._no_parent = np.zeros(0, dtype=np.int64)  # no deduplication
        stages: list[Any] = list(net.gnn.stages)
        self.per_message = bool(stages[0].per_message) if stages else False
        self.ws = tuple(np.ascontiguousarray(_np(st.node.weight).T) for st in stages)  # (in, out)
        self.bs = tuple(_np(st.node.bias) for st in stages)
        self.wes = tuple(_np(st.edge.weight[:, 0]) for st in stages)
        p1: Any = net.p1
        self.p1 = (_np(p1[0].weight), _np(p1[0].bias), _np(p1[2].weight), _np(p1[2].bias))
        state_out, embed = self.p1[2].shape[0], self.ws[-1].shape[1]
        p2: Any = net.p2
        first = p2[0] if isinstance(p2, nn.Sequential) else p2
        w, b = _np(first.weight), _np(first.bias)  # (H, state_out + 2 embed): [s, h_v, m]
        self.head_h = np.ascontiguousarray(w[:, state_out : state_out + embed])
        self.head_c = np.ascontiguousarray(np.concatenate([w[:, :state_out], w[:, state_out + embed :], b[:, None]], 1))
        if isinstance(p2, nn.Sequential):
            last = p2[2]
            self.head_out = np.concatenate([_np(last.weight)[0], _np(last.bias)]).astype(np.float32)
        else:
            self.head_out = np.zeros(0, dtype=np.float32)

    def logits(self, obs: dict[str, npt.NDArray[Any]], dedupe: bool = True) -> F32:
        """Masked logits (S,) float32 for one observation (``nodes`` (V, 4), ``edges`` (E, 1), ``state`` (3,),
        ``action_mask`` (S,)). ``dedupe=False`` computes every node's every stage (tests check both agree)."""
        nodes = np.ascontiguousarray(obs["nodes"], dtype=np.float32)
        edges = np.ascontiguousarray(obs["edges"][:, 0], dtype=np.float32)
        state = np.ascontiguousarray(obs["state"], dtype=np.float32)
        mask = np.ascontiguousarray(obs["action_mask"]).astype(np.bool_)
        parent = self.parent if dedupe and self.parent is not None else self._no_parent
        graph = (self.indptr, self.indices, self.inv, self.e_indptr, self.e_ids)
        weights = (self.ws, self.bs, self.wes, self.p1, self.head_h, self.head_c, self.head_out)
        logits: F32 = _logits(nodes, edges, state, mask, parent, *graph, *weights, MASKED_LOGIT, self.k_edge,
                              self.per_message)  # fmt: skip
        return logits

    def choose(self, obs: dict[str, npt.NDArray[Any]]) -> int:
        """The greedy choice: the first server with the highest logit (torch's and numpy's argmax rule)."""
        return int(np.argmax(self.logits(obs)))
