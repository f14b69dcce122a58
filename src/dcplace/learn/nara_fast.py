"""Nara's policy network at inference, compiled for one topology: the same logits as
:class:`dcplace.learn.nara_model.NaraPolicyNet` (float32, equal within rounding), in one numba call per choice.

Why: at batch one the torch forward pays per-operator dispatch and a sparse-product setup on every stage (about 20
tensor operations per choice, 0.5 ms on delta on a quiet core and 3-7 ms under load), which made a delta episode
(about 9,000 choices) take over a minute. The arithmetic is small (``V`` x 16 x 16 per stage), so one compiled loop
over the topology's CSR arrays does it in a fraction of that.

The computation, for one observation (``nodes`` (V, 4), ``edges`` (E,), ``state`` (3,), ``mask`` (S,)) and stage
weights ``W_i`` (out, in), ``b_i`` (out,), ``We_i`` (out,) (the edge part, one edge feature):

* ``e_mean_v = sum_{e into v} e / (deg(v) + 1)``; ``z_i = h_{i-1} W_i^T + b_i`` on every node;
* ``h_i[v] = ReLU(sum_{u in {v} ∪ N(v)} z_i[u] / (deg(v) + 1) + e_mean_v We_i)``, the last stage on the servers
  only (the logits read nothing else);
* ``m = sum_{v selected} h_3[v] / max(#selected, 1)``, ``s = P1(state)``;
* linear P2 (the paper): ``logit_v = w_h · h_3[v] + (w_s · s + w_m · m + b)``; with a hidden layer
  (``p2_hidden > 0``): ``logit_v = w_2 · ReLU(A_h h_3[v] + (A_s s + A_m m + a)) + b_2``;
* servers outside the mask get :data:`~dcplace.learn.nara_model.MASKED_LOGIT`.

The terms that are the same for every server are summed once, so the order of the float32 additions differs from
torch's and logits agree to about 1e-6 relative, not bit for bit; ties between identical servers (an empty rack)
resolve to the lowest index in both, as torch's and numpy's ``argmax`` do.
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
def _stage(
    h: Any, wt: Any, b: Any, we: Any, e_mean: Any, indptr: Any, indices: Any, inv: Any, rows: int, feed: int
) -> Any:  # pragma: no cover - compiled
    """One message-passing stage on the first ``rows`` nodes; ``z`` on the first ``feed`` (they and their
    neighbours). ``wt`` is ``W`` transposed, (in, out), so the inner loops run over contiguous outputs."""
    d_in, d_out = wt.shape
    z = np.empty((feed, d_out), dtype=np.float32)
    for v in range(feed):
        zv = z[v]
        for o in range(d_out):
            zv[o] = b[o]
        for i in range(d_in):
            x = h[v, i]
            if x != 0:
                for o in range(d_out):
                    zv[o] += x * wt[i, o]
    out = np.zeros((rows, d_out), dtype=np.float32)
    for v in range(rows):
        ov = out[v]
        for k in range(indptr[v], indptr[v + 1]):
            zu = z[indices[k]]
            for o in range(d_out):
                ov[o] += zu[o]
        iv, ev = inv[v], e_mean[v]
        for o in range(d_out):
            a = ov[o] * iv + ev * we[o]
            ov[o] = a if a > 0 else np.float32(0.0)
    return out


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
def _logits(
    nodes: Any,
    edges: Any,
    state: Any,
    mask: Any,
    indptr: Any,
    indices: Any,
    inv: Any,
    e_indptr: Any,
    e_ids: Any,
    rows: Any,
    feed: Any,
    ws: Any,
    bs: Any,
    wes: Any,
    p1: Any,
    head_h: Any,
    head_c: Any,
    head_out: Any,
    masked: float,
) -> Any:  # pragma: no cover - compiled
    """Masked logits (S,) for one observation; see the module docstring. Stage ``i`` computes ``h`` on the first
    ``rows[i]`` nodes from ``z`` on the first ``feed[i]``. ``ws`` (transposed: (in, out)), ``bs``, ``wes``: per-stage;
    ``p1``: (W1, b1, W2, b2); ``head_h`` (H, embed) acts on ``h_3[v]``, ``head_c`` (H, state_out + embed + 1) on
    ``[s, m, 1]``; ``head_out`` (H + 1,): empty for the linear head (then H = 1 and the logit is the pre-activation),
    else ``[w_2, b_2]``."""
    v_all = nodes.shape[0]
    s_count = mask.shape[0]
    e_mean = np.empty(v_all, dtype=np.float32)
    for v in range(v_all):
        acc = np.float32(0.0)
        for k in range(e_indptr[v], e_indptr[v + 1]):
            acc += edges[e_ids[k]]
        e_mean[v] = acc * inv[v]
    h = nodes
    for i in range(len(ws)):
        h = _stage(h, ws[i], bs[i], wes[i], e_mean, indptr, indices, inv, rows[i], feed[i])
    embed = h.shape[1]
    # Mean embedding of the selected servers.
    m = np.zeros(embed, dtype=np.float32)
    count = 0
    for v in range(s_count):
        if nodes[v, 3] != 0:
            count += 1
            for o in range(embed):
                m[o] += nodes[v, 3] * h[v, o]
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
        if head_out.shape[0] == 0:
            acc = c[0]
            for o in range(embed):
                acc += head_h[0, o] * h[v, o]
            out[v] = acc
        else:
            logit = head_out[n_hidden]
            for j in range(n_hidden):
                acc = c[j]
                for o in range(embed):
                    acc += head_h[j, o] * h[v, o]
                if acc > 0:
                    logit += head_out[j] * acc
            out[v] = logit
    return out


def _np(t: Any) -> F32:
    return np.ascontiguousarray(t.detach().cpu().numpy(), dtype=np.float32)


class FastPolicy:
    """``net``'s logits on ``topology`` without torch: :meth:`logits` takes one :class:`NetObserver` observation.

    The weights are copied when built: rebuild after training changes them."""

    def __init__(self, net: NaraPolicyNet, topology: Topology) -> None:
        ei = np.asarray(topology.edge_index)
        src, dst = ei[0].astype(np.int64), ei[1].astype(np.int64)
        v = topology.n_nodes
        self.n_servers = topology.n_servers
        deg = np.bincount(dst, minlength=v)
        self.inv = (1.0 / (deg.astype(np.float32) + np.float32(1.0))).astype(np.float32)
        # Rows {v} ∪ N(v), as in GraphIndex.adj; and each node's incoming edges, as in GraphIndex.edge_mean.
        rows = np.concatenate([dst, np.arange(v)])
        cols = np.concatenate([src, np.arange(v)])
        order = np.lexsort((cols, rows))
        self.indptr = np.concatenate([[0], np.cumsum(np.bincount(rows, minlength=v))]).astype(np.int64)
        self.indices = cols[order].astype(np.int64)
        e_order = np.argsort(dst, kind="stable")
        self.e_indptr = np.concatenate([[0], np.cumsum(deg)]).astype(np.int64)
        self.e_ids = e_order.astype(np.int64)
        stages = list(net.gnn.stages)
        # Only the servers' last embeddings are read: stage i is needed on a prefix of the nodes (servers come
        # first) that covers stage i + 1's rows and their neighbours.
        rows_needed = [self.n_servers]
        feed = []
        for _ in stages:
            r = rows_needed[0]
            f = int(max(r, self.indices[self.indptr[0] : self.indptr[r]].max() + 1))
            feed.insert(0, f)
            rows_needed.insert(0, f)
        self.rows = np.array(rows_needed[1:], dtype=np.int64)
        self.feed = np.array(feed, dtype=np.int64)
        self.ws = tuple(np.ascontiguousarray(_np(st.node.weight).T) for st in stages)
        self.bs = tuple(_np(st.node.bias) for st in stages)
        self.wes = tuple(_np(st.edge.weight[:, 0]) for st in stages)
        p1 = net.p1
        self.p1 = (_np(p1[0].weight), _np(p1[0].bias), _np(p1[2].weight), _np(p1[2].bias))
        state_out, embed = self.p1[2].shape[0], self.ws[-1].shape[1]
        first = net.p2[0] if isinstance(net.p2, nn.Sequential) else net.p2
        w, b = _np(first.weight), _np(first.bias)  # (H, state_out + 2 embed): [s, h_v, m]
        self.head_h = np.ascontiguousarray(w[:, state_out : state_out + embed])
        self.head_c = np.ascontiguousarray(np.concatenate([w[:, :state_out], w[:, state_out + embed :], b[:, None]], 1))
        if first is net.p2:
            self.head_out = np.zeros(0, dtype=np.float32)
        else:
            last = net.p2[2]
            self.head_out = np.concatenate([_np(last.weight)[0], _np(last.bias)]).astype(np.float32)

    def logits(self, obs: dict[str, npt.NDArray[Any]]) -> F32:
        """Masked logits (S,) float32 for one observation (``nodes`` (V, 4), ``edges`` (E, 1), ``state`` (3,),
        ``action_mask`` (S,))."""
        out: F32 = _logits(
            np.ascontiguousarray(obs["nodes"], dtype=np.float32),
            np.ascontiguousarray(obs["edges"][:, 0], dtype=np.float32),
            np.ascontiguousarray(obs["state"], dtype=np.float32),
            np.ascontiguousarray(obs["action_mask"]).astype(np.bool_),
            self.indptr,
            self.indices,
            self.inv,
            self.e_indptr,
            self.e_ids,
            self.rows,
            self.feed,
            self.ws,
            self.bs,
            self.wes,
            self.p1,
            self.head_h,
            self.head_c,
            self.head_out,
            MASKED_LOGIT,
        )
        return out

    def choose(self, obs: dict[str, npt.NDArray[Any]]) -> int:
        """The greedy choice: the first server with the highest logit (torch's and numpy's argmax rule)."""
        return int(np.argmax(self.logits(obs)))
