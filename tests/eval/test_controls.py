"""The label-permuted controls (spec section 7): what they keep and what they permute."""

import numpy as np
import pytest

from envsched_gnn.eval.ablate import train_pool
from envsched_gnn.eval.controls import (
    PERMUTED_CONTROLS,
    permuted_graph,
    remap_sources,
    shuffled_pool,
    within_environment_permutation,
)
from envsched_gnn.graph.hetero import to_hetero_data
from envsched_gnn.graph.task_graph import TaskGraph
from tests.envs.handmade_pool import handmade_pool

N_ENVS, PER_ENV, K_IN, K_CROSS = 8, 15, 4, 6


def structured_graph(seed: int = 0) -> TaskGraph:
    """Within edges join tasks of one class (index mod 3) of an environment; cross edges join
    tasks of the same class in other environments: a graph whose sources carry information."""
    rng = np.random.default_rng(seed)
    tasks = [(f"e{e}-t{t:02d}", f"e{e}") for e in range(N_ENVS) for t in range(PER_ENV)]
    klass = np.array([t % 3 for e in range(N_ENVS) for t in range(PER_ENV)])
    env = np.repeat(np.arange(N_ENVS), PER_ENV)
    rows = []
    for i, (target, _) in enumerate(tasks):
        same = np.flatnonzero((env == env[i]) & (klass == klass[i]) & (np.arange(len(env)) != i))
        for j in rng.choice(same, K_IN, replace=False):
            rows.append((tasks[j][0], target, "within", float(rng.uniform(0.2, 1.0))))
        other = np.flatnonzero((env != env[i]) & (klass == klass[i]))
        for j in rng.choice(other, K_CROSS, replace=False):
            rows.append((tasks[j][0], target, "cross", float(rng.uniform(0.2, 1.0))))
    return TaskGraph.from_edge_rows(tasks, rows)


def env_codes(graph: TaskGraph) -> np.ndarray:
    return graph.env_index()[1]


def klass_of(graph: TaskGraph) -> np.ndarray:
    return np.array([int(t.split("-t")[1]) % 3 for t in graph.task_ids])


@pytest.mark.parametrize("control", PERMUTED_CONTROLS)
def test_controls_keep_targets_similarities_relations_and_environments(control):
    graph = structured_graph()
    permuted = permuted_graph(graph, control, seed=3)
    assert permuted.task_ids == graph.task_ids and permuted.env_ids == graph.env_ids
    for relation in ("within", "cross"):
        before, after = graph.edges[relation], permuted.edges[relation]
        assert np.array_equal(before.dst, after.dst)  # every edge keeps its target ...
        assert np.array_equal(before.sim, after.sim)  # ... and its similarity
        assert np.all(after.src != after.dst)  # no self-loop
        pairs = set(zip(after.src.tolist(), after.dst.tolist(), strict=True))
        assert len(pairs) == len(after)  # no duplicate edge
    TaskGraph.from_json(permuted.to_json())  # a valid snapshot
    assert to_hetero_data(permuted)["task"].num_nodes == graph.num_tasks


@pytest.mark.parametrize("control", ["permuted", "permuted_within"])
def test_within_sources_are_permuted_inside_environments(control):
    graph = structured_graph()
    env, klass = env_codes(graph), klass_of(graph)
    after = permuted_graph(graph, control, seed=1).edges["within"]
    before = graph.edges["within"]
    assert np.all(env[after.src] == env[after.dst])  # still within the target's environment
    assert np.mean(after.src != before.src) > 0.85  # but a different task of it
    # the class signal of the real sources is gone: chance level (1/3), not 1
    assert np.mean(klass[before.src] == klass[before.dst]) == 1.0
    assert abs(np.mean(klass[after.src] == klass[after.dst]) - 1 / 3) < 0.08
    # exactly pi_e(j) (pi_e(i) where pi_e(j) = i), pi_e one permutation per environment
    pi = within_environment_permutation(env, seed=1)
    assert sorted(pi.tolist()) == list(range(graph.num_tasks)) and np.all(env[pi] == env)
    assert np.array_equal(after.src, remap_sources(before.src, before.dst, pi))
    if control == "permuted_within":
        assert np.array_equal(
            permuted_graph(graph, control, 1).edges["cross"].src, graph.edges["cross"].src
        )


@pytest.mark.parametrize("control", ["permuted", "permuted_cross"])
def test_cross_sources_are_drawn_over_all_tasks_of_other_environments(control):
    graph = structured_graph()
    env, klass = env_codes(graph), klass_of(graph)
    after = permuted_graph(graph, control, seed=2).edges["cross"]
    assert np.all(env[after.src] != env[after.dst])
    assert abs(np.mean(klass[after.src] == klass[after.dst]) - 1 / 3) < 0.08
    # sources spread over every environment and nearly every task, as a permutation does
    assert len(np.unique(env[after.src])) == N_ENVS
    assert len(np.unique(after.src)) > 0.95 * graph.num_tasks
    if control == "permuted_cross":
        assert np.array_equal(
            permuted_graph(graph, control, 2).edges["within"].src, graph.edges["within"].src
        )


def test_the_primary_control_is_both_single_relation_controls_at_once():
    graph = structured_graph()
    both = permuted_graph(graph, "permuted", seed=4)
    assert np.array_equal(
        both.edges["within"].src, permuted_graph(graph, "permuted_within", 4).edges["within"].src
    )
    assert np.array_equal(
        both.edges["cross"].src, permuted_graph(graph, "permuted_cross", 4).edges["cross"].src
    )


def test_fully_permuted_graph_draws_both_relations_over_all_tasks():
    graph = structured_graph()
    env = env_codes(graph)
    after = permuted_graph(graph, "permuted_all", seed=5)
    within = after.edges["within"]
    # within sources now mostly leave the environment: about (E - 1) / E of them
    assert np.mean(env[within.src] != env[within.dst]) > 0.75
    assert len(np.unique(after.edges["cross"].src)) > 0.95 * graph.num_tasks


def test_controls_are_seeded():
    graph = structured_graph()
    for control in PERMUTED_CONTROLS:
        a, b = permuted_graph(graph, control, 7), permuted_graph(graph, control, 7)
        c = permuted_graph(graph, control, 8)
        assert list(a.edge_rows()) == list(b.edge_rows())
        assert list(a.edge_rows()) != list(c.edge_rows())
    with pytest.raises(ValueError, match="expected one of"):
        permuted_graph(graph, "permuted_sideways")


def test_remap_sources_fixes_self_loops_through_pi_of_the_target():
    pi = np.array([1, 0, 3, 2])  # 0 <-> 1, 2 <-> 3
    src, dst = np.array([1, 2, 3]), np.array([0, 0, 0])
    assert remap_sources(src, dst, pi).tolist() == [1, 3, 2]  # 1 -> pi(1) = 0 = target -> pi(0)


def test_shuffled_pool_keeps_environment_sizes_and_moves_abstracts():
    pool = train_pool(handmade_pool())
    shuffled = shuffled_pool(pool, seed=1)
    assert sorted(t.env_id for t in shuffled.tasks) == sorted(t.env_id for t in pool.tasks)
    assert [t.task_id for t in shuffled.tasks] == [t.task_id for t in pool.tasks]
    for task in shuffled.tasks:
        assert task.env_class_name == next(
            t.env_class_name for t in pool.tasks if t.env_id == task.env_id
        )


def test_the_predictor_only_control_keeps_the_real_graph_for_the_penalty():
    from envsched_gnn.scheduler.registry import make_scheduler

    graph = structured_graph()
    permuted = permuted_graph(graph, "permuted", seed=0)
    scheduler = make_scheduler("envsched", permuted, batch_size=8, penalty_graph=graph)
    real = make_scheduler("envsched", graph, batch_size=8)
    for i in range(0, graph.num_tasks, 11):
        assert np.array_equal(scheduler.neighbours.row(i)[0], real.neighbours.row(i)[0])
    src = scheduler.data["task", "cross", "task"].edge_index[0].numpy()
    assert np.array_equal(src, permuted.edges["cross"].src)  # the predictor's evidence
    shuffled = TaskGraph(list(reversed(graph.task_ids)), list(reversed(graph.env_ids)))
    with pytest.raises(ValueError, match="same order"):
        make_scheduler("envsched", graph, penalty_graph=shuffled)
