"""What the store's nodes hold: pool objects, observations and predictions as node properties,
checked before writing (errors name task, field and value); keys from :func:`record_key`
(``"<step>:<task_id>"``) and :func:`text_key` (an Abstract's text).
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from hashlib import blake2b
from typing import Any

import numpy as np

from envsched_gnn.envs.pool import Check, Environment, Task, ToolCall
from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.graph_store.errors import StoreError
from envsched_gnn.observations import (
    DEFAULT_REWARD,
    Observation,
    ObservationError,
    reward_stats,
    validate_rewards,
)

PREDICTION_FIELDS = (
    "q",
    "u",
    "u_long",
    "u_short",
    "E_v",
    "E_m",
    "E_d",
    "G_within",
    "G_cross",
    "prior",
    "own_W",
    "shrink_share",
    "rank",
)
EVIDENCE_FIELDS = ("relation", "sim", "W", "y_v", "y_m", "y_d", "share")


def record_key(task_id: str, step: int) -> str:
    """Unique key of an observation or prediction of ``task_id`` at ``step``."""
    return f"{step}:{task_id}"


def text_key(text: str) -> str:
    """The Abstract node key of an abstract text: blake2b-128 of its UTF-8 bytes, in hex."""
    return blake2b(text.encode(), digest_size=16).hexdigest()


def task_properties(task: Task) -> dict[str, Any]:
    """The Task node's properties: what the TF-IDF views and the abstract extractor read."""
    solution = task.reference_solution
    return {
        "env": task.env_id,
        "env_class_name": task.env_class_name,
        "instruction": task.task,
        "init_config": json.dumps(task.init_config, sort_keys=True),
        "checks": json.dumps(
            [
                {"check_item": c.check_item, "check_func": c.check_func}
                for c in task.checklist_with_func
            ]
        ),
        "reference_solution": None
        if solution is None
        else json.dumps([{"name": c.name, "arguments": c.arguments} for c in solution]),
        "abstract": task.abstract,
        "split": task.split,
    }


def task_from_properties(props: Mapping[str, Any]) -> Task:
    """Inverse of :func:`task_properties` (plus ``id``)."""
    solution = props.get("reference_solution")
    return Task(
        task_id=props["id"],
        env_id=props["env"],
        env_class_name=props.get("env_class_name") or "",
        init_config=json.loads(props.get("init_config") or "{}"),
        task=props.get("instruction") or "",
        checklist_with_func=[Check(**c) for c in json.loads(props.get("checks") or "[]")],
        reference_solution=None
        if solution is None
        else [ToolCall(**c) for c in json.loads(solution)],
        abstract=props.get("abstract"),
        split=props.get("split") or "train",
    )


def environment_properties(env: Environment) -> dict[str, Any]:
    """The Environment node's properties."""
    return {
        "introduction": env.environment_introduction,
        "summary": env.environment_summary,
        "constraints_rules": env.constraints_rules,
        "tool_names": list(env.tool_names),
    }


def _number(value: Any, where: str) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise StoreError(f"{where} is {value!r}, expected a number")
    if not math.isfinite(float(value)):
        raise StoreError(f"{where} is {value!r}, expected a finite number")
    return int(value) if isinstance(value, (int, np.integer)) else float(value)


def observation_rows(observations: Iterable[Observation | Mapping]) -> list[dict]:
    """One checked row per distinct (task, step), in first-seen order; a (task, step) given
    twice must have the same rewards, and every row the same reward."""
    rows = [observation_row(o) for o in observations]  # each checked before any pair
    rewards = sorted({row["reward"] for row in rows})
    if len(rewards) > 1:
        raise ObservationError(f"the observations to write mix the rewards {rewards}")
    by_key: dict[str, dict] = {}
    for row in rows:
        previous = by_key.setdefault(row["key"], row)
        if previous["rewards"] != row["rewards"]:
            raise ObservationError(
                f"task {row['task_id']!r} step {row['step']}: given twice with different "
                f"rewards {previous['rewards']} and {row['rewards']}"
            )
    return list(by_key.values())


def observation_row(observation: Observation | Mapping) -> dict:
    """The Observation node's row: rewards finite and in [0, 1], step a non-negative integer,
    and the reward statistics ``m, v, d`` of :func:`~envsched_gnn.observations.reward_stats`."""
    if isinstance(observation, Mapping):
        task_id, step = observation.get("task_id"), observation.get("step")
        rewards, reward = observation.get("rewards"), observation.get("reward", DEFAULT_REWARD)
    else:
        task_id, step, rewards = observation.task_id, observation.step, observation.rewards
        reward = observation.reward
    if not isinstance(task_id, str):
        raise ObservationError(f"observation task_id {task_id!r} is not a string")
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise ObservationError(f"task {task_id!r}: step {step!r} is not a non-negative integer")
    if not isinstance(rewards, (list, tuple)):
        raise ObservationError(f"task {task_id!r} step {step}: rewards {rewards!r} is not a list")
    validate_rewards(rewards, task_id=task_id, step=step, reward=reward)
    m, v, d = reward_stats(rewards)
    return {
        "key": record_key(task_id, step),
        "task_id": task_id,
        "step": step,
        "reward": reward,
        "rewards": [float(r) for r in rewards],
        "m": m,
        "v": v,
        "d": d,
    }


def prediction_rows(step: int, rows: Sequence[Mapping]) -> tuple[list[dict], list[dict], set[str]]:
    """The Prediction rows of ``step``, their EVIDENCE rows, and every task id they name (rows:
    ``task_id``, :data:`PREDICTION_FIELDS`, ``neighbours`` with :data:`EVIDENCE_FIELDS`).
    """
    if isinstance(step, bool) or not isinstance(step, int) or step < 0:
        raise StoreError(f"prediction step {step!r} is not a non-negative integer")
    predictions, evidence, ids = [], [], set()
    for n, row in enumerate(rows):
        task_id = row.get("task_id")
        if not isinstance(task_id, str):
            raise StoreError(f"prediction row {n}: task_id {task_id!r} is not a string")
        key = record_key(task_id, step)
        props = {"task_id": task_id, "step": step}
        for name in PREDICTION_FIELDS:
            props[name] = _number(row.get(name), f"prediction of task {task_id!r}: field {name!r}")
        predictions.append({"key": key, "task_id": task_id, "props": props})
        ids.add(task_id)
        for neighbour in row.get("neighbours") or []:
            where = f"prediction of task {task_id!r}: neighbour {neighbour.get('task_id')!r}"
            relation = neighbour.get("relation")
            if relation not in RELATIONS:
                raise StoreError(f"{where}: relation {relation!r}, expected one of {RELATIONS}")
            ev = {"relation": relation}
            for name in EVIDENCE_FIELDS[1:]:
                ev[name] = _number(neighbour.get(name), f"{where}: field {name!r}")
            evidence.append({"key": key, "task_id": neighbour["task_id"], "props": ev})
            ids.add(neighbour["task_id"])
    return predictions, evidence, ids
