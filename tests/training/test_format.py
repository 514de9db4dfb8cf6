"""The agent format: tool-call parser, chat-template pieces, the policy-token mask."""

from __future__ import annotations

import dataclasses
import json

import pytest

from envsched_gnn.envs.pool import ToolCall
from envsched_gnn.training.agent_format import (
    AgentConfig,
    ChatFormat,
    format_tool_call,
    format_tool_responses,
    parse_assistant,
    reference_turns,
    render_trajectory,
    system_message,
    user_message,
)
from envsched_gnn.training.policy import load_policy
from tests.envs.handmade_pool import handmade_pool
from tests.training.tiny_policy import untrained_policy_dir


def test_parse_one_call_round_trips():
    call = ToolCall("checkout_book", {"member_id": "M1", "book_id": "B1"})
    turn = parse_assistant(format_tool_call(call))
    assert not turn.is_final
    assert [c.call for c in turn.calls] == [call]
    assert turn.calls[0].error is None


def test_parse_several_calls_in_order_with_surrounding_text():
    text = (
        'First I look.\n<tool_call>\n{"name": "find_member", "arguments": {"name": "Ada"}}\n'
        '</tool_call> then <tool_call>{"name": "return_book", "arguments": "{\\"book_id\\": '
        '\\"B2\\"}"}</tool_call>'
    )
    calls = [c.call for c in parse_assistant(text).calls]
    assert calls == [
        ToolCall("find_member", {"name": "Ada"}),
        ToolCall("return_book", {"book_id": "B2"}),
    ]


def test_arguments_may_be_absent():
    assert parse_assistant('<tool_call>{"name": "ping"}</tool_call>').calls[0].call == ToolCall(
        "ping", {}
    )


def test_text_without_tool_call_is_a_final_answer():
    turn = parse_assistant("Done.")
    assert turn.is_final and turn.text == "Done."


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ('<tool_call>{"name": "x", "arguments": {"a": 1}</tool_call>', "invalid JSON"),
        ('<tool_call>["x", {}]</tool_call>', "expected a JSON object"),
        ('<tool_call>{"arguments": {}}</tool_call>', '"name" must be'),
        ('<tool_call>{"name": "", "arguments": {}}</tool_call>', '"name" must be'),
        ('<tool_call>{"name": "x", "arguments": [1]}</tool_call>', '"arguments" must be'),
        ('<tool_call>{"name": "x", "arguments": "not json"}</tool_call>', '"arguments" is not'),
        ('<tool_call>{"name": "x", "arguments": {}}', "missing </tool_call>"),
        ("<tool_call>", "missing </tool_call>"),
    ],
)
def test_malformed_calls_give_errors_not_exceptions(text, reason):
    turn = parse_assistant(text)
    assert not turn.is_final
    assert len(turn.calls) == 1
    assert turn.calls[0].call is None
    assert reason in turn.calls[0].error
    assert turn.calls[0].error.startswith("malformed tool call")


def test_a_malformed_call_keeps_the_good_ones():
    text = '<tool_call>{"name": "a"}</tool_call><tool_call>{oops}</tool_call>'
    calls = parse_assistant(text).calls
    assert calls[0].call == ToolCall("a", {}) and calls[1].call is None


def test_tool_responses_are_cut_to_the_limit():
    text = format_tool_responses([{"success": True, "data": "x" * 100}, {"ok": 1}], max_chars=30)
    blocks = text.split("\n<tool_response>")
    assert len(blocks) == 2
    assert "...(truncated)" in blocks[0] and "x" * 40 not in blocks[0]
    assert '{"ok": 1}' in blocks[1]


def test_system_message_holds_introduction_and_every_tool():
    env = handmade_pool().envs["library"]
    signatures = system_message(env)
    schemas = system_message(env, "json")
    for text in (signatures, schemas):
        assert text.startswith(env.environment_introduction)
    assert "- checkout_book(member_id, book_id): Lend a book to a member." in signatures
    for tool in env.tools:
        assert json.dumps(tool["function"]) in schemas
    with pytest.raises(ValueError, match="unknown tool format"):
        system_message(env, "yaml")


def test_compact_system_message_drops_rules_and_descriptions():
    intro = "A lending library. Rules: A member may borrow 3 books."
    env = dataclasses.replace(handmade_pool().envs["library"], environment_introduction=intro)
    compact = system_message(env, "compact")
    assert compact.startswith("A lending library.\n\n# Tools\n")
    assert "Rules" not in compact and "borrow 3" not in compact
    assert "- checkout_book(member_id, book_id)\n" in compact
    assert "Lend a book" not in compact
    for tool in env.tools:
        assert f"- {tool['function']['name']}(" in compact
    assert len(compact) < len(system_message(env, "signature"))


@pytest.mark.parametrize(
    ("field", "value"), [("max_turns", 0), ("temperature", 0.0), ("top_p", 1.5)]
)
def test_agent_config_rejects_bad_values(field, value):
    with pytest.raises(ValueError, match=field):
        AgentConfig(**{field: value})


def _reference_chat():
    pool = handmade_pool()
    task = pool.task("library-checkout")
    results = [{"success": True, "data": {"member_id": "M1"}}, {"success": True, "data": []}]
    results.append({"success": True, "message": "loan L2 created"})
    return pool, task, reference_turns(task.reference_solution, results, AgentConfig())


def test_mask_covers_exactly_the_policy_tokens():
    _, tokenizer = load_policy(untrained_policy_dir())
    fmt = ChatFormat(tokenizer)
    pool, task, turns = _reference_chat()
    rendered = render_trajectory(fmt, pool.envs[task.env_id], task, turns, AgentConfig())
    assert len(rendered.input_ids) == len(rendered.policy_mask)
    spans, current = [], []
    for token, bit in zip(rendered.input_ids, rendered.policy_mask, strict=True):
        if bit:
            current.append(token)
        elif current:
            spans.append(current)
            current = []
    spans.append(current)
    assert spans == [fmt.assistant_ids(text) for text, _ in turns]
    assert all(span[-1] == fmt.eot_id for span in spans)


def test_incremental_ids_decode_to_the_template_rendering():
    _, tokenizer = load_policy(untrained_policy_dir())
    fmt = ChatFormat(tokenizer)
    pool, task, turns = _reference_chat()
    env = pool.envs[task.env_id]
    rendered = render_trajectory(fmt, env, task, turns, AgentConfig())
    messages = [
        {"role": "system", "content": system_message(env, AgentConfig().tool_format)},
        {"role": "user", "content": user_message(task)},
    ]
    for text, results in turns:
        messages.append({"role": "assistant", "content": text})
        if results is not None:
            content = format_tool_responses(results, AgentConfig().tool_response_max_chars)
            messages.append({"role": "user", "content": content})
    expected = tokenizer.apply_chat_template(messages, tokenize=False)
    assert expected.startswith(fmt.decode(rendered.input_ids))
    assert expected[len(fmt.decode(rendered.input_ids)) :].strip() == ""


def test_chat_format_follows_another_template():
    _, tokenizer = load_policy(untrained_policy_dir())
    tokenizer.chat_template = (
        "{% for m in messages %}<|im_start|>[{{ m['role'] }}] {{ m['content'] }}<|im_end|>"
        "{% endfor %}{% if add_generation_prompt %}<|im_start|>[assistant] {% endif %}"
    )
    fmt = ChatFormat(tokenizer)
    assert (
        fmt.decode(fmt.continuation_ids("R"))
        == "<|im_start|>[user] R<|im_end|><|im_start|>[assistant] "
    )
    assert fmt.decode([fmt.eot_id]) == "<|im_end|>"


def test_chat_format_needs_a_template():
    _, tokenizer = load_policy(untrained_policy_dir())
    tokenizer.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        ChatFormat(tokenizer)
