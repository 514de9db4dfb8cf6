"""Import EnvScaler's released files (environment items and scenario items) as a pool.

EnvScaler ships two JSON (or JSONL) lists, told apart by content, not name: environment items
(id ``env_id`` or ``id``, else their position; ``tools`` and ``constraints_rules`` often JSON
strings or lists) and scenario items (``init_config`` often a JSON string). The result is
validated like a pool on disk (docs/design.md §8; errors name the source file, item and
field) and written with :func:`~envsched_gnn.envs.pool_io.save_pool`.
"""

from __future__ import annotations

import ast
import contextlib
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from envsched_gnn.envs.pool import Pool
from envsched_gnn.envs.pool_io import save_pool
from envsched_gnn.envs.pool_parse import ENV_TEXT_FIELDS, parse_pool, rules_text
from envsched_gnn.validation import UserError

SUFFIXES = (".json", ".jsonl")


class EnvScalerImportError(UserError, ValueError):
    """EnvScaler files that cannot be read or told apart."""


def import_envscaler(sources: Sequence[str | Path], out: str | Path) -> Pool:
    """Reads a folder (or an environments file and a tasks file) and writes the pool to ``out``."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise EnvScalerImportError(f"{out}: exists and is not an empty folder; choose a new --out")
    (envs_file, env_items), (tasks_file, task_items) = _find_files([Path(s) for s in sources])
    envs_raw = _environments(env_items, envs_file)
    tasks_raw = [_task(item, index, envs_raw) for index, item in enumerate(task_items)]
    pool = parse_pool(envs_raw, tasks_raw, envs_file=str(envs_file), tasks_file=str(tasks_file))
    save_pool(pool, out)
    return pool


def _find_files(sources: list[Path]) -> tuple[tuple[Path, list], tuple[Path, list]]:
    """The environments file and the tasks file, each with its items."""
    if len(sources) == 1 and sources[0].is_dir():
        folder = sources[0]
        files = sorted(p for p in folder.iterdir() if p.is_file() and p.suffix in SUFFIXES)
        if not files:
            raise EnvScalerImportError(f"{folder}: holds no .json or .jsonl file")
    elif len(sources) == 2:
        files = sources
        for path in files:
            if not path.is_file():
                raise EnvScalerImportError(f"{path}: not a file")
    else:
        raise EnvScalerImportError(
            "give one folder, or two files (environment items and scenario items), got "
            + ", ".join(map(str, sources))
        )
    kinds: dict[str, list[tuple[Path, list]]] = {"environments": [], "tasks": [], "other": []}
    for path in files:
        items = _read_items(path)
        kinds[_kind(items)].append((path, items))
    for kind in ("environments", "tasks"):
        found = kinds[kind]
        if len(found) != 1:
            what = (
                "items with 'env_class_code'"
                if kind == "environments"
                else "items with 'checklist_with_func'"
            )
            listed = ", ".join(str(path) for path, _ in found) or "none of " + ", ".join(
                str(path) for path in files
            )
            raise EnvScalerImportError(
                f"expected exactly one {kind} file ({what}), found {len(found)}: {listed}"
            )
    return kinds["environments"][0], kinds["tasks"][0]


def _read_items(path: Path) -> list:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as error:
        raise EnvScalerImportError(f"{path}: cannot be read: {error}") from None
    try:
        content = json.loads(text)
    except json.JSONDecodeError as whole:
        content = []
        for number, line in enumerate(text.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                content.append(json.loads(line))
            except json.JSONDecodeError:
                at = f"line {number}" if path.suffix == ".jsonl" else f"line {whole.lineno}"
                reason = "" if path.suffix == ".jsonl" else f": {whole.msg}"
                raise EnvScalerImportError(
                    f"{path}: neither a JSON document nor JSON lines (invalid JSON at {at}{reason})"
                ) from None
    if isinstance(content, dict):
        if content and all(isinstance(value, dict) for value in content.values()):
            return [{"env_id": key, **value} for key, value in content.items()]
        raise EnvScalerImportError(f"{path}: expected a list of items (or an object of items)")
    if not isinstance(content, list):
        raise EnvScalerImportError(
            f"{path}: expected a list of items, got {type(content).__name__}"
        )
    return content


def _kind(items: list) -> str:
    objects = [item for item in items if isinstance(item, dict)]
    if any("env_class_code" in item and "checklist_with_func" not in item for item in objects):
        return "environments"
    if any("checklist_with_func" in item for item in objects):
        return "tasks"
    return "other"


def _environments(items: list, path: Path) -> dict[str, Any]:
    envs: dict[str, Any] = {}
    for index, item in enumerate(items):
        if not isinstance(item, dict):
            raise EnvScalerImportError(
                f"{path}: item #{index}: expected an object, got {type(item).__name__}"
            )
        raw_id = item.get("env_id", item.get("id", index))
        env_id = str(raw_id) if isinstance(raw_id, (int, str)) and raw_id != "" else None
        if env_id is None or isinstance(raw_id, bool):
            raise EnvScalerImportError(
                f"{path}: item #{index}: field 'env_id' must be a string or an integer, "
                f"got {raw_id!r}"
            )
        if env_id in envs:
            raise EnvScalerImportError(f"{path}: item #{index}: duplicate env_id {env_id!r}")
        env: dict[str, Any] = {
            "env_class_code": item.get("env_class_code"),
            "tools": item.get("tools"),
        }
        if "env_class_name" in item:
            env["env_class_name"] = item["env_class_name"]
        for name in ENV_TEXT_FIELDS:
            value = item.get(name)
            if isinstance(value, list):
                value = rules_text(value)
            if value is not None:
                env[name] = value
        envs[env_id] = env
    return envs


def _task(item: Any, index: int, envs: dict[str, Any]) -> Any:
    """A scenario item in this project's task layout (left as is when it is no object, so
    that validation reports it with its position)."""
    if not isinstance(item, dict):
        return item
    task = {key: value for key, value in item.items() if key not in ("id", "instruction")}
    if "task_id" not in task:
        task["task_id"] = item.get("id", f"task-{index}")
    if "task" not in task and "instruction" in item:
        task["task"] = item["instruction"]
    if isinstance(task.get("checklist_with_func"), str):
        # a string that is not JSON stays a string, which validation reports as not a list
        with contextlib.suppress(json.JSONDecodeError):
            task["checklist_with_func"] = json.loads(task["checklist_with_func"])
    env_id = task.get("env_id")
    env = envs.get(str(env_id)) if isinstance(env_id, (int, str)) else None
    if "env_class_name" not in task and env is not None:
        task["env_class_name"] = env.get("env_class_name") or _only_class(env)
    return {key: value for key, value in task.items() if value is not None}


def _only_class(env: dict[str, Any]) -> str | None:
    """The class an environment's code defines, when it defines exactly one."""
    try:
        tree = ast.parse(env.get("env_class_code") or "")
    except SyntaxError:
        return None
    names = [node.name for node in tree.body if isinstance(node, ast.ClassDef)]
    return names[0] if len(names) == 1 else None
