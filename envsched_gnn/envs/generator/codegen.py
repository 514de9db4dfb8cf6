"""Render a domain as the source of its executable environment class.

State lives in dict attributes (owners, records, assignees by id, and the counter of new
record numbers). Each tool returns ``{"success": True, "data" | "message": ...}`` or
``{"success": False, "error": ...}`` when a domain rule refuses it; list items put their
deciding fields before the id.
"""

from __future__ import annotations

from string import Template
from typing import Any

from envsched_gnn.envs.generator.domains import Domain
from envsched_gnn.envs.generator.tool_names import TOOLS_IN_CLASS_ORDER, tool_names, words

NEW_NUMBER_START = 900  # planted records use numbers 100-899, created ones 900 and up


def _subs(domain: Domain) -> dict[str, Any]:
    start, done, closed = domain.statuses
    names = tool_names(domain)
    subs = {
        "O": domain.owner.singular,
        "OS": domain.owner.plural,
        "R": domain.record.singular,
        "RS": domain.record.plural,
        "Rw": words(domain.record.singular),
        "Ow": words(domain.owner.singular),
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
        subs["Aw"] = words(domain.assignee.singular)
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
    spoken = {f"{key}w": words(str(value)) for key, value in subs.items()}
    return Template(template).substitute({**subs, **spoken})


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
    for key in TOOLS_IN_CLASS_ORDER:
        if getattr(names, key):
            parts.append(_render(_METHODS[key], subs))
    return "".join(parts)
