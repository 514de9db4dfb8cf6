"""The observation sink against the real store: a store that is down for a step never stalls
training, and every observation lands exactly once when it is back (Bolt/Cypher tests run
against the session's managed ArcadeDB)."""

from __future__ import annotations

import time

import pytest

from envsched_gnn.graph_store.connect import connect_store
from envsched_gnn.observations import Observation, ObservationError
from envsched_gnn.training.observation_sink import ObservationSink
from tests.envs.handmade_pool import handmade_pool

pytestmark = pytest.mark.store


def step_observations(pool, step: int) -> list[Observation]:
    return [
        Observation(task.task_id, step, (float(i % 2), 0.5, float(step % 2)))
        for i, task in enumerate(pool.tasks)
    ]


@pytest.mark.slow  # waits out a store that is down
@pytest.mark.managed  # stops and restarts the session's server
def test_store_down_for_a_step_then_every_observation_lands_once(store, store_server):
    managed = store_server.managed
    pool = handmade_pool()
    store.write_pool(pool)

    def write(observations):
        # a short connection per write: the restarted server listens on a new port
        with connect_store(managed.uri, managed.auth, managed.database) as connection:
            return connection.write_observations(observations)

    sink = ObservationSink(write, retry_initial_s=0.1, retry_max_s=0.5)
    step0, step1, step2 = (step_observations(pool, s) for s in range(3))
    sink.put(step0)
    assert sink.flush(timeout=60)

    managed.stop()
    try:
        started = time.perf_counter()
        sink.put(step1)
        assert time.perf_counter() - started < 0.5  # training does not wait on the store
        deadline = time.monotonic() + 30
        while sink.failed_writes == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        assert sink.failed_writes >= 1 and sink.pending == len(step1)
        # the trainer crashes here: its checkpoint holds what is still unwritten
        state = sink.state_dict()
        assert sink.close(timeout=0) and len(state["pending"]) == len(step1)
    finally:
        managed.start()
        store_server.uri = managed.uri  # later tests connect to the restarted server

    resumed = ObservationSink(write, retry_initial_s=0.1)
    resumed.load_state_dict(state)
    resumed.put(step0)  # a replay of rows already stored is a no-op
    resumed.put(step2)
    assert resumed.flush(timeout=60)
    assert resumed.close() == [] and resumed.rejected == []

    with store_server.connect() as stored:
        observations = stored.read_observations()
        assert stored.count_observations() == len(step0) + len(step1) + len(step2)
    expected = {(o.task_id, o.step): o.rewards for o in step0 + step1 + step2}
    assert {(o.task_id, o.step): o.rewards for o in observations} == expected


def test_refused_observations_are_reported_not_retried(store):
    store.write_pool(handmade_pool())
    sink = ObservationSink(store.write_observations, retry_initial_s=0.1)
    sink.put([Observation("no-such-task", 0, (1.0, 0.0))])
    assert sink.flush(timeout=30)
    assert sink.close() == []
    assert [o.task_id for o, _ in sink.rejected] == ["no-such-task"]
    assert "unknown task" in sink.rejected[0][1] and sink.failed_writes == 0
    assert store.count_observations() == 0


def test_conflicting_rewards_for_one_key_are_refused_at_once():
    sink = ObservationSink(lambda observations: None)
    sink.put([Observation("a", 0, (1.0,))])
    with pytest.raises(ObservationError, match="queued twice"):
        sink.put([Observation("a", 0, (0.0,))])
    sink.close()
