"""What the policy reads of a domain's environment: its tool schemas and its introduction.

The schemas are OpenAI function schemas, one per tool of :mod:`~envsched_gnn.envs.generator.
tool_names`, in the order the class (:mod:`~envsched_gnn.envs.generator.codegen`) defines them;
the introduction states the domain's rules that its tools enforce.
"""

from __future__ import annotations

from typing import Any

from envsched_gnn.envs.generator.domains import Domain
from envsched_gnn.envs.generator.tool_names import TOOLS_IN_CLASS_ORDER, tool_names, words


def _schema(name: str, description: str, properties: dict[str, dict]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": list(properties),
            },
        },
    }


def _choice(name: str, values: tuple[str, ...]) -> dict[str, dict]:
    """The schema of a string argument ``name`` that takes one of ``values``."""
    return {name: {"type": "string", "enum": list(values), "description": words(name)}}


def tool_schemas(domain: Domain) -> list[dict[str, Any]]:
    """OpenAI function schemas of the domain's tools, in class order."""
    names = tool_names(domain)
    o, r = words(domain.owner.singular), words(domain.record.singular)
    oid = {f"{domain.owner.singular}_id": {"type": "string", "description": f"{o} id"}}
    rid = {f"{domain.record.singular}_id": {"type": "string", "description": f"{r} id"}}
    name_arg = {"name": {"type": "string", "description": "full name"}}
    start, done, closed = domain.statuses
    cat = _choice(domain.category, domain.category_values)
    low, high = domain.amount_range
    amount = {
        domain.amount: {
            "type": "integer",
            "minimum": low,
            "maximum": high,
            "description": words(domain.amount),
        }
    }
    schemas = {
        "get": (f"Get one {r} by id: status, fields and links.", rid),
        "find_owner": (f"Find a {o}'s id by their full name.", name_arg),
        "list": (f"List the {r}s of a {o} (status, {words(domain.category)}, id).", oid),
        "create": (f"Create a new {start} {r} for a {o}.", {**oid, **cat, **amount}),
        "update": (f"Update the {words(domain.category)} of an open {r}.", {**rid, **cat}),
        "update_amount": (f"Update the {words(domain.amount)} of an open {r}.", {**rid, **amount}),
        "update_owner": (
            f"Update a {o}'s {words(domain.owner_field)}.",
            {**oid, **_choice(domain.owner_field, domain.owner_field_values)},
        ),
        "forward": (f"Move a {start} {r} to {done}.", rid),
        "delete": (
            f"{domain.delete_verb.capitalize()} a {r} "
            + ("(removes it)." if domain.delete_style == "remove" else f"(marks it {closed})."),
            rid,
        ),
        "check": (f"Check whether a {o} is eligible for a new {r}.", oid),
        "hold": (f"Mark a {o} as {words(domain.hold_field)}.", oid),
        "validate": (f"Validate a {r} against the rules; lists problems.", rid),
    }
    if domain.assignee:
        a = words(domain.assignee.singular)
        aid = {f"{domain.assignee.singular}_id": {"type": "string", "description": f"{a} id"}}
        schemas["find_assignee"] = (f"Find a {a}'s id by their name.", name_arg)
        schemas["reassign"] = (f"Reassign an open {r} to another {a}.", {**rid, **aid})
    result = []
    for key in TOOLS_IN_CLASS_ORDER:
        name = getattr(names, key)
        if name:
            description, properties = schemas[key]
            result.append(_schema(name, description, properties))
    return result


def introduction(domain: Domain) -> str:
    """The environment introduction: what the domain is and the rules its tools enforce."""
    start, done, closed = domain.statuses
    r, o = words(domain.record.singular), words(domain.owner.singular)
    deletable = f"{start} or {done}" if domain.delete_from_done else start
    rules = [
        f"A new {r} starts {start}; only a {start} {r} can become {done}.",
        f"{domain.delete_verb.capitalize()} applies only to a {deletable} {r}"
        + (" (it is removed)." if domain.delete_style == "remove" else f" (it becomes {closed})."),
        f"A {closed} {r} cannot be changed.",
    ]
    rule = domain.eligibility
    if rule is not None:
        attribute = words(rule.attribute)
        if rule.kind == "min":
            rules.append(f"A {o} needs {attribute} of at least {rule.threshold} for a new {r}.")
        elif rule.kind == "max":
            rules.append(f"A {o} with {attribute} above {rule.threshold} cannot get a new {r}.")
        elif rule.kind == "flag":
            rules.append(f"A {o} needs {attribute} '{rule.values[0]}' for a new {r}.")
        else:
            rules.append(f"A {o} may hold at most {rule.threshold} open {r}s.")
    if domain.validation == "limit":
        rules.append(
            f"A {r} is valid when its {words(domain.amount)} is within the limit of its "
            f"{words(domain.category)}; only valid {r}s can become {done}."
        )
    elif domain.validation == "assigned":
        rules.append(f"A {r} needs an assigned {words(domain.assignee.singular)} to be valid.")
    if domain.assignee:
        a = words(domain.assignee.singular)
        rules.append(
            f"A {a} takes {r}s only up to its capacity."
            if domain.assignee_rule == "capacity"
            else f"Only an available {a} can take {r}s."
        )
    return domain.summary + " Rules: " + " ".join(rules)
