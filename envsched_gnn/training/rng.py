"""The random state of a GRPO run: each step's seed ``step_seed(seed, s)`` (rollouts, mini-batch
order), and the global generators' state (Python, NumPy, torch, CUDA) that a checkpoint
captures and a resumed run restores.
"""

from __future__ import annotations

import random
from typing import Any

import numpy as np
import torch


def step_seed(seed: int, step: int) -> int:
    """The rollout seed of step ``step``: a pure function of the run's seed, so a resumed run
    samples exactly the episodes the uninterrupted run would have."""
    return int(np.random.SeedSequence([seed, step]).generate_state(1)[0])


def capture_rng_state(seed: int) -> dict[str, Any]:
    """The global generators' state, as values ``torch.load(weights_only=True)`` reads back,
    with the run's ``seed`` (``rollout_seed``: the seed of :func:`step_seed`)."""
    return {
        "python": random.getstate(),
        "numpy": _numpy_state(),
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        "rollout_seed": seed,
    }


def restore_rng_state(state: dict[str, Any]) -> None:
    """Set the global generators to a state :func:`capture_rng_state` returned (CUDA's only
    where it was captured and CUDA is present)."""
    random.setstate(state["python"])
    kind, keys, position, has_gauss, gauss = state["numpy"]
    np.random.set_state((kind, np.asarray(keys, dtype=np.uint32), position, has_gauss, gauss))
    torch.set_rng_state(state["torch"])
    if state["cuda"] is not None and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(state["cuda"])


def _numpy_state() -> list:
    """NumPy's legacy RNG state as plain Python values (loadable with ``weights_only``)."""
    kind, keys, position, has_gauss, gauss = np.random.get_state()
    return [kind, [int(k) for k in keys], int(position), int(has_gauss), float(gauss)]
