"""``tool_effects.json``: what each tool's calls did to the state in a replay of the pool.

Written by ``pool check --write-effects`` next to ``envs.json``, per environment and tool the
counts of :class:`~envsched_gnn.envs.state_diff.ObservedEffect`::

    {"env_id": {"tool_name": {"calls": 12, "unchanged": 0, "kinds": {"status": 12}}}}

``load_pool`` reads it when present, for :mod:`envsched_gnn.envs.tool_categories`. A project
extension of the EnvScaler layout (docs/design.md §8); without it nothing changes.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

from envsched_gnn.envs.state_diff import ObservedEffect
from envsched_gnn.json_files import write_json_atomically

TOOL_EFFECTS_FILE = "tool_effects.json"

EffectCounts = dict[str, dict[str, ObservedEffect]]
"""env id -> tool name -> its observed effect."""


def typical_effects(effects: Mapping[str, Mapping[str, ObservedEffect]]) -> dict:
    """env id -> tool name -> the kinds of change its calls typically show."""
    return {
        env_id: {tool: effect.typical() for tool, effect in tools.items()}
        for env_id, tools in effects.items()
    }


def read_tool_effects(directory: str | Path) -> EffectCounts:
    """The pool's ``tool_effects.json`` (empty when the pool has none)."""
    path = Path(directory) / TOOL_EFFECTS_FILE
    if not path.is_file():
        return {}
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as error:
        raise ValueError(f"{path}: not valid JSON ({error.msg} at line {error.lineno})") from error
    return parse_tool_effects(raw, str(path))


def parse_tool_effects(raw: object, where: str) -> EffectCounts:
    """The JSON form (module docstring) as :class:`ObservedEffect` objects."""
    if not isinstance(raw, dict) or not all(isinstance(v, dict) for v in raw.values()):
        raise ValueError(f"{where}: expected an object of environments, each an object of tools")
    return {
        str(env_id): {
            str(tool): ObservedEffect.from_json(value, f"{where}: {env_id}.{tool}")
            for tool, value in tools.items()
        }
        for env_id, tools in raw.items()
    }


def write_tool_effects(directory: str | Path, effects: Mapping[str, Mapping[str, ObservedEffect]]):
    """Write ``tool_effects.json`` into the pool folder (atomically); returns its path."""
    path = Path(directory) / TOOL_EFFECTS_FILE
    payload = {
        env_id: {tool: effects[env_id][tool].to_json() for tool in sorted(effects[env_id])}
        for env_id in sorted(effects)
    }
    return write_json_atomically(path, payload)
