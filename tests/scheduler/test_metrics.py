"""batch_metrics on hand-made rewards."""

from __future__ import annotations

import pytest

from envsched_gnn.observations import ObservationError
from envsched_gnn.scheduler.metrics import batch_metrics


def test_batch_metrics_by_hand():
    rewards = {"a": [0.0, 0.0], "b": [0.0, 1.0], "c": [1.0, 1.0], "d": [0.5, 1.0]}
    env_of = {"a": "e1", "b": "e1", "c": "e2", "d": "e3"}
    m = batch_metrics(rewards, env_of, tools_used=7)
    # means 0, 0.5, 1, 0.75; variances 0, 0.25, 0, 0.0625
    assert m["batch/mean_reward"] == pytest.approx(2.25 / 4)
    assert m["batch/median_reward"] == pytest.approx(0.625)
    assert m["batch/mean_reward_variance"] == pytest.approx(0.3125 / 4)
    assert m["batch/median_reward_variance"] == pytest.approx(0.03125)
    assert m["batch/zero_variance_share"] == 0.5
    assert m["batch/envs_covered"] == 3
    assert m["batch/tools_used"] == 7
    assert "batch/tools_used" not in batch_metrics(rewards, env_of)


def test_batch_metrics_rejects_bad_rewards_and_unknown_tasks():
    with pytest.raises(ObservationError, match="task 'a'"):
        batch_metrics({"a": [1.5]}, {"a": "e"})
    with pytest.raises(KeyError, match="'b'"):
        batch_metrics({"b": [1.0]}, {"a": "e"})
