"""The fixed relation estimate G_r of EnvSched (spec 4.4) as a parameter-free PyG layer."""

from __future__ import annotations

import torch
from torch import Tensor
from torch_geometric.nn.conv import MessagePassing
from torch_geometric.typing import Adj, OptTensor
from torch_geometric.utils import spmm


class EnvSchedPropagation(MessagePassing):
    r"""The relation estimate of EnvSched from `"EnvSched: Environment-Aware Scheduling for
    Rollout-Efficient Agent Reinforcement Learning" <https://arxiv.org/abs/2610.37609>`_
    (Yang et al., 2026), spec section 4.4, for one relation :math:`r`:

    .. math::
        G_r(i,t) = \frac{\sum_{j \in \mathcal{N}^r_t(i)} a_r(i,j,t) \, \bar{y}(j,t)
        + \lambda_g \, g_y(t)}{\sum_{j \in \mathcal{N}^r_t(i)} a_r(i,j,t) + \lambda_g},
        \qquad a_r(i,j,t) = \mathrm{sim}_r(i,j) \, W(j,t)

    where :math:`\mathcal{N}^r_t(i)` are the in-neighbours :math:`j` of :math:`i` under
    :math:`r` with :math:`W(j,t) > 0`, so a task without observed neighbours gets
    :math:`G_r = g_y(t)`. The input is each node's *evidence*
    :math:`x_j = [W \bar{y}_v, W \bar{y}_m, W \bar{y}_d, W](j,t)` (see :meth:`evidence`; zero
    for an unobserved node); node :math:`j` sends :math:`\mathrm{sim}_r(i,j) \cdot x_j`, summed
    (``aggr="add"``) into the numerator channels and the denominator channel; the shrinkage
    toward :math:`g_y(t)` happens in :meth:`update`. All of :math:`y \in \{v, m, d\}` and any
    number :math:`H` of half-lives travel in one propagation, and the same evidence serves
    every relation. The layer has no parameters.

    Args:
        lambda_g (float, optional): Pseudo-weight :math:`\lambda_g > 0` of the global
            reference :math:`g_y(t)`. (default: :obj:`2.0`)
        **kwargs (optional): Additional arguments of
            :class:`torch_geometric.nn.conv.MessagePassing`.

    Shapes:
        - **inputs:** evidence :math:`x` :math:`(|\mathcal{V}|, H, 4)`, global references
          :math:`g` :math:`(H, 3)`, edge indices :math:`(2, |\mathcal{E}|)`
          (row 0 the neighbour :math:`j`, row 1 the target :math:`i`) with similarities
          :math:`(|\mathcal{E}|)`, or a sparse adjacency :math:`(|\mathcal{V}|, |\mathcal{V}|)`
          whose row :math:`i` holds :math:`\mathrm{sim}_r(i, \cdot)` (``adj_t``)
        - **output:** relation estimates :math:`G_r` :math:`(|\mathcal{V}|, H, 3)`
    """

    def __init__(self, lambda_g: float = 2.0, **kwargs) -> None:
        if not lambda_g > 0:
            raise ValueError(f"lambda_g must be > 0, got {lambda_g!r}")
        super().__init__(aggr="add", **kwargs)
        self.lambda_g = float(lambda_g)

    @staticmethod
    def evidence(weighted_ybar: Tensor, weight: Tensor) -> Tensor:
        """x = [W ybar_v, W ybar_m, W ybar_d, W]. Shapes: (N, H, 3), (N, H) -> (N, H, 4)."""
        return torch.cat([weighted_ybar, weight.unsqueeze(-1)], dim=-1)

    def forward(
        self, evidence: Tensor, g: Tensor, edge_index: Adj, edge_weight: OptTensor = None
    ) -> Tensor:
        num_nodes, half_lives, channels = evidence.shape
        x = evidence.reshape(num_nodes, half_lives * channels)
        return self.propagate(edge_index, x=x, edge_weight=edge_weight, g=g)

    def message(self, x_j: Tensor, edge_weight: Tensor) -> Tensor:
        return edge_weight.view(-1, 1) * x_j

    def message_and_aggregate(self, adj_t: Adj, x: Tensor) -> Tensor:
        return spmm(adj_t, x, reduce=self.aggr)

    def update(self, inputs: Tensor, g: Tensor) -> Tensor:
        sums = inputs.view(inputs.shape[0], g.shape[0], g.shape[1] + 1)
        # [g, 1] per half-life: one contiguous in-place pass turns the numerator channels into
        # sum a ybar + lambda_g g and the last channel into sum a + lambda_g
        sums.add_(torch.cat([g, g.new_ones(g.shape[0], 1)], dim=-1), alpha=self.lambda_g)
        return sums[..., :-1] / sums[..., -1:]

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}(lambda_g={self.lambda_g})"
