"""Nara's networks (section 3.3, appendix E): a GraphSAGE-style GNN whose server embeddings are the actions, a policy
head that scores them against the cluster state, and a separate value network.

Shapes, for a batch of ``B`` observations of one topology with ``V`` nodes (servers first), ``S`` servers and ``E``
directed edges (every link both ways):

* ``nodes`` (B, V, 4): ``[cpu, mem, bandwidth, selected]`` scaled to the waiting request
  (:class:`dcplace.envs.net_alloc.NetObserver`);
* ``edges`` (B, E, 1): the link's free bandwidth over the request's;
* ``state`` (B, 3): ``<cpu_util, mem_util, hold>``;
* ``mask`` (B, S): servers that may be picked.

Message passing stage ``i`` (:class:`MessagePassing`): node ``v`` receives from each neighbour ``u`` the message
``[h_u, e_uv]`` and keeps ``[h_v, 0]`` for itself; each goes through the stage's network ``W_i`` (one linear layer,
16 units) and ``v``'s new state is ReLU of their mean over ``{v} ∪ N(v)``. Because ``W_i`` is linear, the mean of
``W_i(x)`` is ``W_i`` applied to the mean message: a sparse product per stage (:class:`GraphIndex`), no per-message
network, which is what makes the same code fast on 40 and on 25,600 servers.

After three stages each server's 16-unit embedding is concatenated with the mean embedding of the servers already
selected for the request (zeros before the first pick): the action representation (32 units). ``P1`` maps the
state to 8 units through an 8-unit hidden layer; ``P2``, one linear layer, maps ``[P1(state), action]`` to a logit.
Servers outside the mask get a logit of ``-1e9``. Nothing depends on ``V`` or ``E``: a model trained on 40 servers
runs on 2,560.

A note on the paper's P2: a single linear layer adds ``w · mean_selected`` to *every* server's logit alike, so the
selected-servers context cancels in the softmax and locality can only come from the ``selected`` input feature
travelling through the message passing. ``NaraConfig(p2_hidden=16)`` puts a hidden layer in P2 so the context can
interact with each server's embedding. It fits alpha as well but transfers less reliably to larger topologies, so
the shipped agents use the paper's head; docs/nara.md has the measurements.

The value network (RLlib's ``vf_share_layers = False``) has its own GNN of the same shape; it reads the mean server
embedding, the mean selected embedding and its own state representation through a 32-unit hidden layer.

We do not use torch_geometric's ``SAGEConv``: it has no edge features, and the aggregation above is four tensor
operations that also batch over a fixed topology (``(B, V, F)`` tensors) without building a disjoint-union graph.
"""

from __future__ import annotations

import itertools
import warnings
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from dcplace.cluster.topology import Topology

NODE_FEATURES = 4
EDGE_FEATURES = 1
STATE_FEATURES = 3
MASKED_LOGIT = -1e9


@dataclass(frozen=True)
class NaraConfig:
    """Layer sizes (appendix E's grid-searched values by default)."""

    embed: int = 16  # units per message-passing stage
    layers: int = 3  # message-passing stages: server -> rack -> fabric -> spine is three hops
    state_hidden: int = 8  # P1's hidden layer
    state_out: int = 8  # P1's output
    value_hidden: int = 32  # the value network's hidden layer
    p2_hidden: int = 0  # 0: P2 is one linear layer (the paper); > 0: a hidden layer of this size (see below)
    relu_per_message: bool = False  # the other reading of where E.1's ReLU sits: the mean of ReLU(W x) (see below)

    def to_dict(self) -> dict[str, int]:
        """The sizes a checkpoint keeps; ``relu_per_message`` only where set, so a checkpoint of the default
        network still loads in a dcplace from before the option."""
        d = asdict(self)
        if not self.relu_per_message:
            del d["relu_per_message"]
        return d


class GraphIndex:
    """A topology's message passing as two sparse (CSR) matrices.

    ``adj`` (V, V) averages over ``{v} ∪ N(v)``: row ``v`` has ``1 / (deg(v) + 1)`` at ``v`` and at each neighbour.
    ``edge_mean`` (V, E) does the same for the raw features of ``v``'s incoming edges (the self message contributes
    a zero edge vector, so it only counts in the denominator). One stage is then ``ReLU(adj @ (h W_node^T + b) +
    edge_mean @ e W_edge^T)``, exactly the mean of ``W [h_u, e_uv]`` over the messages, with no per-edge tensor: on
    delta a CSR product is 10x faster than ``index_add`` over the 5,888 directed edges (docs/nara.md)."""

    def __init__(self, topology: Topology) -> None:
        ei = torch.as_tensor(np.ascontiguousarray(topology.edge_index), dtype=torch.long)
        src, dst = ei[0], ei[1]
        v, e = topology.n_nodes, ei.shape[1]
        self.n_nodes = v
        self.n_servers = topology.n_servers
        self.src = src
        inv = 1.0 / (torch.bincount(dst, minlength=v).to(torch.float32) + 1.0)
        self.inv = inv.unsqueeze(-1)  # (V, 1)
        loops = torch.arange(v)
        rows, cols = torch.cat([dst, loops]), torch.cat([src, loops])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # "sparse CSR support is in beta"; products are what we use
            self.adj = torch.sparse_coo_tensor(torch.stack([rows, cols]), inv[rows], (v, v)).coalesce().to_sparse_csr()
            self.edge_mean = (
                torch.sparse_coo_tensor(torch.stack([dst, torch.arange(e)]), inv[dst], (v, e))
                .coalesce()
                .to_sparse_csr()
            )


def spmm(a: Tensor, x: Tensor) -> Tensor:
    """``a @ x[b]`` for every ``b`` of a (B, N, F) batch, as one sparse product."""
    b, n, f = x.shape
    y: Tensor = torch.sparse.mm(a, x.transpose(0, 1).reshape(n, b * f))
    return y.reshape(-1, b, f).transpose(0, 1)


class MessagePassing(nn.Module):
    """One stage: ``h_v <- ReLU(mean over x in {[h_v, 0]} ∪ {[h_u, e_uv] : u in N(v)} of W x)``, or with
    ``per_message`` the mean of ``ReLU(W x)`` (the ReLU inside each message's network, not after the mean)."""

    def __init__(self, d_in: int, d_out: int, per_message: bool = False) -> None:
        super().__init__()
        self.node = nn.Linear(d_in, d_out)  # W's node part (and its bias)
        self.edge = nn.Linear(EDGE_FEATURES, d_out, bias=False)  # W's edge part (zero input for the self message)
        self.per_message = per_message

    def forward(self, h: Tensor, edges: Tensor, e_mean: Tensor, g: GraphIndex) -> Tensor:
        """``h`` (B, V, in); ``edges`` (B, E, edge features); ``e_mean``: ``g.edge_mean`` applied to ``edges``."""
        if not self.per_message:
            return torch.relu(spmm(g.adj, self.node(h)) + self.edge(e_mean))
        hw = self.node(h)  # (B, V, out), bias included: each message is ReLU(hw[u] + W_e e_uv)
        messages = torch.relu(hw[:, g.src] + self.edge(edges))  # (B, E, out)
        return spmm(g.edge_mean, messages) + g.inv * torch.relu(hw)  # the self message has a zero edge vector


class NodeEmbedding(nn.Module):
    """The action representation model: ``layers`` message-passing stages of ``embed`` units."""

    def __init__(self, cfg: NaraConfig) -> None:
        super().__init__()
        dims = [NODE_FEATURES] + [cfg.embed] * cfg.layers
        self.stages = nn.ModuleList(MessagePassing(a, b, cfg.relu_per_message) for a, b in itertools.pairwise(dims))

    def forward(self, nodes: Tensor, edges: Tensor, g: GraphIndex) -> tuple[Tensor, Tensor]:
        """Server embeddings (B, S, embed) and the mean embedding of the selected servers (B, embed)."""
        h = nodes
        e_mean = spmm(g.edge_mean, edges)  # the edge part of every stage's mean needs this once
        for stage in self.stages:
            h = stage(h, edges, e_mean, g)
        servers = h[:, : g.n_servers]
        selected = nodes[:, : g.n_servers, 3]  # (B, S) 0/1
        count = selected.sum(1, keepdim=True).clamp(min=1.0)
        mean_selected = torch.bmm(selected.unsqueeze(1), servers).squeeze(1) / count
        return servers, mean_selected


def _state_net(cfg: NaraConfig) -> nn.Sequential:
    return nn.Sequential(
        nn.Linear(STATE_FEATURES, cfg.state_hidden),
        nn.ReLU(),
        nn.Linear(cfg.state_hidden, cfg.state_out),
        nn.ReLU(),
    )


class NaraPolicyNet(nn.Module):
    """GNN + P1 + P2: masked logits over the servers."""

    def __init__(self, cfg: NaraConfig) -> None:
        super().__init__()
        self.gnn = NodeEmbedding(cfg)
        self.p1 = _state_net(cfg)
        d = cfg.state_out + 2 * cfg.embed
        if cfg.p2_hidden:
            self.p2: nn.Module = nn.Sequential(nn.Linear(d, cfg.p2_hidden), nn.ReLU(), nn.Linear(cfg.p2_hidden, 1))
        else:
            self.p2 = nn.Linear(d, 1)

    def forward(self, nodes: Tensor, edges: Tensor, state: Tensor, mask: Tensor, g: GraphIndex) -> Tensor:
        servers, mean_selected = self.gnn(nodes, edges, g)
        actions = torch.cat([servers, mean_selected.unsqueeze(1).expand_as(servers)], dim=-1)  # (B, S, 2 embed)
        s = self.p1(state).unsqueeze(1).expand(-1, servers.shape[1], -1)  # (B, S, state_out)
        logits: Tensor = self.p2(torch.cat([s, actions], dim=-1)).squeeze(-1)  # (B, S)
        return logits.masked_fill(~mask, MASKED_LOGIT)


class NaraValueNet(nn.Module):
    """The separate value network: its own GNN, pooled, with the state."""

    def __init__(self, cfg: NaraConfig) -> None:
        super().__init__()
        self.gnn = NodeEmbedding(cfg)
        self.p1 = _state_net(cfg)
        self.head = nn.Sequential(
            nn.Linear(cfg.state_out + 2 * cfg.embed, cfg.value_hidden), nn.ReLU(), nn.Linear(cfg.value_hidden, 1)
        )

    def forward(self, nodes: Tensor, edges: Tensor, state: Tensor, g: GraphIndex) -> Tensor:
        servers, mean_selected = self.gnn(nodes, edges, g)
        x = torch.cat([self.p1(state), servers.mean(1), mean_selected], dim=-1)
        value: Tensor = self.head(x).squeeze(-1)  # (B,)
        return value


class NaraNet(nn.Module):
    """Policy and value networks together (one state dict per checkpoint)."""

    def __init__(self, cfg: NaraConfig | None = None) -> None:
        super().__init__()
        self.cfg = cfg or NaraConfig()
        self.policy = NaraPolicyNet(self.cfg)
        self.value = NaraValueNet(self.cfg)


def obs_tensors(obs: dict[str, Any]) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """One observation (:class:`~dcplace.envs.net_alloc.NetObserver`) as a batch of one."""
    return (
        torch.from_numpy(obs["nodes"]).unsqueeze(0),
        torch.from_numpy(obs["edges"]).unsqueeze(0),
        torch.from_numpy(obs["state"]).unsqueeze(0),
        torch.from_numpy(obs["action_mask"].astype(np.bool_)).unsqueeze(0),
    )
