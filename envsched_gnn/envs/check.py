"""``pool check``: validate a pool, then replay every reference solution and the empty trajectory.

A pool is usable for GRPO when every reference solution scores ``r = 1`` and the empty
trajectory ``r < 1``. A reference call the runtime could not complete (a
:class:`~envsched_gnn.envs.episode.ToolFault`) is an error of that task and tool even when the
checks pass; a state the scorer cannot load is one error of its task. The summary is one JSON
object: ``{"envs", "tasks", "reference_mean_reward", "reference_min_reward",
"empty_mean_reward", "empty_max_reward", "errors", "seconds"}`` (reference figures ``null``
without reference solutions). With ``record_effects`` it also has ``tool_effects`` (per
environment and tool, :class:`~envsched_gnn.envs.state_diff.ObservedEffect` counts of what the
reference calls did) and ``recategorised`` (each ``env/tool`` whose category that changed).
"""

from __future__ import annotations

import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tqdm import tqdm

from envsched_gnn.envs.episode import EpisodeScore, ToolFault, succeeded
from envsched_gnn.envs.pool import Pool, Task, ToolCall
from envsched_gnn.envs.pool_io import load_pool
from envsched_gnn.envs.pool_parse import PoolError
from envsched_gnn.envs.replay import Replayed, replay
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.envs.state_diff import ObservedEffect, state_effects
from envsched_gnn.validation import check_bounds


@dataclass
class CheckConfig:
    """How ``pool check`` replays a pool."""

    runtime: RuntimeConfig
    """Workers, timeouts and memory limit of the environment runtime."""
    chunk_size: int = 256
    """Tasks replayed per batch (the progress bar advances per batch)."""
    progress: bool = True
    """Show a progress bar on stderr."""
    record_effects: bool = False
    """Snapshot the state around every reference call and collect what each tool's calls did
    to it (``pool check --write-effects`` writes that as DIR/tool_effects.json, which the
    abstract extractor uses to categorise tools; the summary lists the tools whose category
    that changes)."""

    def __post_init__(self) -> None:
        check_bounds(self, integers=("chunk_size",), at_least={"chunk_size": 1})


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
    effects: dict[str, dict[str, ObservedEffect]] | None = {} if config.record_effects else None
    tasks = pool.tasks
    with (
        warnings.catch_warnings(),  # a state no check ran on is an error below, reported once
        EnvRuntime(pool, config.runtime) as runtime,
        tqdm(total=len(tasks), desc="pool check", unit="task", disable=not config.progress) as bar,
    ):
        warnings.filterwarnings("ignore", message="state cannot be", category=RuntimeWarning)
        for begin in range(0, len(tasks), config.chunk_size):
            chunk = tasks[begin : begin + config.chunk_size]
            with_reference = [task for task in chunk if task.reference_solution is not None]
            runs: list[tuple[Task, Sequence[ToolCall]]] = [
                (task, task.reference_solution) for task in with_reference
            ]
            runs += [(task, []) for task in chunk]
            scores, unusable = _run(runtime, runs, errors, effects, faults=len(with_reference))
            unscored = _unscored(runs, scores, unusable)
            errors.extend(unscored.values())
            for task, score in zip(with_reference, scores[: len(with_reference)], strict=True):
                reference_rewards.append(score.reward)
                if score.reward < 1.0 and task.task_id not in unscored:
                    errors.append(_reference_error(task, score))
            for task, score in zip(chunk, scores[len(with_reference) :], strict=True):
                empty_rewards.append(score.reward)
                if score.reward >= 1.0:
                    errors.append(
                        f"task {task.task_id!r}: doing nothing already scores 1.0, so its "
                        "rollouts can never differ"
                    )
            bar.update(len(chunk))
    summary = _summary(len(pool.envs), len(tasks), reference_rewards, empty_rewards, errors)
    if effects is not None:
        summary["tool_effects"] = {
            env_id: {tool: effect.to_json() for tool, effect in sorted(tools.items())}
            for env_id, tools in sorted(effects.items())
        }
        summary["recategorised"] = recategorised(pool, effects)
    return summary


def recategorised(pool: Pool, effects: dict[str, dict[str, ObservedEffect]]) -> list[str]:
    """``env/tool: before -> after`` for every tool whose category the observed effects change."""
    from envsched_gnn.envs.abstract import tool_categories
    from envsched_gnn.envs.tool_effects import typical_effects

    typical = typical_effects(effects)
    changes = []
    for env_id, env in pool.envs.items():
        text_only = tool_categories(env)
        with_effects = tool_categories(env, typical.get(env_id))
        changes += [
            f"{env_id}/{tool}: {text_only[tool]} -> {category}"
            for tool, category in with_effects.items()
            if category != text_only[tool]
        ]
    return changes


def empty_trajectory_checks(
    pool: Pool, config: RuntimeConfig | None = None, chunk_size: int = 256
) -> dict[str, tuple[bool, ...]]:
    """Which checks of every task pass when the agent makes no call, by task id (in the
    sandboxed runtime; a check that raises fails, as in a reward)."""
    passed: dict[str, tuple[bool, ...]] = {}
    with EnvRuntime(pool, config) as runtime:
        for begin in range(0, len(pool.tasks), chunk_size):
            chunk = pool.tasks[begin : begin + chunk_size]
            scores = runtime.replay([(task.task_id, []) for task in chunk])
            passed.update(
                (task.task_id, score.checks) for task, score in zip(chunk, scores, strict=True)
            )
    return passed


def _unscored(
    runs: list[tuple[Task, Sequence[ToolCall]]], scores: list[EpisodeScore], unusable: set[str]
) -> dict[str, str]:
    """Task id -> why its state could not be scored (``state cannot be loaded (class X, task
    Y): ...``), the first such reason of each task: one error per task, not one per check or
    per run. Tasks whose instantiation failed are left out (that error is reported)."""
    found: dict[str, str] = {}
    for (task, _), score in zip(runs, scores, strict=True):
        if score.unscored and task.task_id not in unusable:
            found.setdefault(task.task_id, score.unscored)
    return found


def _run(
    runtime: EnvRuntime,
    runs: list[tuple[Task, Sequence[ToolCall]]],
    errors: list[str],
    effects: dict[str, dict[str, ObservedEffect]] | None = None,
    *,
    faults: int,
) -> tuple[list[EpisodeScore], set[str]]:
    """Replays ``runs`` (:func:`~envsched_gnn.envs.replay.replay`); returns their scores and
    the ids of the tasks whose instantiation failed. A failed instantiation is an error, and so
    is a call of the first ``faults`` runs (the reference solutions) that the runtime failed.
    With ``effects``, the calls go one position at a time with a state snapshot after each."""
    state = None if effects is None else runtime.state
    replayed = replay(runtime, [(task.task_id, plan) for task, plan in runs], state)
    failed = {
        task.task_id: run.reset["error"]
        for (task, _), run in zip(runs, replayed, strict=True)
        if not run.reset["success"]
    }
    errors.extend(
        f"task {task_id!r}: instantiation failed: {error}" for task_id, error in failed.items()
    )
    for index, ((task, plan), run) in enumerate(zip(runs, replayed, strict=True)):
        if effects is not None:
            _record_effects(task, plan, run, effects)
        if index >= faults or task.task_id in failed:
            continue
        errors.extend(
            f"task {task.task_id!r}: reference call {number} ({plan[number].name}) "
            f"failed in the runtime: {result['error']}"
            for number, result in enumerate(run.results)
            if isinstance(result, ToolFault)
        )
    return [run.score for run in replayed], set(failed)


def _record_effects(
    task: Task,
    plan: Sequence[ToolCall],
    run: Replayed,
    effects: dict[str, dict[str, ObservedEffect]],
) -> None:
    """Adds to its tool the kinds of change of each successful call of ``run`` whose states
    before and after were readable."""
    if not run.states:  # its reset failed, or it has no call
        return
    steps = zip(plan, run.results, run.states[:-1], run.states[1:], strict=True)
    for call, result, before, now in steps:
        if succeeded(result) and before["success"] and now["success"]:
            effect = effects.setdefault(task.env_id, {}).setdefault(call.name, ObservedEffect())
            effect.add(state_effects(before["data"], now["data"]))


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
