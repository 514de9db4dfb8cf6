"""Replays of one round of rollouts: every task moved to one random step, steps near-equal."""

from collections import Counter

import pytest

from envsched_gnn.eval.rollout_rounds import assign_steps
from envsched_gnn.observations import Observation


def test_assign_steps_spreads_one_round_over_near_equal_steps():
    observations = [Observation(f"t{i}", 0, (0.0, 1.0)) for i in range(765)]
    replay = assign_steps(observations, 6, seed=0)
    assert [(o.task_id, o.rewards) for o in replay] == [
        (o.task_id, o.rewards) for o in observations
    ]
    sizes = Counter(o.step for o in replay)
    assert sorted(sizes) == list(range(6)) and set(sizes.values()) == {127, 128}
    assert replay == assign_steps(observations, 6, seed=0)
    assert replay != assign_steps(observations, 6, seed=1)
    # not in task order: the steps are a random assignment
    assert [o.step for o in replay[:20]] != sorted(o.step for o in replay[:20])
    with pytest.raises(ValueError, match="steps must be >= 1"):
        assign_steps(observations, 0)
