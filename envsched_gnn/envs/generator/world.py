"""The initial state of one task: owners, records and assignees with unique ids and names.

Operations plant their targets and distractors here (records of the same owner in
other states, people with similar names); :meth:`World.init_config` is the task's
``init_config``. Check sources read ``final_state`` and ``initial_state``.
"""

from __future__ import annotations

import random
from typing import Any

from envsched_gnn.envs.generator.codegen import NEW_NUMBER_START
from envsched_gnn.envs.generator.domains import Domain
from envsched_gnn.envs.pool import Check

FIRST_NAMES = [
    "Ada",
    "Alan",
    "Amara",
    "Ben",
    "Carla",
    "Chen",
    "Dana",
    "Diego",
    "Elena",
    "Emil",
    "Farah",
    "Felix",
    "Grace",
    "Hana",
    "Ivan",
    "Iris",
    "Jonas",
    "Kai",
    "Lena",
    "Leo",
    "Maya",
    "Milo",
    "Nadia",
    "Noah",
    "Olga",
    "Omar",
    "Paula",
    "Priya",
    "Quinn",
    "Rosa",
    "Sami",
    "Sofia",
    "Theo",
    "Tara",
    "Uma",
    "Vera",
    "Wei",
    "Yara",
    "Zane",
    "Zoe",
]
LAST_NAMES = [
    "Abbott",
    "Baker",
    "Castro",
    "Diaz",
    "Ellis",
    "Fischer",
    "Garcia",
    "Hughes",
    "Ibarra",
    "Jensen",
    "Khan",
    "Lopez",
    "Moreau",
    "Novak",
    "Okafor",
    "Park",
    "Quinto",
    "Reyes",
    "Sato",
    "Tanaka",
    "Ueda",
    "Varga",
    "Walsh",
    "Xu",
    "Young",
    "Zimmer",
    "Brandt",
    "Costa",
    "Duarte",
    "Evans",
    "Ferrer",
    "Gupta",
    "Holm",
    "Iqbal",
    "Jovic",
    "Kowal",
    "Lund",
    "Meyer",
    "Nash",
    "Ortiz",
]


class World:
    """Mutable builder of a task's initial state (ids 100-899 per prefix, unique names)."""

    def __init__(self, domain: Domain, rng: random.Random) -> None:
        self.domain = domain
        self.rng = rng
        self.owners: dict[str, dict[str, Any]] = {}
        self.records: dict[str, dict[str, Any]] = {}
        self.assignees: dict[str, dict[str, Any]] = {}
        self.base_assignees: list[str] = []
        self._numbers: set[str] = set()
        self._names: set[str] = set()

    # ids, names, values
    def new_id(self, prefix: str) -> str:
        while True:
            candidate = f"{prefix}-{self.rng.randrange(100, NEW_NUMBER_START)}"
            if candidate not in self._numbers:
                self._numbers.add(candidate)
                return candidate

    def new_name(self, like: str | None = None) -> str:
        """A fresh full name; with ``like``, one sharing its last (or first) name."""
        while True:
            first, last = self.rng.choice(FIRST_NAMES), self.rng.choice(LAST_NAMES)
            if like is not None:
                like_first, like_last = like.split()
                if self.rng.random() < 0.5:
                    last = like_last
                else:
                    first = like_first
            name = f"{first} {last}"
            if name not in self._names:
                self._names.add(name)
                return name

    def amount(self, low: int | None = None, high: int | None = None) -> int:
        lo, hi = self.domain.amount_range
        lo = lo if low is None else low
        hi = hi if high is None else high
        step = 10 ** max(0, len(str(hi - lo)) - 2)
        value = self.rng.randrange(lo, hi + 1)
        rounded = value - value % step
        return rounded if rounded >= lo else value

    def other_category(self, current: str) -> str:
        return self.rng.choice([v for v in self.domain.category_values if v != current])

    # entities
    def new_owner(self, name: str | None = None, eligible: bool = True, plant: bool = True) -> str:
        """An owner meeting the eligibility rule or not; under a ``count`` rule, ``plant``
        gives them the open records that decide it."""
        domain = self.domain
        owner_id = self.new_id(domain.owner.prefix)
        owner: dict[str, Any] = {
            "name": name or self.new_name(),
            domain.owner_field: self.rng.choice(domain.owner_field_values),
        }
        rule = domain.eligibility
        if rule is not None:
            if rule.kind == "min":
                low, high = (
                    (rule.threshold, rule.high) if eligible else (rule.low, rule.threshold - 1)
                )
                owner[rule.attribute] = self.rng.randint(low, high)
            elif rule.kind == "max":
                low, high = (
                    (rule.low, rule.threshold) if eligible else (rule.threshold + 1, rule.high)
                )
                owner[rule.attribute] = self.rng.randint(low, high)
            elif rule.kind == "flag":
                owner[rule.attribute] = (
                    rule.values[0] if eligible else self.rng.choice(rule.values[1:])
                )
            owner[domain.hold_field] = False
        self.owners[owner_id] = owner
        if plant and rule is not None and rule.kind == "count":
            for _ in range(self.rng.randrange(rule.threshold) if eligible else rule.threshold):
                self.new_record(owner_id, self.rng.choice(domain.statuses[:2]))
        return owner_id

    def new_record(
        self,
        owner_id: str,
        status: str,
        category: str | None = None,
        valid: bool | None = None,
        assignee_id: str | None = "base",
    ) -> str:
        """A record; ``valid`` forces the validation rule's outcome, ``assignee_id="base"``
        picks a random background assignee or none."""
        domain = self.domain
        record_id = self.new_id(domain.record.prefix)
        category = category or self.rng.choice(domain.category_values)
        limit = domain.amount_limits[category]
        if valid is True and domain.validation == "limit":
            amount = self.amount(high=limit)
        elif valid is False and domain.validation == "limit":
            amount = self.amount(low=limit + 1)
        else:
            amount = self.amount()
        record: dict[str, Any] = {
            "status": status,
            domain.category: category,
            domain.amount: amount,
            f"{domain.owner.singular}_id": owner_id,
        }
        if domain.assignee is not None:
            if assignee_id == "base":
                assignee_id = self.rng.choice([None, *self.base_assignees])
            if domain.validation == "assigned" and valid is not None:
                assignee_id = (assignee_id or self.base_assignees[0]) if valid else None
            record[f"{domain.assignee.singular}_id"] = assignee_id
        self.records[record_id] = record
        return record_id

    def new_assignee(self, name: str | None = None, free: bool = True) -> str:
        """An assignee that can take one more record (``free``) or cannot."""
        domain = self.domain
        assert domain.assignee is not None
        assignee_id = self.new_id(domain.assignee.prefix)
        assignee: dict[str, Any] = {"name": name or self.new_name()}
        if domain.assignee_rule == "capacity":
            assignee["capacity"] = self.rng.randint(2, 4) if free else 0
        else:
            assignee["available"] = free
        self.assignees[assignee_id] = assignee
        return assignee_id

    def populate(self) -> None:
        """Background: three owners with one or two records each, three roomy assignees."""
        if self.domain.assignee is not None:
            for _ in range(3):
                assignee_id = self.new_assignee()
                if self.domain.assignee_rule == "capacity":
                    self.assignees[assignee_id]["capacity"] = 50
                self.base_assignees.append(assignee_id)
        for _ in range(3):
            owner_id = self.new_owner(eligible=self.rng.random() < 0.7)
            for _ in range(self.rng.randint(1, 2)):
                self.new_record(owner_id, self.rng.choice(self.domain.statuses))

    def init_config(self) -> dict[str, Any]:
        domain = self.domain
        config: dict[str, Any] = {
            domain.owner.plural: dict(sorted(self.owners.items())),
            domain.record.plural: dict(sorted(self.records.items())),
        }
        if domain.assignee is not None:
            config[domain.assignee.plural] = dict(sorted(self.assignees.items()))
        config[f"next_{domain.record.singular}_number"] = NEW_NUMBER_START
        return config


def _check(item: str, body: str) -> Check:
    return Check(check_item=item, check_func=f"def check_func(final_state):\n{body}\n")


def field_is(attribute: str, key: str, field: str, value: Any, item: str) -> Check:
    return _check(
        item,
        f"    entry = final_state[{attribute!r}].get({key!r})\n"
        f"    return entry is not None and entry[{field!r}] == {value!r}",
    )


def unchanged(attribute: str, key: str, item: str) -> Check:
    return _check(
        item,
        f"    return final_state[{attribute!r}].get({key!r}) == "
        f"initial_state[{attribute!r}][{key!r}]",
    )


def removed(attribute: str, key: str, item: str) -> Check:
    return _check(item, f"    return {key!r} not in final_state[{attribute!r}]")


def _new_of(attribute: str, owner_key: str, owner_id: str) -> str:
    return (
        f"    new = [\n"
        f"        entry\n"
        f"        for key, entry in final_state[{attribute!r}].items()\n"
        f"        if key not in initial_state[{attribute!r}]"
        f" and entry[{owner_key!r}] == {owner_id!r}\n"
        f"    ]\n"
    )


def created_count(attribute: str, owner_key: str, owner_id: str, count: int, item: str) -> Check:
    return _check(item, _new_of(attribute, owner_key, owner_id) + f"    return len(new) == {count}")


def created_fields(
    attribute: str, owner_key: str, owner_id: str, fields: dict[str, Any], item: str
) -> Check:
    condition = " and ".join(f"new[0][{k!r}] == {v!r}" for k, v in fields.items())
    return _check(
        item, _new_of(attribute, owner_key, owner_id) + f"    return len(new) == 1 and {condition}"
    )


def link_count_unchanged(attribute: str, link: str, target: str, item: str) -> Check:
    return _check(
        item,
        f"    def count(state):\n"
        f"        entries = state[{attribute!r}].values()\n"
        f"        return sum(1 for e in entries if e[{link!r}] == {target!r})\n"
        f"    return count(final_state) == count(initial_state)",
    )
