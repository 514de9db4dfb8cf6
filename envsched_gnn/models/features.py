"""Node features of the learned propagation: per-task history statistics at both half-lives.

For scheduling step t (observations with s < t only) and each half-life h in
(h_long, h_short), with the statistics of spec 4.1-4.3 (``models.history``) and
y in (v, m, d), each channel scaled to [0, 1] (v by 4):

    own(i)      = ybar(i,t), or g_y(t) where W(i,t) = 0
    seen(i)     = 1[W(i,t) > 0]
    evidence(i) = log(1 + W(i,t))
    global      = g_y(t)
    env(i)      = (sum_{j in e(i)} W(j,t) ybar(j,t) + lambda_g g_y(t))
                  / (sum_{j in e(i)} W(j,t) + lambda_g)
    env_evidence(i) = log(1 + sum_{j in e(i)} W(j,t) / n_e),  env_seen(i) = share of e(i) observed
    count(i)    = log(1 + #observations of i),  long(i) = 1[h = h_long]

Neighbour statistics are left to the network's message passing over ``within`` / ``cross``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from envsched_gnn.models.config import Y_NAMES, PredictorConfig
from envsched_gnn.models.history import half_life_stats, observed_before
from envsched_gnn.observations import ObservationLog

SCALE = np.array([4.0, 1.0, 1.0])
"""Per-channel scale of (v, m, d) so that every statistic lies in [0, 1]."""

FEATURE_NAMES = (
    *(f"own_{y}" for y in Y_NAMES),
    "seen",
    "evidence",
    *(f"global_{y}" for y in Y_NAMES),
    *(f"env_{y}" for y in Y_NAMES),
    "env_evidence",
    "env_seen",
    "count",
    "long",
)


def history_features(
    log: ObservationLog | Mapping[str, np.ndarray],
    step: int,
    env: np.ndarray,
    config: PredictorConfig,
) -> np.ndarray:
    """Features of every task at ``step`` for (h_long, h_short): float64 (2, N, F).

    ``env`` is each task's environment index, int64 (N,); F = ``len(FEATURE_NAMES)``.
    """
    env = np.asarray(env, dtype=np.int64)
    n = env.shape[0]
    n_env = int(env.max()) + 1 if n else 0
    env_size = np.bincount(env, minlength=n_env).astype(np.float64)
    history = observed_before(log, step, n)
    count = np.log1p(np.bincount(history.task, minlength=n).astype(np.float64))
    out = np.empty((2, n, len(FEATURE_NAMES)))
    for k, half_life in enumerate(config.half_lives):
        stats = half_life_stats(history, n, half_life, config.defaults)
        seen = stats.weight > 0
        own = np.where(seen[:, None], stats.own_estimate(), stats.g)
        env_weight = np.bincount(env, weights=stats.weight, minlength=n_env)
        env_sum = np.stack(
            [
                np.bincount(env, weights=stats.weighted_sum[:, c], minlength=n_env)
                for c in range(len(Y_NAMES))
            ],
            axis=1,
        )
        env_estimate = (env_sum + config.lambda_g * stats.g) / (env_weight + config.lambda_g)[
            :, None
        ]
        env_seen = np.bincount(env, weights=seen.astype(np.float64), minlength=n_env) / env_size
        out[k] = np.column_stack(
            [
                own * SCALE,
                seen,
                np.log1p(stats.weight),
                np.broadcast_to(stats.g * SCALE, (n, len(Y_NAMES))),
                env_estimate[env] * SCALE,
                np.log1p(env_weight / env_size)[env],
                env_seen[env],
                count,
                np.full(n, 1.0 if k == 0 else 0.0),
            ]
        )
    return out
