"""The tool-call grammar of one environment, an automaton over *units* (a byte, or a special
token of the format)::

    turn    := call+ | answer
    call    := OPEN '{"name": "' NAME '", "arguments": {' [arg (', ' arg)*] '}}' CLOSE
    arg     := '"' KEY '": ' VALUE[KEY]
    answer  := text without OPEN (as a special token or spelled out), at least one byte

NAME a tool, KEY its parameters (each once, required ones before ``'}}'``), VALUE of the
parameter's JSON schema type; separators are ``json.dumps``'s.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

Unit = int | str
"""A byte (0-255) of text, or a special token's text (a format marker such as OPEN)."""
State = tuple
"""An automaton state (hashable)."""

_DIGITS = frozenset(b"0123456789")
_STRING_BYTES = frozenset(b for b in range(0x20, 256) if b not in b'"\\')
"""Bytes that continue a JSON string as they are (no quote, no escape, no control byte)."""
_CALL_HEAD = b'{"name": "'
_ARGS_HEAD = b'", "arguments": {'
_NEEDS_DELIMITER = object()
"""Returned by a value automaton: the value ended just before this unit (a number or bare
literal ends only at the next delimiter), so the unit belongs to what follows."""


def _value_spec(schema: Any) -> tuple:
    """The value automaton's spec for a parameter's JSON schema (module docstring)."""
    if not isinstance(schema, dict):
        return ("json",)
    if isinstance(schema.get("enum"), list) and schema["enum"]:
        values = tuple(json.dumps(v, ensure_ascii=False).encode() for v in schema["enum"])
        if all(isinstance(v, str) for v in schema["enum"]):
            return ("enum", tuple(v[1:-1] for v in values))
        return ("bare", values)
    kind = schema.get("type")
    if kind == "string":
        return ("string",)
    if kind in ("integer", "number"):
        return ("number", kind == "integer")
    if kind == "boolean":
        return ("bare", (b"true", b"false"))
    return ("json",)


def _choice(options: Sequence[bytes], prefix: bytes, byte: int) -> bytes | None:
    """``prefix + byte`` when some option still starts with it."""
    longer = prefix + bytes([byte])
    return longer if any(o.startswith(longer) for o in options) else None


class CallGrammar:
    """The grammar of the module docstring for one environment's tools.

    Args:
        tools: OpenAI function schemas (wrapped in ``{"type": "function", ...}`` or bare).
        open_marker, close_marker: ``<tool_call>`` and ``</tool_call>`` in units: one
            special-token unit each, or their bytes.
    """

    def __init__(
        self,
        tools: Sequence[dict[str, Any]],
        open_marker: tuple[Unit, ...],
        close_marker: tuple[Unit, ...],
    ) -> None:
        self.open_marker, self.close_marker = open_marker, close_marker
        self._open_text = b"".join(
            bytes([u]) if isinstance(u, int) else u.encode() for u in open_marker
        )
        self.keys: dict[bytes, tuple[bytes, ...]] = {}
        self.required: dict[bytes, frozenset[bytes]] = {}
        self.values: dict[tuple[bytes, bytes], tuple] = {}
        for tool in tools:
            schema = tool.get("function", tool) if isinstance(tool, dict) else {}
            name = str(schema.get("name", "")).encode()
            if not name or b'"' in name or b"\\" in name:
                continue
            parameters = schema.get("parameters") or {}
            properties = parameters.get("properties") or {}
            keys = tuple(k.encode() for k in properties if '"' not in k and "\\" not in k)
            self.keys[name] = keys
            self.required[name] = frozenset(
                k.encode() for k in parameters.get("required") or () if k.encode() in keys
            )
            for key in keys:
                self.values[name, key] = _value_spec(properties[key.decode()])
        if not self.keys:
            raise ValueError("CallGrammar: the environment has no tool with a usable name")
        self._answer_loop = frozenset(range(256)) - {self._open_text[0]}
        self.names = tuple(self.keys)
        self.start: State = ("start",)

    # -- the turn ---------------------------------------------------------------------------

    def can_end(self, state: State) -> bool:
        """May the turn end (end-of-turn token) in ``state``?"""
        return state[0] in ("after_call", "answer")

    def loop_units(self, state: State) -> frozenset[int] | None:
        """The units that leave ``state`` as it is (inside a string, inside an answer that
        matches nothing of the call marker), or None: lets a mask be computed from the few
        tokens that leave the state instead of walking the whole vocabulary."""
        if state[0] == "answer" and state[1] == 0:
            return self._answer_loop
        if state[0] == "value":
            value = state[3]
            if value == ("string",) or (value[0] == "json" and value[2] == "str"):
                return _STRING_BYTES
        return None

    def advance(self, state: State, unit: Unit) -> State | None:
        """The state after ``unit``, or None when ``unit`` is not allowed in ``state``."""
        kind = state[0]
        if kind in ("start", "after_call"):
            if unit == self.open_marker[0]:
                return self._literal(self.open_marker[1:], ("lit", _CALL_HEAD, ("name", b"")))
            if kind == "start" and isinstance(unit, int):
                return self._answer(0, unit)
            return None
        if kind == "answer":
            return self._answer(state[1], unit) if isinstance(unit, int) else None
        if kind == "lit":
            _, rest, after = state
            if not rest or rest[0] != unit:
                return None
            return self._literal(rest[1:], after)
        if not isinstance(unit, int):
            return None
        if kind == "name":
            if unit == ord('"'):
                return (
                    ("lit", _ARGS_HEAD[1:], ("args", state[1], ()))
                    if state[1] in self.keys
                    else None
                )
            longer = _choice(self.names, state[1], unit)
            return ("name", longer) if longer is not None else None
        if kind == "args":
            return self._args(state[1], state[2], unit)
        if kind == "key":
            _, tool, used, prefix = state
            free = [k for k in self.keys[tool] if k not in used]
            if unit == ord('"'):
                if prefix not in free:
                    return None
                spec = self.values[tool, prefix]
                return ("lit", b": ", ("value", tool, (*used, prefix), _value_start(spec)))
            longer = _choice(free, prefix, unit)
            return ("key", tool, used, longer) if longer is not None else None
        if kind == "value":
            _, tool, used, value = state
            nxt = _value_step(value, unit)
            if nxt is _NEEDS_DELIMITER:
                return self._args(tool, used, unit)
            if nxt is None:
                return None
            if nxt[0] == "done":
                return ("args", tool, used)
            return ("value", tool, used, nxt)
        raise ValueError(f"CallGrammar: unknown state {state!r}")

    def _literal(self, rest: tuple | bytes, after: State) -> State:
        """Expect the units of ``rest`` (a marker tuple or bytes), then continue at ``after``."""
        if len(rest) == 0:
            return after
        return ("lit", tuple(rest) if isinstance(rest, tuple) else rest, after)

    def _answer(self, matched: int, byte: int) -> State | None:
        """Answer text; ``matched`` bytes of the spelled-out OPEN marker end it so far (the
        answer may not spell the marker: the parser would read a tool call)."""
        text = self._open_text
        candidate = text[:matched] + bytes([byte])
        while candidate and not text.startswith(candidate):
            candidate = candidate[1:]
        if len(candidate) == len(text):
            return None
        return ("answer", len(candidate))

    def _args(self, tool: bytes, used: tuple[bytes, ...], unit: Unit) -> State | None:
        """Between arguments: the next key (after ', ' unless it is the first), or '}}'
        once every required key is given."""
        if unit == ord("}"):
            if not self.required[tool] <= set(used):
                return None
            return ("lit", b"}", self._literal(self.close_marker, ("after_call",)))
        if len(used) == len(self.keys[tool]):
            return None
        if not used:
            return ("key", tool, used, b"") if unit == ord('"') else None
        return ("lit", b' "', ("key", tool, used, b"")) if unit == ord(",") else None


# -- values -----------------------------------------------------------------------------------


def _value_start(spec: tuple) -> State:
    kind = spec[0]
    if kind == "enum":
        return ("lit", b'"', ("enum", spec[1], b""))
    if kind == "string":
        return ("lit", b'"', ("string",))
    if kind == "number":
        return ("num", spec[1], "start")
    if kind == "bare":
        return ("bare", spec[1], b"")
    return ("json", (), "value")


def _value_step(state: State, unit: int) -> State | object | None:
    """One byte of a value automaton: the next state, ``("done",)`` when the value is complete
    with this byte, ``_NEEDS_DELIMITER`` when it ended before it, or None."""
    kind = state[0]
    if kind == "lit":
        _, rest, after = state
        if not rest or rest[0] != unit:
            return None
        return ("lit", rest[1:], after) if len(rest) > 1 else after
    if kind == "enum":
        _, options, prefix = state
        if unit == ord('"'):
            return ("done",) if prefix in options else None
        longer = _choice(options, prefix, unit)
        return ("enum", options, longer) if longer is not None else None
    if kind == "string":
        if unit == ord('"'):
            return ("done",)
        return state if unit >= 0x20 and unit != ord("\\") else None
    if kind == "num":
        return _number_step(state, unit)
    if kind == "bare":
        _, options, prefix = state
        if unit in b",}]" and prefix in options:
            return _NEEDS_DELIMITER
        longer = _choice(options, prefix, unit)
        return ("bare", options, longer) if longer is not None else None
    if kind == "json":
        return _json_step(state, unit)
    raise ValueError(f"CallGrammar: unknown value state {state!r}")


_NUMBER_ENDS = frozenset(("int", "frac", "exp"))


def _number_step(state: State, unit: int) -> State | object | None:
    """A JSON number (an integer when ``state[1]``); it ends at the next delimiter."""
    _, integer, part = state
    digit = unit in _DIGITS
    if part in _NUMBER_ENDS and unit in b",}]":
        return _NEEDS_DELIMITER
    if part in ("start", "sign"):
        if unit == ord("-") and part == "start":
            return ("num", integer, "sign")
        if unit == ord("0"):
            return ("num", integer, "zero")
        return ("num", integer, "int") if digit else None
    if part == "zero":
        if unit in b",}]":
            return _NEEDS_DELIMITER
        return ("num", integer, "dot") if unit == ord(".") and not integer else None
    if part == "int":
        if digit:
            return state
        if integer:
            return None
        if unit == ord("."):
            return ("num", integer, "dot")
        return ("num", integer, "e") if unit in b"eE" else None
    if part == "dot":
        return ("num", integer, "frac") if digit else None
    if part == "frac":
        if digit:
            return state
        return ("num", integer, "e") if unit in b"eE" else None
    if part == "e":
        if unit in b"+-":
            return ("num", integer, "esign")
        return ("num", integer, "exp") if digit else None
    if part == "esign":
        return ("num", integer, "exp") if digit else None
    if part == "exp":
        return state if digit else None
    raise ValueError(f"CallGrammar: unknown number state {state!r}")


def _json_step(state: State, unit: int) -> State | object | None:
    """Any JSON value with ``json.dumps``'s separators; ``stack`` holds the open containers."""
    _, stack, mode = state[:3]
    if mode == "value":
        if unit == ord('"'):
            return ("json", stack, "str")
        if unit == ord("{"):
            return ("json", (*stack, "{"), "first_key")
        if unit == ord("["):
            return ("json", (*stack, "["), "first_item")
        for word in (b"true", b"false", b"null"):
            if unit == word[0]:
                return ("json", stack, "word", word[1:])
        inner = _number_step(("num", False, "start"), unit)
        return ("json", stack, "num", inner) if inner is not None else None
    if mode in ("str", "key"):
        if unit == ord('"'):
            return ("json", stack, "colon") if mode == "key" else _json_after(stack)
        if unit == ord("\\"):
            return ("json", stack, mode + "_esc")
        return state if unit >= 0x20 else None
    if mode in ("str_esc", "key_esc"):
        return ("json", stack, mode[:-4]) if unit in b'"\\/bfnrt' else None
    if mode == "word":
        rest = state[3]
        if rest[0] != unit:
            return None
        return ("json", stack, "word", rest[1:]) if len(rest) > 1 else _json_after(stack)
    if mode == "num":
        inner = _number_step(state[3], unit)
        if inner is _NEEDS_DELIMITER:
            after = _json_after(stack)
            return _NEEDS_DELIMITER if after == ("done",) else _json_step(after, unit)
        return ("json", stack, "num", inner) if inner is not None else None
    if mode == "first_key":
        if unit == ord("}"):
            return _json_after(stack[:-1])
        return ("json", stack, "key") if unit == ord('"') else None
    if mode == "first_item":
        if unit == ord("]"):
            return _json_after(stack[:-1])
        return _json_step(("json", stack, "value"), unit)
    if mode == "colon":
        return ("json", stack, "colon_space") if unit == ord(":") else None
    if mode == "colon_space":
        return ("json", stack, "value") if unit == ord(" ") else None
    if mode == "after":
        closer = ord("}") if stack[-1] == "{" else ord("]")
        if unit == closer:
            return _json_after(stack[:-1])
        return ("json", stack, "comma_space") if unit == ord(",") else None
    if mode == "comma_space":
        if unit != ord(" "):
            return None
        return ("json", stack, "next_key") if stack[-1] == "{" else ("json", stack, "value")
    if mode == "next_key":
        return ("json", stack, "key") if unit == ord('"') else None
    raise ValueError(f"CallGrammar: unknown JSON state {state!r}")


def _json_after(stack: tuple) -> State:
    """After a complete value: done at the top level, else a separator or the container's end."""
    return ("done",) if not stack else ("json", stack, "after")
