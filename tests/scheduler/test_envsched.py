"""EnvSched over a run: spec-5 constraints on every batch, resume from state, predictor link."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envsched_gnn.bench.scheduler import synthetic_graph
from envsched_gnn.scheduler.base import BatchInfo, Scheduler, SchedulerError
from envsched_gnn.scheduler.envsched import EnvSchedScheduler
from envsched_gnn.scheduler.registry import make_scheduler
from tests.scheduler.scheduler_checks import check_batches


def rewards_for(batch, step, rates, index, k=8):
    """Deterministic rewards per (step, task): Bernoulli(rate of the task)."""
    rng = np.random.default_rng([step, 7])
    draws = rng.random((len(batch), k))
    return {t: (draws[n] < rates[index[t]]).astype(float).tolist() for n, t in enumerate(batch)}


@pytest.fixture(scope="module")
def pool():
    graph = synthetic_graph(2550, seed=0)  # 51 environments x 50 tasks
    rates = np.random.default_rng(1).beta(0.5, 0.5, graph.num_tasks)
    return graph, rates


def test_every_constraint_holds_over_a_long_run(pool):
    graph, rates = pool
    scheduler = EnvSchedScheduler(graph, seed=3)
    assert isinstance(scheduler, Scheduler)
    batches, relaxed, covered = {}, {}, []
    for step in range(60):
        batch = scheduler.next_batch(step)
        info = scheduler.last_batch
        assert isinstance(info, BatchInfo) and info.batch == batch
        assert [info.stage[t] for t in batch] == ["coverage"] * 32 + ["exploitation"] * 32
        batches[step], relaxed[step] = batch, info.relaxed
        scheduler.observe(step, rewards_for(batch, step, rates, graph.index))
        covered.append(scheduler.metrics()["batch/envs_covered"])
    env_of = dict(zip(graph.task_ids, graph.env_ids, strict=True))
    check_batches(batches, relaxed, env_of, 64)
    assert all(not r for r in relaxed.values())
    assert min(covered) >= 32
    counts = scheduler.selections.counts_before(60)
    assert counts.sum() == 60 * 64


def test_state_dict_round_trip_continues_identically(pool):
    graph, rates = pool

    def run(scheduler, steps):
        out = []
        for step in steps:
            batch = scheduler.next_batch(step)
            scheduler.observe(step, rewards_for(batch, step, rates, graph.index))
            out.append(batch)
        return out

    first = EnvSchedScheduler(graph, seed=5)
    run(first, range(5))
    state = json.loads(json.dumps(first.state_dict()))
    expected = run(first, range(5, 10))
    restored = EnvSchedScheduler(graph, seed=0)
    restored.load_state_dict(state)
    assert run(restored, range(5, 10)) == expected


OWN_SCHEDULERS = (
    "envsched",
    "envsched_spread",
    "envsched_ops",
    "within_only",
    "cross_only",
    "rho0",
    "rho1",
    "random",
    "dapo",
    "mopps",
    "greso",
    "dps",
    "dump",
)


@pytest.mark.parametrize("name", OWN_SCHEDULERS)
def test_every_registered_scheduler_resumes_identically(name):
    graph = synthetic_graph(300, seed=2)
    rates = np.random.default_rng(0).random(graph.num_tasks)

    def run(scheduler, steps):
        out = []
        for step in steps:
            batch = scheduler.next_batch(step)
            rewards = rewards_for(batch, step, rates, graph.index)
            scheduler.filter_groups(step, rewards)
            scheduler.observe(step, rewards)
            out.append((batch, scheduler.last_batch.relaxed))
        return out

    operations = {t: f"pattern {i % 5}" for i, t in enumerate(graph.task_ids)}
    first = make_scheduler(name, graph, batch_size=16, seed=1, operations=operations)
    run(first, range(4))
    state = json.loads(json.dumps(first.state_dict()))
    expected = run(first, range(4, 8))
    restored = make_scheduler(name, graph, batch_size=16, seed=1, operations=operations)
    restored.load_state_dict(state)
    assert run(restored, range(4, 8)) == expected


def test_next_batch_is_repeatable_for_a_step_and_uses_the_predictor_q(pool):
    graph, rates = pool
    scheduler = EnvSchedScheduler(graph, seed=0)
    for step in range(3):
        batch = scheduler.next_batch(step)
        scheduler.observe(step, rewards_for(batch, step, rates, graph.index))
    again = [scheduler.next_batch(3) for _ in range(2)]
    assert again[0] == again[1]
    q = scheduler.last_prediction.q
    exploit = [graph.index[t] for t in again[0][32:]]
    assert np.mean(q[exploit]) > np.quantile(q, 0.8)


def test_state_of_another_scheduler_is_refused(pool):
    graph, _ = pool
    state = make_scheduler("random", graph).state_dict()
    with pytest.raises(SchedulerError, match="name = 'random'"):
        EnvSchedScheduler(graph).load_state_dict(state)


def test_pool_smaller_than_batch_and_bad_step_are_errors():
    graph = synthetic_graph(100, seed=0)
    with pytest.raises(SchedulerError, match="pool has 100 tasks, fewer than the batch size"):
        EnvSchedScheduler(graph, batch_size=128)
    scheduler = EnvSchedScheduler(graph, batch_size=8)
    with pytest.raises(SchedulerError, match="step must be a non-negative integer"):
        scheduler.next_batch(-1)


def test_ablations_are_configured():
    graph = synthetic_graph(200, seed=0)
    within = make_scheduler("within_only", graph, batch_size=8)
    assert within.config.penalty_relations == ("within",)
    assert within.predictor.config.relation_weights == {"within": 1.0, "cross": 0.0}
    cross = make_scheduler("cross_only", graph, batch_size=8)
    assert cross.neighbours.indices.size == 2 * len(graph.edges["cross"])
    assert make_scheduler("rho0", graph).config.rho == 0.0
    assert make_scheduler("rho1", graph, lambda_sim=0.0).config.lambda_sim == 0.0
    with pytest.raises(ValueError, match="unknown option"):
        make_scheduler("envsched", graph, rhoo=0.3)
    with pytest.raises(ValueError, match="unknown scheduler 'nope'"):
        make_scheduler("nope", graph)


def test_the_operation_coverage_option_reads_the_pools_patterns():
    graph = synthetic_graph(200, seed=0)
    operations = {t: f"pattern {i % 4}" for i, t in enumerate(graph.task_ids)}
    ops = make_scheduler("envsched_ops", graph, batch_size=8, operations=operations)
    assert ops.config.operation_coverage and ops.name == "envsched_ops"
    assert ops.selector.operation.tolist() == [i % 4 for i in range(graph.num_tasks)]
    # the schedulers that do not read patterns never see them
    assert make_scheduler("random", graph, batch_size=8, operations=operations).name == "random"
    assert make_scheduler("envsched", graph, operations=operations).selector.operation is None
    with pytest.raises(SchedulerError, match="needs operations="):
        make_scheduler("envsched_ops", graph, batch_size=8)
    with pytest.raises(SchedulerError, match="no operation pattern for 1 task"):
        make_scheduler("envsched_ops", graph, operations=dict(list(operations.items())[1:]))
