"""The tool-call grammar: every call ``format_tool_call`` renders is accepted, everything the
grammar accepts parses into a call of a real tool with valid arguments, and what breaks the
schema is refused."""

from __future__ import annotations

import json
import random

import pytest

from envsched_gnn.envs.pool import ToolCall
from envsched_gnn.training.agent_format import (
    TOOL_CALL_CLOSE,
    TOOL_CALL_OPEN,
    format_tool_call,
    parse_assistant,
)
from envsched_gnn.training.call_grammar import CallGrammar

OPEN, CLOSE = (TOOL_CALL_OPEN,), (TOOL_CALL_CLOSE,)


def _tool(name, properties, required):
    return {
        "type": "function",
        "function": {
            "name": name,
            "parameters": {"type": "object", "properties": properties, "required": required},
        },
    }


TOOLS = [
    _tool("get_order", {"order_id": {"type": "string"}}, ["order_id"]),
    _tool(
        "set_priority",
        {
            "order_id": {"type": "string"},
            "priority": {"type": "string", "enum": ["low", "high", "higher"]},
            "seats": {"type": "integer"},
            "weight": {"type": "number"},
            "rush": {"type": "boolean"},
        },
        ["order_id", "priority"],
    ),
    _tool("tag", {"tags": {"type": "array"}, "extra": {"type": "object"}, "note": {}}, []),
    _tool("list_all", {}, []),
    _tool("get", {"level": {"enum": [1, 2, 10]}}, ["level"]),
]
GRAMMAR = CallGrammar(TOOLS, OPEN, CLOSE)


def units(text: str) -> list:
    """The turn's units, with the markers as special units."""
    out: list = []
    for i, piece in enumerate(text.split(TOOL_CALL_OPEN)):
        if i:
            out.append(TOOL_CALL_OPEN)
        for j, part in enumerate(piece.split(TOOL_CALL_CLOSE)):
            if j:
                out.append(TOOL_CALL_CLOSE)
            out.extend(part.encode())
    return out


def walk(text: str, grammar: CallGrammar = GRAMMAR):
    """The state after ``text``, or None when some unit is refused."""
    state = grammar.start
    for unit in units(text):
        state = grammar.advance(state, unit)
        if state is None:
            return None
    return state


def accepts(text: str, grammar: CallGrammar = GRAMMAR) -> bool:
    state = walk(text, grammar)
    return state is not None and grammar.can_end(state)


VALID = [
    ToolCall("get_order", {"order_id": "ORD-123"}),
    ToolCall("set_priority", {"order_id": "A", "priority": "high"}),
    ToolCall("set_priority", {"priority": "higher", "order_id": "A", "seats": -40}),
    ToolCall("set_priority", {"order_id": "A", "priority": "low", "weight": 0.25, "rush": True}),
    ToolCall("set_priority", {"order_id": "Zoë", "priority": "low", "weight": 1e-3}),
    ToolCall("tag", {}),
    ToolCall("tag", {"tags": ["a", 1, [], {"b": None}], "extra": {"k": [True, 2.5]}}),
    ToolCall("tag", {"note": 'say "hi"\n'}),
    ToolCall("list_all", {}),
    ToolCall("get", {"level": 10}),
    ToolCall("get", {"level": 1}),
]


@pytest.mark.parametrize("call", VALID, ids=lambda c: json.dumps(c.arguments))
def test_every_rendered_call_is_accepted(call):
    text = format_tool_call(call)
    assert accepts(text)
    assert accepts(text + text)  # several calls in one turn
    assert not GRAMMAR.can_end(walk(text[: -len(TOOL_CALL_CLOSE)]))


@pytest.mark.parametrize(
    "text",
    [
        '<tool_call>{"name": "teleport", "arguments": {}}</tool_call>',  # unknown tool
        '<tool_call>{"name": "get_orde", "arguments": {"order_id": "A"}}</tool_call>',
        '<tool_call>{"name": "get_order", "arguments": {"id": "A"}}</tool_call>',  # unknown key
        '<tool_call>{"name": "get_order", "arguments": {}}</tool_call>',  # required key missing
        '<tool_call>{"name": "set_priority", "arguments": {"order_id": "A"}}</tool_call>',
        '<tool_call>{"name": "set_priority", "arguments": {"order_id": "A", "priority": "mid"}}'
        "</tool_call>",  # not one of the enum
        '<tool_call>{"name": "get_order", "arguments": {"order_id": "A", "order_id": "B"}}'
        "</tool_call>",  # a key twice
        '<tool_call>{"name": "set_priority", "arguments": {"order_id": "A", "priority": "low", '
        '"seats": 2.5}}</tool_call>',  # not an integer
        '<tool_call>{"name": "set_priority", "arguments": {"order_id": "A", "priority": "low", '
        '"seats": "2"}}</tool_call>',
        '<tool_call>{"name": "set_priority", "arguments": {"order_id": "A", "priority": "low", '
        '"rush": 1}}</tool_call>',
        '<tool_call>{"name": "get_order", "arguments": {"order_id": "A\\"B"}}</tool_call>',
        '<tool_call>{"name":"get_order", "arguments": {"order_id": "A"}}</tool_call>',  # spacing
        '<tool_call>{"name": "get", "arguments": {"level": 3}}</tool_call>',
        '<tool_call>{"name": "tag", "arguments": {"tags": [1,2]}}</tool_call>',
        '<tool_call>{"name": "list_all", "arguments": {"x": 1}}</tool_call>',
        "Done. <tool_call>",  # an answer may not spell a call
        "",  # an empty turn
    ],
)
def test_what_breaks_the_schema_is_refused(text):
    assert not accepts(text)


def test_answers_are_text_without_a_call():
    assert accepts("Done.")
    assert accepts("The order <is> shipped.")
    assert walk("Done. <tool_ca") is not None
    assert walk("Done. <tool_call>") is None
    assert GRAMMAR.advance(GRAMMAR.start, TOOL_CALL_CLOSE) is None
    assert not GRAMMAR.can_end(GRAMMAR.start)


def test_markers_spelled_in_bytes_when_the_tokenizer_has_no_special_tokens():
    spelled = CallGrammar(TOOLS, tuple(TOOL_CALL_OPEN.encode()), tuple(TOOL_CALL_CLOSE.encode()))
    text = format_tool_call(VALID[0])
    state = spelled.start
    for byte in text.encode():
        state = spelled.advance(state, byte)
        assert state is not None
    assert spelled.can_end(state)


def _random_turn(rng: random.Random, alphabet: list, limit: int = 400) -> str | None:
    """A turn drawn unit by unit among the allowed ones, ending as soon as it may."""
    state, out = GRAMMAR.start, []
    for _ in range(limit):
        if GRAMMAR.can_end(state) and out and rng.random() < 0.3:
            return "".join(u if isinstance(u, str) else chr(u) for u in out)
        options = [(u, s) for u in alphabet if (s := GRAMMAR.advance(state, u)) is not None]
        assert options, f"no unit allowed in {state}"
        if state == GRAMMAR.start and rng.random() < 0.8:
            options = [o for o in options if o[0] == TOOL_CALL_OPEN]
        # prefer the units that move towards the end of a call (short, finite turns)
        closing = [o for o in options if o[0] in (ord('"'), ord("}"), ord("]"), TOOL_CALL_CLOSE)]
        unit, state = rng.choice(closing if closing and rng.random() < 0.5 else options)
        out.append(unit)
    return None


@pytest.mark.slow  # many sampled calls
def test_whatever_the_grammar_accepts_parses_into_a_valid_call():
    schemas = {t["function"]["name"]: t["function"]["parameters"] for t in TOOLS}
    alphabet = [*range(32, 127), ord("\n"), TOOL_CALL_OPEN, TOOL_CALL_CLOSE]
    rng = random.Random(0)
    calls = 0
    for _ in range(300):
        turn = _random_turn(rng, alphabet)
        if turn is None:
            continue
        parsed = parse_assistant(turn)
        for item in parsed.calls:
            assert item.call is not None, (turn, item.error)
            calls += 1
            schema = schemas[item.call.name]
            assert set(item.call.arguments) <= set(schema["properties"])
            assert set(schema["required"]) <= set(item.call.arguments)
            for key, value in item.call.arguments.items():
                spec = schema["properties"][key]
                if "enum" in spec:
                    assert value in spec["enum"]
                elif spec.get("type") == "integer":
                    assert isinstance(value, int) and not isinstance(value, bool)
                elif spec.get("type") == "string":
                    assert isinstance(value, str)
                elif spec.get("type") == "boolean":
                    assert isinstance(value, bool)
    assert calls > 50


def test_loop_units_leave_the_state_as_it_is():
    inside = walk('<tool_call>{"name": "get_order", "arguments": {"order_id": "OR')
    answer = walk("Done")
    for state in (inside, answer):
        loop = GRAMMAR.loop_units(state)
        assert loop and all(GRAMMAR.advance(state, u) == state for u in loop)
        outside = [u for u in range(256) if u not in loop]
        assert outside and all(GRAMMAR.advance(state, u) != state for u in outside)
    assert GRAMMAR.loop_units(GRAMMAR.start) is None
    assert GRAMMAR.loop_units(walk("<tool_call>")) is None
