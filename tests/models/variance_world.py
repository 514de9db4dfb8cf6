"""A world where cross-environment neighbours share reward variance (or nothing does).

Tasks of N_ENVS environments; a hidden type per task; cross edges join tasks of the same
type in other environments, within edges random environment-mates. Rewards are Bernoulli.
Used by the graph-signal tests and the learned layer's collapse test.
"""

from __future__ import annotations

import numpy as np

from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.observations import Observation

N_ENVS, PER_ENV, N_TYPES, K = 16, 20, 5, 8


def world(seed: int, shared: bool) -> tuple[TaskGraph, list[Observation]]:
    """Two rounds of K Bernoulli rewards per task; cross edges join tasks of one hidden type.

    ``shared``: a task's success rate is its type's level, so cross neighbours share variance;
    else every task draws its own rate, independent of the graph (and of the environment).
    """
    rng = np.random.default_rng(seed)
    tasks = [(f"e{e}/t{t:02d}", f"e{e}") for e in range(N_ENVS) for t in range(PER_ENV)]
    env = np.repeat(np.arange(N_ENVS), PER_ENV)
    kind = rng.integers(0, N_TYPES, len(tasks))
    rate = np.linspace(0.05, 0.95, N_TYPES)[kind] if shared else rng.uniform(0, 1, len(tasks))
    rows = []
    for i in range(len(tasks)):
        mates = np.flatnonzero((env == env[i]) & (np.arange(len(tasks)) != i))
        for j in rng.choice(mates, 6, replace=False):
            rows.append((tasks[j][0], tasks[i][0], "within", float(rng.uniform(0.3, 1.0))))
        alike = np.flatnonzero((kind == kind[i]) & (env != env[i]))
        for j in rng.choice(alike, 12, replace=False):
            rows.append((tasks[j][0], tasks[i][0], "cross", float(rng.uniform(0.3, 1.0))))
    observations = [
        Observation(task_id, r, tuple((rng.random(K) < rate[i]).astype(float).tolist()))
        for r in (0, 1)
        for i, (task_id, _) in enumerate(tasks)
    ]
    return TaskGraph.from_edge_rows(tasks, rows), observations
