"""The hidden structure of a generated task: its generator operations, gates and distractors.

The pool files do not name the operations a task was composed of; this module recovers
them from the reference solution, with the tool roles of the task's domain
(:func:`~envsched_gnn.envs.generator.tool_names.tool_names`). The generator's grammar makes
the parse unambiguous: every multi-call operation starts with a call that no one-call
operation makes (a name search, a lookup, a validation, an eligibility check):

=====================================  ====================================================
calls (roles)                          operation, variant
=====================================  ====================================================
find_owner, list, forward|delete|upd.  ``select_from_list``, the action; list siblings
find_owner, check, create|hold         ``eligibility_by_name``, eligible | ineligible
find_owner, create                     ``create_by_name``
find_owner, update_owner               ``update_owner_by_name``
find_assignee, reassign                ``reassign_by_name``
get, forward|update                    ``state_gate``, start | done (the branch taken)
validate, forward|delete               ``validation_gate``, valid | invalid
check, create|hold                     ``eligibility_gate``, eligible | ineligible
one of update, update_amount, forward, ``update``, ``update_amount``, ``forward``,
delete, create, reassign               ``delete``, ``create``, ``reassign``
=====================================  ====================================================

By-name operations plant a look-alike name, except ``select_from_list`` (its difficulty is
picking one of the owner's records). The checklist is the change checks, then the distractor
checks, in operation order, cut at :data:`~envsched_gnn.envs.generator.tasks.MAX_CHECKS`. A
simulator may use this as the task's hidden truth; the graph never reads it.
"""

from __future__ import annotations

from dataclasses import dataclass

from envsched_gnn.envs.generator.domains import Domain
from envsched_gnn.envs.generator.tasks import MAX_CHECKS, generated_domain
from envsched_gnn.envs.generator.tool_names import tool_names
from envsched_gnn.envs.pool import Environment, Task, ToolCall

ONE_CALL = ("update", "update_amount", "forward", "delete", "create", "reassign")
LOOK_ALIKE = ("create_by_name", "update_owner_by_name", "reassign_by_name", "eligibility_by_name")
CHANGE_CHECKS = {
    "update": 2,
    "update_amount": 1,
    "forward": 1,
    "delete": 1,
    "create": 2,
    "create_by_name": 2,
    "reassign": 1,
    "reassign_by_name": 1,
    "state_gate": 2,
    "validation_gate": 1,
    "update_owner_by_name": 1,
    "select_from_list": 1,
}
"""Checks of the intended change per operation (eligibility: 3 when eligible, else 2)."""


class StructureError(ValueError):
    """A task whose reference solution is not a sequence of generator operations."""


@dataclass(frozen=True)
class Operation:
    """One generator operation of a task, as the generator composed it."""

    kind: str
    """The generator's operation name (``state_gate``, ``create_by_name``, ...)."""
    variant: str
    """The gate's outcome or the action taken (``start``, ``invalid``, ``delete``...); ``""``."""
    look_alike: bool
    """A look-alike name was planted next to the one the instruction gives."""
    list_siblings: int
    """Other records of the owner in the list to choose from (``select_from_list``), else 0."""
    calls: int
    """Calls of the reference solution it takes."""
    change_checks: int
    """Checks of its intended change."""
    distractors: int
    """Its distractor checks that made it into the checklist."""


def task_structure(task: Task, env: Environment) -> list[Operation]:
    """The operations of generated task ``task`` (module docstring); :class:`StructureError`
    names the task and the call where its reference solution leaves the grammar."""
    domain = generated_domain(task.env_id, env)
    if domain is None:
        raise StructureError(f"task {task.task_id!r}: {env.env_id!r} is not a generated domain")
    if not task.reference_solution:
        raise StructureError(f"task {task.task_id!r}: no reference solution")
    role_of = {name: role for role, name in vars(tool_names(domain)).items() if name}
    calls = task.reference_solution
    roles = [role_of.get(call.name, "") for call in calls]
    found: list[tuple[str, str, bool, int, int]] = []
    n = 0
    while n < len(calls):
        kind, variant, size = _match(roles, n)
        if not kind:
            raise StructureError(
                f"task {task.task_id!r}: call {n + 1} ({calls[n].name}) starts no generator "
                "operation"
            )
        siblings = _list_siblings(task, domain, calls[n + 1]) if kind == "select_from_list" else 0
        found.append((kind, variant, kind in LOOK_ALIKE, siblings, size))
        n += size
    return _with_checks(task, found)


def _match(roles: list[str], n: int) -> tuple[str, str, int]:
    """(operation, variant, calls) of the operation starting at call ``n``; ``("", "", 0)``."""
    first = roles[n]
    second = roles[n + 1] if n + 1 < len(roles) else ""
    third = roles[n + 2] if n + 2 < len(roles) else ""
    if first == "find_owner":
        if second == "list" and third in ("forward", "delete", "update"):
            return "select_from_list", third, 3
        if second == "check" and third in ("create", "hold"):
            return "eligibility_by_name", _eligible(third), 3
        if second == "create":
            return "create_by_name", "", 2
        if second == "update_owner":
            return "update_owner_by_name", "", 2
    elif first == "find_assignee" and second == "reassign":
        return "reassign_by_name", "", 2
    elif first == "get" and second in ("forward", "update"):
        return "state_gate", "start" if second == "forward" else "done", 2
    elif first == "validate" and second in ("forward", "delete"):
        return "validation_gate", "valid" if second == "forward" else "invalid", 2
    elif first == "check" and second in ("create", "hold"):
        return "eligibility_gate", _eligible(second), 2
    elif first in ONE_CALL:
        return first, "", 1
    return "", "", 0


def _eligible(action: str) -> str:
    return "eligible" if action == "create" else "ineligible"


def _list_siblings(task: Task, domain: Domain, listing: ToolCall) -> int:
    """Records of the listed owner other than the target, from the initial state."""
    owner_key = f"{domain.owner.singular}_id"
    owner_id = listing.arguments.get(owner_key)
    records = task.init_config.get(domain.record.plural, {})
    return max(0, sum(1 for r in records.values() if r.get(owner_key) == owner_id) - 1)


def _with_checks(task: Task, found: list[tuple[str, str, bool, int, int]]) -> list[Operation]:
    """Attach each operation's change checks and kept distractors; they must add up."""
    change = [
        (3 if variant == "eligible" else 2)
        if kind.startswith("eligibility")
        else CHANGE_CHECKS[kind]
        for kind, variant, _, _, _ in found
    ]
    planted = [
        2 if kind == "reassign_by_name" else siblings if kind == "select_from_list" else 1
        for kind, _, _, siblings, _ in found
    ]
    room = max(0, MAX_CHECKS - sum(change))
    kept = []
    for count in planted:
        kept.append(min(count, room))
        room -= kept[-1]
    total = sum(change) + sum(kept)
    if total != len(task.checklist_with_func):
        raise StructureError(
            f"task {task.task_id!r}: its operations give {total} checks, its checklist has "
            f"{len(task.checklist_with_func)}"
        )
    return [
        Operation(kind, variant, look_alike, siblings, calls, c, d)
        for (kind, variant, look_alike, siblings, calls), c, d in zip(
            found, change, kept, strict=True
        )
    ]


def check_operations(operations: list[Operation]) -> list[int]:
    """The operation index of each check, in checklist order (change checks, then distractors)."""
    owners = [n for n, op in enumerate(operations) for _ in range(op.change_checks)]
    return owners + [n for n, op in enumerate(operations) for _ in range(op.distractors)]
