"""The rows of a Cypher statement as plain values (nodes, relationships and paths as JSON
with ``_labels`` / ``_type`` keys, temporal values ``str``), rendered as a table, JSON or CSV.
"""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Mapping, Sequence
from typing import Any

FORMATS = ("table", "json", "csv")


def plain(value: Any) -> Any:
    """A driver value as a JSON value (see the module docstring)."""
    from neo4j.graph import Node, Path, Relationship

    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, Node):
        props = {k: plain(v) for k, v in value.items()}
        return {"_labels": sorted(value.labels), "_element_id": value.element_id, **props}
    if isinstance(value, Relationship):
        props = {k: plain(v) for k, v in value.items()}
        ends = (value.start_node, value.end_node)
        start, end = (n.element_id if n is not None else None for n in ends)
        return {"_type": value.type, "_start": start, "_end": end, **props}
    if isinstance(value, Path):
        items: list[Any] = [plain(value.start_node)]
        for relationship in value.relationships:
            items += [plain(relationship), plain(relationship.end_node)]
        return items
    if isinstance(value, Mapping):
        return {str(k): plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [plain(v) for v in value]
    return str(value)


def plain_rows(keys: Sequence[str], records: Sequence[Any]) -> list[dict[str, Any]]:
    """One ``{column: value}`` dict per record, values made plain."""
    return [{key: plain(record[key]) for key in keys} for record in records]


def _cell(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)


def render(keys: Sequence[str], rows: Sequence[Mapping[str, Any]], fmt: str) -> str:
    """The rows as ``table`` (aligned columns, then the row count), ``json`` (a list of
    objects) or ``csv`` (a header line, then one line per row)."""
    if fmt == "json":
        return json.dumps(list(rows), indent=1, ensure_ascii=False)
    if fmt == "csv":
        buffer = io.StringIO()
        writer = csv.writer(buffer, lineterminator="\n")
        writer.writerow(keys)
        writer.writerows([_cell(row[key]) for key in keys] for row in rows)
        return buffer.getvalue().rstrip("\n")
    if fmt != "table":
        raise ValueError(f"unknown output format {fmt!r}, expected one of {FORMATS}")
    cells = [[_cell(row[key]) for key in keys] for row in rows]
    widths = [max([len(key), *(len(line[c]) for line in cells)]) for c, key in enumerate(keys)]
    lines = [
        "  ".join(key.ljust(width) for key, width in zip(keys, widths, strict=True)).rstrip(),
        "  ".join("-" * width for width in widths),
    ]
    lines += [
        "  ".join(cell.ljust(width) for cell, width in zip(line, widths, strict=True)).rstrip()
        for line in cells
    ]
    lines.append(f"({len(rows)} row{'s' if len(rows) != 1 else ''})")
    return "\n".join(lines)
