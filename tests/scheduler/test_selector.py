"""The greedy selector of spec 5: reference agreement, lazy == naive, stages, quotas, errors."""

from __future__ import annotations

import numpy as np
import pytest

from envsched_gnn.scheduler.config import SelectorConfig
from envsched_gnn.scheduler.selector import (
    COVERAGE,
    EXPLOITATION,
    GreedySelector,
    SelectionError,
    coverage_slots,
)
from envsched_gnn.scheduler.similarity import SimilarityNeighbours
from tests.scheduler.scheduler_checks import grid_graph, reference_select


def make_selector(graph, operation=None, **config):
    _, env = graph.env_index()
    cfg = SelectorConfig(**config)
    neighbours = SimilarityNeighbours(graph, cfg.penalty_relations)
    return GreedySelector(env, neighbours, cfg, operation), env


def random_case(seed: int, ties: bool):
    rng = np.random.default_rng(seed)
    num_envs, per_env = int(rng.integers(3, 9)), int(rng.integers(4, 15))
    graph = grid_graph(num_envs, per_env, seed=seed, sims=(0.25, 0.5) if ties else None)
    n = graph.num_tasks
    q = rng.choice([0.0, 0.5, 1.0], n) if ties else rng.random(n)
    counts = rng.integers(0, 3 if ties else 6, n)
    window = rng.integers(0, 12, num_envs)
    blocked = rng.random(n) < 0.2
    tie = rng.choice([0.0, 0.5], n) if ties else rng.random(n)
    batch_size = int(rng.integers(1, min(n, 24) + 1))
    rho = float(rng.choice([0.0, 0.3, 0.5, 1.0]))
    return graph, q, counts, window, blocked, tie, batch_size, rho


@pytest.mark.parametrize("ties", [False, True])
def test_lazy_equals_naive_equals_reference(ties):
    for seed in range(60):
        graph, q, counts, window, blocked, tie, b, rho = random_case(seed, ties)
        batches = {}
        for lazy, initial in ((False, 256), (True, 1), (True, 3), (True, 256)):
            selector, _ = make_selector(graph, rho=rho, lazy=lazy, initial_candidates=initial)
            sel = selector.select(q, counts, window, blocked, b, tie)
            batches[(lazy, initial)] = (sel.indices.tolist(), sel.relaxed)
        assert len({str(v) for v in batches.values()}) == 1, (seed, batches)
        indices, relaxed = batches[(False, 256)]
        cfg = SelectorConfig(rho=rho)
        expected = reference_select(graph, q, counts, window, blocked, b, tie, cfg, relaxed)
        assert indices == expected, seed


@pytest.mark.parametrize("ties", [False, True])
def test_operation_coverage_lazy_equals_naive_equals_reference(ties):
    for seed in range(60):
        graph, q, counts, window, blocked, tie, b, rho = random_case(seed, ties)
        operation = np.random.default_rng(seed + 100).integers(0, 4, graph.num_tasks)
        batches = {}
        for lazy, initial in ((False, 256), (True, 1), (True, 3), (True, 256)):
            selector, _ = make_selector(
                graph, operation, rho=rho, lazy=lazy, initial_candidates=initial,
                operation_coverage=True,
            )  # fmt: skip
            sel = selector.select(q, counts, window, blocked, b, tie)
            batches[(lazy, initial)] = (sel.indices.tolist(), sel.relaxed)
        assert len({str(v) for v in batches.values()}) == 1, (seed, batches)
        indices, relaxed = batches[(False, 256)]
        cfg = SelectorConfig(rho=rho)
        expected = reference_select(
            graph, q, counts, window, blocked, b, tie, cfg, relaxed, operation.tolist()
        )
        assert indices == expected, seed


def test_operation_coverage_spreads_the_coverage_stage_over_patterns():
    """Every environment holds the same 6 patterns and q favours pattern 0 everywhere: the
    environment factor alone fills the coverage slots with pattern 0; the operation factor
    spreads them over all 6, still one environment each."""
    from envsched_gnn.bench.scheduler import synthetic_graph

    graph = synthetic_graph(2550, seed=0)
    n = graph.num_tasks
    _, env = graph.env_index()
    rank = np.zeros(n, np.int64)
    for e in np.unique(env):
        members = np.flatnonzero(env == e)
        rank[members] = np.arange(members.shape[0])
    operation = rank % 6
    q = np.where(operation == 0, 0.9, 0.1) + 1e-3 * np.random.default_rng(0).random(n)
    args = (q, np.zeros(n, int), np.zeros(51, int), np.zeros(n, bool), 12, np.zeros(n))
    plain, _ = make_selector(graph, lambda_sim=0.0)
    spread, _ = make_selector(graph, operation, lambda_sim=0.0, operation_coverage=True)
    by_env = plain.select(*args).indices[:6]
    by_both = spread.select(*args).indices[:6]
    assert set(operation[by_env].tolist()) == {0}
    assert sorted(operation[by_both].tolist()) == [0, 1, 2, 3, 4, 5]
    assert len(set(env[by_both].tolist())) == 6


def test_operation_coverage_needs_every_tasks_pattern():
    graph = grid_graph(3, 4, seed=0)
    with pytest.raises(SelectionError, match="operation pattern of every task"):
        make_selector(graph, None, operation_coverage=True)
    with pytest.raises(SelectionError, match=r"got \(5,\), expected \(12,\)"):
        make_selector(graph, np.zeros(5, int), operation_coverage=True)


def test_lazy_equals_naive_on_a_larger_pool():
    graph = grid_graph(20, 25, seed=3, k_in=6, k_cross=12)
    rng = np.random.default_rng(0)
    n = graph.num_tasks
    for case in range(5):
        q, counts = rng.random(n), rng.integers(0, 10, n)
        args = (q, counts, rng.integers(0, 8, 20), rng.random(n) < 0.1, 64, rng.random(n))
        naive, _ = make_selector(graph, lazy=False)
        lazy, _ = make_selector(graph, lazy=True, initial_candidates=8)
        assert naive.select(*args).indices.tolist() == lazy.select(*args).indices.tolist(), case


def test_excluded_tasks_are_never_chosen_even_when_quotas_are_relaxed():
    """Retired environments' tasks are excluded: never chosen, whatever is relaxed; the rest is
    the batch of a pool without them (lazy == naive == the reference, which gets them blocked
    when no quota is relaxed)."""
    relaxed_seen = False
    for seed in range(40):
        graph, q, counts, window, blocked, tie, b, rho = random_case(seed, ties=False)
        _, env = graph.env_index()
        excluded = np.isin(env, np.random.default_rng(seed).choice(env.max() + 1, 2, False))
        b = min(b, int((~excluded).sum()))
        batches = set()
        for lazy in (False, True):
            selector, _ = make_selector(graph, rho=rho, lazy=lazy, initial_candidates=2)
            sel = selector.select(q, counts, window, blocked, b, tie, excluded=excluded)
            assert not excluded[sel.indices].any(), seed
            batches.add((tuple(sel.indices.tolist()), tuple(sel.relaxed)))
        assert len(batches) == 1, seed
        indices, relaxed = batches.pop()
        relaxed_seen |= bool(relaxed)
        if not relaxed:
            cfg = SelectorConfig(rho=rho)
            expected = reference_select(graph, q, counts, window, blocked | excluded, b, tie, cfg)
            assert list(indices) == expected, seed
    assert relaxed_seen
    selector, _ = make_selector(grid_graph(2, 5))
    n = 10
    with pytest.raises(SelectionError, match="5 tasks outside the excluded ones, fewer than"):
        selector.select(
            np.zeros(n), np.zeros(n), np.zeros(2), np.zeros(n, bool), 6, np.zeros(n),
            excluded=np.arange(n) < 5,
        )  # fmt: skip


@pytest.mark.parametrize("rho, n_cov", [(0.0, 0), (1.0, 64), (0.5, 32), (0.25, 16)])
def test_stages_follow_rho(rho, n_cov):
    graph = grid_graph(20, 10, seed=1)
    selector, _ = make_selector(graph, rho=rho)
    n = graph.num_tasks
    rng = np.random.default_rng(0)
    sel = selector.select(
        rng.random(n), np.zeros(n, int), np.zeros(20, int), np.zeros(n, bool), 64, rng.random(n)
    )
    assert sel.stages == [COVERAGE] * n_cov + [EXPLOITATION] * (64 - n_cov)
    assert coverage_slots(rho, 64) == n_cov


def test_coverage_stage_spreads_over_environments():
    """Spec 5: with b_e the 32 coverage slots on 51 x 50 tasks cover about 32 environments."""
    from envsched_gnn.bench.scheduler import synthetic_graph

    graph = synthetic_graph(2550, seed=0)
    selector, env = make_selector(graph)
    rng = np.random.default_rng(0)
    n = graph.num_tasks
    sel = selector.select(
        rng.random(n), np.zeros(n, int), np.zeros(51, int), np.zeros(n, bool), 64, rng.random(n)
    )
    coverage = sel.indices[:32]
    assert len(set(env[coverage].tolist())) >= 30
    exploitation_only, _ = make_selector(graph, rho=0.0)
    q = np.sort(rng.random(n))  # the best tasks crowd the last environments
    sel0 = exploitation_only.select(
        q, np.zeros(n, int), np.zeros(51, int), np.zeros(n, bool), 64, rng.random(n)
    )
    assert len(set(env[sel0.indices].tolist())) == 16  # per-step quota 4: 64 / 4


def test_exposure_lowers_exploitation_score_and_penalty_separates_neighbours():
    graph = grid_graph(4, 5, seed=0, k_in=0, k_cross=0)
    selector, _ = make_selector(graph, rho=0.0)
    n = graph.num_tasks
    q = np.linspace(0.5, 1.0, n)
    counts = np.zeros(n, int)
    counts[n - 1] = 16  # omega = 2^(-1/2): 1.0 * 0.707 < q of the next task (0.97)
    sel = selector.select(q, counts, np.zeros(4, int), np.zeros(n, bool), 1, np.zeros(n))
    assert sel.indices.tolist() == [n - 2]
    # a strong edge to the first pick demotes the runner-up
    from envsched_gnn.graph.task_graph import RelationEdges

    graph.edges["cross"] = RelationEdges(np.array([n - 1]), np.array([n - 6]), np.array([0.9]))
    selector, _ = make_selector(graph, rho=0.0)
    sel = selector.select(q, np.zeros(n, int), np.zeros(4, int), np.zeros(n, bool), 2, np.zeros(n))
    assert sel.indices.tolist() == [n - 1, n - 2]
    q2 = q.copy()
    q2[n - 6] = q[n - 2] + 0.01  # would be second, but 0.5 * 0.9 penalty
    sel = selector.select(q2, np.zeros(n, int), np.zeros(4, int), np.zeros(n, bool), 2, np.zeros(n))
    assert sel.indices.tolist() == [n - 1, n - 2]


def _select(graph, batch, blocked_ids=(), window=None, **config):
    selector, env = make_selector(graph, **config)
    n = graph.num_tasks
    blocked = np.zeros(n, bool)
    blocked[list(blocked_ids)] = True
    num_envs = int(env.max()) + 1
    window = np.zeros(num_envs, int) if window is None else np.asarray(window)
    rng = np.random.default_rng(0)
    return selector.select(
        rng.random(n), np.zeros(n, int), window, blocked, batch, rng.random(n)
    ), env


def test_relaxation_order_consecutive_then_window_then_per_step():
    graph = grid_graph(5, 4, seed=0)  # 20 tasks, per-step room 5 x 4 = 20
    sel, env = _select(graph, 16)
    assert sel.relaxed == []
    sel, env = _select(graph, 16, blocked_ids=range(5))  # 15 eligible left
    assert sel.relaxed == ["consecutive"]
    assert np.bincount(env[sel.indices]).max() <= 4
    sel, env = _select(graph, 16, blocked_ids=range(5), window=[9, 9, 9, 0, 0])
    assert sel.relaxed == ["consecutive", "window"]
    assert np.bincount(env[sel.indices]).max() <= 4
    graph = grid_graph(3, 10, seed=0)  # 3 envs x 4 = 12 < 16 whatever else is relaxed
    sel, env = _select(graph, 16)
    assert sel.relaxed == ["consecutive", "window", "per_step"]
    assert len(set(sel.indices.tolist())) == 16
    sel, _ = _select(graph, 16, relaxation_order=("per_step", "window", "consecutive"))
    assert sel.relaxed == ["per_step"]


def test_window_quota_and_consecutive_cap_respected_when_feasible():
    graph = grid_graph(6, 6, seed=0)
    sel, env = _select(graph, 12, blocked_ids=[0, 1, 2], window=[10, 8, 0, 0, 0, 0])
    assert sel.relaxed == []
    counts = np.bincount(env[sel.indices], minlength=6)
    assert counts[0] <= 1 and counts[1] <= 3 and counts.max() <= 4
    assert not {0, 1, 2} & set(sel.indices.tolist())


def test_pool_smaller_than_batch_is_an_error():
    graph = grid_graph(2, 5, seed=0)
    with pytest.raises(SelectionError, match="pool has 10 tasks, fewer than the batch size B = 11"):
        _select(graph, 11)


def test_bad_input_shapes_are_named():
    graph = grid_graph(2, 5, seed=0)
    selector, _ = make_selector(graph)
    with pytest.raises(SelectionError, match="q has shape"):
        selector.select(
            np.zeros(3), np.zeros(10, int), np.zeros(2, int), np.zeros(10, bool), 4, np.zeros(10)
        )


def test_config_rejects_bad_values():
    with pytest.raises(ValueError, match="rho"):
        SelectorConfig(rho=1.5)
    with pytest.raises(ValueError, match="relaxation_order"):
        SelectorConfig(relaxation_order=("window",))
