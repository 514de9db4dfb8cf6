"""The tool names of a domain's environment: one per role (get, create, forward, ...).

What the class source (:mod:`~envsched_gnn.envs.generator.codegen`), the tool schemas
(:mod:`~envsched_gnn.envs.generator.descriptions`) and the task generator
(:mod:`~envsched_gnn.envs.generator.operations`) call each tool.
"""

from __future__ import annotations

from dataclasses import dataclass

from envsched_gnn.envs.generator.domains import Domain

TOOLS_IN_CLASS_ORDER = (
    "get",
    "find_owner",
    "list",
    "create",
    "update",
    "update_amount",
    "update_owner",
    "forward",
    "delete",
    "find_assignee",
    "reassign",
    "check",
    "hold",
    "validate",
)
"""The roles of :class:`ToolNames` in the order the class defines their methods."""


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


def words(name: str) -> str:
    """An identifier as words: ``plot_lease`` -> ``plot lease``."""
    return name.replace("_", " ")
