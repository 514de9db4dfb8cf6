"""Group-relative advantages, in numpy: the one formula that GRPO's objective trains with and
DUMP's bandit scores environments by.

    A(i,k) = (r(i,k) - mean_k r(i,.)) / (std_k r(i,.) + eps)     (sample std, as TRL and verl)

or ``r(i,k) - mean_k r(i,.)`` without the division (Dr. GRPO). A group whose K rewards are all
equal gets exactly 0: it has no learning signal.
"""

from __future__ import annotations

import numpy as np


def relative_advantages(
    rewards: np.ndarray, normalize_std: bool = True, eps: float = 1e-6
) -> np.ndarray:
    """A(i,k) of each group (row) of rewards, in float64. Shapes: ``(G, K) -> (G, K)``."""
    r = np.asarray(rewards, np.float64)
    if r.ndim != 2:
        raise ValueError(f"rewards must have shape (G, K), got {r.shape}")
    constant = r.max(axis=1, keepdims=True) == r.min(axis=1, keepdims=True)
    centred = r - r.mean(axis=1, keepdims=True)
    if normalize_std and r.shape[1] > 1:
        centred = centred / np.where(constant, 1.0, r.std(axis=1, ddof=1, keepdims=True) + eps)
    return np.where(constant, 0.0, centred)
