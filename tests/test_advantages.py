"""Group-relative advantages on hand-made numbers: the sample std, Dr. GRPO's undivided form,
exactly 0 for a group of equal rewards, and the training estimator's agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from envsched_gnn.advantages import relative_advantages
from envsched_gnn.training.grpo.objective import group_advantages


def test_divided_by_the_sample_std_and_zero_for_equal_rewards():
    rewards = [[1.0, 0.0, 0.0, 1.0], [0.5, 0.5, 0.5, 0.5]]
    std = math.sqrt(4 * 0.25 / 3)  # sample std of (1, 0, 0, 1)
    expected = [[0.5 / std, -0.5 / std, -0.5 / std, 0.5 / std], [0.0] * 4]
    np.testing.assert_allclose(relative_advantages(rewards, eps=0.0), expected, rtol=1e-15)


def test_dr_grpo_only_centres():
    got = relative_advantages([[1.0, 0.0], [0.25, 0.75]], normalize_std=False)
    assert got.tolist() == [[0.5, -0.5], [-0.25, 0.25]]


@pytest.mark.parametrize("value", [0.0, 0.1, 1.0 / 3.0, 1.0])
def test_equal_rewards_and_single_rollouts_get_exactly_zero(value):
    assert np.all(relative_advantages([[value] * 3], eps=0.0) == 0.0)
    assert np.all(relative_advantages([[value]]) == 0.0)


def test_the_training_estimator_is_this_formula_on_consecutive_groups():
    rewards = [0.2, 0.9, 0.4, 0.4, 1.0, 1.0, 0.0, 1.0]
    for normalize_std in (True, False):
        trained = group_advantages(torch.tensor(rewards, dtype=torch.float64), 4, normalize_std)
        expected = relative_advantages(np.reshape(rewards, (2, 4)), normalize_std).reshape(-1)
        np.testing.assert_array_equal(trained.numpy(), expected)


def test_rewards_must_be_groups():
    with pytest.raises(ValueError, match=r"shape \(G, K\)"):
        relative_advantages([0.0, 1.0])
