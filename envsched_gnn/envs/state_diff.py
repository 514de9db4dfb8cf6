"""What a tool call did to an environment's state: the *kinds* of change a diff shows.

A state is the instance's attributes (docs/design.md §8). A dict whose values are all dicts is
a *collection* of records keyed by id; its keys, anywhere in the state, are the *known ids*.
The kinds (:data:`KINDS`):

- ``removed`` / ``added``: a record left or joined a top-level collection (or a top-level
  list shrank or grew); ``nested_removed`` / ``nested_added``: the same inside a record;
- ``moved``: a record left a collection and reappeared unchanged under another key;
- ``status``: a changed value under a key named ``status`` / ``state`` (``*_status``,
  ``*Status``, ``*_state``, ``*State``, at any level of its path);
- ``link``: a changed value under a key ending in ``_id`` / ``_ids``, or a new value that is a
  known id; ``field``: any other changed value.

:class:`ObservedEffect` accumulates the kinds of many calls of one tool and says which kinds
it typically shows.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

KINDS = ("removed", "added", "nested_removed", "nested_added", "moved", "status", "link", "field")
_STATUS_KEY = re.compile(r"(^|_)(status|state|STATUS|STATE)$|[a-z](Status|State)$")
_LINK_KEY = re.compile(r"(^|_)ids?$|[a-z]Ids?$")


def _is_collection(value: Any) -> bool:
    return (
        isinstance(value, dict) and bool(value) and all(isinstance(v, dict) for v in value.values())
    )


def known_ids(*states: Mapping[str, Any]) -> set[str]:
    """Keys of every collection anywhere in ``states`` (record ids)."""
    ids: set[str] = set()
    stack: list[Any] = list(states)
    while stack:
        value = stack.pop()
        if isinstance(value, dict):
            if _is_collection(value):
                ids.update(str(k) for k in value)
            stack.extend(value.values())
        elif isinstance(value, list):
            stack.extend(value)
    return ids


def state_effects(before: Mapping[str, Any], after: Mapping[str, Any]) -> frozenset[str]:
    """The kinds of change (module docstring) between two states; empty when equal."""
    diff = _Diff(known_ids(before, after))
    missing = object()
    for key in sorted(set(before) | set(after), key=str):
        a, b = before.get(key, missing), after.get(key, missing)
        if a is missing or b is missing:
            diff.kinds.add("field")
        else:
            diff.compare(a, b, 0, _is_status(key), key)
    return frozenset(diff.kinds)


class _Diff:
    """The kinds of change found so far, and the known ids that tell a link."""

    def __init__(self, ids: set[str]) -> None:
        self.ids = ids
        self.kinds: set[str] = set()

    def compare(self, a: Any, b: Any, depth: int, status: bool, key: Any) -> None:
        """Adds the kinds of change from ``a`` to ``b``, ``depth`` levels below the state's
        attributes, under ``key`` (``status``: under a status key)."""
        if a == b:
            return
        prefix = "" if depth == 0 else "nested_"
        if isinstance(a, dict) and isinstance(b, dict):
            if _is_collection(a) or _is_collection(b):
                removed = [k for k in a if k not in b]
                added = [k for k in b if k not in a]
                moved = {k for k in removed if any(a[k] == b[n] for n in added)}
                if moved:
                    self.kinds.add("moved")
                    added = [n for n in added if not any(a[k] == b[n] for k in moved)]
                if len(moved) < len(removed):
                    self.kinds.add(prefix + "removed")
                if added:
                    self.kinds.add(prefix + "added")
            else:
                if set(a) - set(b):
                    self.kinds.add("field")
                for k in set(b) - set(a):
                    self.new_value(b[k], status or _is_status(k), k)
            for k in set(a) & set(b):
                self.compare(a[k], b[k], depth + 1, status or _is_status(k), k)
        elif isinstance(a, list) and isinstance(b, list):
            if len(a) == len(b):
                for x, y in zip(a, b, strict=True):
                    self.compare(x, y, depth + 1, status, key)
            else:
                self.kinds.add(prefix + ("added" if len(b) > len(a) else "removed"))
        else:
            self.new_value(b, status, key)

    def new_value(self, value: Any, status: bool, key: Any) -> None:
        """A value that replaced another or appeared under a new key of a record."""
        if status:
            self.kinds.add("status")
        elif _LINK_KEY.search(str(key)) or _mentions_id(value, self.ids):
            self.kinds.add("link")
        else:
            self.kinds.add("field")


def _is_status(key: Any) -> bool:
    return bool(_STATUS_KEY.search(str(key)))


def _mentions_id(value, ids: set[str]) -> bool:
    if isinstance(value, str):
        return value in ids
    if isinstance(value, list):
        return bool(value) and all(isinstance(v, str) and v in ids for v in value)
    return False


@dataclass
class ObservedEffect:
    """The kinds of change shown by the successful calls of one tool."""

    calls: int = 0
    """Successful calls seen."""
    unchanged: int = 0
    """Of those, calls that left the state as it was."""
    kinds: Counter[str] = field(default_factory=Counter)
    """Kind -> number of calls that showed it."""

    def add(self, kinds: frozenset[str]) -> None:
        self.calls += 1
        if not kinds:
            self.unchanged += 1
        self.kinds.update(kinds)

    def typical(self) -> frozenset[str]:
        """Kinds shown by at least half of the calls that changed the state; empty when most
        calls changed nothing."""
        changed = self.calls - self.unchanged
        if changed == 0 or 2 * self.unchanged > self.calls:
            return frozenset()
        return frozenset(kind for kind, count in self.kinds.items() if 2 * count >= changed)

    def to_json(self) -> dict:
        return {
            "calls": self.calls,
            "unchanged": self.unchanged,
            "kinds": dict(sorted(self.kinds.items())),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any], where: str) -> ObservedEffect:
        try:
            calls, unchanged = int(data["calls"]), int(data["unchanged"])
            kinds = Counter({str(k): int(v) for k, v in data["kinds"].items()})
        except (KeyError, TypeError, ValueError, AttributeError) as error:
            raise ValueError(
                f"{where}: expected {{'calls': int, 'unchanged': int, 'kinds': {{kind: int}}}}, "
                f"got {data!r:.120}"
            ) from error
        unknown = sorted(set(kinds) - set(KINDS))
        if unknown:
            raise ValueError(f"{where}: unknown effect kind(s) {unknown}; known: {list(KINDS)}")
        return cls(calls, unchanged, kinds)
