"""How a tool's return value becomes the JSON text the policy sees (stdlib only).

The tool process (:mod:`~envsched_gnn.envs.worker`, which imports this file by its bare name
inside the sandbox) encodes every result with :func:`encode_result`, by the rule of
docs/design.md §8 ("Tool results"): any return value is accepted, ``None`` is
``{"success": true}``, a JSON value goes as it is, anything else is converted value by value
(``mpf('2.5')`` -> ``2.5``, ``Decimal('0.1')`` -> ``"0.1"``, sets sorted, ``" at 0x..."``
addresses removed). A result holding itself cannot be encoded (:class:`ResultNotEncodable`);
``RuntimeConfig.max_result_bytes`` applies to the encoded text.
"""

from __future__ import annotations

import json
import math
import re

SUCCESS = '{"success": true}'
"""What a tool returning ``None`` answers (the EnvScaler convention's success marker)."""
_ADDRESS = re.compile(r" at 0x[0-9A-Fa-f]+")
_JSON_KEYS = (str, int, float, bool, type(None))


class ResultNotEncodable(ValueError):
    """A result that no rule encodes (it holds itself)."""


def encode_result(value: object) -> str:
    """The JSON text of a tool's return value, by the rule of the module docstring."""
    if value is None:
        return SUCCESS
    try:
        return json.dumps(value, allow_nan=False)
    except (TypeError, ValueError):
        pass  # not a JSON value (or a cycle): encode value by value
    return json.dumps(_jsonable(value, set()), allow_nan=False)


def _jsonable(value: object, path: set[int]) -> object:
    """``value`` as a JSON value; ``path`` holds the ids of the containers around it."""
    if value is None or isinstance(value, bool):
        return value
    if isinstance(value, str):
        return str.__str__(value)
    if isinstance(value, int):
        return int(value)
    if isinstance(value, float):
        return float(value) if math.isfinite(value) else str(value)
    if isinstance(value, (dict, list, tuple, set, frozenset)):
        if id(value) in path:
            raise ResultNotEncodable("the result holds itself (a circular reference)")
        path.add(id(value))
        try:
            return _container(value, path)
        finally:
            path.discard(id(value))
    return _scalar(value)


def _container(value: dict | list | tuple | set | frozenset, path: set[int]) -> object:
    if isinstance(value, dict):
        return {_key(key): _jsonable(item, path) for key, item in value.items()}
    items = [_jsonable(item, path) for item in value]
    if isinstance(value, (set, frozenset)):
        try:
            items.sort()
        except TypeError:
            items.sort(key=lambda item: json.dumps(item, sort_keys=True))
    return items


def _key(key: object) -> object:
    """A dict key JSON can hold: strings, numbers, booleans, null as :mod:`json` writes them."""
    if isinstance(key, float) and not math.isfinite(key):
        return str(key)
    if isinstance(key, _JSON_KEYS):
        return _jsonable(key, set())
    return _text(key)


def _scalar(value: object) -> object:
    """A number through ``int``/``float`` where that loses nothing; anything else as text."""
    kind = type(value)
    try:
        if hasattr(kind, "__index__"):
            return int(value.__index__())
        if hasattr(kind, "__float__"):
            number = float(value)
            if math.isfinite(number) and bool(number == value):
                return number
    except Exception:  # noqa: BLE001 - a number type whose conversion fails: its text
        pass
    return _text(value)


def _text(value: object) -> str:
    try:
        text = str(value)
    except Exception:  # noqa: BLE001 - a __str__ that raises: the type's name
        text = f"<{type(value).__qualname__} object>"
    return _ADDRESS.sub("", text)
