"""``explain --png`` / ``--html``: the picture holds and draws what ``explain --json`` says."""

from __future__ import annotations

import json
import re

import pytest
from PIL import Image

from envsched_gnn.cli import main
from envsched_gnn.graph.task_graph import RELATIONS
from envsched_gnn.models.evidence_picture import (
    draw,
    global_label,
    neighbour_label,
    read_png_data,
    u_path_lines,
)
from tests.models.test_commands import snapshot  # noqa: F401  (the fixture)


def explain(folder, task, step, *extra) -> int:
    files = ["--graph", str(folder / "graph.json"), "--history", str(folder / "history.jsonl")]
    return main(["explain", task, "--step", str(step), *files, *extra])


def figure_texts(data) -> set[str]:
    figure = draw(data)
    return {text.get_text() for text in figure.findobj(lambda a: hasattr(a, "get_text"))}


@pytest.mark.parametrize("task", ["a1", "a0", "c0"], ids=["observed", "unobserved", "isolated"])
def test_the_picture_holds_and_draws_the_evidence_of_explain_json(snapshot, capsys, task):  # noqa: F811
    folder, _, _ = snapshot
    png, page = folder / "evidence.png", folder / "evidence.html"
    assert explain(folder, task, 3, "--json") == 0
    evidence = json.loads(capsys.readouterr().out)
    assert explain(folder, task, 3, "--png", str(png), "--html", str(page)) == 0
    assert f"wrote {png}" in capsys.readouterr().err

    with Image.open(png) as image:
        assert image.format == "PNG" and image.size[0] >= 1200
    data = read_png_data(png)
    long = evidence["half_lives"]["long"]
    assert (data["task_id"], data["env"], data["step"]) == (task, evidence["env"], 3)
    assert data["g_v"] == long["g"]["v"]
    for relation in RELATIONS:
        drawn, said = data["relations"][relation], long["relations"][relation]
        assert drawn["G_v"] == evidence[f"G_{relation}"] == said["G"]["v"]
        assert drawn["global_share"] == said["global_share"]
        fields = ("task_id", "env", "sim", "W", "y_v", "share")
        assert [tuple(n[f] for f in fields) for n in drawn["neighbours"]] == [
            tuple(n[f] for f in fields) for n in said["neighbours"]
        ]
        shares = [n["share"] for n in drawn["neighbours"]] + [drawn["global_share"]]
        assert sum(shares) == pytest.approx(1.0)
    assert [(r["step"], r["v"], r["w_long"]) for r in data["own"]["history"]] == [
        (r["step"], r["v"], r["w_long"]) for r in evidence["own_history"]
    ]
    assert data["own"]["W"] == evidence["own_W"]
    path = data["u_path"]
    for name in ("u", "q", "E_v", "E_m", "E_d", "f", "rank"):
        assert path[name] == evidence[name], name
    assert path["P_v"] == evidence["prior"]
    assert path["half_lives"]["long"]["u"] == evidence["u_long"]
    assert path["half_lives"]["short"]["u"] == evidence["u_short"]

    # what is drawn: every neighbour's label, each global reference, each step towards u
    texts = figure_texts(data)
    for relation in RELATIONS:
        part = data["relations"][relation]
        assert global_label(relation, part, data["g_v"]) in texts
        for n in part["neighbours"]:
            assert neighbour_label(n) in texts
    assert "\n\n".join(u_path_lines(data)) in texts
    assert f"q = pr(u) = {evidence['q']:.4f}" in "\n".join(u_path_lines(data))

    # the page: the same data, the picture inline, nothing fetched from elsewhere
    text = page.read_text(encoding="utf-8")
    embedded = re.search(r'<script type="application/json" id="evidence">(.*?)</script>', text)
    assert json.loads(embedded.group(1).replace("<\\/", "</")) == data
    assert "<svg" in text and text.count("<table>") == 3
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:|//)""", text, re.IGNORECASE)
    assert not re.search(r"<link|@import|url\(\s*['\"]?https?:", text, re.IGNORECASE)
    assert "<script src" not in text


def test_an_unwritable_picture_is_an_error(snapshot, capsys):  # noqa: F811
    folder, _, _ = snapshot
    (folder / "file").write_text("")
    assert explain(folder, "a1", 3, "--png", str(folder / "file" / "x.png")) == 2
    assert "error:" in capsys.readouterr().err
