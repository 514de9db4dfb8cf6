"""The controls (spec section 7): the relabelled graph (primary) and the label-permuted ones;
what they keep, what they permute, and that each run seed draws its own."""

import numpy as np
import pytest

from envsched_gnn.eval.ablation.ablate import train_pool
from envsched_gnn.eval.ablation.config import AblationConfig, job_graph
from envsched_gnn.eval.controls import (
    DRAWN_CONTROLS,
    PERMUTED_CONTROLS,
    control_graph,
    permuted_graph,
    relabelled_graph,
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


@pytest.fixture(scope="module")
def built_graph() -> TaskGraph:
    """The builder's graph of a generated pool (5 x 20, repeating abstracts: reciprocal edges,
    cliques of similarity 1.0), as ``eval ablate`` builds it."""
    from envsched_gnn.envs.generator import generate_pool
    from envsched_gnn.eval.ablation.ablate import build_pool_graph

    pool = generate_pool(n_envs=5, tasks_per_env=20, seed=0, test_per_env=4)
    return build_pool_graph(train_pool(pool), 6, 12)


def edge_set(graph: TaskGraph, relation: str) -> set[tuple[int, int]]:
    e = graph.edges[relation]
    return set(zip(e.src.tolist(), e.dst.tolist(), strict=True))


def node_structure(graph: TaskGraph) -> dict[str, np.ndarray]:
    """Per node and relation: in-degree, out-degree, reciprocal edges (i in N(j) and j in
    N(i)), the sorted similarities of its in-edges; and the node's environment code."""
    n = graph.num_tasks
    out: dict[str, np.ndarray] = {"env": env_codes(graph)}
    for relation in ("within", "cross"):
        e = graph.edges[relation]
        pairs = edge_set(graph, relation)
        mutual = np.array([(d, s) in pairs for s, d in zip(e.src, e.dst, strict=True)])
        out[f"{relation}/in"] = np.bincount(e.dst, minlength=n)
        out[f"{relation}/out"] = np.bincount(e.src, minlength=n)
        out[f"{relation}/reciprocal"] = np.bincount(e.dst, weights=mutual, minlength=n)
        sims = [sorted(e.sim[e.dst == i].tolist()) for i in range(n)]
        out[f"{relation}/sims"] = np.array([",".join(map(repr, x)) for x in sims])
    return out


def test_relabelled_graph_keeps_every_nodes_structure_and_moves_the_tasks(built_graph):
    graph = built_graph
    before = node_structure(graph)
    assert before["cross/reciprocal"].sum() > 0.3 * len(graph.edges["cross"])  # real structure
    after_graph = relabelled_graph(graph, seed=3)
    after = node_structure(after_graph)
    sigma = within_environment_permutation(before["env"], 3, stream="relabel")
    # the task at node j moves to node sigma(j) and finds there everything node j had:
    # in- and out-degree, reciprocal edges, in-edge similarities, per relation, and its
    # environment (sigma stays inside environments)
    for key, values in before.items():
        assert np.array_equal(after[key][sigma], values), key
    assert np.array_equal(after["env"], before["env"])
    # the graph is the real one up to the relabelling: edge (sigma(j), sigma(i)) for j -> i
    for relation in ("within", "cross"):
        e, r = graph.edges[relation], after_graph.edges[relation]
        assert np.array_equal(r.src, sigma[e.src]) and np.array_equal(r.dst, sigma[e.dst])
        assert np.array_equal(r.sim, e.sim)
        assert np.all(r.src != r.dst)
    # ... and which task sits at which node changed: nearly every task, and with it nearly
    # every task's set of in-neighbours
    assert np.mean(sigma != np.arange(graph.num_tasks)) > 0.9
    edges_before, edges_after = edge_set(graph, "cross"), edge_set(after_graph, "cross")
    assert len(edges_before & edges_after) < 0.2 * len(edges_before)
    TaskGraph.from_json(after_graph.to_json())  # a valid snapshot


def test_the_label_permuted_graph_changes_the_structure_the_relabelled_one_keeps(built_graph):
    """Why the label-permuted graph is only a secondary control: permuting sources alone moves
    out-degrees and dissolves reciprocal pairs, so a batch task penalises more distinct tasks."""
    from envsched_gnn.scheduler.similarity import SimilarityNeighbours

    def penalised(graph: TaskGraph) -> float:
        rows = SimilarityNeighbours(graph)
        return float(np.mean([len(set(rows.row(i)[0].tolist())) for i in range(graph.num_tasks)]))

    permuted_one = permuted_graph(built_graph, "permuted")
    real, permuted = node_structure(built_graph), node_structure(permuted_one)
    assert np.array_equal(permuted["cross/in"], real["cross/in"])  # targets kept ...
    assert not np.array_equal(permuted["cross/out"], real["cross/out"])  # ... sources moved
    assert permuted["cross/reciprocal"].sum() < 0.3 * real["cross/reciprocal"].sum()
    assert penalised(permuted_one) > 1.1 * penalised(built_graph)
    assert penalised(relabelled_graph(built_graph)) == penalised(built_graph)


def test_relabelled_graph_cuts_the_class_signal_of_the_neighbours():
    graph = structured_graph()
    klass = klass_of(graph)
    after = relabelled_graph(graph, seed=1)
    for relation in ("within", "cross"):
        e = after.edges[relation]
        assert abs(np.mean(klass[e.src] == klass[e.dst]) - 1 / 3) < 0.08, relation
    env = env_codes(graph)
    assert np.all(env[after.edges["within"].src] == env[after.edges["within"].dst])
    assert np.all(env[after.edges["cross"].src] != env[after.edges["cross"].dst])


def test_each_run_seed_draws_its_own_control_graph():
    graph = structured_graph()
    graphs = {"k6_12": graph, "oracle": TaskGraph(graph.task_ids, graph.env_ids)}
    config = AblationConfig(control_seed=5)
    for control in DRAWN_CONTROLS:
        first = job_graph(control, 0, graphs, config)
        assert list(first.edge_rows()) == list(control_graph(graph, control, (5, 0)).edge_rows())
        assert list(first.edge_rows()) == list(job_graph(control, 0, graphs, config).edge_rows())
        assert list(first.edge_rows()) != list(job_graph(control, 1, graphs, config).edge_rows())
    assert job_graph("oracle", 3, graphs, config) is graphs["oracle"]  # fixed graphs stay
    assert job_graph("k6_12", 3, graphs, config) is graph
