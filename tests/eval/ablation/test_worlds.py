"""``eval worlds`` on hand-made results of two worlds (every number worked out by hand)."""

from __future__ import annotations

import json

import pytest

from envsched_gnn.cli import main
from envsched_gnn.eval.ablation.worlds import plot_worlds, reference_lift, render_worlds


def _margin(mean: float, half: float | None) -> dict:
    return {"mean": mean, "ci95": half, "n": 2}


def world(lift: tuple[float, float]) -> dict:
    """Random from 0.5 at step 0 to 0.5 + lift at seeds 0 and 1; task a ends 0.1 higher, b
    0.3 higher (mean over seeds); EnvSched 0.02 ± 0.01 above random."""
    evals = [
        [{"step": 0, "per_task": {"a": [0.4, 0.6], "b": [0.5, 0.5]}},
         {"step": 2, "per_task": {"a": [0.5, 0.7], "b": [0.8, 0.8]}}],
        [{"step": 0, "per_task": {"a": [0.4, 0.6], "b": [0.5, 0.5]}},
         {"step": 2, "per_task": {"a": [0.6, 0.6], "b": [0.8, 0.8]}}],
    ]  # fmt: skip
    random = {
        "seeds": [0, 1],
        "rollouts": 128,
        "score": {"2": {"mean": 0.5 + sum(lift) / 2, "per_seed": [0.5 + lift[0], 0.5 + lift[1]]}},
        "runs": [
            {"seed": s, "records": [{"step": -1, "score": 0.5}], "evals": evals[s]} for s in (0, 1)
        ],
        "picks": {"wasted_share": _margin(0.45, 0.05)},
    }
    envsched = {
        "seeds": [0, 1],
        "margin_over_random": {"2": _margin(0.02, 0.01)},
        "margin_over_controls": {"envsched_relabelled": {"2": _margin(-0.01, 0.03)}},
        "pool_margin_over_random": {"2": _margin(0.0, None)},
        "picks": {"wasted_share": _margin(0.3, 0.02), "wasted_minus_random": _margin(-0.15, 0.04)},
        "compute_to_target": {
            "rollouts_to": {"1.0": {"median": 96.0, "reached": 2, "seeds": 2}},
        },
    }
    return {"random": random, "envsched": envsched}


def test_randoms_lift_over_seeds_and_paired_by_task():
    lift = reference_lift(world((0.1, 0.3)))
    assert lift["start"] == 0.5
    assert lift["over_seeds"]["mean"] == pytest.approx(0.2)  # (0.1 + 0.3) / 2
    # task a: (0.6 + 0.6) / 2 - 0.5 = 0.1; task b: 0.8 - 0.5 = 0.3
    assert lift["over_tasks"]["mean"] == pytest.approx(0.2)
    assert lift["over_tasks"]["n"] == 2


def test_the_tables_of_two_worlds():
    text = render_worlds([("narrow", world((0.1, 0.3))), ("wide", world((0.2, 0.2)))])
    assert "| narrow | 2 | 128 | 0.450 ± 0.050 | 0.500 -> 0.700 |" in text
    assert "| wide | 2 | 128 | 0.450 ± 0.050 | 0.500 -> 0.700 | +0.200 ± 0.000 |" in text
    row = (
        "| narrow | envsched | +0.020 ± 0.010 | -0.010 ± 0.030 (inside the noise) | +0.000 | "
        "0.300 ± 0.020 | -0.150 ± 0.040 | 96 (2/2) |"
    )
    assert row in text


def test_the_command_reads_output_folders_and_refuses_what_is_not_one(tmp_path, capsys):
    folder = tmp_path / "narrow"
    folder.mkdir()
    (folder / "results.json").write_text(json.dumps(world((0.1, 0.3))))
    out = tmp_path / "worlds.md"
    assert main(["eval", "worlds", "--world", f"narrow={folder}", "--out", str(out)]) == 0
    assert "| narrow | envsched |" in out.read_text()
    assert main(["eval", "worlds", "--world", f"empty={tmp_path}"]) == 2
    assert "no results.json" in capsys.readouterr().err
    assert main(["eval", "worlds", "--world", "narrow"]) == 2
    assert "expected NAME=FOLDER" in capsys.readouterr().err
    assert main(["eval", "worlds"]) == 2
    assert "give at least one world" in capsys.readouterr().err


def with_targets(results: dict) -> dict:
    """A world whose comparison measured compute to a target: EnvSched behind dynamic sampling
    needs 1.6 [1.2, 2.1] times fewer rollouts than random to 75 % of its lift; its curve and
    random's have bands."""
    reach = {"reached": 2, "seeds": 2, "median": 640.0, "mean_reached": _margin(640.0, 80.0)}
    ratio = {"pairs": 2, "ratio": {"mean": 1.6, "interval": [1.2, 2.1], "n": 2}}
    results["envsched"]["compute_to_target"] = {
        "groups_per_trained": _margin(1.4, 0.1),
        "rollouts_to": {"0.75": reach, "1.0": reach},
        "versus": {"random": {"rollouts_to": {"0.75": ratio}, "area": _margin(0.01, 0.02)}},
    }
    for entry in results.values():
        entry["curve"] = {"budget_step": [0, 1, 2], "score_mean": [0.5, 0.6, 0.7],
                          "score_ci95": [None, 0.02, 0.03]}  # fmt: skip
    return results


def test_compute_to_a_target_side_by_side_and_its_plot(tmp_path):
    results = with_targets(world((0.1, 0.3)))
    text = render_worlds([("wide", results)])
    row = (
        "| wide | envsched | 1.40 ± 0.10 | 640 (2/2) | 1.60 [1.20, 2.10] (2) | - | +0.0100 ± 0.0200"
    )
    assert row in text
    png = tmp_path / "worlds.png"
    assert plot_worlds([("wide", results), ("narrow", results)], png) == png
    assert png.stat().st_size > 0
