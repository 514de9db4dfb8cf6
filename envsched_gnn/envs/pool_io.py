"""Load and save pool folders in the EnvScaler layout (docs/design.md §8).

Validation is :func:`~envsched_gnn.envs.pool_parse.parse_pool`; an optional
``tool_effects.json`` becomes ``Pool.tool_effects``. Saving validates first and replaces each
file atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envsched_gnn.envs.pool import Environment, Pool, Task
from envsched_gnn.envs.pool_parse import ENV_TEXT_FIELDS, PoolError, parse_pool
from envsched_gnn.envs.tool_effects import read_tool_effects, typical_effects
from envsched_gnn.json_files import write_json_atomically

ENVS_FILE = "envs.json"
TASKS_FILE = "tasks.json"
TASKS_JSONL_FILE = "tasks.jsonl"


def load_pool(directory: str | Path) -> Pool:
    """Reads and validates the pool in ``directory``; raises :class:`PoolError` on defects."""
    directory = Path(directory)
    if not directory.is_dir():
        raise PoolError([f"{directory}: not a folder (expected a pool with {ENVS_FILE})"])
    envs_path = directory / ENVS_FILE
    tasks_path, jsonl_path = directory / TASKS_FILE, directory / TASKS_JSONL_FILE
    errors: list[str] = []
    if not envs_path.is_file():
        errors.append(f"{envs_path}: missing (a pool needs {ENVS_FILE})")
    if tasks_path.is_file() and jsonl_path.is_file():
        errors.append(f"{directory}: holds both {TASKS_FILE} and {TASKS_JSONL_FILE}; keep one")
    elif not tasks_path.is_file() and not jsonl_path.is_file():
        errors.append(f"{tasks_path}: missing (a pool needs {TASKS_FILE} or {TASKS_JSONL_FILE})")
    if errors:
        raise PoolError(errors)
    envs_raw = read_json(envs_path)
    if tasks_path.is_file():
        tasks_file, tasks_raw = tasks_path, read_json(tasks_path)
    else:
        tasks_file, tasks_raw = jsonl_path, _read_jsonl(jsonl_path)
    pool = parse_pool(envs_raw, tasks_raw, envs_file=str(envs_path), tasks_file=str(tasks_file))
    try:
        pool.tool_effects = typical_effects(read_tool_effects(directory))
    except ValueError as error:
        raise PoolError([str(error)]) from error
    return pool


def save_pool(pool: Pool, directory: str | Path) -> Path:
    """Writes ``envs.json`` and ``tasks.json``; validates first, so nothing invalid is written."""
    directory = Path(directory)
    if (directory / TASKS_JSONL_FILE).exists():
        raise PoolError(
            [f"{directory / TASKS_JSONL_FILE}: exists; saving would leave two task files"]
        )
    envs_raw = {env_id: environment_to_dict(env) for env_id, env in pool.envs.items()}
    tasks_raw = [task_to_dict(task) for task in pool.tasks]
    parse_pool(envs_raw, tasks_raw, envs_file="<pool to save>", tasks_file="<pool to save>")
    directory.mkdir(parents=True, exist_ok=True)
    write_json_atomically(directory / ENVS_FILE, envs_raw, ensure_ascii=False)
    write_json_atomically(directory / TASKS_FILE, tasks_raw, ensure_ascii=False)
    return directory


def environment_to_dict(env: Environment) -> dict[str, Any]:
    """The ``envs.json`` value of an environment (``tools`` as a list)."""
    item: dict[str, Any] = {"env_class_code": env.env_class_code, "tools": env.tools}
    for name in ENV_TEXT_FIELDS:
        if getattr(env, name):
            item[name] = getattr(env, name)
    return item


def task_to_dict(task: Task) -> dict[str, Any]:
    """The ``tasks.json`` item of a task (``init_config`` as an object)."""
    item: dict[str, Any] = {
        "task_id": task.task_id,
        "env_id": task.env_id,
        "env_class_name": task.env_class_name,
        "init_config": task.init_config,
        "task": task.task,
        "checklist_with_func": [
            {"check_item": check.check_item, "check_func": check.check_func}
            for check in task.checklist_with_func
        ],
    }
    if task.reference_solution is not None:
        item["reference_solution"] = [
            {"name": call.name, "arguments": call.arguments} for call in task.reference_solution
        ]
    if task.abstract is not None:
        item["abstract"] = task.abstract
    item["split"] = task.split
    return item


def read_json(path: Path) -> Any:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise PoolError([f"{path}: cannot be read: {error}"]) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise PoolError(
            [f"{path}: invalid JSON at line {error.lineno} column {error.colno}: {error.msg}"]
        ) from None


def _read_jsonl(path: Path) -> list[Any]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as error:
        raise PoolError([f"{path}: cannot be read: {error}"]) from None
    items, errors = [], []
    for number, line in enumerate(lines, start=1):
        if not line.strip():
            continue
        try:
            items.append(json.loads(line))
        except json.JSONDecodeError as error:
            errors.append(f"{path}: line {number}: invalid JSON: {error.msg}")
    if errors:
        raise PoolError(errors)
    return items
