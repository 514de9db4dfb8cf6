"""The 51 domains of the built-in pool: entities, fields, status machines and rules.

Every domain has an *owner* entity (found by name), a *record* entity (created, changed and
removed; status machine ``start -> done`` and a closing verb), optionally an *assignee* (with
a capacity or availability rule), an eligibility rule gating creation, a validation rule
gating the forward transition, a delete style and its optional tools. The domains are data:
``domains.json`` next to this module, objects with the fields of :class:`Domain`, read once
by :func:`load_domains`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, fields
from importlib import resources


@dataclass(frozen=True)
class Entity:
    """An entity type: ``singular`` names its id argument, ``plural`` its state attribute."""

    singular: str
    plural: str
    prefix: str


@dataclass(frozen=True)
class Eligibility:
    """Who may get a new record.

    ``kind``: ``min`` (owner ``attribute`` >= ``threshold``), ``max`` (<= ``threshold``),
    ``flag`` (owner ``attribute`` == ``values[0]``) or ``count`` (fewer than ``threshold``
    records that are not closed). ``low``/``high`` bound the numeric attribute.
    """

    kind: str
    attribute: str = ""
    low: int = 0
    high: int = 0
    threshold: int = 0
    values: tuple[str, ...] = ()


@dataclass(frozen=True)
class Domain:
    """One environment of the pool; see the module docstring for the roles."""

    key: str
    class_name: str
    summary: str
    owner: Entity
    record: Entity
    assignee: Entity | None
    assignee_rule: str  # "capacity" or "available"
    statuses: tuple[str, str, str]  # start, done, closed
    create_verb: str
    forward_verb: str
    delete_verb: str
    reassign_verb: str
    category: str
    category_values: tuple[str, ...]
    amount: str
    amount_range: tuple[int, int]
    owner_field: str
    owner_field_values: tuple[str, ...]
    eligibility: Eligibility | None
    hold_verb: str  # tool that flags an owner when not eligible ("" without eligibility)
    hold_field: str
    validation: str  # "", "limit" (amount <= limit of its category) or "assigned"
    delete_style: str  # "remove" or "status"
    delete_from_done: bool  # whether done records may be deleted too
    list_tool: bool
    amount_tool: bool
    owner_tool: bool
    update_verb: str
    validate_verb: str

    @property
    def amount_limits(self) -> dict[str, int]:
        """Validation limit of each category value: rising shares of the amount range."""
        low, high = self.amount_range
        n = len(self.category_values)
        return {
            value: low + (high - low) * (i + 1) // (n + 1)
            for i, value in enumerate(self.category_values)
        }


DOMAINS_FILE = "domains.json"
ASSIGNEE_RULES = ("capacity", "available")
ELIGIBILITY_KINDS = ("min", "max", "flag", "count")
VALIDATIONS = ("", "limit", "assigned")
DELETE_STYLES = ("remove", "status")


class DomainDataError(ValueError):
    """``domains.json`` does not describe valid domains (names the domain and the field)."""


def load_domains(text: str | None = None) -> list[Domain]:
    """The domains of ``text`` (JSON; default: the packaged ``domains.json``), in file order."""
    if text is None:
        text = resources.files(__package__).joinpath(DOMAINS_FILE).read_text(encoding="utf-8")
    rows = json.loads(text)
    if not isinstance(rows, list):
        raise DomainDataError(
            f"{DOMAINS_FILE}: expected a list of domains, got {type(rows).__name__}"
        )
    domains = [_domain(row, f"{DOMAINS_FILE}[{index}]") for index, row in enumerate(rows)]
    keys = [domain.key for domain in domains]
    if len(set(keys)) != len(keys):
        raise DomainDataError(f"{DOMAINS_FILE}: a domain key appears twice in {keys}")
    return domains


def _fields(row: object, cls: type, where: str, required: tuple[str, ...] | None = None) -> dict:
    """``row`` as keyword arguments of ``cls``: an object with exactly the ``required`` keys
    (default: every field of ``cls``)."""
    expected = set(required if required is not None else (f.name for f in fields(cls)))
    if not isinstance(row, dict):
        raise DomainDataError(f"{where}: expected an object, got {type(row).__name__}")
    if set(row) != expected:
        missing, unknown = sorted(expected - set(row)), sorted(set(row) - expected)
        raise DomainDataError(f"{where}: missing fields {missing}, unknown fields {unknown}")
    return dict(row)


def _entity(row: object, where: str) -> Entity:
    return Entity(**_fields(row, Entity, where))


def _eligibility(row: object, where: str) -> Eligibility | None:
    if row is None:
        return None
    kind = row.get("kind") if isinstance(row, dict) else None
    if kind not in ELIGIBILITY_KINDS:
        raise DomainDataError(f"{where}.kind: expected one of {ELIGIBILITY_KINDS}, got {kind!r}")
    required = {
        "count": ("kind", "threshold"),
        "flag": ("kind", "attribute", "values"),
    }.get(kind, ("kind", "attribute", "low", "high", "threshold"))
    values = _fields(row, Eligibility, where, required)
    if "values" in values:
        values["values"] = tuple(values["values"])
    return Eligibility(**values)


def _domain(row: object, where: str) -> Domain:
    values = _fields(row, Domain, where)
    where = f"{where} ({values['key']})"
    values["owner"] = _entity(values["owner"], f"{where}.owner")
    values["record"] = _entity(values["record"], f"{where}.record")
    if values["assignee"] is not None:
        values["assignee"] = _entity(values["assignee"], f"{where}.assignee")
    values["eligibility"] = _eligibility(values["eligibility"], f"{where}.eligibility")
    for name in ("statuses", "category_values", "amount_range", "owner_field_values"):
        values[name] = tuple(values[name])
    rule = values["assignee_rule"]
    if rule not in (ASSIGNEE_RULES if values["assignee"] is not None else ("",)):
        raise DomainDataError(f"{where}.assignee_rule: {rule!r} does not fit the assignee")
    checks = (
        ("statuses", len(values["statuses"]) == 3, "three statuses: start, done, closed"),
        ("validation", values["validation"] in VALIDATIONS, f"one of {VALIDATIONS}"),
        ("delete_style", values["delete_style"] in DELETE_STYLES, f"one of {DELETE_STYLES}"),
        ("amount_range", len(values["amount_range"]) == 2, "[low, high]"),
    )
    for name, ok, expected in checks:
        if not ok:
            raise DomainDataError(f"{where}.{name}: expected {expected}, got {values[name]!r}")
    return Domain(**values)


DOMAINS: list[Domain] = load_domains()

DOMAIN_BY_KEY = {domain.key: domain for domain in DOMAINS}
