"""The simulator's INDEPENDENT world: difficulty drawn independently of anything a graph sees.

The first world of the learner simulator (:mod:`~envsched_gnn.eval.simulator.simulate`); fixed by
the pool and ``world_seed``, the same for every run seed:

- Task i lives in environment e(i) and needs the abstract operations of its abstract
  description, in order, l = 1..L_i, with categories o(i,l) (``operation_categories``;
  a task with none gets one operation of category ``"none"``). Its checks c = 0..C_i-1
  each test one operation, l(c) = (c mod L_i) + 1; w(i,l) = |{c : l(c) = l}| / C_i.
- Skills: one per environment s_env(e), one per operation category s_op(o) (so
  F(i,l) = {o(i,l)}), one per task s_task(i) (memorisation, which never transfers).
  Initial values s_env(e) ~ N(0, sigma_env^2), s_op(o) ~ N(0, sigma_op^2), s_task(i) = 0.
- Operation difficulty: delta(i,l) = mu + b_i + eps(i,l), b_i ~ N(0, sigma_task^2),
  eps(i,l) ~ N(0, sigma_op_noise^2).
- Operation logit: z(i,l) = s_env(e(i)) + s_op(o(i,l)) + s_task(i) - delta(i,l).

Rollouts, update and score are the simulator's; w_rest = 0 in this world.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from envsched_gnn.envs.pool import Pool, Task
from envsched_gnn.eval.simulator.config import SimulatorConfig
from envsched_gnn.eval.simulator.world import SimulatorWorld

NO_CATEGORY = "none"


def pool_categories(pool: Pool) -> Callable[[Task], list[str]]:
    """Each task's operation categories, from its abstract (given, or extracted)."""
    from envsched_gnn.envs.abstract import abstract_of, operation_categories

    def categories_of(task: Task) -> list[str]:
        env = pool.envs.get(task.env_id)
        try:
            return operation_categories(abstract_of(task, env))
        except ValueError:
            # an abstract in a free-form format: extract one from the solution or checks
            return operation_categories(abstract_of(replace(task, abstract=None), env))

    return categories_of


def build_independent_world(
    pool: Pool,
    config: SimulatorConfig,
    categories_of: Callable[[Task], Sequence[str]] | None = None,
) -> SimulatorWorld:
    """The independent world (module docstring) for ``pool``, from ``config.world_seed``."""
    if not pool.tasks:
        raise ValueError("simulator: the pool has no tasks")
    categories_of = categories_of or pool_categories(pool)
    rng = np.random.default_rng(config.world_seed)
    env_names = list(dict.fromkeys(task.env_id for task in pool.tasks))
    env_of = {e: k for k, e in enumerate(env_names)}
    categories = [list(categories_of(task)) or [NO_CATEGORY] for task in pool.tasks]
    op_names = sorted({c for cats in categories for c in cats})
    op_of = {o: k for k, o in enumerate(op_names)}
    n = len(pool.tasks)
    l_max = max(len(cats) for cats in categories)
    slot_op = np.zeros((n, l_max), np.int64)
    slot_mask = np.zeros((n, l_max), bool)
    slot_weight = np.zeros((n, l_max), np.float64)
    for i, (task, cats) in enumerate(zip(pool.tasks, categories, strict=True)):
        n_checks = len(task.checklist_with_func)
        if n_checks == 0:
            raise ValueError(f"simulator: task {task.task_id!r} has an empty checklist_with_func")
        slot_op[i, : len(cats)] = [op_of[c] for c in cats]
        slot_mask[i, : len(cats)] = True
        slot_weight[i, : len(cats)] = np.bincount(
            np.arange(n_checks) % len(cats), minlength=len(cats)
        )
        slot_weight[i] /= n_checks
    offset = rng.normal(0.0, config.sigma_task, n)
    noise = rng.normal(0.0, config.sigma_op_noise, (n, l_max))
    delta = config.difficulty_mean + offset[:, None] + noise
    return SimulatorWorld(
        task_ids=[task.task_id for task in pool.tasks],
        env_names=env_names,
        op_names=op_names,
        env=np.array([env_of[task.env_id] for task in pool.tasks], np.int64),
        slot_op=slot_op[:, :, None],
        slot_op_mask=slot_mask[:, :, None],
        slot_mask=slot_mask,
        need_weight=slot_weight,
        rest_weight=np.zeros_like(slot_weight),
        delta=np.where(slot_mask, delta, 0.0),
        test=np.array([task.split == "test" for task in pool.tasks], bool),
        s_env0=rng.normal(0.0, config.sigma_env, len(env_names)),
        s_op0=rng.normal(0.0, config.sigma_op, len(op_names)),
        kind="independent",
    )
