"""The ablation's numbers on hand-made curves."""

import numpy as np

from envsched_gnn.eval.ablation_config import AblationConfig
from envsched_gnn.eval.ablation_summary import _rollouts_to


def test_rollouts_to_random_final_on_hand_made_curves():
    """The first budget step whose seed-mean score reaches random's final, in rollouts."""
    config = AblationConfig(steps=4, batch_size=2)  # K = 8
    grid = np.array([0.0, 2.0, 4.0])
    entry = {"curve": {"score_mean": [0.50, 0.61, 0.62]}}
    assert _rollouts_to(entry, 0.61, grid, config) == 2 * 2 * 8
    assert _rollouts_to(entry, 0.40, grid, config) == 0  # the start already reaches it
    assert _rollouts_to(entry, 0.70, grid, config) is None
