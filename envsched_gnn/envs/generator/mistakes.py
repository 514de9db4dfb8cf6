"""Imperfect solutions of a generated task: the mistakes its checks are built to catch.

Each mistake kind sits at a decision the acting policy can resolve from what it sees:

================  ===============================================================  ===========
kind              the imperfect solution                                           seen in
================  ===============================================================  ===========
``stop_early``    the first k of the n reference calls, k uniform in 0..n-1        instruction
``wrong_branch``  a gate's other branch: after the gate call (``get``,             gate result
                  ``validate``, ``check``), the action the instruction gives for
                  the other outcome
``wrong_value``   one value argument the instruction names (a category, an         instruction
                  amount, an owner field) replaced by another valid value
``extra_call``    the reference, then one more change of the last call's target:   instruction
                  its record closed (``delete``), or a second ``create``
================  ===============================================================  ===========

An imperfect solution is a list of tool calls; whether it is a mistake is the runtime's
verdict (a refused second delete leaves the state correct). Values the reference does not
hold (the other branch's category, amount) are read from the instruction.
"""

from __future__ import annotations

import random
import re
from dataclasses import dataclass

from envsched_gnn.envs.generator.domains import Domain
from envsched_gnn.envs.generator.structure import Operation, task_structure
from envsched_gnn.envs.generator.tasks import generated_domain
from envsched_gnn.envs.generator.tool_names import ToolNames, tool_names
from envsched_gnn.envs.pool import Environment, Task, ToolCall

MISTAKE_KINDS = ("stop_early", "wrong_branch", "wrong_value", "extra_call")
GATES = ("state_gate", "validation_gate", "eligibility_gate", "eligibility_by_name")


class MistakeError(ValueError):
    """A mistake kind that the task has no decision for, or an unknown kind."""


@dataclass(frozen=True)
class _Parts:
    """What a mistake needs of a task: its domain, tool names, operations and their calls."""

    task: Task
    domain: Domain
    tools: ToolNames
    operations: list[Operation]
    starts: list[int]
    """Index of each operation's first call in the reference solution."""

    @property
    def calls(self) -> list[ToolCall]:
        return list(self.task.reference_solution or [])


def _parts(task: Task, env: Environment) -> _Parts:
    domain = generated_domain(task.env_id, env)
    if domain is None:
        raise MistakeError(f"task {task.task_id!r}: {task.env_id!r} is not a generated domain")
    operations = task_structure(task, env)
    starts, n = [], 0
    for operation in operations:
        starts.append(n)
        n += operation.calls
    return _Parts(task, domain, tool_names(domain), operations, starts)


def applicable_kinds(task: Task, env: Environment) -> list[str]:
    """The mistake kinds ``task`` has a decision for, in :data:`MISTAKE_KINDS` order."""
    parts = _parts(task, env)
    kinds = ["stop_early"]
    if any(op.kind in GATES for op in parts.operations):
        kinds.append("wrong_branch")
    if _value_slots(parts):
        kinds.append("wrong_value")
    if _extra_call(parts) is not None:
        kinds.append("extra_call")
    return kinds


def imperfect_solution(
    task: Task, env: Environment, kind: str, rng: random.Random
) -> list[ToolCall]:
    """The calls of ``task``'s solution with one mistake of ``kind`` (module docstring);
    the choices it leaves open (where to stop, which gate or value) are drawn from ``rng``."""
    if kind not in MISTAKE_KINDS:
        raise MistakeError(f"unknown mistake kind {kind!r}, expected one of {MISTAKE_KINDS}")
    parts = _parts(task, env)
    calls = parts.calls
    if kind == "stop_early":
        return calls[: rng.randrange(len(calls))]
    if kind == "wrong_branch":
        gates = [n for n, op in enumerate(parts.operations) if op.kind in GATES]
        if not gates:
            raise MistakeError(f"task {task.task_id!r} has no gate")
        n = rng.choice(gates)
        action = parts.starts[n] + parts.operations[n].calls - 1
        calls[action] = _other_branch(parts, parts.operations[n], calls[action])
        return calls
    if kind == "wrong_value":
        slots = _value_slots(parts)
        if not slots:
            raise MistakeError(f"task {task.task_id!r} has no value to get wrong")
        index, argument = rng.choice(slots)
        call = calls[index]
        wrong = _other_value(parts.domain, argument, call.arguments[argument], rng)
        calls[index] = ToolCall(call.name, {**call.arguments, argument: wrong})
        return calls
    extra = _extra_call(parts)
    if extra is None:
        raise MistakeError(f"task {task.task_id!r}: its last call has no target to act on again")
    return [*calls, extra]


def _value_slots(parts: _Parts) -> list[tuple[int, str]]:
    """(call index, argument) of every value the instruction names."""
    d = parts.domain
    valued = {d.category, d.amount, d.owner_field}
    return [
        (index, argument)
        for index, call in enumerate(parts.calls)
        for argument in call.arguments
        if argument in valued
    ]


def _other_value(domain: Domain, argument: str, current: object, rng: random.Random) -> object:
    if argument == domain.category:
        return rng.choice([v for v in domain.category_values if v != current])
    if argument == domain.owner_field:
        return rng.choice([v for v in domain.owner_field_values if v != current])
    low, high = domain.amount_range
    while True:
        value = rng.randrange(low, high + 1)
        if value != current:
            return value


def _record_key(domain: Domain) -> str:
    return f"{domain.record.singular}_id"


def _owner_key(domain: Domain) -> str:
    return f"{domain.owner.singular}_id"


def _other_branch(parts: _Parts, operation: Operation, action: ToolCall) -> ToolCall:
    """The action of the gate's other outcome, with the instruction's values."""
    d, t = parts.domain, parts.tools
    rkey, okey = _record_key(d), _owner_key(d)
    if operation.kind == "state_gate":
        record = action.arguments[rkey]
        if operation.variant == "done":
            return ToolCall(t.forward, {rkey: record})
        value = _instruction_value(parts.task.task, rf"{re.escape(record)}:[^.]*? to ", d)
        return ToolCall(t.update, {rkey: record, d.category: value})
    if operation.kind == "validation_gate":
        record = action.arguments[rkey]
        return ToolCall(t.delete if operation.variant == "valid" else t.forward, {rkey: record})
    owner = action.arguments[okey]
    if operation.variant == "eligible":
        return ToolCall(t.hold, {okey: owner})
    category, amount = _create_values(parts, owner)
    return ToolCall(t.create, {okey: owner, d.category: category, d.amount: amount})


def _instruction_value(text: str, lead: str, domain: Domain) -> str:
    """The category value that follows the pattern ``lead`` in the instruction."""
    values = "|".join(re.escape(v) for v in domain.category_values)
    found = re.search(rf"{lead}({values})\.", text)
    if found is None:
        raise MistakeError(f"no {domain.category} value after {lead!r} in {text!r}")
    return found.group(1)


def _create_values(parts: _Parts, owner: str) -> tuple[str, int]:
    """The category and amount the eligibility sentence about ``owner`` names."""
    d = parts.domain
    names = [c.arguments.get("name", "") for c in parts.calls if c.name == parts.tools.find_owner]
    who = "|".join(re.escape(w) for w in [owner, *names] if w)
    values = "|".join(re.escape(v) for v in d.category_values)
    category_w, amount_w = d.category.replace("_", " "), d.amount.replace("_", " ")
    found = re.search(
        rf"If [^,]*?(?:{who}) is eligible, [^;]*? with {re.escape(category_w)} ({values}) "
        rf"and {re.escape(amount_w)} (\d+);",
        parts.task.task,
    )
    if found is None:
        raise MistakeError(f"no eligibility sentence for {owner} in {parts.task.task!r}")
    return found.group(1), int(found.group(2))


def _extra_call(parts: _Parts) -> ToolCall | None:
    """One more change of the last call's target: close its record (unless that was the
    last call), or create a second record for its owner after a create; else None."""
    if not parts.calls:
        return None
    last = parts.calls[-1]
    d, t = parts.domain, parts.tools
    rkey = _record_key(d)
    if rkey in last.arguments:
        return None if last.name == t.delete else ToolCall(t.delete, {rkey: last.arguments[rkey]})
    if last.name == t.create:
        return ToolCall(last.name, dict(last.arguments))
    return None
