"""The learned layer's network: its repr and output shape."""

import torch

from envsched_gnn.models.variance_gnn import VarianceGNN


def test_repr_and_layer_shapes():
    layer = VarianceGNN(5, 16, 3)
    assert repr(layer) == "VarianceGNN(5, 16, num_layers=3, relations=('within', 'cross'))"
    x = torch.randn(4, 5)
    edges = {("task", r, "task"): torch.tensor([[0, 1], [1, 2]]) for r in ("within", "cross")}
    weights = {("task", r, "task"): torch.tensor([0.5, 1.0]) for r in ("within", "cross")}
    assert layer(x, edges, weights).shape == (4, 3)
