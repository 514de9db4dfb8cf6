"""Validate decoded pool content (``envs.json`` / ``tasks.json`` values) and build the
:class:`~envsched_gnn.envs.pool.Pool` (docs/design.md §8).

Code is read with :mod:`ast` only. Every defect names the file, the environment or task and
the field; all are raised together as one :class:`PoolError`.
"""

from __future__ import annotations

import ast
import json
from collections.abc import Iterable
from typing import Any

from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall
from envsched_gnn.validation import UserError

SPLITS = ("train", "test")
ENV_TEXT_FIELDS = ("environment_introduction", "environment_summary", "constraints_rules")
MAX_REPORTED_ERRORS = 200


class PoolError(UserError, ValueError):
    """A pool that cannot be used; ``errors`` lists every defect found."""

    def __init__(self, errors: Iterable[str]) -> None:
        self.errors = list(errors)
        shown = self.errors[:MAX_REPORTED_ERRORS]
        more = len(self.errors) - len(shown)
        text = "\n".join(shown) + (f"\n... and {more} more" if more else "")
        super().__init__(text)


def parse_pool(envs_raw: Any, tasks_raw: Any, *, envs_file: str, tasks_file: str) -> Pool:
    """Validates decoded ``envs.json`` / ``tasks.json`` content and builds the :class:`Pool`."""
    errors: list[str] = []
    envs, classes = parse_envs(envs_raw, envs_file, errors)
    declared = set(envs_raw) if isinstance(envs_raw, dict) else set()
    tasks = _parse_tasks(tasks_raw, tasks_file, envs, classes, declared, errors)
    if errors:
        raise PoolError(errors)
    return Pool(envs=envs, tasks=tasks)


def parse_envs(
    raw: Any, file: str, errors: list[str]
) -> tuple[dict[str, Environment], dict[str, set[str]]]:
    """The environments of decoded ``envs.json`` content and the classes each one's code
    defines; defects are added to ``errors``."""
    envs: dict[str, Environment] = {}
    classes: dict[str, set[str]] = {}
    if not isinstance(raw, dict):
        errors.append(
            f"{file}: expected an object keyed by env_id, got {type(raw).__name__}"
            " (EnvScaler's released lists are read by `pool import-envscaler`)"
        )
        return envs, classes
    for env_id, item in raw.items():
        where = f"{file}: environment {env_id!r}"
        if not isinstance(item, dict):
            errors.append(f"{where}: expected an object, got {type(item).__name__}")
            continue
        before = len(errors)
        if "env_id" in item and _normalise_id(item["env_id"]) != env_id:
            errors.append(
                f"{where}: field 'env_id' is {item['env_id']!r}, but its key is {env_id!r}"
            )
        code = item.get("env_class_code")
        if not isinstance(code, str) or not code.strip():
            errors.append(f"{where}: field 'env_class_code' must be non-empty Python source")
        else:
            defined = _class_names(code, f"{where}: field 'env_class_code'", errors)
            if defined is not None:
                classes[env_id] = defined
        tools = _parse_tools(item.get("tools", _MISSING), f"{where}: field 'tools'", errors)
        texts = {}
        for name in ENV_TEXT_FIELDS:
            value = item.get(name, "")
            if value is None:
                value = ""
            if name == "constraints_rules" and isinstance(value, list):
                value = rules_text(value)
            if not isinstance(value, str):
                errors.append(f"{where}: field {name!r} must be a string, got {value!r:.80}")
            texts[name] = value
        if len(errors) == before:
            envs[env_id] = Environment(env_id=env_id, env_class_code=code, tools=tools, **texts)
    return envs, classes


def rules_text(rules: list[Any]) -> list[Any] | str:
    """EnvScaler's list of constraint rules as text, one ``- rule`` line each (unchanged if
    an item is not a string, so the caller reports it)."""
    if not all(isinstance(rule, str) for rule in rules):
        return rules
    return "".join(f"- {rule}\n" for rule in rules)


def _parse_tools(value: Any, where: str, errors: list[str]) -> list[dict[str, Any]]:
    if value is _MISSING:
        errors.append(f"{where}: missing (a list of OpenAI function schemas)")
        return []
    value = _maybe_json(value, list, where, errors)
    if value is None:
        return []
    names: set[str] = set()
    for index, tool in enumerate(value):
        schema = tool.get("function", tool) if isinstance(tool, dict) else None
        name = schema.get("name") if isinstance(schema, dict) else None
        if not isinstance(name, str) or not name:
            errors.append(f"{where}: tool #{index} has no 'name' (or 'function.name')")
        elif name in names:
            errors.append(f"{where}: tool {name!r} is listed twice")
        else:
            names.add(name)
    return value


def _parse_tasks(
    raw: Any,
    file: str,
    envs: dict[str, Environment],
    classes: dict[str, set[str]],
    declared: set[str],
    errors: list[str],
) -> list[Task]:
    if not isinstance(raw, list):
        errors.append(f"{file}: expected a list of tasks, got {type(raw).__name__}")
        return []
    tasks: list[Task] = []
    first_seen: dict[str, int] = {}
    context = (envs, classes, declared, {})
    for index, item in enumerate(raw):
        task = parse_task(item, index, file, context, first_seen, errors)
        if task is not None:
            tasks.append(task)
    return tasks


def parse_task(
    item: Any,
    index: int,
    file: str,
    context: tuple,
    first_seen: dict[str, int],
    errors: list[str],
) -> Task | None:
    """Task #``index`` of ``file``, checked; None with its defects added to ``errors``.

    ``context``: (environments, their classes, the declared env ids, a cache of check
    defects by source); ``first_seen`` maps each task id met so far to its index.
    """
    where = f"{file}: task #{index}"
    if not isinstance(item, dict):
        errors.append(f"{where}: expected an object, got {type(item).__name__}")
        return None
    task_id = _normalise_id(item.get("task_id"))
    if task_id is None:
        errors.append(f"{where}: field 'task_id' must be a non-empty string or an integer")
        return None
    where = f"{file}: task #{index} ({task_id!r})"
    if task_id in first_seen:
        errors.append(f"{where}: duplicate task_id (first at task #{first_seen[task_id]})")
        return None
    first_seen[task_id] = index
    return _parse_task(item, task_id, where, context, errors)


def _parse_task(
    item: dict[str, Any],
    task_id: str,
    where: str,
    context: tuple,
    errors: list[str],
) -> Task | None:
    envs, classes, declared, check_cache = context
    before = len(errors)
    for name in ("env_id", "env_class_name", "init_config", "task", "checklist_with_func"):
        if name not in item:
            errors.append(f"{where}: missing field {name!r}")
    if len(errors) > before:
        return None
    env_id = _normalise_id(item["env_id"])
    if env_id is None:
        errors.append(f"{where}: field 'env_id' must be a non-empty string or an integer")
    elif env_id not in declared:
        errors.append(f"{where}: field 'env_id' names unknown environment {env_id!r}")
    elif env_id not in envs:
        errors.append(f"{where}: its environment {env_id!r} has defects (reported above)")
    class_name = item["env_class_name"]
    if not isinstance(class_name, str) or not class_name.isidentifier():
        errors.append(f"{where}: field 'env_class_name' must be a class name, got {class_name!r}")
    elif env_id in classes and class_name not in classes[env_id]:
        defined = ", ".join(sorted(classes[env_id])) or "none"
        errors.append(
            f"{where}: field 'env_class_name' is {class_name!r}, which the code of environment "
            f"{env_id!r} does not define (classes: {defined})"
        )
    init_config = _maybe_json(item["init_config"], dict, f"{where}: field 'init_config'", errors)
    if not isinstance(item["task"], str) or not item["task"].strip():
        errors.append(f"{where}: field 'task' must be a non-empty instruction string")
    checks = _parse_checks(item["checklist_with_func"], where, check_cache, errors)
    tool_names = set(envs[env_id].tool_names) if env_id in envs else None
    reference = _parse_reference(item.get("reference_solution"), where, tool_names, errors)
    abstract = item.get("abstract")
    if abstract is not None and not isinstance(abstract, str):
        errors.append(f"{where}: field 'abstract' must be a string, got {abstract!r:.80}")
    split = item.get("split", "train")
    if split not in SPLITS:
        errors.append(f"{where}: field 'split' must be one of {SPLITS}, got {split!r}")
    if len(errors) > before:
        return None
    return Task(
        task_id=task_id,
        env_id=env_id,
        env_class_name=class_name,
        init_config=init_config,
        task=item["task"],
        checklist_with_func=checks,
        reference_solution=reference,
        abstract=abstract,
        split=split,
    )


def _parse_checks(
    raw: Any, where: str, cache: dict[str, str | None], errors: list[str]
) -> list[Check]:
    where = f"{where}: field 'checklist_with_func'"
    if not isinstance(raw, list) or not raw:
        errors.append(f"{where}: must be a non-empty list of {{check_item, check_func}}")
        return []
    checks = []
    for index, item in enumerate(raw):
        if not isinstance(item, dict):
            errors.append(f"{where}[{index}]: expected an object, got {type(item).__name__}")
            continue
        check_item, source = item.get("check_item"), item.get("check_func")
        if not isinstance(check_item, str):
            errors.append(f"{where}[{index}]: field 'check_item' must be a string")
        if not isinstance(source, str):
            errors.append(f"{where}[{index}]: field 'check_func' must be Python source")
            continue
        if source not in cache:
            cache[source] = _check_defect(source)
        if cache[source] is not None:
            errors.append(f"{where}[{index}]: field 'check_func' {cache[source]}")
        elif isinstance(check_item, str):
            checks.append(Check(check_item=check_item, check_func=source))
    return checks


def _parse_reference(
    raw: Any, where: str, tool_names: set[str] | None, errors: list[str]
) -> list[ToolCall] | None:
    if raw is None:
        return None
    where = f"{where}: field 'reference_solution'"
    if not isinstance(raw, list):
        errors.append(f"{where}: must be a list of {{name, arguments}}")
        return None
    calls = []
    for index, item in enumerate(raw):
        name = item.get("name") if isinstance(item, dict) else None
        if not isinstance(name, str) or not name:
            errors.append(f"{where}[{index}]: needs a tool 'name'")
            continue
        if tool_names is not None and name not in tool_names:
            errors.append(f"{where}[{index}]: calls {name!r}, not a tool of the environment")
        arguments = _maybe_json(
            item.get("arguments", {}), dict, f"{where}[{index}]: field 'arguments'", errors
        )
        if arguments is not None:
            calls.append(ToolCall(name=name, arguments=arguments))
    return calls


def _class_names(code: str, where: str, errors: list[str]) -> set[str] | None:
    try:
        tree = ast.parse(code)
    except SyntaxError as error:
        errors.append(f"{where}: Python syntax error at line {error.lineno}: {error.msg}")
        return None
    return {node.name for node in tree.body if isinstance(node, ast.ClassDef)}


def _check_defect(source: str) -> str | None:
    """Why a check source is unusable, or None: it must define ``check_func`` at top level."""
    try:
        tree = ast.parse(source)
    except SyntaxError as error:
        return f"has a Python syntax error at line {error.lineno}: {error.msg}"
    for node in tree.body:
        if isinstance(node, ast.FunctionDef) and node.name == "check_func":
            return None
        if isinstance(node, ast.Assign) and any(
            isinstance(target, ast.Name) and target.id == "check_func" for target in node.targets
        ):
            return None
    return "does not define check_func(final_state)"


_MISSING = object()


def _maybe_json(value: Any, kind: type, where: str, errors: list[str]) -> Any:
    """``value`` itself, or the JSON it encodes when it is a string; None on a defect."""
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as error:
            errors.append(f"{where}: a string that is not valid JSON ({error})")
            return None
    if not isinstance(value, kind):
        expected = "an object" if kind is dict else "a list"
        errors.append(
            f"{where}: expected {expected} or a JSON string of one, got {type(value).__name__}"
        )
        return None
    return value


def _normalise_id(value: Any) -> str | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str) and value.strip():
        return value
    return None
