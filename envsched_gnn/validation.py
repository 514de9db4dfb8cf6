"""What a user can get wrong, and how it is refused: one line, no traceback.

:class:`UserError` is the base class of every error a user can fix (a flag's value, a file, a
pool, a store that is down); ``cli.main`` prints it as ``error: ...`` and exits with its
:attr:`~UserError.exit_status`. Configs check their fields with :func:`check_bounds` and
:func:`config_error` (``"GRPOConfig.clip = 1.5, expected a number in (0, 1)"``), and the paths a
command was given with :func:`check_paths`, before anything expensive loads.
"""

from __future__ import annotations

import math
import numbers
import os
import sys
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

USAGE_ERROR = 2
"""Exit status of a command refused for its arguments (as ``argparse`` exits)."""
RUN_ERROR = 1
"""Exit status of a command that failed while it ran (a store, a sandbox, a file on disk)."""


class UserError(Exception):
    """An error the user can fix; its message says what was wrong and what was expected."""

    exit_status = RUN_ERROR


class UsageError(UserError):
    """A command refused for its arguments: a value out of bounds, a missing input."""

    exit_status = USAGE_ERROR


class ConfigError(UsageError, ValueError):
    """A setting holds a value it cannot take (:func:`config_error` names the config field)."""


class PathError(UsageError, ValueError):
    """A path a command was given is missing, or of the wrong kind (:func:`check_paths`)."""


def fail(message: object, status: int = USAGE_ERROR) -> int:
    """Print ``error: message`` to stderr; returns ``status``, the command's exit status."""
    print(f"error: {message}", file=sys.stderr)
    return status


def config_error(config: object, name: str, value: Any, expected: str) -> ConfigError:
    """The error of field ``name`` of ``config`` holding ``value`` where ``expected`` was
    (``"GRPOConfig.clip = 1.5, expected a number in (0, 1)"``), for the caller to raise."""
    return ConfigError(f"{type(config).__name__}.{name} = {value!r}, expected {expected}")


def check_bounds(
    config: object,
    *,
    integers: Iterable[str] = (),
    finite: Iterable[str] = (),
    positive: Iterable[str] = (),
    non_negative: Iterable[str] = (),
    at_least: Mapping[str, float] | None = None,
    unit: Iterable[str] = (),
    open_unit: Iterable[str] = (),
    within: Mapping[str, tuple[float, float]] | None = None,
    optional: Iterable[str] = (),
) -> None:
    """Raises :func:`config_error` for the first field of ``config`` out of its bounds, in
    the order of the keywords: ``integers`` must be ``int`` (not ``bool``), ``finite`` finite;
    ``positive`` > 0, ``non_negative`` >= 0, ``at_least`` (field -> low) >= low, ``unit`` in
    [0, 1], ``open_unit`` in (0, 1), ``within`` (field -> (low, high)) in [low, high]. Every
    field named must be a real number (not a ``bool``), or None where it is ``optional``;
    a sequence (a tuple of temperatures) must hold such numbers only; NaN lies within no
    bound."""
    checks: list[tuple[str, Callable[[Any], bool], str]] = [
        *((name, lambda v: isinstance(v, int), "an integer") for name in integers),
        *((name, math.isfinite, "a finite number") for name in finite),
        *((name, lambda v: v > 0, "a number > 0") for name in positive),
        *((name, lambda v: v >= 0, "a number >= 0") for name in non_negative),
        *(
            (name, lambda v, low=low: v >= low, f"a number >= {low:g}")
            for name, low in (at_least or {}).items()
        ),
        *((name, lambda v: 0 <= v <= 1, "a number in [0, 1]") for name in unit),
        *((name, lambda v: 0 < v < 1, "a number in (0, 1)") for name in open_unit),
        *(
            (
                name,
                lambda v, low=low, high=high: low <= v <= high,
                f"a number in [{low:g}, {high:g}]",
            )
            for name, (low, high) in (within or {}).items()
        ),
    ]
    optional = set(optional)
    for name, holds, expected in checks:
        value = getattr(config, name)
        if value is None and name in optional:
            continue
        items = value if isinstance(value, list | tuple) else [value]
        if not all(isinstance(v, numbers.Real) and not isinstance(v, bool) for v in items) or (
            not all(holds(v) for v in items)
        ):
            raise config_error(config, name, value, expected)


PathArgument = str | Path | Sequence[str | Path] | None
"""A path argument: one path, several (each checked), or None (not given, not checked)."""


def check_paths(
    *,
    folders: Mapping[str, PathArgument] | None = None,
    files: Mapping[str, PathArgument] | None = None,
    out_folders: Mapping[str, PathArgument] | None = None,
    out_files: Mapping[str, PathArgument] | None = None,
) -> None:
    """Raises :class:`PathError` for the first path that cannot serve, in the order of the
    keywords, each a mapping from the name the user knows it by (``--pool``,
    ``PolicyLearnerConfig.model``) to the path: ``folders`` must be existing folders, ``files``
    existing files; ``out_folders`` and ``out_files`` are written later, so
    they must not be a file, resp. a folder, already, and the first of their ancestors that
    exists must be a folder this process may write into. A check costs a few ``stat`` calls,
    so that a command finds a wrong path before it loads anything."""
    kinds: list[tuple[Mapping[str, PathArgument] | None, Callable[[Path], str | None]]] = [
        (folders, lambda p: None if p.is_dir() else "an existing folder"),
        (files, lambda p: None if p.is_file() else "an existing file"),
        (out_folders, lambda p: _writable(p, folder=True)),
        (out_files, lambda p: _writable(p, folder=False)),
    ]
    for paths, problem in kinds:
        for name, value in (paths or {}).items():
            for path in [value] if isinstance(value, str | Path) or value is None else value:
                expected = None if path is None else problem(Path(path))
                if expected is not None:
                    raise PathError(f"{name} {str(path)!r}: expected {expected}")


def _writable(path: Path, *, folder: bool) -> str | None:
    """Why ``path`` cannot be written as a folder (or a file); None when it can."""
    if path.exists() and path.is_dir() != folder:
        return "a folder to write (it is a file)" if folder else "a file to write (it is a folder)"
    ancestor = (path if folder else path.parent).absolute()
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        return f"a path under a folder ({ancestor} is a file)"
    if not os.access(ancestor, os.W_OK | os.X_OK):
        return f"a path this process may write into ({ancestor} is not writable)"
    return None
