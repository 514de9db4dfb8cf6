"""``pool check``: validate a pool, then replay every reference solution and the empty trajectory.

A pool is usable for GRPO when its verifiers can tell success from doing nothing: every
reference solution must score ``r = 1`` and the empty trajectory (no tool call) must score
``r < 1`` on every task. A reference call that the runtime could not complete (the tool
raised, hung, crashed or killed its worker, or the call is malformed: a
:class:`~envsched_gnn.envs.runtime.ToolFault`) is an error of that task and tool even when
the checks pass. The summary is one JSON object:
``{"envs", "tasks", "reference_mean_reward", "reference_min_reward", "empty_mean_reward",
"empty_max_reward", "errors", "seconds"}`` (reference figures are ``null`` when no task has a
reference solution).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from envsched_gnn.envs.pool import Pool, Task, ToolCall
from envsched_gnn.envs.pool_io import PoolError, load_pool
from envsched_gnn.envs.runtime import EnvRuntime, EpisodeScore, RuntimeConfig, ToolFault


@dataclass
class CheckConfig:
    """How ``pool check`` replays a pool."""

    runtime: RuntimeConfig
    """Workers, timeouts and memory limit of the environment runtime."""
    chunk_size: int = 256
    """Tasks replayed per batch (the progress bar advances per batch)."""
    progress: bool = True
    """Show a progress bar on stderr."""


def check_pool(directory: str | Path, config: CheckConfig) -> dict[str, Any]:
    """Validates and replays the pool in ``directory``; returns the JSON summary."""
    start = time.perf_counter()
    try:
        pool = load_pool(directory)
    except PoolError as error:
        summary = _summary(0, 0, [], [], error.errors)
    else:
        summary = replay_pool(pool, config)
    summary["seconds"] = round(time.perf_counter() - start, 3)
    return summary


def replay_pool(pool: Pool, config: CheckConfig) -> dict[str, Any]:
    """Replays each task's reference solution (when it has one) and the empty trajectory."""
    errors: list[str] = []
    reference_rewards: list[float] = []
    empty_rewards: list[float] = []
    tasks = pool.tasks
    with (
        EnvRuntime(pool, config.runtime) as runtime,
        tqdm(total=len(tasks), desc="pool check", unit="task", disable=not config.progress) as bar,
    ):
        for begin in range(0, len(tasks), config.chunk_size):
            chunk = tasks[begin : begin + config.chunk_size]
            with_reference = [task for task in chunk if task.reference_solution is not None]
            runs: list[tuple[Task, Sequence[ToolCall]]] = [
                (task, task.reference_solution) for task in with_reference
            ]
            runs += [(task, []) for task in chunk]
            scores = _run(runtime, runs, errors, faults=len(with_reference))
            for task, score in zip(with_reference, scores[: len(with_reference)], strict=True):
                reference_rewards.append(score.reward)
                if score.reward < 1.0:
                    errors.append(_reference_error(task, score))
            for task, score in zip(chunk, scores[len(with_reference) :], strict=True):
                empty_rewards.append(score.reward)
                if score.reward >= 1.0:
                    errors.append(
                        f"task {task.task_id!r}: doing nothing already scores 1.0, so its "
                        "rollouts can never differ"
                    )
            bar.update(len(chunk))
    return _summary(len(pool.envs), len(tasks), reference_rewards, empty_rewards, errors)


def _run(
    runtime: EnvRuntime,
    runs: list[tuple[Task, Sequence[ToolCall]]],
    errors: list[str],
    *,
    faults: int,
) -> list[EpisodeScore]:
    """Fresh episodes, their calls, their scores; a failed instantiation is an error, and so
    is a call of the first ``faults`` runs (the reference solutions) that the runtime failed."""
    episode_ids = [f"check-{index}" for index in range(len(runs))]
    try:
        resets = runtime.reset(
            [(e, task.task_id) for e, (task, _) in zip(episode_ids, runs, strict=True)]
        )
        failed = {
            task.task_id: result["error"]
            for (task, _), result in zip(runs, resets, strict=True)
            if not result["success"]
        }
        errors.extend(
            f"task {task_id!r}: instantiation failed: {error}" for task_id, error in failed.items()
        )
        calls = [
            (run, number, e, call)
            for run, (e, (_, plan)) in enumerate(zip(episode_ids, runs, strict=True))
            for number, call in enumerate(plan)
        ]
        results = runtime.call([(e, call) for _, _, e, call in calls])
        for (run, number, _, call), result in zip(calls, results, strict=True):
            task = runs[run][0]
            if run < faults and isinstance(result, ToolFault) and task.task_id not in failed:
                errors.append(
                    f"task {task.task_id!r}: reference call {number} ({call.name}) failed in "
                    f"the runtime: {result['error']}"
                )
        return runtime.score(episode_ids)
    finally:
        runtime.release(episode_ids)


def _reference_error(task: Task, score: EpisodeScore) -> str:
    failed = [
        f"{check.check_item!r}" + (f" ({error})" if error else "")
        for check, passed, error in zip(
            task.checklist_with_func,
            score.checks,
            score.errors or ("",) * len(score.checks),
            strict=True,
        )
        if not passed
    ]
    return (
        f"task {task.task_id!r}: reference solution scores {score.reward:.3f}; "
        f"failed checks: {'; '.join(failed)}"
    )


def _summary(
    envs: int, tasks: int, reference: list[float], empty: list[float], errors: list[str]
) -> dict[str, Any]:
    def mean(values: list[float]) -> float | None:
        return sum(values) / len(values) if values else None

    return {
        "envs": envs,
        "tasks": tasks,
        "reference_mean_reward": mean(reference),
        "reference_min_reward": min(reference, default=None),
        "empty_mean_reward": mean(empty),
        "empty_max_reward": max(empty, default=None),
        "errors": errors,
    }
