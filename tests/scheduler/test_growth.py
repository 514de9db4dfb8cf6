"""A live pool: every registered scheduler takes a grown graph mid-run and keeps its history;
a graph without observed tasks is refused; retired environments are not selected."""

from __future__ import annotations

import json

import numpy as np
import pytest

from envsched_gnn.bench.scheduler import synthetic_graph
from envsched_gnn.observations import ObservationConfig, ObservationError
from envsched_gnn.scheduler.base import SchedulerError
from envsched_gnn.scheduler.registry import SCHEDULERS, make_scheduler
from tests.scheduler.test_envsched import rewards_for

B = 8
OLD_ENVS = 4


def operations(graph) -> dict[str, str]:
    """Three operation patterns, by position in the graph (for ``envsched_ops``)."""
    return {t: f"pattern {i % 3}" for i, t in enumerate(graph.task_ids)}


@pytest.fixture(scope="module")
def graphs():
    """A 6-environment graph and the graph of its first 4 environments (the pool before)."""
    full = synthetic_graph(120, tasks_per_env=20, k_in=4, k_cross=6, seed=3)
    old_ids = [t for t, e in zip(full.task_ids, full.env_ids, strict=True) if int(e[1:]) < OLD_ENVS]
    rates = np.random.default_rng(0).random(full.num_tasks)
    return full.subgraph(old_ids), full, rates


def drive(scheduler, steps, rates, index):
    """Run ``steps`` steps; the batches."""
    batches = []
    for step in steps:
        batch = scheduler.next_batch(step)
        rewards = rewards_for(batch, step, rates, index)
        scheduler.filter_groups(step, rewards)
        scheduler.observe(step, rewards)
        batches.append(batch)
    return batches


def observed(scheduler) -> set:
    return {(o.task_id, o.step, o.rewards) for o in scheduler.log.observations()}


WITH_DS = [*sorted(SCHEDULERS), "random+ds", "envsched_spread+ds"]


def base_state(state: dict) -> dict:
    """A scheduler's own state, also inside a dynamic-sampling composition's."""
    return state.get("scheduler", state)


@pytest.mark.parametrize("name", WITH_DS)
def test_every_registered_scheduler_grows_mid_run_and_keeps_its_history(graphs, name):
    old, full, rates = graphs
    scheduler = make_scheduler(name, old, batch_size=B, seed=1, operations=operations(full))
    before = drive(scheduler, range(3), rates, full.index)
    kept, history = observed(scheduler), base_state(scheduler.state_dict())["selections"]
    assert len(kept) >= 3 * B

    scheduler.grow(full)

    assert scheduler.task_ids == full.task_ids
    assert observed(scheduler) == kept  # every observation, none invented
    assert base_state(scheduler.state_dict())["selections"] == history  # and the selections
    counts = scheduler.selections.counts_before(3)
    new = [full.index[t] for t in full.task_ids if t not in old.index]
    assert counts[new].sum() == 0 and counts.sum() == sum(len(set(b)) for b in before)
    # a scheduler built on the grown graph and loaded with the old run's state (a resumed
    # run after graph add-env) is the same scheduler
    resumed = make_scheduler(name, full, batch_size=B, seed=1, operations=operations(full))
    old_state = json.loads(json.dumps(make_state(name, old, rates, full.index)))
    resumed.load_state_dict(old_state)
    after = drive(scheduler, range(3, 9), rates, full.index)
    assert drive(resumed, range(3, 9), rates, full.index) == after
    new_ids = {full.task_ids[i] for i in new}
    assert new_ids & {t for batch in after for t in batch}, "no new task was ever selected"


def make_state(name, graph, rates, index) -> dict:
    scheduler = make_scheduler(name, graph, batch_size=B, seed=1, operations=operations(graph))
    drive(scheduler, range(3), rates, index)
    return scheduler.state_dict()


def test_envsched_selects_new_tasks_in_its_coverage_stage_with_the_graph_prior(graphs):
    old, full, rates = graphs
    scheduler = make_scheduler("envsched", old, batch_size=B, seed=1)
    drive(scheduler, range(3), rates, full.index)
    scheduler.grow(full)
    batch = scheduler.next_batch(3)
    info = scheduler.last_batch
    new = [t for t in batch if t not in old.index]
    # the new environments have C_e = 0: the coverage stage goes there first
    assert new and all(info.stage[t] == "coverage" for t in new)
    # unobserved: E_y = P_y, the graph prior (spec 4.5 with W = 0)
    computation = scheduler.predictor.compute(scheduler.data, scheduler.log, 3)
    rows = [full.index[t] for t in new]
    assert np.array_equal(computation.long.estimate[rows], computation.long.prior[rows])
    assert np.array_equal(scheduler.last_prediction.q, computation.q)


def test_a_graph_that_lacks_observed_tasks_is_refused_naming_them_and_loses_nothing(graphs):
    old, full, rates = graphs
    scheduler = make_scheduler("envsched", full, batch_size=B, seed=1)
    drive(scheduler, range(3), rates, full.index)
    state = json.dumps(scheduler.state_dict())
    used = sorted({o.task_id for o in scheduler.log.observations()})
    dropped = [t for t in used if t not in old.index]
    assert dropped

    with pytest.raises(SchedulerError, match="lacks") as error:
        scheduler.grow(old)
    for task in dropped[:20]:
        assert repr(task) in str(error.value)
    assert json.dumps(scheduler.state_dict()) == state  # nothing changed
    assert scheduler.task_ids == full.task_ids

    smaller = make_scheduler("envsched", old, batch_size=B, seed=1)
    with pytest.raises(SchedulerError, match=f"lacks {len(dropped)} task"):
        smaller.load_state_dict(json.loads(state))
    assert len(smaller.log) == 0

    # renaming an observed task is dropping it
    renamed = full.subgraph(full.task_ids)
    renamed.task_ids[full.index[used[0]]] = "renamed"
    renamed = type(full)(renamed.task_ids, renamed.env_ids, renamed.edges)
    with pytest.raises(SchedulerError, match=repr(used[0])):
        scheduler.grow(renamed)


def test_a_grown_scheduler_keeps_the_reward_its_log_holds(graphs):
    old, full, rates = graphs
    scheduler = make_scheduler("envsched", old, batch_size=B, seed=1)
    scheduler.log.config = ObservationConfig(reward="success")

    def observe(step: int) -> None:
        rewards = rewards_for(scheduler.next_batch(step), step, rates, full.index)
        scheduler.observe(step, {t: [float(r >= 0.5) for r in rs] for t, rs in rewards.items()})

    observe(0)
    scheduler.grow(full)
    observe(1)

    assert scheduler.log.config.reward == "success"
    assert {o.reward for o in scheduler.log.observations()} == {"success"}
    assert {o.step for o in scheduler.log.observations()} == {0, 1}
    with pytest.raises(ObservationError, match="expected 0 or 1"):
        scheduler.observe(2, {full.task_ids[0]: [0.5, 1.0]})


def test_dropping_tasks_no_state_mentions_loses_nothing_and_is_accepted(graphs):
    old, full, rates = graphs
    scheduler = make_scheduler("random", full, batch_size=B, seed=1)
    scheduler.retire([f"e{k}" for k in range(OLD_ENVS, 6)])
    drive(scheduler, range(2), rates, full.index)
    kept = observed(scheduler)
    scheduler.grow(old)  # the retired environments were never selected
    assert observed(scheduler) == kept and scheduler.task_ids == old.task_ids


@pytest.mark.parametrize("name", WITH_DS)
def test_retired_environments_are_not_selected_and_their_observations_stay(graphs, name):
    _, full, rates = graphs
    scheduler = make_scheduler(name, full, batch_size=B, seed=2, operations=operations(full))
    drive(scheduler, range(3), rates, full.index)
    retired_tasks = {t for t, e in zip(full.task_ids, full.env_ids, strict=True) if e == "e0"}
    kept = observed(scheduler)
    assert {t for t, _, _ in kept} & retired_tasks

    scheduler.retire(["e0"])
    after = drive(scheduler, range(3, 10), rates, full.index)
    assert not retired_tasks & {t for batch in after for t in batch}
    assert kept <= observed(scheduler)  # the evidence stays
    state = json.loads(json.dumps(scheduler.state_dict()))
    assert base_state(state)["retired"] == ["e0"]
    resumed = make_scheduler(name, full, batch_size=B, seed=2, operations=operations(full))
    resumed.load_state_dict(state)
    assert resumed.retired == {"e0"}

    scheduler.reinstate("e0")
    again = drive(scheduler, range(10, 40), rates, full.index)
    assert retired_tasks & {t for batch in again for t in batch}


def test_retiring_too_much_or_unknown_environments_is_an_error_that_changes_nothing(graphs):
    _, full, _ = graphs
    scheduler = make_scheduler("envsched", full, batch_size=64, seed=0)
    with pytest.raises(SchedulerError, match="leaves 60 selectable tasks, fewer than"):
        scheduler.retire(["e0", "e1", "e2"])
    assert scheduler.retired == frozenset() and scheduler.eligible.all()
    with pytest.raises(SchedulerError, match=r"unknown environment\(s\) \['nowhere'\]"):
        scheduler.retire("nowhere")
    with pytest.raises(SchedulerError, match="not retired"):
        scheduler.reinstate(["e1"])
