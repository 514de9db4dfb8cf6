"""The run's random state: step seeds are pure, a captured state restores every generator."""

from __future__ import annotations

import io
import random

import numpy as np
import torch

from envsched_gnn.training.rng import capture_rng_state, restore_rng_state, step_seed


def _draws() -> tuple:
    return (random.random(), float(np.random.rand()), float(torch.rand(())), np.random.randn())


def test_step_seed_depends_on_seed_and_step_only():
    assert step_seed(3, 0) == step_seed(3, 0)
    assert len({step_seed(3, 0), step_seed(3, 1), step_seed(4, 0)}) == 3
    assert 0 <= step_seed(3, 7) < 2**32


def test_restored_state_repeats_the_draws_and_loads_with_weights_only():
    random.seed(1), np.random.seed(1), torch.manual_seed(1)
    np.random.randn()  # a cached Gaussian is part of NumPy's state
    state = capture_rng_state(seed=5)
    first = _draws()
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    loaded = torch.load(buffer, weights_only=True)
    assert loaded["rollout_seed"] == 5
    restore_rng_state(loaded)
    assert _draws() == first
