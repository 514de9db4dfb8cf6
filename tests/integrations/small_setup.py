"""What the integration tests share: a small generated pool, its real graph, a tiny policy."""

from __future__ import annotations

import functools
import hashlib
from pathlib import Path

from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.envs.pool import Pool
from envsched_gnn.graph.task_graph import TaskGraph
from envsched_gnn.graph_build.builder import GraphConfig, build_graph
from envsched_gnn.training.policy import build_default_policy
from tests.training.tiny_policy import TINY, _scratch


@functools.cache
def small_pool() -> Pool:
    """3 generated environments x 6 tasks (5 train, 1 test each), reference solutions of
    at most 2 calls."""
    return generate_pool(n_envs=3, tasks_per_env=6, seed=0, test_per_env=1, max_calls=2)


@functools.cache
def small_graph() -> TaskGraph:
    """The real dual-relation graph (TF-IDF views, MiniLM embeddings) of the train split."""
    pool = small_pool()
    graph = build_graph(pool, GraphConfig(show_progress=False))
    return graph.subgraph([task.task_id for task in pool.split("train")])


@functools.cache
def small_policy_dir() -> Path:
    """The built-in policy architecture (tiny size), untrained, tokenizer fitted to the pool."""
    return build_default_policy(small_pool(), TINY, _scratch() / "integrations-policy")


def rollout_rewards(runtime, task_ids, step, k):
    """Real environment rewards without a policy: sample j of a task replays a prefix of its
    reference solution whose length is drawn from (task, step, j); ``{task_id: [r_1..r_k]}``."""
    pool, runs = runtime.pool, []
    for task_id in task_ids:
        calls = list(pool.task(task_id).reference_solution)
        for j in range(k):
            digest = hashlib.blake2b(f"{task_id}:{step}:{j}".encode(), digest_size=4).digest()
            runs.append((task_id, calls[: int.from_bytes(digest, "little") % (len(calls) + 1)]))
    scores = [score.reward for score in runtime.replay(runs)]
    return {t: scores[i * k : (i + 1) * k] for i, t in enumerate(task_ids)}
