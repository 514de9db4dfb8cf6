"""Task building blocks: one operation each, with its gates, distractors and checks.

An operation plants its target and distractors in the :class:`World` and returns an
instruction sentence, the reference calls (1-3), the checks of the intended change and those
that its distractors were left untouched (gates: docs/design.md §3).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from envsched_gnn.envs.generator.domains import Domain
from envsched_gnn.envs.generator.tool_names import ToolNames, tool_names
from envsched_gnn.envs.generator.world import (
    World,
    created_count,
    created_fields,
    field_is,
    link_count_unchanged,
    removed,
    unchanged,
)
from envsched_gnn.envs.pool import Check, ToolCall


@dataclass
class Step:
    """What one operation adds to a task."""

    text: str
    calls: list[ToolCall]
    checks: list[Check]
    distractors: list[Check] = field(default_factory=list)


def _w(name: str) -> str:
    return name.replace("_", " ")


def _a(noun: str) -> str:
    return ("an " if noun[0] in "aeiou" else "a ") + noun


class Operations:
    """The operations available in one domain, applied to one task's world."""

    def __init__(self, domain: Domain, world: World) -> None:
        self.d = domain
        self.w = world
        self.t: ToolNames = tool_names(domain)
        self.r = _w(domain.record.singular)
        self.o = _w(domain.owner.singular)
        self.rs = domain.record.plural
        self.os = domain.owner.plural
        self.rkey = f"{domain.record.singular}_id"
        self.okey = f"{domain.owner.singular}_id"
        self.akey = f"{domain.assignee.singular}_id" if domain.assignee else ""

    def available(self) -> dict[str, tuple[int, Callable[[], Step]]]:
        """Operation name -> (number of calls, builder)."""
        ops: dict[str, tuple[int, Callable[[], Step]]] = {
            "update": (1, self.update),
            "forward": (1, self.forward),
            "delete": (1, self.delete),
            "create": (1, self.create),
            "create_by_name": (2, self.create_by_name),
            "state_gate": (2, self.state_gate),
        }
        if self.t.update_amount:
            ops["update_amount"] = (1, self.update_amount)
        if self.t.reassign:
            ops["reassign"] = (1, self.reassign)
            ops["reassign_by_name"] = (2, lambda: self.reassign(by_name=True))
        if self.t.validate:
            ops["validation_gate"] = (2, self.validation_gate)
        if self.t.check:
            ops["eligibility_gate"] = (2, self.eligibility_gate)
            ops["eligibility_by_name"] = (3, lambda: self.eligibility_gate(by_name=True))
        if self.t.update_owner:
            ops["update_owner_by_name"] = (2, self.update_owner_by_name)
        if self.t.list:
            ops["select_from_list"] = (3, self.select_from_list)
        return ops

    # helpers
    def _target(self, status: str, valid: bool | None = None) -> tuple[str, str, Check]:
        """A target record of a fresh owner, and a sibling record left as a distractor."""
        owner_id = self.w.new_owner()
        target = self.w.new_record(owner_id, status, valid=valid)
        sibling = self.w.new_record(owner_id, self.w.rng.choice(self.d.statuses[:2]))
        keep = unchanged(self.rs, sibling, f"{self.r} {sibling} is unchanged")
        return target, owner_id, keep

    def _status_is(self, record_id: str, status: str) -> Check:
        return field_is(self.rs, record_id, "status", status, f"{self.r} {record_id} is {status}")

    def _closed(self, record_id: str) -> Check:
        if self.d.delete_style == "remove":
            return removed(self.rs, record_id, f"{self.r} {record_id} was removed")
        return self._status_is(record_id, self.d.statuses[2])

    def _new_values(self) -> tuple[str, int]:
        return self.w.rng.choice(self.d.category_values), self.w.amount()

    def _create_checks(self, owner_id: str, category: str, amount: int) -> list[Check]:
        return [
            created_count(self.rs, self.okey, owner_id, 1, f"one new {self.r} for {owner_id}"),
            created_fields(
                self.rs,
                self.okey,
                owner_id,
                {"status": self.d.statuses[0], self.d.category: category, self.d.amount: amount},
                f"the new {self.r} has {_w(self.d.category)} {category} and "
                f"{_w(self.d.amount)} {amount}",
            ),
        ]

    def _create_call(self, owner_id: str, category: str, amount: int) -> ToolCall:
        return ToolCall(
            self.t.create,
            {self.okey: owner_id, self.d.category: category, self.d.amount: amount},
        )

    def _create_text(self, who: str, category: str, amount: int) -> str:
        return (
            f"{self.d.create_verb.capitalize()} {_a(self.r)} for {who} with "
            f"{_w(self.d.category)} {category} and {_w(self.d.amount)} {amount}."
        )

    # one call
    def update(self) -> Step:
        start, done, _ = self.d.statuses
        target, _, keep = self._target(self.w.rng.choice((start, done)))
        value = self.w.other_category(self.w.records[target][self.d.category])
        status = self.w.records[target]["status"]
        return Step(
            f"Set the {_w(self.d.category)} of {self.r} {target} to {value}.",
            [ToolCall(self.t.update, {self.rkey: target, self.d.category: value})],
            [
                field_is(self.rs, target, self.d.category, value, f"{target} has {value}"),
                self._status_is(target, status),
            ],
            [keep],
        )

    def update_amount(self) -> Step:
        target, _, keep = self._target(self.w.rng.choice(self.d.statuses[:2]))
        current = self.w.records[target][self.d.amount]
        value = self.w.amount()
        while value == current:
            value = self.w.amount()
        return Step(
            f"Change the {_w(self.d.amount)} of {self.r} {target} to {value}.",
            [ToolCall(self.t.update_amount, {self.rkey: target, self.d.amount: value})],
            [field_is(self.rs, target, self.d.amount, value, f"{target} has {value}")],
            [keep],
        )

    def forward(self) -> Step:
        start, done, _ = self.d.statuses
        target, _, keep = self._target(start, valid=True)
        return Step(
            f"{self.d.forward_verb.capitalize()} {self.r} {target}.",
            [ToolCall(self.t.forward, {self.rkey: target})],
            [self._status_is(target, done)],
            [keep],
        )

    def delete(self) -> Step:
        start, done, _ = self.d.statuses
        status = self.w.rng.choice((start, done)) if self.d.delete_from_done else start
        target, _, keep = self._target(status)
        return Step(
            f"{self.d.delete_verb.capitalize()} {self.r} {target}.",
            [ToolCall(self.t.delete, {self.rkey: target})],
            [self._closed(target)],
            [keep],
        )

    def create(self) -> Step:
        owner_id = self.w.new_owner()
        other = self.w.new_owner()
        category, amount = self._new_values()
        return Step(
            self._create_text(f"{self.o} {owner_id}", category, amount),
            [self._create_call(owner_id, category, amount)],
            self._create_checks(owner_id, category, amount),
            [created_count(self.rs, self.okey, other, 0, f"no new {self.r} for {other}")],
        )

    def reassign(self, by_name: bool = False) -> Step:
        start, done, _ = self.d.statuses
        target, _, keep = self._target(self.w.rng.choice((start, done)))
        name = self.w.new_name()
        new = self.w.new_assignee(name)
        look_alike = self.w.new_assignee(self.w.new_name(like=name), free=False)
        a = _w(self.d.assignee.singular)
        calls = [ToolCall(self.t.reassign, {self.rkey: target, self.akey: new})]
        if by_name:
            calls.insert(0, ToolCall(self.t.find_assignee, {"name": name}))
        who = f"{a} {name}" if by_name else f"{a} {new}"
        verb = self.d.reassign_verb.capitalize()
        distractors = [keep]
        if by_name:
            item = f"{look_alike} untouched"
            distractors.append(link_count_unchanged(self.rs, self.akey, look_alike, item))
        return Step(
            f"{verb} {self.r} {target} to {who}.",
            calls,
            [field_is(self.rs, target, self.akey, new, f"{target} is with {new}")],
            distractors,
        )

    # two calls
    def create_by_name(self) -> Step:
        name = self.w.new_name()
        owner_id = self.w.new_owner(name)
        look_alike = self.w.new_owner(self.w.new_name(like=name))
        category, amount = self._new_values()
        return Step(
            self._create_text(f"{self.o} {name}", category, amount),
            [
                ToolCall(self.t.find_owner, {"name": name}),
                self._create_call(owner_id, category, amount),
            ],
            self._create_checks(owner_id, category, amount),
            [created_count(self.rs, self.okey, look_alike, 0, f"no new {self.r} for {look_alike}")],
        )

    def state_gate(self) -> Step:
        start, done, _ = self.d.statuses
        status = self.w.rng.choice((start, done))
        target, _, keep = self._target(status, valid=True)
        value = self.w.other_category(self.w.records[target][self.d.category])
        text = (
            f"Look up {self.r} {target}: if it is still {start}, {self.d.forward_verb} it; "
            f"if it is already {done}, set its {_w(self.d.category)} to {value}."
        )
        lookup = ToolCall(self.t.get, {self.rkey: target})
        if status == start:
            calls = [lookup, ToolCall(self.t.forward, {self.rkey: target})]
            old = self.w.records[target][self.d.category]
            checks = [
                self._status_is(target, done),
                field_is(self.rs, target, self.d.category, old, f"{target} keeps {old}"),
            ]
        else:
            calls = [lookup, ToolCall(self.t.update, {self.rkey: target, self.d.category: value})]
            checks = [
                field_is(self.rs, target, self.d.category, value, f"{target} has {value}"),
                self._status_is(target, done),
            ]
        return Step(text, calls, checks, [keep])

    def validation_gate(self) -> Step:
        start = self.d.statuses[0]
        valid = self.w.rng.random() < 0.5
        target, _, keep = self._target(start, valid=valid)
        text = (
            f"{self.d.validate_verb.capitalize()} {self.r} {target}; if it is valid, "
            f"{self.d.forward_verb} it, otherwise {self.d.delete_verb} it."
        )
        action = self.t.forward if valid else self.t.delete
        check = self._status_is(target, self.d.statuses[1]) if valid else self._closed(target)
        return Step(
            text,
            [ToolCall(self.t.validate, {self.rkey: target}), ToolCall(action, {self.rkey: target})],
            [check],
            [keep],
        )

    def eligibility_gate(self, by_name: bool = False) -> Step:
        eligible = self.w.rng.random() < 0.5
        name = self.w.new_name()
        owner_id = self.w.new_owner(name, eligible=eligible)
        category, amount = self._new_values()
        who = f"{self.o} {name}" if by_name else f"{self.o} {owner_id}"
        hold = _w(self.d.hold_verb)
        text = (
            f"If {who} is eligible, {self.d.create_verb} {_a(self.r)} for them with "
            f"{_w(self.d.category)} {category} and {_w(self.d.amount)} {amount}; "
            f"otherwise {hold} them."
        )
        calls = [ToolCall(self.t.check, {self.okey: owner_id})]
        held = field_is(self.os, owner_id, self.d.hold_field, not eligible, f"{owner_id} hold")
        if eligible:
            calls.append(self._create_call(owner_id, category, amount))
            checks = self._create_checks(owner_id, category, amount) + [held]
        else:
            calls.append(ToolCall(self.t.hold, {self.okey: owner_id}))
            none = created_count(self.rs, self.okey, owner_id, 0, f"no new {self.r}")
            checks = [held, none]
        distractors = []
        if by_name:
            calls.insert(0, ToolCall(self.t.find_owner, {"name": name}))
            look_alike = self.w.new_owner(self.w.new_name(like=name))
            distractors.append(unchanged(self.os, look_alike, f"{look_alike} unchanged"))
        else:
            other = self.w.new_owner(eligible=not eligible)
            distractors.append(unchanged(self.os, other, f"{other} unchanged"))
        return Step(text, calls, checks, distractors)

    def update_owner_by_name(self) -> Step:
        name = self.w.new_name()
        owner_id = self.w.new_owner(name)
        look_alike = self.w.new_owner(self.w.new_name(like=name))
        current = self.w.owners[owner_id][self.d.owner_field]
        value = self.w.rng.choice([v for v in self.d.owner_field_values if v != current])
        return Step(
            f"Set the {_w(self.d.owner_field)} of {self.o} {name} to {value}.",
            [
                ToolCall(self.t.find_owner, {"name": name}),
                ToolCall(self.t.update_owner, {self.okey: owner_id, self.d.owner_field: value}),
            ],
            [field_is(self.os, owner_id, self.d.owner_field, value, f"{owner_id} has {value}")],
            [unchanged(self.os, look_alike, f"{look_alike} unchanged")],
        )

    # three calls
    def select_from_list(self) -> Step:
        """Find an owner by name, list their records, act on the one in a given status."""
        start, done, closed = self.d.statuses
        rng = self.w.rng
        action = rng.choice(("forward", "delete", "update"))
        status = {"forward": start, "delete": start, "update": rng.choice((start, done))}[action]
        name = self.w.new_name()
        owner_id = self.w.new_owner(name, plant=False)
        target = self.w.new_record(owner_id, status, valid=True)
        others = [s for s in (start, done, closed) if s != status]
        siblings = [self.w.new_record(owner_id, s) for s in rng.sample(others, rng.randint(1, 2))]
        find = ToolCall(self.t.find_owner, {"name": name})
        listing = ToolCall(self.t.list, {self.okey: owner_id})
        lead = f"Find the {status} {self.r} of {self.o} {name} and"
        if action == "forward":
            text = f"{lead} {self.d.forward_verb} it."
            call = ToolCall(self.t.forward, {self.rkey: target})
            check = self._status_is(target, done)
        elif action == "delete":
            text = f"{lead} {self.d.delete_verb} it."
            call = ToolCall(self.t.delete, {self.rkey: target})
            check = self._closed(target)
        else:
            value = self.w.other_category(self.w.records[target][self.d.category])
            text = f"{lead} set its {_w(self.d.category)} to {value}."
            call = ToolCall(self.t.update, {self.rkey: target, self.d.category: value})
            check = field_is(self.rs, target, self.d.category, value, f"{target} has {value}")
        keep = [unchanged(self.rs, s, f"{self.r} {s} is unchanged") for s in siblings]
        return Step(text, [find, listing, call], [check], keep)
