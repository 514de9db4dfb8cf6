"""The evidence behind one prediction as a picture (``explain TASK --step T --png FILE``).

:func:`picture_data` keeps, at h_long, what :func:`draw` shows of :func:`.evidence.explain_task`:
the observed in-neighbours by relation (distance by sim, disc by W, edge by share of G_r),
the task's own history and the chain from P_v to q (spec 4.5-4.7). The PNG carries that data
as JSON in its ``evidence`` text chunk.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.plots import pyplot, save_figure

PNG_KEY = "evidence"
"""The PNG text chunk holding :func:`picture_data` as JSON."""
COLOURS = {"within": "#1f77b4", "cross": "#d95f02", "global": "#7f7f7f", "target": "#2ca02c"}
SIDE = {"within": -1.0, "cross": 1.0}
"""Fan of each relation: left (within) or right (cross) of the target."""


def picture_data(evidence: dict) -> dict[str, Any]:
    """What the picture shows, taken from the evidence of ``explain --json`` (module doc)."""
    long, short = evidence["half_lives"]["long"], evidence["half_lives"]["short"]
    config = evidence["config"]
    relations = {}
    for relation in RELATIONS:
        part = long["relations"][relation]
        relations[relation] = {
            "weight": part["weight"],
            "G_v": part["G"]["v"],
            "global_share": part["global_share"],
            "neighbours": [
                {key: n[key] for key in ("task_id", "env", "sim", "W", "y_v", "share")}
                for n in part["neighbours"]
            ],
        }
    return {
        "task_id": evidence["task_id"],
        "env": evidence["env"],
        "step": evidence["step"],
        "num_tasks": evidence["num_tasks"],
        "g_v": long["g"]["v"],
        "relations": relations,
        "own": {
            "W": long["own_W"],
            "ybar_v": long["own_ybar"]["v"] if long["own_ybar"] is not None else None,
            "shrink_share": long["shrink_share"],
            "prior_share": long["prior_share"],
            "history": [
                {"step": row["step"], "v": row["v"], "w_long": row["w_long"]}
                for row in evidence["own_history"]
            ],
        },
        "u_path": {
            "P_v": long["prior"]["v"],
            "E_v": evidence["E_v"],
            "E_m": evidence["E_m"],
            "E_d": evidence["E_d"],
            "f": evidence["f"],
            "half_lives": {
                name: {
                    "h": part["half_life"],
                    "pr_E_v": part["pr_E_v"],
                    "pr_f": part["pr_f"],
                    "level": part["percentile"],
                    "u": part["u"],
                }
                for name, part in (("long", long), ("short", short))
            },
            "eta": config["eta"],
            "lambda_s": config["lambda_s"],
            "lambda_g": config["lambda_g"],
            "u": evidence["u"],
            "q": evidence["q"],
            "rank": evidence["rank"],
        },
    }


def neighbour_label(n: dict) -> str:
    """The label of one neighbour's disc."""
    return (
        f"{n['task_id']} ({n['env']})\nsim {n['sim']:.3f}  W {n['W']:.2f}  "
        f"share {n['share']:.3f}  ybar_v {n['y_v']:.4f}"
    )


def global_label(relation: str, part: dict, g_v: float) -> str:
    """The label of a relation's global reference."""
    return f"global reference ({relation})\ng_v {g_v:.4f}  share {part['global_share']:.3f}"


def u_path_lines(data: dict) -> list[str]:
    """How u was reached, one step a line, with the numbers of this prediction."""
    p, own, rel = data["u_path"], data["own"], data["relations"]
    w, c = rel["within"], rel["cross"]
    ybar = "undefined (never observed)" if own["ybar_v"] is None else f"{own['ybar_v']:.4f}"
    lines = [
        f"G_within = {w['G_v']:.4f}   G_cross = {c['G_v']:.4f}",
        f"P_v = {w['weight']:g} x G_within + {c['weight']:g} x G_cross = {p['P_v']:.4f}",
        f"own: W = {own['W']:.3f}, ybar_v = {ybar}",
        f"E_v = (W ybar_v + {p['lambda_s']:g} P_v) / (W + {p['lambda_s']:g}) = {p['E_v']:.4f}\n"
        f"    (own share {own['shrink_share']:.3f}, prior share {own['prior_share']:.3f})",
        f"E_m = {p['E_m']:.4f}   E_d = {p['E_d']:.4f}   f = E_d E_m (1 - E_m) = {p['f']:.4f}",
    ]
    for name, h in p["half_lives"].items():
        lines.append(
            f"u_{name} (h = {h['h']:g}) = Q_v(0.65 x {h['pr_E_v']:.3f} + 0.35 x {h['pr_f']:.3f}"
            f" = {h['level']:.3f}) = {h['u']:.4f}"
        )
    long, short = p["half_lives"]["long"]["u"], p["half_lives"]["short"]["u"]
    lines += [
        f"u = u_long - {p['eta']:g} max(u_long - u_short, 0) = {long:.4f} - {p['eta']:g} x "
        f"{max(long - short, 0.0):.4f} = {p['u']:.4f}",
        f"q = pr(u) = {p['q']:.4f}   (rank {p['rank']:g} of {data['num_tasks']})",
    ]
    return lines


def _fan(axis, relation: str, part: dict, g_v: float) -> None:
    """One relation's neighbours in a column beside the target at (0, 0), one row each
    (largest share on top), and its global reference below them."""
    side, colour = SIDE[relation], COLOURS[relation]
    neighbours = part["neighbours"]
    rows = max(len(neighbours), 1)
    for k, n in enumerate(neighbours):
        x = side * (0.8 + 1.5 * (1.0 - n["sim"]))
        y = 2.0 - 3.6 * k / max(rows - 1, 1) if rows > 1 else 0.6
        axis.plot([x, 0], [y, 0], color=colour, linewidth=0.5 + 14 * n["share"], alpha=0.55)
        axis.scatter([x], [y], s=40 + 60 * n["W"], color=colour, zorder=3, edgecolor="white")
        axis.annotate(
            neighbour_label(n),
            (x, y),
            xytext=(side * 9, 0),
            textcoords="offset points",
            ha="left" if side > 0 else "right",
            va="center",
            fontsize=7,
        )
    gx, gy = side * 0.8, -2.45
    axis.plot([gx, 0], [gy, 0], color=COLOURS["global"], linestyle="--",
              linewidth=0.5 + 14 * part["global_share"], alpha=0.5)  # fmt: skip
    axis.scatter([gx], [gy], s=160, marker="s", color=COLOURS["global"], zorder=3)
    axis.annotate(
        global_label(relation, part, g_v),
        (gx, gy),
        xytext=(side * 10, 0),
        textcoords="offset points",
        ha="left" if side > 0 else "right",
        va="center",
        fontsize=7.5,
    )
    axis.text(
        side * 0.25,
        2.55,
        f"{relation}: {len(neighbours)} observed neighbour{'s' if len(neighbours) != 1 else ''}"
        f", G_{relation} = {part['G_v']:.4f}",
        ha="left" if side > 0 else "right",
        color=colour,
        fontsize=9.5,
        fontweight="bold",
    )


def draw(data: dict):
    """The picture of :func:`picture_data` as a matplotlib Figure (Agg backend)."""
    figure = pyplot().figure(figsize=(16, 9))
    grid = figure.add_gridspec(2, 2, width_ratios=(1.9, 1.0), height_ratios=(1.0, 1.25))
    graph_axis = figure.add_subplot(grid[:, 0])
    for relation in RELATIONS:
        _fan(graph_axis, relation, data["relations"][relation], data["g_v"])
    graph_axis.scatter([0], [0], s=500, color=COLOURS["target"], zorder=4, edgecolor="black")
    graph_axis.annotate(
        "target", (0, 0), xytext=(0, -14), textcoords="offset points", ha="center", va="top",
        fontsize=7, color=COLOURS["target"], fontweight="bold",
    )  # fmt: skip
    graph_axis.set_xlim(-4.4, 4.4)
    graph_axis.set_ylim(-2.8, 2.8)
    graph_axis.axis("off")
    graph_axis.set_title(
        f"Evidence behind the prediction of {data['task_id']} ({data['env']}) at step "
        f"{data['step']} (h_long)\nq = {data['u_path']['q']:.4f}, E_v = "
        f"{data['u_path']['E_v']:.4f}",
        fontsize=11,
    )
    graph_axis.text(
        0.5, 0.0, "nearer the target: more similar (sim)   disc: effective weight W (how "
        "observed)\nedge: share of G_r (how much it moved the estimate)   dashed: the global "
        "reference's share", transform=graph_axis.transAxes, ha="center", va="top", fontsize=8,
        color="#444444",
    )  # fmt: skip

    history_axis = figure.add_subplot(grid[0, 1])
    history = data["own"]["history"]
    if history:
        steps = [row["step"] for row in history]
        history_axis.vlines(steps, 0, [row["v"] for row in history], color=COLOURS["target"])
        history_axis.scatter(
            steps,
            [row["v"] for row in history],
            s=[20 + 80 * row["w_long"] for row in history],
            color=COLOURS["target"],
            zorder=3,
        )
        history_axis.set_xlabel("step s < t (disc: weight w_long(t, s))")
        history_axis.set_ylabel("reward variance v(i, s)")
        history_axis.set_ylim(0, max(0.26, max(row["v"] for row in history) * 1.1))
    else:
        history_axis.text(
            0.5,
            0.5,
            "never observed before this step:\nE = P, the graph prior alone",
            ha="center",
            va="center",
            transform=history_axis.transAxes,
            fontsize=10,
        )
        history_axis.set_xticks([])
        history_axis.set_yticks([])
    history_axis.set_title(
        f"own history: {len(history)} observation{'s' if len(history) != 1 else ''}, "
        f"W = {data['own']['W']:.3f}",
        fontsize=10,
    )

    path_axis = figure.add_subplot(grid[1, 1])
    path_axis.axis("off")
    path_axis.set_title("how u was reached", fontsize=10)
    lines = u_path_lines(data)
    path_axis.text(
        0.0, 1.0, "\n\n".join(lines), transform=path_axis.transAxes, fontsize=8,
        family="monospace", va="top",
    )  # fmt: skip
    figure.tight_layout()
    return figure


def write_png(evidence: dict, path: str | Path) -> Path:
    """Draw the evidence of ``explain --json`` into a PNG holding its data (``PNG_KEY``)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    data = picture_data(evidence)
    return save_figure(draw(data), path, metadata={PNG_KEY: json.dumps(data)})


def read_png_data(path: str | Path) -> dict:
    """The data a PNG of :func:`write_png` was drawn from."""
    from PIL import Image

    with Image.open(path) as image:
        return json.loads(image.text[PNG_KEY])
