"""The evidence picture as one self-contained HTML page (``explain --html FILE``): inline SVG,
tables, and the picture's data as JSON in ``<script type="application/json" id="evidence">``.
"""

from __future__ import annotations

import html
import io
import json
from pathlib import Path

from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.models.evidence_picture import draw, picture_data, u_path_lines
from envsched_gnn.plots import pyplot

STYLE = """
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.2em 0.6em; text-align: right; }
th:first-child, td:first-child, td:nth-child(2) { text-align: left; }
pre { background: #f6f6f6; padding: 0.8em; }
svg { max-width: 100%; height: auto; }
"""


def _svg(data: dict) -> str:
    figure = draw(data)
    buffer = io.StringIO()
    figure.savefig(buffer, format="svg", metadata={"Date": None})
    pyplot().close(figure)
    text = buffer.getvalue()
    return text[text.index("<svg") :]


def _table(header: list[str], rows: list[list[str]]) -> str:
    head = "".join(f"<th>{html.escape(h)}</th>" for h in header)
    body = "".join(
        "<tr>" + "".join(f"<td>{html.escape(cell)}</td>" for cell in row) + "</tr>" for row in rows
    )
    return f"<table><tr>{head}</tr>{body}</table>"


def render_html(evidence: dict) -> str:
    """The page of the evidence of ``explain --json``."""
    data = picture_data(evidence)
    title = f"Evidence behind the prediction of {data['task_id']} at step {data['step']}"
    parts = [f"<h1>{html.escape(title)}</h1>", _svg(data)]
    for relation in RELATIONS:
        part = data["relations"][relation]
        rows = [
            [n["task_id"], str(n["env"]), f"{n['sim']:.4f}", f"{n['W']:.4f}", f"{n['y_v']:.4f}",
             f"{n['share']:.4f}"]
            for n in part["neighbours"]
        ]  # fmt: skip
        rows.append(["global reference", "", "", "", f"{data['g_v']:.4f}",
                     f"{part['global_share']:.4f}"])  # fmt: skip
        parts.append(
            f"<h2>{relation}: G_{relation} = {part['G_v']:.4f} (fusion weight "
            f"{part['weight']:g})</h2>"
        )
        parts.append(_table(["neighbour", "environment", "sim", "W", "ybar_v", "share"], rows))
    history = data["own"]["history"]
    parts.append(f"<h2>Own history ({len(history)} observations before step {data['step']})</h2>")
    parts.append(
        _table(
            ["step", "v", "w_long"],
            [[str(r["step"]), f"{r['v']:.4f}", f"{r['w_long']:.4f}"] for r in history],
        )
    )
    parts.append("<h2>How u was reached</h2>")
    parts.append("<pre>" + html.escape("\n".join(u_path_lines(data))) + "</pre>")
    payload = json.dumps(data).replace("</", "<\\/")
    parts.append(f'<script type="application/json" id="evidence">{payload}</script>')
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{html.escape(title)}</title><style>{STYLE}</style></head><body>"
        + "\n".join(parts)
        + "</body></html>\n"
    )


def write_html(evidence: dict, path: str | Path) -> Path:
    """Write :func:`render_html` of ``evidence`` to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_html(evidence), encoding="utf-8")
    return path
