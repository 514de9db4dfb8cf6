"""The ORACLE graph: neighbours by hidden structure, an upper bound of what a graph can give.

From the hidden structure the real graph never reads
(:func:`envsched_gnn.eval.simulator.structure_world.operation_factors`), task i is the set

    A_i = { (l, f) : f in F(i,l) } U { ("length", L_i), ("task", distractors:D_i) }

    sim_oracle(i, j) = |A_i & A_j| / |A_i | A_j|     (Jaccard; 1 for the same structure).

Each task keeps its top ``k_in`` within and ``k_cross`` cross tasks by it, ties by the
builder's pair key, so only who the neighbours are differs from a real run.
"""

from __future__ import annotations

import numpy as np

from envsched_gnn.envs.pool import Pool
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.graph_build.cross import EdgeRow
from envsched_gnn.graph_build.neighbours import task_hashes, top_neighbours


def structure_sets(pool: Pool) -> tuple[list[str], np.ndarray]:
    """Task ids (sorted) and their binary (task, (position, factor)) matrix ``(N, D)``."""
    from envsched_gnn.eval.simulator.structure_world import operation_factors

    factors, task_factors, _, _ = operation_factors(pool)
    items = [
        {(slot, f) for slot, names in enumerate(slots) for f in names}
        | {("length", len(slots))}
        | {("task", f) for f in extra}
        for slots, extra in zip(factors, task_factors, strict=True)
    ]
    order = sorted(range(len(pool.tasks)), key=lambda n: pool.tasks[n].task_id)
    vocabulary = {item: d for d, item in enumerate(sorted({i for s in items for i in s}, key=str))}
    x = np.zeros((len(order), len(vocabulary)))
    for row, n in enumerate(order):
        x[row, [vocabulary[i] for i in items[n]]] = 1.0
    return [pool.tasks[n].task_id for n in order], x


def oracle_graph(pool: Pool, k_in: int, k_cross: int, block: int = 1024) -> TaskGraph:
    """The oracle graph of ``pool`` (module docstring)."""
    ids, x = structure_sets(pool)
    env_of = {t.task_id: t.env_id for t in pool.tasks}
    envs = [env_of[t] for t in ids]
    env = np.unique(np.asarray(envs), return_inverse=True)[1]
    sizes = x.sum(axis=1)
    hashes = task_hashes(ids)
    rows: list[EdgeRow] = []
    for start in range(0, len(ids), block):
        part = np.arange(start, min(start + block, len(ids)))
        shared = x[part] @ x.T
        sims = shared / (sizes[part][:, None] + sizes[None, :] - shared)
        same_env = env[part][:, None] == env[None, :]
        not_self = part[:, None] != np.arange(len(ids))[None, :]
        for relation, valid, k in (
            ("within", same_env & not_self, k_in),
            ("cross", ~same_env, k_cross),
        ):
            found, cols = top_neighbours(sims, valid, k, hashes[part], hashes)
            rows.extend(
                (ids[c], ids[part[r]], relation, float(min(sims[r, c], 1.0)))
                for r, c in zip(found.tolist(), cols.tolist(), strict=True)
            )
    return TaskGraph.from_edge_rows(list(zip(ids, envs, strict=True)), rows)
