"""Abstract operation descriptions of tasks (docs/design.md §3, cross relation).

Each call becomes a *category* (tools classified by :mod:`envsched_gnn.envs.tool_categories`,
from replayed effects too when ``pool check --write-effects`` recorded them), and each step
names the earlier steps it uses and their *gates*, one clause per step joined by ``"; "``::

    step 1: identifier resolution; step 2: list/filter using step 1 (gate: identifier
    resolution); step 3: update using step 2 (gate: record selection)

Step k *uses* step j < k when an identifier argument of k was an argument of j or, when no
earlier call carried it, was produced by j: the latest earlier read step whose noun is that
identifier's entity (``customer_id`` is produced by ``find_customer_by_name``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

from envsched_gnn.envs.pool import Environment, Task, ToolCall
from envsched_gnn.envs.tool_categories import (
    CATEGORIES,
    CREATE,
    DELETE,
    ELIGIBILITY,
    LIST,
    LOOKUP,
    PRECONDITION,
    RELATION,
    RESOLVE,
    TRANSITION,
    UPDATE,
    VALIDATE,
    classify_tool,
)

GATE_RESOLUTION = "identifier resolution"
GATE_PRECONDITION = "state precondition"
GATE_ELIGIBILITY = "eligibility"
GATE_VALIDATION = "validation"
GATE_SELECTION = "record selection"
GATE_TYPES = (GATE_RESOLUTION, GATE_PRECONDITION, GATE_ELIGIBILITY, GATE_VALIDATION, GATE_SELECTION)
GATE_OF_CATEGORY = {
    RESOLVE: GATE_RESOLUTION,
    LOOKUP: GATE_PRECONDITION,
    PRECONDITION: GATE_PRECONDITION,
    ELIGIBILITY: GATE_ELIGIBILITY,
    VALIDATE: GATE_VALIDATION,
    LIST: GATE_SELECTION,
}

_NOUN_STOP = frozenset({"by", "for", "of", "with", "from", "to", "in", "eligibility", "name"})
_ID_QUALIFIERS = frozenset(
    {"new", "target", "old", "source", "destination", "current", "replacement", "other"}
)
_STEP = re.compile(r"step (\d+): (.+?)(?: using .*)?$")


ToolEffects = Mapping[str, frozenset[str]]
"""Tool name -> the kinds of change its replayed calls showed (``ObservedEffect.typical``)."""


def tool_categories(env: Environment, effects: ToolEffects | None = None) -> dict[str, str]:
    """Category of every tool of ``env``, keyed by tool name; ``effects`` maps a tool name to
    the kinds of change its replayed calls showed (:mod:`envsched_gnn.envs.state_diff`)."""
    effects = effects or {}
    categories = {}
    for tool in env.tools:
        function = tool.get("function", tool)
        name = function.get("name", "")
        categories[name] = classify_tool(
            name, function.get("description", ""), function.get("parameters"), effects.get(name)
        )
    return categories


def _noun(tool_name: str) -> str:
    """The entity a read tool returns: the last word of its name before ``by``/``for``/..."""
    words = tool_name.lower().split("_")[1:]
    nouns = []
    for word in words:
        if word in _NOUN_STOP:
            break
        nouns.append(word)
    return nouns[-1] if nouns else ""


def _entity_of_argument(argument: str, tool_name: str) -> str:
    words = [w for w in argument.lower().split("_") if w and w not in _ID_QUALIFIERS]
    if words and words[-1] == "id":
        words = words[:-1]
    return words[-1] if words else _noun(tool_name)


def _same_entity(a: str, b: str) -> bool:
    """``policy`` and ``policies`` name the same entity: a shared stem of all but 2 letters."""
    if not a or not b:
        return False
    prefix = len(os.path.commonprefix([a, b]))
    return prefix >= max(3, min(len(a), len(b)) - 2)


def _produces(call: ToolCall, category: str, entity: str) -> bool:
    """Whether a read call's response can carry identifiers of ``entity``."""
    if category in (LIST, RESOLVE):
        return _same_entity(_noun(call.name), entity)
    if category == LOOKUP:
        own = {_entity_of_argument(argument, call.name) for argument, _ in _id_arguments(call)}
        return not any(_same_entity(entity, e) for e in own)
    return False


def _id_arguments(call: ToolCall) -> list[tuple[str, str]]:
    return [
        (key, str(value))
        for key, value in sorted(call.arguments.items())
        if key.lower() == "id" or key.lower().endswith("_id")
        if isinstance(value, (str, int)) and not isinstance(value, bool)
    ]


def _format_step(index: int, category: str, uses: list[int], gates: list[str]) -> str:
    clause = f"step {index}: {category}"
    if uses:
        label = "step" if len(uses) == 1 else "steps"
        clause += f" using {label} {', '.join(str(u) for u in uses)}"
    if gates:
        label = "gate" if len(gates) == 1 else "gates"
        clause += f" ({label}: {', '.join(gates)})"
    return clause


def abstract_from_calls(
    calls: Sequence[ToolCall],
    env: Environment,
    instruction: str | None = None,
    effects: ToolEffects | None = None,
) -> str:
    """Deterministic abstract of a call sequence in ``env`` (module docstring format).

    Gates of step k: those of the read steps it uses (:data:`GATE_OF_CATEGORY`), in
    :data:`GATE_TYPES` order. An identifier in ``instruction`` was given, not produced; a
    lookup never produces identifiers of the entity it looks up. ``effects``: as in
    :func:`tool_categories`.
    """
    categories = tool_categories(env, effects)
    steps: list[str] = []
    step_categories: list[str] = []
    for k, call in enumerate(calls):
        category = categories.get(call.name) or classify_tool(call.name)
        uses: set[int] = set()
        for argument, value in _id_arguments(call):
            carriers = [j for j in range(k) if value in {v for _, v in _id_arguments(calls[j])}]
            if carriers:
                uses.update(carriers)
                continue
            if instruction is not None and re.search(
                rf"(?<![\w-]){re.escape(value)}(?![\w-])", instruction
            ):
                continue
            entity = _entity_of_argument(argument, calls[k].name)
            for j in range(k - 1, -1, -1):
                if _produces(calls[j], step_categories[j], entity):
                    uses.add(j)
                    break
        used = sorted(uses)
        gate_set = {GATE_OF_CATEGORY.get(step_categories[j]) for j in used}
        gates = [gate for gate in GATE_TYPES if gate in gate_set]
        steps.append(_format_step(k + 1, category, [j + 1 for j in used], gates))
        step_categories.append(category)
    return "; ".join(steps)


_CHECK_PATTERNS = (
    (re.compile(r"==\s*initial_state|initial_state\[[^\]]*\]\s*==\s*final_state"), None),
    (re.compile(r"not in final_state|is None"), DELETE),
    (re.compile(r"len\(|not in initial_state"), CREATE),
    (re.compile(r"_id['\"]\]\s*==|_id['\"]\)\s*=="), RELATION),
    (re.compile(r"\[['\"]status['\"]\]\s*=="), TRANSITION),
)


def abstract_from_checks(task: Task) -> str:
    """Fallback abstract from the check sources: one step per change a check verifies
    (checks comparing a record with ``initial_state`` add none)."""
    steps = []
    for check in task.checklist_with_func:
        category = UPDATE
        for pattern, matched in _CHECK_PATTERNS:
            if pattern.search(check.check_func):
                category = matched
                break
        if category is not None:
            steps.append(_format_step(len(steps) + 1, category, [], []))
    return "; ".join(steps)


LlmExtractor = Callable[[Task, Environment], str]


def abstract_of(
    task: Task,
    env: Environment,
    llm_extractor: LlmExtractor | None = None,
    effects: ToolEffects | None = None,
) -> str:
    """The task's abstract: ``task.abstract``, else ``llm_extractor(task, env)`` when passed,
    else from the reference solution (with ``effects`` when known), else from the checks."""
    if task.abstract:
        return task.abstract
    if llm_extractor is not None:
        return llm_extractor(task, env)
    if task.reference_solution:
        return abstract_from_calls(task.reference_solution, env, task.task, effects)
    return abstract_from_checks(task)


def operation_categories(abstract: str) -> list[str]:
    """The category sequence of an abstract in this module's format; ``ValueError`` naming a
    clause whose category is not in :data:`CATEGORIES`."""
    categories = []
    for clause in (part.strip() for part in abstract.split(";")):
        if not clause:
            continue
        body = re.sub(r" \((gate|gates): [^)]*\)$", "", clause)
        match = _STEP.match(body)
        if match is None or match.group(2) not in CATEGORIES:
            raise ValueError(f"abstract clause {clause!r} is not 'step N: <category> ...'")
        categories.append(match.group(2))
    return categories


PATTERN_SEPARATOR = " > "
"""Joins the categories of an operation pattern."""

NO_ABSTRACT = "(no abstract)"
"""The operation pattern of a task whose abstract is missing or not in this module's
``step N: <category>`` format."""


def operation_pattern(abstract: str | None) -> str:
    """The category sequence of ``abstract`` joined by " > " (e.g. "identifier resolution >
    update"): what tasks of any environment that run the same steps share;
    :data:`NO_ABSTRACT` without a parsable abstract."""
    if not abstract:
        return NO_ABSTRACT
    try:
        return PATTERN_SEPARATOR.join(operation_categories(abstract)) or NO_ABSTRACT
    except ValueError:
        return NO_ABSTRACT


def operation_patterns(tasks: Iterable[Task]) -> dict[str, str]:
    """``{task_id: operation_pattern(task.abstract)}``."""
    return {task.task_id: operation_pattern(task.abstract) for task in tasks}
