"""A config dataclass's defaults, and the fields that differ from them: what fingerprints a
run by its settings, so that an option added later at a default that keeps the old behaviour
leaves every fingerprint as it was."""

from __future__ import annotations

import dataclasses
from typing import Any


def field_default(field: dataclasses.Field) -> Any:
    """A dataclass field's default value (its factory called), ``MISSING`` if it has none."""
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.default_factory is not dataclasses.MISSING:
        return field.default_factory()
    return dataclasses.MISSING


def non_default_fields(config: Any) -> dict[str, Any]:
    """The fields of a config dataclass that differ from their defaults, nested configs
    likewise (an optional one given where the default is None: all its fields). An option
    added later, at a default that keeps the old behaviour, then leaves every fingerprint
    made of this as it was (``PolicyConfig.space_tokens`` and ``AgentConfig.constrained``
    came after the packaged policy)."""
    changed: dict[str, Any] = {}
    for spec in dataclasses.fields(config):
        value, default = getattr(config, spec.name), field_default(spec)
        if dataclasses.is_dataclass(value) and dataclasses.is_dataclass(default):
            nested = non_default_fields(value)
            if nested:
                changed[spec.name] = nested
        elif dataclasses.is_dataclass(value):
            changed[spec.name] = dataclasses.asdict(value)
        elif value != default:
            changed[spec.name] = value
    return changed
