"""The oracle graph: neighbours by hidden structure (Jaccard of the factor sets)."""

import numpy as np

from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.eval.ablation.oracle import oracle_graph, structure_sets

POOL = generate_pool(n_envs=6, tasks_per_env=25, seed=1, test_per_env=0)


def test_oracle_edges_are_jaccard_top_k_per_relation():
    ids, x = structure_sets(POOL)
    graph = oracle_graph(POOL, k_in=4, k_cross=5)
    assert graph.task_ids == ids == sorted(t.task_id for t in POOL.tasks)
    env = np.array(graph.env_ids)
    inter = x @ x.T
    jaccard = inter / (x.sum(1)[:, None] + x.sum(1)[None, :] - inter)
    for relation, k, same in (("within", 4, True), ("cross", 5, False)):
        e = graph.edges[relation]
        assert np.all((env[e.src] == env[e.dst]) == same) and np.all(e.src != e.dst)
        assert np.allclose(e.sim, jaccard[e.dst, e.src])
        counts = np.bincount(e.dst, minlength=len(ids))
        for target in range(len(ids)):  # the kept ones are the most similar candidates
            valid = (env == env[target]) == same
            valid[target] = False
            candidates = np.sort(jaccard[target, valid])[::-1]
            assert counts[target] == min(k, np.count_nonzero(candidates > 0))
            kept = e.sim[e.dst == target]
            assert kept.min() >= candidates[counts[target] - 1] - 1e-12


def test_tasks_with_the_same_structure_are_joined_with_similarity_one():
    ids, x = structure_sets(POOL)
    graph = oracle_graph(POOL, k_in=4, k_cross=5)
    cross = graph.edges["cross"]
    same = {tuple(row) for row in x}
    assert len(same) < len(ids)  # structures repeat in a generated pool
    twins = np.array([(x[j] == x[i]).all() for i, j in zip(cross.dst, cross.src, strict=True)])
    assert np.array_equal(twins, cross.sim == 1.0) and twins.mean() > 0.1
