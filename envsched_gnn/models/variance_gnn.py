r"""The learned layer's network: a heterogeneous edge-weighted GNN over ``within`` / ``cross``.

.. math::
    \mathbf{x}^{(0)}_i = \mathrm{ReLU}(\mathbf{W}_{in} \mathbf{x}_i + \mathbf{b}_{in})

    \mathbf{x}^{(l+1)}_i = \mathbf{x}^{(l)}_i + \mathrm{ReLU}\Big(\sum_{r \in
    \{within, cross\}} \mathbf{W}^{(l)}_{r,root} \mathbf{x}^{(l)}_i +
    \mathbf{W}^{(l)}_{r,rel} \frac{1}{|N^r(i)|} \sum_{j \in N^r(i)} \mathrm{sim}_r(i,j)\,
    \mathbf{x}^{(l)}_j + \mathbf{b}^{(l)}_r\Big)

    \mathbf{o}_i = \mathbf{W}_{head} [\mathbf{x}^{(0)}_i \,\|\, \mathbf{x}^{(L)}_i]
    + \mathbf{b}_{head}

per relation PyG's ``GraphConv(aggr="mean")`` with ``edge_weight`` = sim, summed by
``HeteroConv``; :mod:`.learned` turns o into (E_v, E_m, E_d).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch
from torch import nn
from torch_geometric.nn import GraphConv, HeteroConv

from envsched_gnn.graph.task_graph import RELATIONS

EDGE_TYPES = tuple(("task", relation, "task") for relation in RELATIONS)


class VarianceGNN(nn.Module):
    """Heterogeneous edge-weighted GNN: features (N, F) -> logits of (E_v, E_m, E_d) (N, 3).

    Args:
        in_channels: F, the node feature size.
        hidden_channels: hidden width (default 32).
        num_layers: message-passing layers over ``within`` and ``cross`` (default 2).
        zero_head: start the head at zero, so the logits start at 0 (default False).

    Shapes:
        - **inputs:** node features (N, F); per edge type, edge indices (2, E) (row 0 the
          neighbour j, row 1 the target i) with similarities (E,), or a sparse (N, N)
          adjacency whose row i holds sim(i, .) (``adj_t``)
        - **output:** logits (o_v, o_m, o_d) (N, 3)
    """

    def __init__(
        self,
        in_channels: int,
        hidden_channels: int = 32,
        num_layers: int = 2,
        zero_head: bool = False,
    ) -> None:
        super().__init__()
        self.in_channels = in_channels
        self.hidden_channels = hidden_channels
        self.num_layers = num_layers
        self.zero_head = zero_head
        self.input = nn.Linear(in_channels, hidden_channels)
        self.convs = nn.ModuleList(
            HeteroConv(
                {et: GraphConv(hidden_channels, hidden_channels, aggr="mean") for et in EDGE_TYPES},
                aggr="sum",
            )
            for _ in range(num_layers)
        )
        self.head = nn.Linear(2 * hidden_channels, 3)

    def reset_parameters(self) -> None:
        self.input.reset_parameters()
        for conv in self.convs:
            conv.reset_parameters()
        self.head.reset_parameters()
        if self.zero_head:
            nn.init.zeros_(self.head.weight)
            nn.init.zeros_(self.head.bias)

    def forward(
        self,
        x: torch.Tensor,
        edge_index: Mapping[tuple, torch.Tensor],
        edge_weight: Mapping[tuple, torch.Tensor] | None = None,
    ) -> torch.Tensor:
        """``edge_index``: per edge type (2, E) indices with ``edge_weight`` (E,), or a sparse
        (N, N) adjacency whose row i holds sim(i, .) (``adj_t``; then no ``edge_weight``)."""
        h0 = torch.relu(self.input(x))
        h = h0
        weights = {} if edge_weight is None else {"edge_weight_dict": dict(edge_weight)}
        for conv in self.convs:
            out = conv({"task": h}, dict(edge_index), **weights)["task"]
            h = h + torch.relu(out)
        return self.head(torch.cat([h0, h], dim=1))

    def __repr__(self) -> str:
        return (
            f"{self.__class__.__name__}({self.in_channels}, {self.hidden_channels}, "
            f"num_layers={self.num_layers}, relations={RELATIONS})"
        )
