"""The scheduling step made for 1M tasks gives today's outputs bit for bit (a smaller pool).

The reference is computed in the test by today's code path: today's predictor, copied in
``tests/scheduler/todays_step.py`` (full sorts, ``reduceat`` over all entries, every node's
evidence propagated), and the selector's naive loop (every gain, every slot), which the
rewrite of the lazy loop's top-k does not touch."""

from __future__ import annotations

import numpy as np
import pytest

from envsched_gnn.bench.scheduler import random_rewards, synthetic_graph
from envsched_gnn.models.prediction import Prediction
from envsched_gnn.scheduler.config import SelectorConfig
from envsched_gnn.scheduler.envsched import EnvSchedScheduler
from tests.scheduler.todays_step import TodaysPredictor


@pytest.mark.slow  # up to 40,000 tasks against a full-sort reference
@pytest.mark.parametrize("num_tasks", [3000, 12_345, 40_000])
def test_step_outputs_equal_the_full_sort_and_naive_selection(num_tasks) -> None:
    graph = synthetic_graph(num_tasks, seed=1)
    fast = EnvSchedScheduler(graph, batch_size=64, seed=3)
    today = EnvSchedScheduler(
        graph,
        batch_size=64,
        seed=3,
        predictor=TodaysPredictor(),
        config=SelectorConfig(lazy=False),
    )
    rng = np.random.default_rng(0)
    for step in range(8):
        batch = fast.next_batch(step)
        assert batch == today.next_batch(step), step
        for name in Prediction.FIELDS:
            mine, theirs = getattr(fast.last_prediction, name), getattr(today.last_prediction, name)
            assert mine.tobytes() == theirs.tobytes(), (step, name)
        rewards = random_rewards(batch, rng)
        fast.observe(step, rewards)
        today.observe(step, rewards)
