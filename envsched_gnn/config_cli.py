"""Command-line flags generated from documented config dataclasses (CleanRL's ``Args`` habit).

:func:`add_config_flags` turns each field into an ``argparse`` option (``lr`` -> ``--lr``) with
the field's attribute docstring as help and the field's type and default, so help and default
cannot drift from the dataclass; :func:`config_from_args` builds the dataclass back. Each action
records ``action.config_class`` / ``action.config_field`` (``"GRPOConfig.lr"``) for the CLI test.
Types: scalars take one value; ``X | None`` an ``X``; ``bool`` is ``--name`` (default False),
``--no-name`` (default True) or both (``bool | None``); ``tuple[X, ...]`` / ``list[X]`` one or
more values; ``Literal[...]`` gives ``choices``; a field without a default is required.
How configs check their values, and how a command refuses them, is :mod:`envsched_gnn.validation`.
"""

from __future__ import annotations

import argparse
import ast
import dataclasses
import inspect
import re
import textwrap
import types
import typing
from collections.abc import Callable, Iterable, Mapping, Sequence
from functools import cache
from pathlib import Path
from typing import Any, TypeVar

from envsched_gnn.config_defaults import field_default

T = TypeVar("T")
_SCALARS = (str, int, float, Path)
_ROLE = re.compile(r":[a-z]+:`~?([^`]+)`")
_LITERAL = re.compile(r"``([^`]+)``")


@cache
def field_docs(cls: type) -> dict[str, str]:
    """The attribute docstring of each field of dataclass ``cls`` (base classes first), as
    terminal text: whitespace collapsed to single spaces, reST roles (``:class:`X```) and
    literals (````x````) reduced to their text."""
    docs: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        if not dataclasses.is_dataclass(klass):
            continue
        body = ast.parse(textwrap.dedent(inspect.getsource(klass))).body[0].body
        for node, following in zip(body, body[1:], strict=False):
            if (
                isinstance(node, ast.AnnAssign)
                and isinstance(node.target, ast.Name)
                and isinstance(following, ast.Expr)
                and isinstance(following.value, ast.Constant)
                and isinstance(following.value.value, str)
            ):
                text = " ".join(following.value.value.split())
                docs[node.target.id] = _LITERAL.sub(r"\1", _ROLE.sub(r"\1", text))
    return docs


def flag_name(field_name: str, *, negated: bool = False) -> str:
    """``batch_size`` -> ``--batch-size``; ``k_grid`` negated -> ``--no-k-grid``."""
    return ("--no-" if negated else "--") + field_name.replace("_", "-")


def add_config_flags(
    parser: argparse.ArgumentParser | argparse._ArgumentGroup,
    cls: type,
    *,
    fields: Iterable[str] | None = None,
    exclude: Iterable[str] = (),
    defaults: Mapping[str, Any] | None = None,
    flags: Mapping[str, str] | None = None,
    choices: Mapping[str, Sequence[Any]] | None = None,
    positional: Iterable[str] = (),
    dest_prefix: str = "",
    types: Mapping[str, Callable[[str], Any]] | None = None,
    metavars: Mapping[str, str] | None = None,
    repeatable: Iterable[str] = (),
    parsers: Mapping[str, Callable[[str], Any]] | None = None,
) -> list[str]:
    """Add one option per field of dataclass ``cls``; returns the field names added.

    Args:
        parser: the parser (or argument group) the options go to.
        cls: the config dataclass; every field added must have an attribute docstring.
        fields: the fields to add, in this order (default: all fields, in class order).
        exclude: fields left out (nested configs, values the command sets itself).
        defaults: per-field defaults that replace the dataclass's (a preset's values).
        flags: per-field option strings that replace ``--field-name`` (kept names of old flags).
        choices: per-field allowed values.
        positional: fields given as positional arguments instead of options.
        dest_prefix: prefix of the namespace attribute (two configs with a same-named field).
        types: per-field converters that replace the field's type (a value check, e.g. >= 0).
        metavars: per-field names of the value in the usage line (``DIR``).
        repeatable: list-typed fields whose option is repeated, one value each (``--x 1 --x 2``).
        parsers: per-field functions from the option's one text to the field's whole value (a
            comma-separated list, kept as users' scripts write it).
    """
    by_name = {f.name: f for f in dataclasses.fields(cls)}
    names = list(fields) if fields is not None else list(by_name)
    repeatable = set(repeatable)
    named = [*names, *exclude, *(defaults or {}), *(flags or {}), *(types or {}), *(metavars or {})]
    unknown = [n for n in [*named, *repeatable, *(parsers or {})] if n not in by_name]
    if unknown:
        raise ValueError(f"{cls.__name__} has no field(s) {unknown}")
    hints = typing.get_type_hints(cls)
    docs = field_docs(cls)
    positional = set(positional)
    added = []
    for name in names:
        if name in exclude:
            continue
        if name not in docs:
            raise ValueError(f"{cls.__name__}.{name} has no docstring to use as its help")
        field = by_name[name]
        default = _field_default(field, defaults or {})
        kwargs = _value_kwargs(cls, name, hints[name], default)
        if name in repeatable:
            if kwargs.pop("nargs", None) != "+" or default is not None:
                # argparse appends to a default list instead of replacing it
                raise TypeError(f"{cls.__name__}.{name}: only a list defaulting to None repeats")
            kwargs["action"] = "append"
        if choices and name in choices:
            kwargs["choices"] = tuple(choices[name])
        if types and name in types:
            kwargs["type"] = types[name]
        if parsers and name in parsers:
            kwargs.pop("nargs", None)
            kwargs["type"] = parsers[name]
        if metavars and name in metavars:
            kwargs["metavar"] = metavars[name]
        elif dest_prefix and "choices" not in kwargs and kwargs.get("action") in (None, "append"):
            kwargs["metavar"] = name.upper()  # argparse would show the prefixed dest
        help_text = docs[name].replace("%", "%%")
        if (
            default is not dataclasses.MISSING
            and default is not None
            and kwargs.get("action") in (None, "append")
        ):
            help_text += " (default: %(default)s)"
        elif kwargs.get("action") == "store_false":
            help_text += " (on by default; this flag turns it off)"
        dest = dest_prefix + name
        if name in positional:
            kwargs.pop("required", None)
            action = parser.add_argument(dest, help=help_text, **kwargs)
        else:
            negated = kwargs.get("action") == "store_false"
            option = (flags or {}).get(name, flag_name(name, negated=negated))
            action = parser.add_argument(option, dest=dest, help=help_text, **kwargs)
        action.config_class, action.config_field = cls, f"{cls.__name__}.{name}"
        added.append(name)
    return added


def config_from_args(
    cls: type[T],
    args: argparse.Namespace,
    *,
    base: T | None = None,
    dest_prefix: str = "",
    **overrides: Any,
) -> T:
    """Build ``cls`` from the namespace's values of its fields (those :func:`add_config_flags`
    added), on top of ``base`` (default: the dataclass defaults), then ``overrides``."""
    hints = typing.get_type_hints(cls)
    values = {
        f.name: _as_field_value(getattr(args, dest_prefix + f.name), hints[f.name])
        for f in dataclasses.fields(cls)
        if hasattr(args, dest_prefix + f.name)
    }
    values.update(overrides)
    if base is not None:
        return dataclasses.replace(base, **values)
    return cls(**values)


def _field_default(field: dataclasses.Field, defaults: Mapping[str, Any]) -> Any:
    if field.name in defaults:
        return defaults[field.name]
    return field_default(field)


def _value_kwargs(cls: type, name: str, hint: Any, default: Any) -> dict[str, Any]:
    """``type`` / ``nargs`` / ``action`` / ``choices`` / ``default`` for a field's type."""
    kwargs: dict[str, Any] = {}
    if default is dataclasses.MISSING:
        kwargs["required"] = True
    else:
        kwargs["default"] = list(default) if isinstance(default, tuple) else default
    args = typing.get_args(hint)
    optional = _is_optional(hint)
    if optional:
        hint = next(a for a in args if a is not type(None))
        args = typing.get_args(hint)
    origin = typing.get_origin(hint)
    if hint is bool and optional:
        kwargs["action"] = argparse.BooleanOptionalAction
    elif hint is bool:
        kwargs["action"] = "store_false" if default is True else "store_true"
    elif hint in _SCALARS:
        kwargs["type"] = hint
    elif origin is typing.Literal:
        kwargs["choices"] = args
        kwargs["type"] = type(args[0])
    elif origin in (tuple, list) and args and args[0] in _SCALARS:
        if origin is tuple and not (len(args) == 2 and args[1] is Ellipsis):
            raise TypeError(f"{cls.__name__}.{name}: only tuple[X, ...] becomes a flag")
        kwargs["type"] = args[0]
        kwargs["nargs"] = "+"
    else:
        raise TypeError(f"{cls.__name__}.{name}: type {hint!r} has no flag form; exclude it")
    return kwargs


def _is_optional(hint: Any) -> bool:
    origin = typing.get_origin(hint)
    return origin in (typing.Union, types.UnionType) and type(None) in typing.get_args(hint)


def _as_field_value(value: Any, hint: Any) -> Any:
    """argparse gives lists for ``nargs``; tuple-typed fields get tuples back."""
    if _is_optional(hint):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    if isinstance(value, list) and typing.get_origin(hint) is tuple:
        return tuple(value)
    return value


def split_names(*texts: str) -> list[str]:
    """Names given space- or comma-separated: ``"envsched, random"`` -> ``["envsched", "random"]``
    (empty names dropped)."""
    return [name.strip() for text in texts for name in text.split(",") if name.strip()]
