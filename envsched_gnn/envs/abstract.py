"""Abstract operation descriptions of tasks (spec section 3, cross relation).

An abstract describes a task's operations with tool names, field names and entity
identifiers removed: each call becomes a *category* (lookup, identifier resolution,
create, ...), and each step names the earlier steps whose records or identifiers it
uses and the *gates* those steps impose (identifier resolution, state precondition,
...). The format, one clause per step joined by ``"; "``::

    step 1: identifier resolution; step 2: list/filter using step 1 (gate: identifier
    resolution); step 3: update using step 2 (gate: record selection)

Tools are classified by the verb their name starts with, then by the words of their
schema description. A step k *uses* step j < k when an identifier argument of step k
was an argument of step j, or (when no earlier call carried it) was produced by step j:
the latest earlier read step (lookup, list/filter, identifier resolution) whose noun is
that identifier's entity (``customer_id`` is produced by ``find_customer_by_name``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Sequence

from envsched_gnn.envs.pool import Environment, Task, ToolCall

LOOKUP = "lookup"
LIST = "list/filter"
RESOLVE = "identifier resolution"
ELIGIBILITY = "eligibility check"
PRECONDITION = "state precondition"
CREATE = "create"
UPDATE = "update"
TRANSITION = "status transition"
DELETE = "delete"
RELATION = "relation replacement"
VALIDATE = "validate"
OTHER = "other operation"

CATEGORIES = (
    LOOKUP,
    LIST,
    RESOLVE,
    ELIGIBILITY,
    PRECONDITION,
    CREATE,
    UPDATE,
    TRANSITION,
    DELETE,
    RELATION,
    VALIDATE,
    OTHER,
)
READ_CATEGORIES = frozenset({LOOKUP, LIST, RESOLVE, ELIGIBILITY, PRECONDITION, VALIDATE})
CHANGE_CATEGORIES = frozenset({CREATE, UPDATE, TRANSITION, DELETE, RELATION})

GATE_RESOLUTION = "identifier resolution"
GATE_PRECONDITION = "state precondition"
GATE_ELIGIBILITY = "eligibility"
GATE_VALIDATION = "validation"
GATE_SELECTION = "record selection"
GATE_TYPES = (
    GATE_RESOLUTION,
    GATE_PRECONDITION,
    GATE_ELIGIBILITY,
    GATE_VALIDATION,
    GATE_SELECTION,
)
GATE_OF_CATEGORY = {
    RESOLVE: GATE_RESOLUTION,
    LOOKUP: GATE_PRECONDITION,
    PRECONDITION: GATE_PRECONDITION,
    ELIGIBILITY: GATE_ELIGIBILITY,
    VALIDATE: GATE_VALIDATION,
    LIST: GATE_SELECTION,
}

VERBS: dict[str, str] = {}
for _category, _verbs in (
    (LOOKUP, "get fetch lookup show view read retrieve describe find inspect"),
    (LIST, "list search filter query browse"),
    (RESOLVE, "resolve identify"),
    (ELIGIBILITY, "check is can has eligible"),
    (PRECONDITION, "ensure require assert"),
    (CREATE, "create add register book open issue enroll schedule file place new make reserve"),
    (CREATE, "log record insert request apply post"),
    (UPDATE, "update set change edit modify adjust rename flag hold waitlist mark note tag"),
    (UPDATE, "increase decrease extend suspend refer"),
    (TRANSITION, "approve confirm activate complete fulfill fill ship dispatch publish sign"),
    (TRANSITION, "submit process settle accept start finish finalize release admit certify"),
    (TRANSITION, "launch authorize reject renew grant award"),
    (DELETE, "delete remove cancel void withdraw revoke terminate drop archive close"),
    (DELETE, "discard retire discharge expire deactivate"),
    (RELATION, "reassign transfer replace move swap switch rebook reroute relocate assign"),
    (VALIDATE, "validate verify audit"),
):
    for _verb in _verbs.split():
        VERBS[_verb] = _category

_NOUN_STOP = frozenset({"by", "for", "of", "with", "from", "to", "in", "eligibility", "name"})
_ID_QUALIFIERS = frozenset(
    {"new", "target", "old", "source", "destination", "current", "replacement", "other"}
)
_STEP = re.compile(r"step (\d+): (.+?)(?: using .*)?$")


def classify_tool(name: str, description: str = "") -> str:
    """The category of a tool, from its name's verb, else its description's first verb."""
    lowered = name.lower()
    tokens = [token for token in lowered.split("_") if token]
    if "by_name" in lowered or re.search(r"_id_(by|for|of)_", lowered):
        return RESOLVE
    if tokens and tokens[0] in VERBS:
        return VERBS[tokens[0]]
    for word in re.findall(r"[a-z]+", description.lower()):
        if word in VERBS:
            return VERBS[word]
    return OTHER


def tool_categories(env: Environment) -> dict[str, str]:
    """Category of every tool of ``env``, keyed by tool name."""
    categories = {}
    for tool in env.tools:
        function = tool.get("function", tool)
        categories[function.get("name", "")] = classify_tool(
            function.get("name", ""), function.get("description", "")
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
    calls: Sequence[ToolCall], env: Environment, instruction: str | None = None
) -> str:
    """Deterministic abstract of a call sequence in ``env`` (module docstring format).

    Gates of step k are the gate types of the read steps it uses, in :data:`GATE_TYPES`
    order (identifier resolution from a resolution step, state precondition from a
    lookup, eligibility, validation, record selection from a list). An identifier that
    appears in ``instruction`` was given, not produced by an earlier step; a lookup
    never produces identifiers of the entity it looks up.
    """
    categories = tool_categories(env)
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
    """Fallback abstract from the check sources: one step per change a check verifies.

    Checks comparing a record with ``initial_state`` (left untouched) add no step.
    """
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


def abstract_of(task: Task, env: Environment, llm_extractor: LlmExtractor | None = None) -> str:
    """The task's abstract: ``task.abstract`` when given, else ``llm_extractor(task, env)``
    when a hook is passed, else extracted from the reference solution, else from the checks.
    """
    if task.abstract:
        return task.abstract
    if llm_extractor is not None:
        return llm_extractor(task, env)
    if task.reference_solution:
        return abstract_from_calls(task.reference_solution, env, task.task)
    return abstract_from_checks(task)


def operation_categories(abstract: str) -> list[str]:
    """The category sequence of an abstract in this module's format.

    Clauses whose category is not in :data:`CATEGORIES` raise ``ValueError`` naming it.
    """
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
