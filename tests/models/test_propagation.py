import numpy as np
import pytest
import torch

from envsched_gnn.models.propagation import EnvSchedPropagation


def _loop_relation_estimate(num_nodes, edges, ybar, weight, g, lambda_g):
    """G_r(i) = (sum_j a ybar_j + lambda_g g) / (sum_j a + lambda_g), a = sim W_j, W_j > 0."""
    out = np.zeros((num_nodes, weight.shape[1], 3))
    for i in range(num_nodes):
        for h in range(weight.shape[1]):
            num = lambda_g * g[h].copy()
            den = lambda_g
            for j, target, sim in edges:
                if target == i and weight[j, h] > 0:
                    a = sim * weight[j, h]
                    num += a * ybar[j, h]
                    den += a
            out[i, h] = num / den
    return out


def _graph(seed, num_nodes=9, num_edges=25):
    rng = np.random.default_rng(seed)
    edges = []
    for _ in range(num_edges):
        j, i = rng.choice(num_nodes, size=2, replace=False)
        edges.append((int(j), int(i), float(rng.uniform(0.05, 1.0))))
    weight = rng.uniform(0.2, 3.0, size=(num_nodes, 2))
    weight[rng.random((num_nodes, 2)) < 0.3] = 0.0
    ybar = rng.uniform(0, 0.25, size=(num_nodes, 2, 3))
    ybar[weight == 0] = np.nan  # undefined for unobserved tasks; the loop must never read it
    g = rng.uniform(0, 0.25, size=(2, 3))
    return edges, ybar, weight, g


def _adj_t(num_nodes, edges):
    index = torch.tensor([[i for _, i, _ in edges], [j for j, _, _ in edges]])
    values = torch.tensor([s for _, _, s in edges], dtype=torch.float64)
    coo = torch.sparse_coo_tensor(index, values, (num_nodes, num_nodes), check_invariants=False)
    return coo.coalesce().to_sparse_csr()


@pytest.mark.parametrize("lambda_g", [2.0, 0.5, 10.0])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_layer_matches_loop_on_both_paths(lambda_g, seed):
    edges, ybar, weight, g = _graph(seed)
    expected = _loop_relation_estimate(9, edges, ybar, weight, g, lambda_g)
    layer = EnvSchedPropagation(lambda_g=lambda_g)
    weighted = np.where(weight[..., None] > 0, weight[..., None] * ybar, 0.0)
    x = EnvSchedPropagation.evidence(torch.from_numpy(weighted), torch.from_numpy(weight))
    args = (x, torch.from_numpy(g))
    edge_index = torch.tensor([[j for j, _, _ in edges], [i for _, i, _ in edges]])
    sim = torch.tensor([s for _, _, s in edges], dtype=torch.float64)
    by_messages = layer(*args, edge_index, sim)
    fused = layer(*args, _adj_t(9, edges))
    assert by_messages.dtype == torch.float64 and by_messages.shape == (9, 2, 3)
    np.testing.assert_allclose(by_messages.numpy(), expected, rtol=1e-13, atol=0)
    np.testing.assert_allclose(fused.numpy(), expected, rtol=1e-13, atol=0)


def test_by_hand_one_observed_neighbour_and_none():
    # node 0 <- node 1 (sim 0.5, W 2, ybar = (0.2, 0.6, 0.4)); node 1 has no in-edges
    weighted = torch.tensor([[[0.0, 0.0, 0.0]], [[0.4, 1.2, 0.8]]], dtype=torch.float64)
    weight = torch.tensor([[0.0], [2.0]], dtype=torch.float64)
    g = torch.tensor([[0.05, 0.5, 0.5]], dtype=torch.float64)
    out = EnvSchedPropagation()(
        EnvSchedPropagation.evidence(weighted, weight),
        g,
        torch.tensor([[1], [0]]),
        torch.tensor([0.5]).double(),
    )
    # G_v(0) = (0.5 * 2 * 0.2 + 2 * 0.05) / (0.5 * 2 + 2) = 0.3 / 3
    np.testing.assert_allclose(out[0, 0].numpy(), [0.1, (0.6 + 1.0) / 3, (0.4 + 1.0) / 3])
    np.testing.assert_array_equal(out[1, 0].numpy(), g[0].numpy())


def test_empty_relation_gives_the_global_reference():
    weighted = torch.rand(4, 2, 3, dtype=torch.float64)
    weight = torch.ones(4, 2, dtype=torch.float64)
    g = torch.rand(2, 3, dtype=torch.float64)
    empty = torch.zeros(2, 0, dtype=torch.long)
    x = EnvSchedPropagation.evidence(weighted, weight)
    out = EnvSchedPropagation()(x, g, empty, torch.zeros(0, dtype=torch.float64))
    np.testing.assert_array_equal(out.numpy(), np.broadcast_to(g.numpy(), (4, 2, 3)))


def test_layer_is_parameter_free():
    layer = EnvSchedPropagation(lambda_g=3.0)
    assert list(layer.parameters()) == []
    assert repr(layer) == "EnvSchedPropagation(lambda_g=3.0)"
    with pytest.raises(ValueError, match="lambda_g"):
        EnvSchedPropagation(lambda_g=0.0)
