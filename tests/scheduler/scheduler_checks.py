"""Independent checks of spec section 5, written from the spec, not from the selector."""

from __future__ import annotations

import math

import numpy as np

from envsched_gnn.graph.task_graph import RelationEdges, TaskGraph
from envsched_gnn.scheduler.config import SelectorConfig


def grid_graph(
    num_envs: int,
    per_env: int,
    *,
    seed: int = 0,
    k_in: int = 3,
    k_cross: int = 4,
    sims: tuple[float, ...] | None = None,
) -> TaskGraph:
    """A small graph built with Python loops; ``sims`` restricts similarities (ties)."""
    rng = np.random.default_rng(seed)
    n = num_envs * per_env
    rows = []
    for i in range(n):
        e = i // per_env
        own = [j for j in range(e * per_env, (e + 1) * per_env) if j != i]
        other = [j for j in range(n) if j // per_env != e]
        for relation, pool, k in (("within", own, k_in), ("cross", other, k_cross)):
            for j in rng.choice(pool, size=min(k, len(pool)), replace=False):
                sim = float(rng.choice(sims)) if sims else float(rng.uniform(0.05, 1.0))
                rows.append((int(j), i, relation, sim))
    edges = {}
    for relation in ("within", "cross"):
        sel = [r for r in rows if r[2] == relation]
        edges[relation] = RelationEdges(
            np.array([r[0] for r in sel], np.int64),
            np.array([r[1] for r in sel], np.int64),
            np.array([r[3] for r in sel], np.float64),
        )
    return TaskGraph(
        [f"task{i}" for i in range(n)], [f"env{i // per_env}" for i in range(n)], edges
    )


def dense_sim(graph: TaskGraph, relations=("within", "cross")) -> dict[tuple[int, int], float]:
    """sim(i, j) as a dict: max edge similarity in either direction under either relation."""
    sim: dict[tuple[int, int], float] = {}
    for relation in relations:
        e = graph.edges[relation]
        for s, d, w in zip(e.src.tolist(), e.dst.tolist(), e.sim.tolist(), strict=True):
            for key in ((s, d), (d, s)):
                sim[key] = max(sim.get(key, 0.0), w)
    return sim


def reference_select(
    graph, q, counts, window_counts, blocked, batch_size, tie, config, relaxed=(), operation=None
):
    """Spec 5 greedy with plain loops: returns the batch (node indices, in order); with
    ``operation`` (each task's pattern index) the coverage score also has the operation
    factor (1 + C_o / n_o + b_o)^(-1/2)."""
    _, env = graph.env_index()
    env = env.tolist()
    num_envs = max(env) + 1
    n_e = [env.count(e) for e in range(num_envs)]
    c_e = [0] * num_envs
    for i, c in enumerate(counts):
        c_e[env[i]] += int(c)
    ops = list(operation) if operation is not None else [0] * len(env)
    n_o = [ops.count(o) for o in range(max(ops) + 1)]
    c_o = [0] * len(n_o)
    for i, c in enumerate(counts):
        c_o[ops[i]] += int(c)
    b_o = [0] * len(n_o)
    sim = dense_sim(graph, config.penalty_relations)
    n_cov = min(batch_size, math.floor(config.rho * batch_size + 0.5))
    batch: list[int] = []
    b = [0] * num_envs
    for slot in range(batch_size):
        best, best_key = None, None
        for i in range(len(env)):
            e = env[i]
            if i in batch:
                continue
            if "consecutive" not in relaxed and blocked[i]:
                continue
            if "per_step" not in relaxed and b[e] >= config.per_step_env_quota:
                continue
            if "window" not in relaxed and window_counts[e] + b[e] >= config.window_env_quota:
                continue
            if slot < n_cov:
                score = (1.0 / math.sqrt(1.0 + counts[i])) * (
                    1.0 / math.sqrt(1.0 + c_e[e] / n_e[e] + b[e])
                )
                if operation is not None:
                    o = ops[i]
                    score *= 1.0 / math.sqrt(1.0 + c_o[o] / n_o[o] + b_o[o])
            else:
                score = q[i] * (1.0 / math.sqrt(1.0 + counts[i] / config.exposure_scale))
            penalty = max((sim.get((i, j), 0.0) for j in batch), default=0.0)
            gain = score - config.lambda_sim * penalty
            key = (gain, q[i], -tie[i], -i)
            if best_key is None or key > best_key:
                best, best_key = i, key
        batch.append(best)
        b[env[best]] += 1
        b_o[ops[best]] += 1
    return batch


def check_batches(
    batches: dict[int, list[str]],
    relaxed: dict[int, list[str]],
    env_of: dict,
    batch_size: int,
    config: SelectorConfig | None = None,
) -> None:
    """Assert every constraint of spec 5 on every batch of a run (steps in order)."""
    config = config if config is not None else SelectorConfig()
    for t, batch in batches.items():
        assert len(batch) == batch_size, t
        assert len(set(batch)) == batch_size, f"step {t}: a task twice"
        off = set(relaxed.get(t, []))
        per_env: dict[str, int] = {}
        for task in batch:
            per_env[env_of[task]] = per_env.get(env_of[task], 0) + 1
        if "per_step" not in off:
            assert max(per_env.values()) <= config.per_step_env_quota, f"step {t}: {per_env}"
        if "window" not in off:
            window: dict[str, int] = dict(per_env)
            for s in range(t - config.window_steps + 1, t):
                for task in batches.get(s, []):
                    window[env_of[task]] = window.get(env_of[task], 0) + 1
            assert max(window.values()) <= config.window_env_quota, f"step {t}: {window}"
        if "consecutive" not in off:
            previous = [set(batches.get(s, [])) for s in range(t - config.consecutive_cap, t)]
            capped = set.intersection(*previous) if previous else set()
            assert not capped & set(batch), f"step {t}: consecutive cap broken"
