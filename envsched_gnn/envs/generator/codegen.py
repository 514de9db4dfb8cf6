"""Render a domain as an executable environment: class source, tool schemas, introduction.

The class keeps its state in dict attributes (owners, records, assignees keyed by id,
plus the counter of new record numbers). Each tool is a method returning
``{"success": True, "data": ...}`` (queries), ``{"success": True, "message": ...}``
(changes) or ``{"success": False, "error": ...}`` when a domain rule refuses it.
Responses stay short, and list items put their deciding fields before the id.
"""

from __future__ import annotations

from dataclasses import dataclass
from string import Template
from typing import Any

from envsched_gnn.envs.generator.domains import Domain

NEW_NUMBER_START = 900  # planted records use numbers 100-899, created ones 900 and up


@dataclass(frozen=True)
class ToolNames:
    """The tool names of one domain (empty string: the domain lacks that tool)."""

    get: str
    find_owner: str
    create: str
    update: str
    forward: str
    delete: str
    list: str = ""
    update_amount: str = ""
    update_owner: str = ""
    find_assignee: str = ""
    reassign: str = ""
    check: str = ""
    hold: str = ""
    validate: str = ""


def tool_names(domain: Domain) -> ToolNames:
    o, r = domain.owner.singular, domain.record.singular
    a = domain.assignee.singular if domain.assignee else ""
    return ToolNames(
        get=f"get_{r}",
        find_owner=f"find_{o}_by_name",
        create=f"{domain.create_verb}_{r}",
        update=f"{domain.update_verb}_{r}_{domain.category}",
        forward=f"{domain.forward_verb}_{r}",
        delete=f"{domain.delete_verb}_{r}",
        list=f"list_{o}_{domain.record.plural}" if domain.list_tool else "",
        update_amount=f"adjust_{r}_{domain.amount}" if domain.amount_tool else "",
        update_owner=f"update_{o}_{domain.owner_field}" if domain.owner_tool else "",
        find_assignee=f"find_{a}_by_name" if a else "",
        reassign=f"{domain.reassign_verb}_{r}" if a else "",
        check=f"check_{o}_eligibility" if domain.eligibility else "",
        hold=f"{domain.hold_verb}_{o}" if domain.eligibility else "",
        validate=f"{domain.validate_verb}_{r}" if domain.validation else "",
    )


def _words(name: str) -> str:
    return name.replace("_", " ")


def _subs(domain: Domain) -> dict[str, Any]:
    start, done, closed = domain.statuses
    names = tool_names(domain)
    subs = {
        "O": domain.owner.singular,
        "OS": domain.owner.plural,
        "R": domain.record.singular,
        "RS": domain.record.plural,
        "Rw": _words(domain.record.singular),
        "Ow": _words(domain.owner.singular),
        "PREFIX": domain.record.prefix,
        "COUNTER": f"next_{domain.record.singular}_number",
        "START": start,
        "DONE": done,
        "CLOSED": closed,
        "CAT": domain.category,
        "AMT": domain.amount,
        "OFIELD": domain.owner_field,
        "HOLDF": domain.hold_field,
    }
    subs.update({f"T_{key}": value for key, value in vars(names).items()})
    if domain.assignee:
        subs.update(A=domain.assignee.singular, AS=domain.assignee.plural)
        subs["Aw"] = _words(domain.assignee.singular)
    return subs


_HEADER = Template('''\
class $CLASS:
    """$SUMMARY"""

$CONSTANTS
    def __init__(self, init_config=None):
        config = init_config or {}
$INIT
    def _open_${R}(self, ${R}_id):
        record = self.$RS.get(${R}_id)
        if record is None:
            return None, {"success": False, "error": f"$Rw {${R}_id} not found"}
        if record["status"] == "$CLOSED":
            return None, {"success": False, "error": f"$Rw {${R}_id} is $CLOSED"}
        return record, None
''')

_ELIGIBLE = {
    "min": """
    def _eligibility(self, ${O}_id):
        value = self.$OS[${O}_id]["$ATTR"]
        if value < $THRESHOLD:
            return False, f"$ATTRw {value} is below $THRESHOLD"
        return True, "meets all requirements"
""",
    "max": """
    def _eligibility(self, ${O}_id):
        value = self.$OS[${O}_id]["$ATTR"]
        if value > $THRESHOLD:
            return False, f"$ATTRw {value} is above $THRESHOLD"
        return True, "meets all requirements"
""",
    "flag": """
    def _eligibility(self, ${O}_id):
        value = self.$OS[${O}_id]["$ATTR"]
        if value != "$REQUIRED":
            return False, f"$ATTRw is {value}, must be $REQUIRED"
        return True, "meets all requirements"
""",
    "count": """
    def _eligibility(self, ${O}_id):
        open_count = sum(
            1
            for record in self.$RS.values()
            if record["${O}_id"] == ${O}_id and record["status"] != "$CLOSED"
        )
        if open_count >= $THRESHOLD:
            return False, f"already has {open_count} open $RSw (limit $THRESHOLD)"
        return True, "meets all requirements"
""",
}

_VALID = {
    "limit": """
    def _problems(self, record):
        limit = self.${CAT_UPPER}_LIMITS[record["$CAT"]]
        if record["$AMT"] > limit:
            return [f"$AMTw {record['$AMT']} exceeds the {record['$CAT']} limit {limit}"]
        return []
""",
    "assigned": """
    def _problems(self, record):
        if record["${A}_id"] is None:
            return ["no $Aw assigned"]
        return []
""",
}

_METHODS = {
    "get": """
    def $T_get(self, ${R}_id):
        record = self.$RS.get(${R}_id)
        if record is None:
            return {"success": False, "error": f"$Rw {${R}_id} not found"}
        return {"success": True, "data": dict(record, ${R}_id=${R}_id)}
""",
    "find_owner": """
    def $T_find_owner(self, name):
        wanted = str(name).strip().lower()
        for ${O}_id, $O in sorted(self.$OS.items()):
            if $O["name"].lower() == wanted:
                return {"success": True, "data": {"${O}_id": ${O}_id}}
        return {"success": False, "error": f"no $Ow named {name}"}
""",
    "list": """
    def $T_list(self, ${O}_id):
        if ${O}_id not in self.$OS:
            return {"success": False, "error": f"$Ow {${O}_id} not found"}
        items = [
            {"status": record["status"], "$CAT": record["$CAT"], "${R}_id": ${R}_id}
            for ${R}_id, record in sorted(self.$RS.items())
            if record["${O}_id"] == ${O}_id
        ]
        return {"success": True, "data": items}
""",
    "create": """
    def $T_create(self, ${O}_id, $CAT, $AMT):
        if ${O}_id not in self.$OS:
            return {"success": False, "error": f"$Ow {${O}_id} not found"}
        if $CAT not in self.${CAT_UPPER}_VALUES:
            return {"success": False, "error": f"unknown $CATw {$CAT}"}
        if not isinstance($AMT, int) or not $AMT_LOW <= $AMT <= $AMT_HIGH:
            return {"success": False, "error": "$AMTw must be an integer in $AMT_LOW-$AMT_HIGH"}
$CREATE_GATE
        ${R}_id = f"$PREFIX-{self.$COUNTER}"
        self.$COUNTER += 1
        self.$RS[${R}_id] = {$NEW_RECORD}
        return {"success": True, "message": f"$Rw {${R}_id} created for {${O}_id}"}
""",
    "update": """
    def $T_update(self, ${R}_id, $CAT):
        record, error = self._open_${R}(${R}_id)
        if error:
            return error
        if $CAT not in self.${CAT_UPPER}_VALUES:
            return {"success": False, "error": f"unknown $CATw {$CAT}"}
        record["$CAT"] = $CAT
        return {"success": True, "message": f"$Rw {${R}_id} $CATw set to {$CAT}"}
""",
    "update_amount": """
    def $T_update_amount(self, ${R}_id, $AMT):
        record, error = self._open_${R}(${R}_id)
        if error:
            return error
        if not isinstance($AMT, int) or not $AMT_LOW <= $AMT <= $AMT_HIGH:
            return {"success": False, "error": "$AMTw must be an integer in $AMT_LOW-$AMT_HIGH"}
        record["$AMT"] = $AMT
        return {"success": True, "message": f"$Rw {${R}_id} $AMTw set to {$AMT}"}
""",
    "update_owner": """
    def $T_update_owner(self, ${O}_id, $OFIELD):
        if ${O}_id not in self.$OS:
            return {"success": False, "error": f"$Ow {${O}_id} not found"}
        if $OFIELD not in self.${OFIELD_UPPER}_VALUES:
            return {"success": False, "error": f"unknown $OFIELDw {$OFIELD}"}
        self.$OS[${O}_id]["$OFIELD"] = $OFIELD
        return {"success": True, "message": f"$Ow {${O}_id} $OFIELDw set to {$OFIELD}"}
""",
    "forward": """
    def $T_forward(self, ${R}_id):
        record, error = self._open_${R}(${R}_id)
        if error:
            return error
        if record["status"] != "$START":
            return {"success": False, "error": f"$Rw {${R}_id} is {record['status']}, not $START"}
$FORWARD_GATE
        record["status"] = "$DONE"
        return {"success": True, "message": f"$Rw {${R}_id} is now $DONE"}
""",
    "delete": """
    def $T_delete(self, ${R}_id):
        record, error = self._open_${R}(${R}_id)
        if error:
            return error
        if record["status"] not in self.DELETABLE:
            return {"success": False, "error": f"$Rw {${R}_id} is {record['status']}"}
$DELETE_ACTION
""",
    "find_assignee": """
    def $T_find_assignee(self, name):
        wanted = str(name).strip().lower()
        for ${A}_id, $A in sorted(self.$AS.items()):
            if $A["name"].lower() == wanted:
                return {"success": True, "data": {"${A}_id": ${A}_id}}
        return {"success": False, "error": f"no $Aw named {name}"}
""",
    "reassign": """
    def $T_reassign(self, ${R}_id, ${A}_id):
        record, error = self._open_${R}(${R}_id)
        if error:
            return error
        if ${A}_id not in self.$AS:
            return {"success": False, "error": f"$Aw {${A}_id} not found"}
        if record["${A}_id"] == ${A}_id:
            return {"success": False, "error": f"$Rw {${R}_id} is already with {${A}_id}"}
$REASSIGN_GATE
        record["${A}_id"] = ${A}_id
        return {"success": True, "message": f"$Rw {${R}_id} moved to {${A}_id}"}
""",
    "check": """
    def $T_check(self, ${O}_id):
        if ${O}_id not in self.$OS:
            return {"success": False, "error": f"$Ow {${O}_id} not found"}
        eligible, reason = self._eligibility(${O}_id)
        return {"success": True, "data": {"eligible": eligible, "reason": reason}}
""",
    "hold": """
    def $T_hold(self, ${O}_id):
        if ${O}_id not in self.$OS:
            return {"success": False, "error": f"$Ow {${O}_id} not found"}
        if self.$OS[${O}_id]["$HOLDF"]:
            return {"success": False, "error": f"$Ow {${O}_id} is already $HOLDFw"}
        self.$OS[${O}_id]["$HOLDF"] = True
        return {"success": True, "message": f"$Ow {${O}_id} is now $HOLDFw"}
""",
    "validate": """
    def $T_validate(self, ${R}_id):
        record = self.$RS.get(${R}_id)
        if record is None:
            return {"success": False, "error": f"$Rw {${R}_id} not found"}
        problems = self._problems(record)
        return {"success": True, "data": {"valid": not problems, "problems": problems}}
""",
}

_CAPACITY_GATE = """\
        load = sum(
            1
            for other in self.$RS.values()
            if other["${A}_id"] == ${A}_id and other["status"] != "$CLOSED"
        )
        if load >= self.$AS[${A}_id]["capacity"]:
            return {"success": False, "error": f"$Aw {${A}_id} is at capacity"}"""
_AVAILABLE_GATE = """\
        if not self.$AS[${A}_id]["available"]:
            return {"success": False, "error": f"$Aw {${A}_id} is not available"}"""
_ELIGIBLE_GATE = """\
        eligible, reason = self._eligibility(${O}_id)
        if not eligible:
            return {"success": False, "error": f"$Ow {${O}_id} is not eligible: {reason}"}"""
_VALID_GATE = """\
        problems = self._problems(record)
        if problems:
            return {"success": False, "error": f"$Rw {${R}_id} is invalid: {problems[0]}"}"""
_REMOVE = """\
        del self.$RS[${R}_id]
        return {"success": True, "message": f"$Rw {${R}_id} removed"}"""
_CLOSE = """\
        record["status"] = "$CLOSED"
        return {"success": True, "message": f"$Rw {${R}_id} is now $CLOSED"}"""


def _render(template: str, subs: dict[str, Any]) -> str:
    words = {f"{key}w": _words(str(value)) for key, value in subs.items()}
    return Template(template).substitute({**subs, **words})


def class_source(domain: Domain) -> str:
    """The Python source of the domain's environment class."""
    subs = _subs(domain)
    names = tool_names(domain)
    low, high = domain.amount_range
    start, done, _ = domain.statuses
    subs.update(
        CLASS=domain.class_name,
        SUMMARY=domain.summary,
        CAT_UPPER=domain.category.upper(),
        OFIELD_UPPER=domain.owner_field.upper(),
        AMT_LOW=low,
        AMT_HIGH=high,
    )
    constants = [
        f"    {domain.category.upper()}_VALUES = {domain.category_values!r}",
        f"    DELETABLE = {(start, done) if domain.delete_from_done else (start,)!r}",
    ]
    if domain.owner_tool:
        constants.append(f"    {domain.owner_field.upper()}_VALUES = {domain.owner_field_values!r}")
    if domain.validation == "limit":
        constants.append(f"    {domain.category.upper()}_LIMITS = {domain.amount_limits!r}")
    subs["CONSTANTS"] = "\n".join(constants) + "\n"
    attributes = [domain.owner.plural, domain.record.plural]
    if domain.assignee:
        attributes.append(domain.assignee.plural)
    init = [f"        self.{name} = dict(config.get({name!r}, {{}}))" for name in attributes]
    counter = subs["COUNTER"]
    init.append(f"        self.{counter} = int(config.get({counter!r}, {NEW_NUMBER_START}))")
    subs["INIT"] = "\n".join(init) + "\n"
    new_record = [f'"status": "{start}"', f'"{domain.category}": {domain.category}']
    new_record += [f'"{domain.amount}": {domain.amount}', f'"{domain.owner.singular}_id": ']
    new_record[-1] += f"{domain.owner.singular}_id"
    if domain.assignee:
        new_record.append(f'"{domain.assignee.singular}_id": None')
    subs["NEW_RECORD"] = ", ".join(new_record)
    subs["CREATE_GATE"] = _render(_ELIGIBLE_GATE, subs) if domain.eligibility else ""
    subs["FORWARD_GATE"] = _render(_VALID_GATE, subs) if domain.validation else ""
    subs["DELETE_ACTION"] = _render(_REMOVE if domain.delete_style == "remove" else _CLOSE, subs)
    if domain.assignee:
        gate = _CAPACITY_GATE if domain.assignee_rule == "capacity" else _AVAILABLE_GATE
        subs["REASSIGN_GATE"] = _render(gate, subs)
    parts = [_render(_HEADER.template, subs)]
    if domain.eligibility:
        rule = domain.eligibility
        subs.update(
            ATTR=rule.attribute,
            THRESHOLD=rule.threshold,
            REQUIRED=rule.values[0] if rule.values else "",
        )
        parts.append(_render(_ELIGIBLE[rule.kind], subs))
    if domain.validation:
        parts.append(_render(_VALID[domain.validation], subs))
    for key, template in _METHODS.items():
        if getattr(names, key):
            parts.append(_render(template, subs))
    return "".join(parts)


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


def tool_schemas(domain: Domain) -> list[dict[str, Any]]:
    """OpenAI function schemas of the domain's tools, in class order."""
    names = tool_names(domain)
    o, r = _words(domain.owner.singular), _words(domain.record.singular)
    oid = {f"{domain.owner.singular}_id": {"type": "string", "description": f"{o} id"}}
    rid = {f"{domain.record.singular}_id": {"type": "string", "description": f"{r} id"}}
    name_arg = {"name": {"type": "string", "description": "full name"}}
    start, done, closed = domain.statuses
    cat = {
        domain.category: {
            "type": "string",
            "enum": list(domain.category_values),
            "description": _words(domain.category),
        }
    }
    low, high = domain.amount_range
    amount = {
        domain.amount: {
            "type": "integer",
            "minimum": low,
            "maximum": high,
            "description": _words(domain.amount),
        }
    }
    schemas = {
        "get": (f"Get one {r} by id: status, fields and links.", rid),
        "find_owner": (f"Find a {o}'s id by their full name.", name_arg),
        "list": (f"List the {r}s of a {o} (status, {_words(domain.category)}, id).", oid),
        "create": (f"Create a new {start} {r} for a {o}.", {**oid, **cat, **amount}),
        "update": (f"Update the {_words(domain.category)} of an open {r}.", {**rid, **cat}),
        "update_amount": (f"Update the {_words(domain.amount)} of an open {r}.", {**rid, **amount}),
        "update_owner": (
            f"Update a {o}'s {_words(domain.owner_field)}.",
            {
                **oid,
                domain.owner_field: {
                    "type": "string",
                    "enum": list(domain.owner_field_values),
                    "description": _words(domain.owner_field),
                },
            },
        ),
        "forward": (f"Move a {start} {r} to {done}.", rid),
        "delete": (
            f"{domain.delete_verb.capitalize()} a {r} "
            + ("(removes it)." if domain.delete_style == "remove" else f"(marks it {closed})."),
            rid,
        ),
        "check": (f"Check whether a {o} is eligible for a new {r}.", oid),
        "hold": (f"Mark a {o} as {_words(domain.hold_field)}.", oid),
        "validate": (f"Validate a {r} against the rules; lists problems.", rid),
    }
    if domain.assignee:
        a = _words(domain.assignee.singular)
        aid = {f"{domain.assignee.singular}_id": {"type": "string", "description": f"{a} id"}}
        schemas["find_assignee"] = (f"Find a {a}'s id by their name.", name_arg)
        schemas["reassign"] = (f"Reassign an open {r} to another {a}.", {**rid, **aid})
    result = []
    for key in _METHODS:
        name = getattr(names, key)
        if name:
            description, properties = schemas[key]
            result.append(_schema(name, description, properties))
    return result


def introduction(domain: Domain) -> str:
    """The environment introduction: what the domain is and the rules its tools enforce."""
    start, done, closed = domain.statuses
    r, o = _words(domain.record.singular), _words(domain.owner.singular)
    deletable = f"{start} or {done}" if domain.delete_from_done else start
    rules = [
        f"A new {r} starts {start}; only a {start} {r} can become {done}.",
        f"{domain.delete_verb.capitalize()} applies only to a {deletable} {r}"
        + (" (it is removed)." if domain.delete_style == "remove" else f" (it becomes {closed})."),
        f"A {closed} {r} cannot be changed.",
    ]
    rule = domain.eligibility
    if rule is not None:
        attribute = _words(rule.attribute)
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
            f"A {r} is valid when its {_words(domain.amount)} is within the limit of its "
            f"{_words(domain.category)}; only valid {r}s can become {done}."
        )
    elif domain.validation == "assigned":
        rules.append(f"A {r} needs an assigned {_words(domain.assignee.singular)} to be valid.")
    if domain.assignee:
        a = _words(domain.assignee.singular)
        rules.append(
            f"A {a} takes {r}s only up to its capacity."
            if domain.assignee_rule == "capacity"
            else f"Only an available {a} can take {r}s."
        )
    return domain.summary + " Rules: " + " ".join(rules)
