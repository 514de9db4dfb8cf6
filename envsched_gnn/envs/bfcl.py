"""Import BFCL's multi-turn categories (the Berkeley Function Calling Leaderboard) as a pool.

Source: the ``bfcl-eval`` package's files, read as data (:mod:`~envsched_gnn.envs.bfcl_files`):
the tasks ``bfcl_eval/data/BFCL_v*_multi_turn_<category>.json`` with their ground truth in
``possible_answer/``, the API classes of ``func_source_code/*.py`` and their tool documents
in ``multi_turn_func_doc/``. One environment per set of involved classes and excluded tools
(code: :mod:`~envsched_gnn.envs.bfcl_code`); one task per BFCL task, its ground truth the
reference solution (positional arguments named from the method's signature), with BFCL's
state and response checks on the final state. What a final state cannot show (the state after
every turn; ``miss_func`` / ``miss_param``): docs/pools.md, "A real pool: BFCL's multi-turn APIs".
"""

from __future__ import annotations

import ast
import json
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

from envsched_gnn.envs.bfcl_code import LICENSE_LINE, environment_code, response_check, state_check
from envsched_gnn.envs.bfcl_files import (
    CODE_DIR,
    DATA_DIR,
    BfclFiles,
    BfclImportError,
    ModuleSources,
)
from envsched_gnn.envs.pool import Check, Environment, Pool, Task, ToolCall
from envsched_gnn.envs.pool_io import save_pool

CATEGORIES = ("base", "long_context")
_SCHEMA_TYPES = {"dict": "object", "float": "number", "tuple": "array"}


@dataclass(frozen=True)
class ApiClass:
    """One API class as its module's source shows it."""

    name: str
    module: str
    stateful: bool
    """It defines ``_load_scenario`` (BFCL loads every class but the stateless ones so)."""
    parameters: dict[str, list[str]]
    """Tool -> its parameter names after ``self`` (to name positional ground-truth values)."""
    description: str
    """Its ``self._api_description``."""
    tools: list[dict[str, Any]]
    """Its tool documents, as OpenAI function schemas."""


def import_bfcl(source: str | Path, out: str | Path, category: str = "base") -> Pool:
    """Converts BFCL's multi-turn ``category`` from ``source`` and writes the pool to ``out``."""
    out = Path(out)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise BfclImportError(f"{out}: exists and is not an empty folder; choose a new --out")
    pool = convert(BfclFiles(source), category)
    save_pool(pool, out)
    return pool


def convert(files: BfclFiles, category: str = "base") -> Pool:
    """The pool of BFCL's multi-turn ``category`` (see the module docstring)."""
    if category not in CATEGORIES:
        raise BfclImportError(
            f"category {category!r}: expected one of {', '.join(CATEGORIES)} (miss_func and "
            "miss_param check that no call is made in a turn, which a final state cannot show)"
        )
    entries, answers = _category(files, category)
    sources = ModuleSources(files)
    defining = sources.defining()
    origin = LICENSE_LINE.format(version=files.version())
    classes: dict[str, ApiClass] = {}
    envs: dict[str, Environment] = {}
    tasks = []
    for entry in entries:
        where = f"{DATA_DIR}: task {entry.get('id')!r}"
        try:
            involved = sorted(entry["involved_classes"])
            for name in involved:
                if name not in defining:
                    raise BfclImportError(f"{where}: no module of {CODE_DIR}/ defines {name}")
                if name not in classes:
                    classes[name] = _api_class(files, sources, name, defining[name])
            api = [classes[name] for name in involved]
            _check_tools_unique(api, where)
            excluded = sorted(entry.get("excluded_function") or [])
            env_id = "bfcl-" + "-".join(involved) + "".join(f"-no-{name}" for name in excluded)
            if env_id not in envs:
                envs[env_id] = _environment(sources, env_id, api, excluded, origin)
            if entry["id"] not in answers:
                raise BfclImportError(
                    f"{where}: has no ground truth in {DATA_DIR}/possible_answer/"
                )
            tasks.append(_task(entry, answers[entry["id"]], envs[env_id], api, category, where))
        except KeyError as missing:
            raise BfclImportError(f"{where}: has no field {missing}") from None
    return Pool(envs=envs, tasks=tasks)


def _check_tools_unique(api: list[ApiClass], where: str) -> None:
    """BFCL calls a tool by name; two involved classes with one tool name would be ambiguous."""
    owners: dict[str, str] = {}
    for cls in api:
        for tool in cls.parameters:
            if owners.setdefault(tool, cls.name) != cls.name:
                raise BfclImportError(
                    f"{where}: tool {tool!r} of both {owners[tool]} and {cls.name}"
                )


def _category(files: BfclFiles, category: str) -> tuple[list[dict], dict[str, list]]:
    found = files.names(DATA_DIR, f"BFCL_v*_multi_turn_{category}.json")
    if not found:
        raise BfclImportError(
            f"{files.source}: has no {DATA_DIR}/BFCL_v*_multi_turn_{category}.json"
        )
    questions = found[-1]  # the newest version's, should a folder hold two
    answers = files.json_lines(f"{DATA_DIR}/possible_answer/{PurePosixPath(questions).name}")
    return files.json_lines(questions), {item["id"]: item["ground_truth"] for item in answers}


def _api_class(files: BfclFiles, sources: ModuleSources, name: str, module: str) -> ApiClass:
    tree = sources.module(module).tree
    [node] = [n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name]
    methods = {n.name: n for n in node.body if isinstance(n, ast.FunctionDef)}
    docs = files.json_lines(f"{DATA_DIR}/multi_turn_func_doc/{module}.json")
    missing = [doc["name"] for doc in docs if doc["name"] not in methods]
    if missing:
        raise BfclImportError(f"{CODE_DIR}/{module}.py: {name} has no method {missing}")
    parameters = {
        tool: [arg.arg for arg in (*methods[tool].args.posonlyargs, *methods[tool].args.args)][1:]
        for tool in (doc["name"] for doc in docs)
    }
    return ApiClass(
        name=name,
        module=module,
        stateful="_load_scenario" in methods,
        parameters=parameters,
        description=_api_description(methods.get("__init__")),
        tools=[_tool_schema(doc) for doc in docs],
    )


def _api_description(init: ast.FunctionDef | None) -> str:
    for node in ast.walk(init) if init is not None else ():
        if (
            isinstance(node, ast.Assign)
            and any(
                isinstance(t, ast.Attribute) and t.attr == "_api_description" for t in node.targets
            )
            and isinstance(node.value, ast.Constant)
            and isinstance(node.value.value, str)
        ):
            return node.value.value
    return ""


def _tool_schema(doc: dict[str, Any]) -> dict[str, Any]:
    """A BFCL function document as an OpenAI function schema (BFCL's ``dict``, ``float``,
    ``tuple`` are JSON Schema's ``object``, ``number``, ``array``; ``any`` has no type)."""

    def schema(value: Any) -> Any:
        if isinstance(value, list):
            return [schema(item) for item in value]
        if not isinstance(value, dict):
            return value
        converted = {}
        for key, item in value.items():
            if key == "type" and isinstance(item, str):
                if item != "any":
                    converted[key] = _SCHEMA_TYPES.get(item, item)
            else:
                converted[key] = schema(item)
        return converted

    function = {"name": doc["name"], "description": doc.get("description", "")}
    function["parameters"] = schema(doc.get("parameters", {"type": "dict", "properties": {}}))
    return {"type": "function", "function": function}


def _environment(
    sources: ModuleSources, env_id: str, api: list[ApiClass], excluded: list[str], origin: str
) -> Environment:
    """The environment of the classes ``api`` without the tools ``excluded``."""
    texts: dict[str, str] = {}
    wanted: dict[str, set[str]] = {}
    for cls in api:
        for sibling, names in sources.module(cls.module).imports:
            wanted.setdefault(sibling, set()).update(names)
    for sibling, names in wanted.items():  # siblings first: their names are given to the rest
        texts[sibling] = sources.bindings(sibling, names)
    texts.update((cls.module, sources.module(cls.module).source) for cls in api)
    code = environment_code(
        class_name=_class_name(api),
        origin=origin,
        sources=texts,
        imports={
            cls.module: sources.module(cls.module).imports
            for cls in api
            if sources.module(cls.module).imports
        },
        module_classes={cls.module: sources.module(cls.module).classes for cls in api},
        stateful=[cls.name for cls in api if cls.stateful],
        tools={cls.name: [t for t in cls.parameters if t not in excluded] for cls in api},
    )
    schemas = [t for cls in api for t in cls.tools if t["function"]["name"] not in excluded]
    introduction = "\n".join(f"{cls.name}: {cls.description}" for cls in api)
    return Environment(env_id, code, schemas, environment_introduction=introduction)


def _class_name(api: list[ApiClass]) -> str:
    return "Bfcl" + "".join(cls.name for cls in api)


def _task(
    entry: dict, truth: list, env: Environment, api: list[ApiClass], category: str, where: str
) -> Task:
    owners = {tool: cls.name for cls in api for tool in cls.parameters}
    parameters = {tool: cls.parameters[tool] for cls in api for tool in cls.parameters}
    tools = set(env.tool_names)
    calls = []  # (turn, class, tool, arguments)
    for turn, texts in enumerate(truth):
        for text in texts:
            tool, arguments = _parse_call(text, parameters, f"{where}: ground truth {text!r}")
            if tool not in tools:
                raise BfclImportError(f"{where}: ground truth {text!r}: not a tool of {env.env_id}")
            calls.append((turn, owners[tool], tool, arguments))
    checks = [
        Check(
            f"{cls.name} ends as the ground truth leaves it (every public attribute equal, "
            "as BFCL's state checker compares)",
            state_check(cls.name, [(t, a) for _, owner, t, a in calls if owner == cls.name]),
        )
        for cls in api
        if cls.stateful
    ]
    for turn in sorted({turn for turn, *_ in calls}):
        names = ", ".join(tool for t, _, tool, _ in calls if t == turn)
        checks.append(
            Check(
                f"the tool results include those of turn {turn + 1}'s ground-truth calls "
                f"({names}), as BFCL's response checker compares",
                response_check([cls.name for cls in api], [c for c in calls if c[0] <= turn], turn),
            )
        )
    instruction = "\n\n".join(
        " ".join(message["content"] for message in messages if message.get("role") == "user")
        for messages in entry["question"]
        if any(message.get("role") == "user" for message in messages)
    )
    return Task(
        task_id=str(entry["id"]),
        env_id=env.env_id,
        env_class_name=_class_name(api),
        init_config={
            "initial_config": entry.get("initial_config", {}),
            "long_context": category == "long_context",
        },
        task=instruction,
        checklist_with_func=checks,
        reference_solution=[ToolCall(tool, arguments) for _, _, tool, arguments in calls],
    )


def _parse_call(text: str, parameters: dict[str, list[str]], where: str) -> tuple[str, dict]:
    """``"f(1, b='x')"`` -> ``("f", {"a": 1, "b": "x"})``: values are literals, positional ones
    named from the method's signature, and JSON (a tuple becomes a list, as on the wire)."""
    try:
        node = ast.parse(text, mode="eval").body
    except SyntaxError as error:
        raise BfclImportError(f"{where}: not a call ({error.msg})") from None
    if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Name):
        raise BfclImportError(f"{where}: not a call of a tool by name")
    tool = node.func.id
    if tool not in parameters:
        raise BfclImportError(f"{where}: {tool!r} is no tool of the task's classes")
    if len(node.args) > len(parameters[tool]):
        raise BfclImportError(f"{where}: more positional values than {tool} has parameters")
    try:
        named = zip(parameters[tool][: len(node.args)], node.args, strict=True)
        arguments = {name: ast.literal_eval(value) for name, value in named}
        arguments.update({k.arg: ast.literal_eval(k.value) for k in node.keywords if k.arg})
    except (ValueError, TypeError, SyntaxError):
        raise BfclImportError(f"{where}: an argument is not a literal") from None
    return tool, json.loads(json.dumps(arguments))
