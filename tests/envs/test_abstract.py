"""The abstract-operation extractor on hand-written tools, calls and checks."""

from __future__ import annotations

import pytest

from envsched_gnn.envs.abstract import (
    abstract_from_calls,
    abstract_from_checks,
    abstract_of,
    operation_categories,
)
from envsched_gnn.envs.pool import Check, Environment, Task, ToolCall
from envsched_gnn.envs.tool_categories import CATEGORIES, classify_tool


def _tool(name: str, description: str = "", *args: str) -> dict:
    properties = {arg: {"type": "string"} for arg in args}
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {"type": "object", "properties": properties, "required": list(args)},
        },
    }


SHOP = Environment(
    env_id="shop",
    env_class_code="class Shop:\n    pass\n",
    tools=[
        _tool("find_customer_by_name", "Find a customer's id.", "name"),
        _tool("list_customer_orders", "Orders of a customer.", "customer_id"),
        _tool("get_order", "One order.", "order_id"),
        _tool("cancel_order", "Cancel an order.", "order_id"),
        _tool("check_customer_credit", "Credit check.", "customer_id"),
        _tool("place_order", "Place an order.", "customer_id", "item"),
        _tool("move_order", "Move an order to another courier.", "order_id", "new_courier_id"),
        _tool("find_courier_by_name", "Find a courier's id.", "name"),
        _tool("handle_refund", "Approve a pending refund.", "order_id"),
    ],
)


@pytest.mark.parametrize(
    ("name", "description", "category"),
    [
        ("get_order", "", "lookup"),
        ("lookup_patient", "", "lookup"),
        ("find_order", "", "lookup"),
        ("search_flights", "", "list/filter"),
        ("list_customer_orders", "", "list/filter"),
        ("find_customer_by_name", "", "identifier resolution"),
        ("resolve_account", "", "identifier resolution"),
        ("get_user_id_by_email", "", "identifier resolution"),
        ("check_donor_eligibility", "", "eligibility check"),
        ("is_member_active", "", "eligibility check"),
        ("can_borrow", "", "eligibility check"),
        ("create_policy", "", "create"),
        ("add_item", "", "create"),
        ("register_student", "", "create"),
        ("update_address", "", "update"),
        ("set_priority", "", "update"),
        ("change_plan", "", "update"),
        ("delete_note", "", "delete"),
        ("remove_member", "", "delete"),
        ("cancel_booking", "", "delete"),
        ("reassign_ticket", "", "relation replacement"),
        ("transfer_account", "", "relation replacement"),
        ("replace_device", "", "relation replacement"),
        ("validate_claim", "", "validate"),
        ("verify_identity", "", "validate"),
        ("approve_claim", "", "status transition"),
        ("handle_refund", "Approve a pending refund.", "status transition"),
        ("handle_refund", "Does something.", "other operation"),
    ],
)
def test_classify_tool_by_verb_then_description(name, description, category):
    assert classify_tool(name, description) == category


def test_resolution_list_and_selection_chain():
    calls = [
        ToolCall("find_customer_by_name", {"name": "Ada Lopez"}),
        ToolCall("list_customer_orders", {"customer_id": "C-1"}),
        ToolCall("cancel_order", {"order_id": "O-7"}),
    ]
    assert abstract_from_calls(calls, SHOP) == (
        "step 1: identifier resolution; "
        "step 2: list/filter using step 1 (gate: identifier resolution); "
        "step 3: delete using step 2 (gate: record selection)"
    )


def test_eligibility_and_state_gates_and_reused_ids():
    calls = [
        ToolCall("check_customer_credit", {"customer_id": "C-1"}),
        ToolCall("place_order", {"customer_id": "C-1", "item": "lamp"}),
        ToolCall("get_order", {"order_id": "O-2"}),
        ToolCall("cancel_order", {"order_id": "O-2"}),
    ]
    assert abstract_from_calls(calls, SHOP) == (
        "step 1: eligibility check; step 2: create using step 1 (gate: eligibility); "
        "step 3: lookup; step 4: delete using step 3 (gate: state precondition)"
    )


def test_ids_named_in_the_instruction_are_given_not_produced():
    calls = [
        ToolCall("find_courier_by_name", {"name": "Kai Park"}),
        ToolCall("move_order", {"order_id": "O-5", "new_courier_id": "K-3"}),
    ]
    without = abstract_from_calls(calls, SHOP)
    assert without == (
        "step 1: identifier resolution; "
        "step 2: relation replacement using step 1 (gate: identifier resolution)"
    )
    # a lookup of an order does not produce other order ids, but may produce linked ids
    lookup_first = [ToolCall("get_order", {"order_id": "O-9"}), calls[1]]
    assert abstract_from_calls(lookup_first, SHOP) == (
        "step 1: lookup; step 2: relation replacement using step 1 (gate: state precondition)"
    )
    other_order = [lookup_first[0], ToolCall("cancel_order", {"order_id": "O-5"})]
    assert abstract_from_calls(other_order, SHOP) == "step 1: lookup; step 2: delete"
    given = abstract_from_calls(calls, SHOP, "Move order O-5 to courier K-3.")
    assert given == "step 1: identifier resolution; step 2: relation replacement"


def test_abstracts_leave_out_names_fields_and_identifiers():
    calls = [
        ToolCall("find_customer_by_name", {"name": "Ada Lopez"}),
        ToolCall("place_order", {"customer_id": "C-1", "item": "lamp"}),
    ]
    text = abstract_from_calls(calls, SHOP)
    for leaked in ("customer", "order", "Ada", "C-1", "lamp", "item", "place"):
        assert leaked not in text


def _task(**changes) -> Task:
    fields = dict(
        task_id="t1",
        env_id="shop",
        env_class_name="Shop",
        init_config={},
        task="Cancel order O-7.",
        checklist_with_func=[
            Check(
                "O-7 cancelled",
                "def check_func(final_state):\n    return 'O-7' not in final_state['orders']\n",
            ),
            Check(
                "O-8 untouched",
                "def check_func(final_state):\n"
                "    return final_state['orders']['O-8'] == initial_state['orders']['O-8']\n",
            ),
            Check(
                "O-9 is shipped",
                "def check_func(final_state):\n"
                "    return final_state['orders']['O-9']['status'] == 'shipped'\n",
            ),
        ],
        reference_solution=[ToolCall("cancel_order", {"order_id": "O-7"})],
        abstract=None,
    )
    fields.update(changes)
    return Task(**fields)


def test_abstract_of_prefers_given_then_hook_then_reference_then_checks():
    assert abstract_of(_task(abstract="step 1: update"), SHOP) == "step 1: update"
    hook_calls = []

    def hook(task, env):
        hook_calls.append((task.task_id, env.env_id))
        return "step 1: validate"

    assert abstract_of(_task(), SHOP, llm_extractor=hook) == "step 1: validate"
    assert hook_calls == [("t1", "shop")]
    assert abstract_of(_task(), SHOP) == "step 1: delete"
    from_checks = abstract_of(_task(reference_solution=None), SHOP)
    assert from_checks == "step 1: delete; step 2: status transition"
    assert from_checks == abstract_from_checks(_task())


def test_operation_categories_parses_abstracts_back():
    abstract = (
        "step 1: identifier resolution; step 2: eligibility check using step 1 "
        "(gate: identifier resolution); step 3: create using steps 1, 2 "
        "(gates: identifier resolution, eligibility)"
    )
    assert operation_categories(abstract) == [
        "identifier resolution",
        "eligibility check",
        "create",
    ]
    assert operation_categories("") == []
    assert set(operation_categories("; ".join(f"step 1: {c}" for c in CATEGORIES))) == set(
        CATEGORIES
    )
    with pytest.raises(ValueError, match="flying"):
        operation_categories("step 1: flying")
