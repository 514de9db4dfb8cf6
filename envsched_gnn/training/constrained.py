"""Grammar-constrained decoding: the tokens a :class:`~.call_grammar.CallGrammar` allows next,
as boolean masks over the policy's vocabulary (what vLLM and SGLang call guided decoding).

    A(s) = { v : every unit of token v is accepted in turn from s }  (+ end-of-turn if allowed)
    pi_A(v | s) = softmax(z / T)[v] / sum_{w in A(s)} softmax(z / T)[w]   for v in A(s), else 0

A(s) comes from a walk over a trie of the vocabulary's units, cached per state (inside a
string, from the loop units). Rollouts and the update share the masks (:class:`MaskTable`).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import Any

import torch

from envsched_gnn.training.agent_format import TOOL_CALL_CLOSE, TOOL_CALL_OPEN
from envsched_gnn.training.call_grammar import CallGrammar, State, Unit


@cache
def _byte_decoder() -> dict[str, int]:
    """The inverse of GPT-2's ``bytes_to_unicode`` (byte-level BPE's alphabet)."""
    printable = (
        list(range(ord("!"), ord("~") + 1))
        + list(range(ord("¡"), ord("¬") + 1))
        + list(range(ord("®"), ord("ÿ") + 1))
    )
    codes = printable[:]
    extra = 0
    for byte in range(256):
        if byte not in printable:
            printable.append(byte)
            codes.append(256 + extra)
            extra += 1
    return {chr(code): byte for byte, code in zip(printable, codes, strict=True)}


def token_units(tokenizer: Any) -> list[tuple[Unit, ...] | None]:
    """Each token id's units (module docstring); None for tokens that are never text."""
    special = {
        int(i): str(t.content if hasattr(t, "content") else t)
        for i, t in getattr(tokenizer, "added_tokens_decoder", {}).items()
    }
    decoder = _byte_decoder()
    pieces = tokenizer.convert_ids_to_tokens(list(range(len(tokenizer))))
    byte_level = all(
        piece is None or i in special or all(ch in decoder for ch in piece)
        for i, piece in enumerate(pieces)
    )
    units: list[tuple[Unit, ...] | None] = []
    for i, piece in enumerate(pieces):
        if i in special:
            units.append((special[i],))
        elif piece is None:
            units.append(None)
        elif byte_level:
            units.append(tuple(decoder[ch] for ch in piece) or None)
        else:
            units.append(tuple(tokenizer.decode([i]).encode()) or None)
    return units


class _Node:
    __slots__ = ("children", "tokens")

    def __init__(self) -> None:
        self.children: dict[Unit, _Node] = {}
        self.tokens: list[int] = []


def marker_units(units: Sequence[tuple[Unit, ...] | None], text: str) -> tuple[Unit, ...]:
    """How the format marker ``text`` is spelled: one special unit when some token is exactly
    it, else its bytes."""
    return (text,) if (text,) in units else tuple(text.encode())


class MaskTable:
    """The distinct allowed-token masks met so far, ``(S, V)`` bool, addressed by id."""

    def __init__(self, width: int) -> None:
        self.width = width
        self._masks: list[torch.Tensor] = []

    def add(self, mask: torch.Tensor) -> int:
        self._masks.append(mask)
        return len(self._masks) - 1

    def __len__(self) -> int:
        return len(self._masks)

    def stack(self, ids: torch.Tensor) -> torch.Tensor:
        """``ids (N,)`` -> ``(N, V)`` bool masks."""
        return (
            torch.stack([self._masks[i] for i in ids.tolist()])
            if len(ids)
            else (torch.zeros((0, self.width), dtype=torch.bool))
        )


class ConstrainedDecoding:
    """Allowed-token masks of environments' call grammars over one tokenizer's vocabulary.

    Args:
        tokenizer: the policy's tokenizer.
        width: the width of the policy's logits (>= the tokenizer's vocabulary).
        stop_ids: end-of-turn token ids (allowed exactly where the turn may end).
    """

    def __init__(self, tokenizer: Any, width: int, stop_ids: Sequence[int]) -> None:
        self.units = token_units(tokenizer)
        if width < len(self.units):
            raise ValueError(f"logits width {width} < vocabulary size {len(self.units)}")
        self.width = width
        self.stop_ids = sorted(int(i) for i in stop_ids)
        self.open_marker = marker_units(self.units, TOOL_CALL_OPEN)
        self.close_marker = marker_units(self.units, TOOL_CALL_CLOSE)
        self._root = _Node()
        for token, units in enumerate(self.units):
            if units is None or token in self.stop_ids:
                continue
            node = self._root
            for unit in units:
                node = node.children.setdefault(unit, _Node())
            node.tokens.append(token)
        self.table = MaskTable(width)
        self._ids: dict[tuple[int, State], int] = {}
        self._grammars: dict[str, CallGrammar] = {}
        self._loops: dict[frozenset, tuple[torch.Tensor, list[tuple[int, int]]]] = {}

    def grammar(self, key: str, tools: Sequence[dict[str, Any]]) -> CallGrammar:
        """The call grammar of ``tools``, built once per ``key`` (an environment id)."""
        if key not in self._grammars:
            self._grammars[key] = CallGrammar(tools, self.open_marker, self.close_marker)
        return self._grammars[key]

    def mask_id(self, grammar: CallGrammar, state: State) -> int:
        """The :attr:`table` id of ``A(state)`` (computed on first use)."""
        key = (id(grammar), state)
        found = self._ids.get(key)
        if found is None:
            found = self._ids[key] = self.table.add(self._allowed(grammar, state))
        return found

    def _allowed(self, grammar: CallGrammar, state: State) -> torch.Tensor:
        loop = grammar.loop_units(state)
        if loop is not None:
            return self._allowed_in_loop(grammar, state, loop)
        mask = torch.zeros(self.width, dtype=torch.bool)
        allowed: list[int] = list(self.stop_ids) if grammar.can_end(state) else []
        todo = [(state, self._root)]
        while todo:
            current, node = todo.pop()
            for unit, child in node.children.items():
                nxt = grammar.advance(current, unit)
                if nxt is None:
                    continue
                allowed += child.tokens
                if child.children:
                    todo.append((nxt, child))
        if not allowed:
            raise ValueError(f"the call grammar allows no token in state {state!r}")
        mask[allowed] = True
        return mask

    def _allowed_in_loop(self, grammar: CallGrammar, state: State, loop: frozenset) -> torch.Tensor:
        """``A(state)`` where the units of ``loop`` keep ``state``: every token made of them,
        and each other token whose units from its first one outside ``loop`` are accepted."""
        if loop not in self._loops:
            pure = torch.zeros(self.width, dtype=torch.bool)
            leaving = []
            for token, units in enumerate(self.units):
                if units is None or token in self.stop_ids:
                    continue
                first = next((i for i, u in enumerate(units) if u not in loop), None)
                if first is None:
                    pure[token] = True
                else:
                    leaving.append((token, first))
            self._loops[loop] = (pure, leaving)
        pure, leaving = self._loops[loop]
        mask = pure.clone()
        mask[self.stop_ids] = grammar.can_end(state)
        for token, first in leaving:
            walked: State | None = state
            for unit in self.units[token][first:]:
                walked = grammar.advance(walked, unit)
                if walked is None:
                    break
            mask[token] = walked is not None
        return mask

    def advance(self, grammar: CallGrammar, state: State, token: int) -> State:
        """The state after ``token`` (which ``A(state)`` must allow)."""
        units = self.units[token] if token < len(self.units) else None
        if units is None:
            raise ValueError(f"token {token} is not text; the grammar cannot take it")
        for unit in units:
            nxt = grammar.advance(state, unit)
            if nxt is None:
                raise ValueError(f"token {token} ({units!r}) is not allowed in state {state!r}")
            state = nxt
        return state
