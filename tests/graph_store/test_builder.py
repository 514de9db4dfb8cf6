"""The graph builder (spec section 3): neighbour counts, similarity ranges, ties, exactness."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from envsched_gnn.envs.pool import Check
from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph_build.builder import GraphConfig, build
from envsched_gnn.graph_build.embeddings import exact_cosines, fixed_point
from envsched_gnn.graph_build.views import (
    VIEWS,
    check_structure_text,
    source_structure_text,
    verifier_structure_text,
    within_similarity,
)
from tests.envs.handmade_pool import handmade_pool
from tests.graph_store.small_pool import small_pool


def in_neighbours(graph, relation: str) -> dict[int, list[int]]:
    edges = graph.edges[relation]
    found: dict[int, list[int]] = {i: [] for i in range(graph.num_tasks)}
    for s, d in zip(edges.src.tolist(), edges.dst.tolist(), strict=True):
        found[d].append(s)
    return found


@pytest.mark.parametrize(("n_envs", "per_env"), [(4, 8), (3, 4)])
def test_neighbour_counts_environments_and_sims(embedder, config, n_envs, per_env) -> None:
    graph = build(small_pool(n_envs, per_env), config, embedder=embedder).graph
    env = graph.env_ids
    within, cross = in_neighbours(graph, "within"), in_neighbours(graph, "cross")
    for i in range(graph.num_tasks):
        assert len(within[i]) == min(6, per_env - 1)
        assert all(env[j] == env[i] and j != i for j in within[i])
        assert len(cross[i]) == min(12, (n_envs - 1) * per_env)
        assert all(env[j] != env[i] for j in cross[i])
    for edges in graph.edges.values():
        assert np.all(edges.sim > 0) and np.all(edges.sim <= 1)
    assert graph.task_ids == sorted(graph.task_ids)


def test_build_is_deterministic_and_sizes_configurable(embedder) -> None:
    pool = small_pool(3, 6)
    small = GraphConfig(k_within=2, k_cross=3, show_progress=False)
    first = build(pool, small, embedder=embedder)
    cache = {first.abstracts[t]: first.embeddings[t] for t in first.abstracts}
    encoded = embedder.encoded
    second = build(pool, small, embedder=embedder, cache=cache)
    assert embedder.encoded == encoded  # every abstract came from the cache
    assert list(first.graph.edge_rows()) == list(second.graph.edge_rows())
    first = first.graph
    assert len(first.edges["within"]) == 18 * 2 and len(first.edges["cross"]) == 18 * 3


def test_handmade_pool_graph_loads_as_hetero_data(embedder, config) -> None:
    pool = handmade_pool()
    graph = build(pool, config, embedder=embedder).graph
    data = to_hetero_data(graph)
    assert data["task"].num_nodes == 6
    within = data["task", "within", "task"]
    assert within.edge_index.shape == (2, 12)  # 2 in-neighbours per task in 3-task environments
    assert data["task", "cross", "task"].edge_weight.dtype.is_floating_point
    assert data.task_ids == sorted(t.task_id for t in pool.tasks)
    env = data["task"].env
    src, dst = within.edge_index
    assert bool((env[src] == env[dst]).all())


def test_ties_in_a_built_graph_spread_over_environments(embedder, config) -> None:
    """Every task has the same abstract: all cross similarities are 1.0, and no environment
    becomes the source of most cross edges (ties by task id made env0 the source of all)."""
    pool = small_pool(6, 8)
    abstract = "step 1: lookup; step 2: update using step 1 (gate: state precondition)"
    pool = type(pool)(pool.envs, [replace(t, abstract=abstract) for t in pool.tasks])
    graph = build(pool, GraphConfig(k_within=2, k_cross=4, show_progress=False), embedder=embedder)
    cross = graph.graph.edges["cross"]
    assert np.all(cross.sim == 1.0)
    env_codes = graph.graph.env_index()[1]
    per_env = np.bincount(env_codes[cross.src], minlength=6)
    assert per_env.max() <= 1.5 * per_env.mean(), per_env


def test_exact_cosines_do_not_depend_on_blocking() -> None:
    rng = np.random.default_rng(0)
    vectors = rng.normal(size=(40, 384)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    q = fixed_point(vectors)
    full = exact_cosines(q, q)
    blocks = np.vstack([exact_cosines(q[i : i + 7], q) for i in range(0, 40, 7)])
    assert np.array_equal(full, blocks)
    assert np.allclose(full, vectors.astype(np.float64) @ vectors.T.astype(np.float64), atol=1e-5)


def test_embedding_of_a_text_does_not_depend_on_its_batch(embedder) -> None:
    texts = [f"step 1: lookup; step {n}: update using step 1" for n in range(2, 9)]
    texts.append("step 1: create; step 2: delete using step 1 (gate: state precondition)")
    encode = super(type(embedder), embedder).encode  # the encoder itself, not the test memo
    together = encode(texts)
    alone = np.stack([encode([t])[0] for t in texts[:3]])
    assert np.array_equal(together[:3], alone)
    assert np.allclose(np.linalg.norm(together, axis=1), 1.0, atol=1e-6)


def test_code_structure_view_ignores_literal_values() -> None:
    pool = handmade_pool()
    task = pool.tasks[0]
    source = "def check_func(final_state):\n    return final_state['loans']['L{}']['days'] == {}"
    first = type(task)(
        **{**task.__dict__, "checklist_with_func": [Check("a", source.format(1, 7))]}
    )
    second = type(task)(
        **{**task.__dict__, "checklist_with_func": [Check("b", source.format(2, 9))]}
    )
    assert verifier_structure_text(first) == verifier_structure_text(second)
    assert "loans" in verifier_structure_text(first) and "7" not in verifier_structure_text(first)


def test_within_similarity_is_a_mean_of_six_views() -> None:
    tasks = handmade_pool().tasks_of("library")
    sims = within_similarity(tasks)
    assert len(VIEWS) == 6
    assert np.allclose(sims, sims.T) and np.allclose(np.diag(sims), 1.0)
    assert np.all(sims[~np.eye(3, dtype=bool)] < 1.0)


def test_llm_extractor_hook_supplies_missing_abstracts(embedder) -> None:
    pool = small_pool(3, 4)
    pool = type(pool)(pool.envs, [replace(t, abstract=None) for t in pool.tasks])
    asked: list[str] = []
    abstract = "step 1: lookup; step 2: update using step 1 (gate: state precondition)"

    def extractor(task, env) -> str:
        asked.append(task.task_id)
        return abstract

    config = GraphConfig(k_within=2, k_cross=3, show_progress=False, llm_extractor=extractor)
    built = build(pool, config, embedder=embedder)
    assert sorted(asked) == sorted(t.task_id for t in pool.tasks)
    assert set(built.abstracts.values()) == {abstract}


CHECK_SOURCES = [
    "def check_func(final_state):\n    return final_state['loans'].get('L-7', {})['days'] == 14\n",
    "def check_func(final_state):\n    return final_state[\"a b\"] == 'it''s' and 1.5 < 2e3\n",
    "def check_func(final_state):\n    return f'{final_state[\"k\"]}-{3}' == 'x-3'\n",
    "def check_func(final_state):\n    return rb'\\x00' != b'' and u'café' != 'cafe'\n",
    "def check_func(final_state):  # it's 'quoted' here\n    return 'value' == \"x\"\n",
    "def check_func(final_state):\n    return '''one\n'two' ''' == \"\"\"x\"\"\" and 0x1F == 31\n",
    "def check_func(final_state):\n    return 'a\\'b' == \"it's\" and -5 == x1 and 1_000 == 10e2\n",
    "def check_func(final_state):\n    return final_state['items'][0]['qty'] >= 2 and True\n",
    "def check_func(final_state):\n    return final_state[\n",
]


@pytest.mark.parametrize("source", CHECK_SOURCES)
def test_structure_of_a_check_computed_from_its_shape_equals_its_parse(source) -> None:
    """The per-shape cache never changes a check's tokens: prefixed strings, comments,
    escapes, triple quotes, floats, hex and a syntax error included."""
    assert check_structure_text(source) == source_structure_text(source)
