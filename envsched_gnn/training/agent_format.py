"""The agent text format: chat messages of an episode, the tool-call parser, SFT rendering.

System: the environment's introduction and tool schemas; user: the instruction; assistant:
Qwen/Hermes ``<tool_call>{"name": ..., "arguments": {...}}</tool_call>`` calls or a final
message; tool results: a user turn of ``<tool_response>`` blocks. Token ids are built
incrementally (never re-rendered), so training sees exactly the ids acted on:

    prompt(system, user) | assistant_1 <eot> | continuation(responses_1) | assistant_2 <eot> | ...
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from envsched_gnn.envs.pool import Environment, Task, ToolCall
from envsched_gnn.validation import check_bounds, config_error

TOOL_CALL_OPEN = "<tool_call>"
TOOL_CALL_CLOSE = "</tool_call>"
TOOL_RESPONSE_OPEN = "<tool_response>"
TOOL_RESPONSE_CLOSE = "</tool_response>"
FORMAT_TOKENS = (TOOL_CALL_OPEN, TOOL_CALL_CLOSE, TOOL_RESPONSE_OPEN, TOOL_RESPONSE_CLOSE)

_TOOLS_PREAMBLE = (
    "# Tools\n\nYou may call one or more functions to assist with the user query. "
    "The function signatures are within <tools></tools> XML tags:\n<tools>\n"
)
_TOOLS_POSTAMBLE = (
    "\n</tools>\n\nFor each function call, return a json object with function name and "
    'arguments within <tool_call></tool_call> XML tags:\n<tool_call>{"name": <function-name>, '
    '"arguments": <args-json-object>}</tool_call>\nWhen the task is complete, answer without '
    "a tool call."
)
_SIGNATURES_PREAMBLE = "# Tools\n\n"
_SIGNATURES_POSTAMBLE = (
    '\n\nCall a tool as <tool_call>{"name": <tool>, "arguments": {...}}</tool_call>. '
    "When the task is complete, answer without a tool call."
)
_COMPACT_POSTAMBLE = (
    '\n\nCall: <tool_call>{"name": <tool>, "arguments": {...}}</tool_call>. Then answer.'
)
TOOL_FORMATS = ("signature", "compact", "json")
_TOOL_CALL_BLOCK = re.compile(r"<tool_call>(.*?)(</tool_call>|$)", re.S)
# Private-use characters: never in real text, so they split a rendered template unambiguously.
_PLACEHOLDER_A = "\ue000assistant\ue001"
_PLACEHOLDER_U = "\ue002user\ue003"


@dataclass
class AgentConfig:
    """Limits and sampling of one episode."""

    max_turns: int = 5
    """Assistant turns per episode; an episode still calling tools after this many stops."""
    max_new_tokens: int = 96
    """Tokens the policy may generate in one turn; a turn cut here ends the episode."""
    max_prompt_tokens: int = 2048
    """Longest token sequence an assistant turn may start from; longer episodes stop."""
    max_calls_per_turn: int = 4
    """Tool calls executed from one assistant turn; further calls get an error response."""
    temperature: float = 1.0
    """Sampling temperature (1.0: the policy's own distribution; 1.4 made 4x more bad calls)."""
    top_p: float = 1.0
    """Nucleus sampling mass; 1.0 samples from the full tempered distribution."""
    constrained: bool = False
    """Decode under each environment's tool-call grammar (:mod:`~.constrained`)."""
    tool_response_max_chars: int = 1200
    """Tool results are cut to this many characters of JSON before the policy sees them."""
    final_message: str = "Done."
    """The final answer of reference trajectories (what SFT teaches the policy to end with)."""
    tool_format: str = "compact"
    """Tools in the system message: "signature" lines ``name(arg, ...): description`` after the
    full introduction; "compact" lines ``name(arg, ...)`` after the introduction's first part
    (no rules text: a ~3x shorter prompt, what a tiny CPU policy trains on fastest); or "json"
    schemas in ``<tools>`` tags (the Qwen/Hermes format of real chat models)."""

    def __post_init__(self) -> None:
        if self.tool_format not in TOOL_FORMATS:
            raise config_error(self, "tool_format", self.tool_format, f"one of {TOOL_FORMATS}")
        names = ("max_turns", "max_new_tokens", "max_prompt_tokens", "max_calls_per_turn")
        check_bounds(
            self,
            positive=("temperature", "top_p"),
            at_least=dict.fromkeys(names, 1),
            unit=("top_p",),
        )


@dataclass(frozen=True)
class ParsedCall:
    """One ``<tool_call>`` block: a call, or the reason it is malformed."""

    call: ToolCall | None
    error: str | None = None


@dataclass(frozen=True)
class ParsedTurn:
    """An assistant turn: its tool-call blocks in order, or (none) a final answer."""

    calls: tuple[ParsedCall, ...]
    text: str

    @property
    def is_final(self) -> bool:
        return not self.calls


def tool_schema(tool: dict[str, Any]) -> dict[str, Any]:
    """The function schema of an OpenAI tool entry (``{"type": "function", "function": ...}``)."""
    return tool.get("function", tool) if isinstance(tool, dict) else tool


def tool_signature(tool: dict[str, Any], describe: bool = True) -> str:
    """``name(arg, ...): description`` of a function schema (``name(arg, ...)`` when not
    ``describe``)."""
    schema = tool_schema(tool)
    arguments = ", ".join((schema.get("parameters") or {}).get("properties") or {})
    description = str(schema.get("description", "")).strip() if describe else ""
    return f"{schema.get('name', '')}({arguments})" + (f": {description}" if description else "")


def system_message(env: Environment, tool_format: str = "signature") -> str:
    """Environment introduction, then the tools: one signature line each (``compact``: the
    introduction without its rules, signatures without descriptions), or (``json``) the
    schemas as JSON lines in ``<tools>`` tags."""
    intro = env.environment_introduction.strip()
    if tool_format == "compact":
        intro = intro.split(" Rules: ", 1)[0].strip()
    head = f"{intro}\n\n" if intro else ""
    if tool_format == "json":
        schemas = "\n".join(json.dumps(tool_schema(tool), ensure_ascii=False) for tool in env.tools)
        return f"{head}{_TOOLS_PREAMBLE}{schemas}{_TOOLS_POSTAMBLE}"
    if tool_format == "compact":
        lines = "\n".join(f"- {tool_signature(tool, describe=False)}" for tool in env.tools)
        return f"{head}{_SIGNATURES_PREAMBLE}{lines}{_COMPACT_POSTAMBLE}"
    if tool_format != "signature":
        raise ValueError(f"unknown tool format {tool_format!r}; expected one of {TOOL_FORMATS}")
    lines = "\n".join(f"- {tool_signature(tool)}" for tool in env.tools)
    return f"{head}{_SIGNATURES_PREAMBLE}{lines}{_SIGNATURES_POSTAMBLE}"


def user_message(task: Task) -> str:
    """The task's instruction."""
    return task.task.strip()


def format_tool_call(call: ToolCall) -> str:
    """``<tool_call>{"name": ..., "arguments": {...}}</tool_call>``."""
    body = json.dumps({"name": call.name, "arguments": call.arguments}, ensure_ascii=False)
    return f"{TOOL_CALL_OPEN}{body}{TOOL_CALL_CLOSE}"


def format_tool_responses(results: Sequence[Any], max_chars: int) -> str:
    """One ``<tool_response>`` block per result, JSON cut to ``max_chars`` characters."""
    blocks = []
    for result in results:
        text = json.dumps(result, ensure_ascii=False)
        if len(text) > max_chars:
            text = text[:max_chars] + "...(truncated)"
        blocks.append(f"{TOOL_RESPONSE_OPEN}\n{text}\n{TOOL_RESPONSE_CLOSE}")
    return "\n".join(blocks)


def parse_assistant(text: str) -> ParsedTurn:
    """Parse an assistant turn; never raises. Each ``<tool_call>`` block becomes a
    :class:`ParsedCall` (a :class:`ToolCall`, or why it is malformed); no block: a final answer.
    """
    calls = tuple(
        _parse_block(body, closed=bool(end)) for body, end in _TOOL_CALL_BLOCK.findall(text)
    )
    return ParsedTurn(calls=calls, text=text)


def _parse_block(body: str, closed: bool) -> ParsedCall:
    if not closed:
        return ParsedCall(None, f"malformed tool call: missing {TOOL_CALL_CLOSE}")
    try:
        obj = json.loads(body.strip())
    except json.JSONDecodeError as error:
        return ParsedCall(None, f"malformed tool call: invalid JSON ({error.msg})")
    if not isinstance(obj, dict):
        return ParsedCall(None, "malformed tool call: expected a JSON object")
    name = obj.get("name")
    if not isinstance(name, str) or not name:
        return ParsedCall(None, 'malformed tool call: "name" must be a non-empty string')
    arguments = obj.get("arguments", {})
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except json.JSONDecodeError:
            return ParsedCall(None, 'malformed tool call: "arguments" is not a JSON object')
    if not isinstance(arguments, dict):
        return ParsedCall(None, 'malformed tool call: "arguments" must be a JSON object')
    return ParsedCall(ToolCall(name=name, arguments=arguments))


def error_result(message: str) -> dict[str, Any]:
    """The tool response a malformed or refused call gets."""
    return {"success": False, "error": message}


class ChatFormat:
    """Token pieces of a tokenizer's chat template, measured once by rendering placeholders:
    ``prompt_ids(system, user)`` and ``continuation_ids(responses)`` (what follows
    :attr:`eot_id`). Works for any template that renders messages in order.
    """

    def __init__(self, tokenizer: Any) -> None:
        if not getattr(tokenizer, "chat_template", None):
            raise ValueError(
                f"tokenizer {getattr(tokenizer, 'name_or_path', '?')!r} has no chat template"
            )
        self.tokenizer = tokenizer
        base = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
        prompt = self._render(base, generation_prompt=True)
        with_answer = self._render(
            [*base, {"role": "assistant", "content": _PLACEHOLDER_A}], generation_prompt=False
        )
        with_user = self._render(
            [
                *base,
                {"role": "assistant", "content": _PLACEHOLDER_A},
                {"role": "user", "content": _PLACEHOLDER_U},
            ],
            generation_prompt=True,
        )
        if not with_answer.startswith(prompt) or not with_user.startswith(with_answer):
            raise ValueError("chat template does not render messages incrementally")
        answer_tail = with_answer[len(prompt) :].split(_PLACEHOLDER_A, 1)[1]
        tail_ids = self.encode(answer_tail)
        if not tail_ids:
            raise ValueError("chat template ends assistant turns with nothing: no end-of-turn")
        self.eot_id: int = tail_ids[0]
        eot_text = tokenizer.decode([self.eot_id], skip_special_tokens=False)
        self._after_eot = answer_tail[len(eot_text) :] if answer_tail.startswith(eot_text) else ""
        self._user_before, self._user_after = with_user[len(with_answer) :].split(_PLACEHOLDER_U)
        stops = {self.eot_id}
        if tokenizer.eos_token_id is not None:
            stops.add(int(tokenizer.eos_token_id))
        self.stop_ids: frozenset[int] = frozenset(stops)

    def _render(self, messages: list[dict[str, str]], generation_prompt: bool) -> str:
        return self.tokenizer.apply_chat_template(
            messages, tokenize=False, add_generation_prompt=generation_prompt
        )

    def encode(self, text: str) -> list[int]:
        return list(self.tokenizer.encode(text, add_special_tokens=False))

    def decode(self, ids: Sequence[int]) -> str:
        return self.tokenizer.decode(list(ids), skip_special_tokens=False)

    def prompt_ids(self, system: str, user: str) -> list[int]:
        messages = [{"role": "system", "content": system}, {"role": "user", "content": user}]
        return self.encode(self._render(messages, generation_prompt=True))

    def continuation_ids(self, responses: str) -> list[int]:
        return self.encode(self._after_eot + self._user_before + responses + self._user_after)

    def assistant_ids(self, text: str) -> list[int]:
        """A whole assistant turn as the policy emits it: the text, then end-of-turn."""
        return [*self.encode(text), self.eot_id]


@dataclass(frozen=True)
class RenderedEpisode:
    """Token ids of a chat and the mask of the policy's own tokens (1) vs the rest (0)."""

    input_ids: list[int]
    policy_mask: list[int]


def render_trajectory(
    fmt: ChatFormat,
    env: Environment,
    task: Task,
    turns: Sequence[tuple[str, Sequence[dict[str, Any]] | None]],
    config: AgentConfig,
) -> RenderedEpisode:
    """Render ``turns`` (assistant text, tool results) into ids as the rollout engine does."""
    ids = fmt.prompt_ids(system_message(env, config.tool_format), user_message(task))
    mask = [0] * len(ids)
    for index, (text, results) in enumerate(turns):
        answer = fmt.assistant_ids(text)
        ids += answer
        mask += [1] * len(answer)
        if index < len(turns) - 1:
            if results is None:
                raise ValueError(f"task {task.task_id}: turn {index} has no tool results")
            responses = format_tool_responses(results, config.tool_response_max_chars)
            more = fmt.continuation_ids(responses)
            ids += more
            mask += [0] * len(more)
    return RenderedEpisode(ids, mask)


def reference_turns(
    calls: Sequence[ToolCall], results: Sequence[dict[str, Any]], config: AgentConfig
) -> list[tuple[str, Sequence[dict[str, Any]] | None]]:
    """A reference solution as turns: one tool call per turn, then the final message."""
    if len(calls) != len(results):
        raise ValueError(f"{len(calls)} reference calls but {len(results)} results")
    turns: list[tuple[str, Sequence[dict[str, Any]] | None]] = [
        (format_tool_call(call), [result]) for call, result in zip(calls, results, strict=True)
    ]
    turns.append((config.final_message, None))
    return turns
