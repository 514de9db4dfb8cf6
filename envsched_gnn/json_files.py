"""JSON for files: written atomically (readers see the old file or the new one, never a torn
one), and hashed in its canonical form (what keys a file by the inputs it was made from)."""

from __future__ import annotations

import hashlib
import json
import math
import os
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any, TextIO


def canonical_sha256(value: Any) -> str:
    """SHA-256 (hex) of ``value`` as canonical JSON: sorted keys, no spaces, UTF-8 as is."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def write_json_atomically(
    path: str | Path,
    payload: Any,
    *,
    indent: int | None = 1,
    ensure_ascii: bool = True,
    non_finite_as_null: bool = False,
) -> Path:
    """Write ``payload`` as JSON (and a newline) to a temporary file beside ``path``, then rename
    it over ``path``; returns the path. Creates the folder; the file gets the umask's mode; on
    failure ``path`` keeps what it held. ``non_finite_as_null`` writes NaN and inf as ``null``.
    """
    if non_finite_as_null:
        payload = _non_finite_as_null(payload)

    def write(stream: TextIO) -> None:
        json.dump(payload, stream, indent=indent, ensure_ascii=ensure_ascii)
        stream.write("\n")

    return write_text_atomically(path, write)


def write_text_atomically(path: str | Path, write: Callable[[TextIO], None]) -> Path:
    """:func:`write_json_atomically` for text: ``write`` gets a UTF-8 stream of the temp file."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(handle, "w", encoding="utf-8") as stream:
            write(stream)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(temporary, 0o666 & ~umask)
        os.replace(temporary, path)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return path


def _non_finite_as_null(value: Any) -> Any:
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {key: _non_finite_as_null(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_non_finite_as_null(item) for item in value]
    return value
