"""scripts/gpu_scheduler_comparison.py at tiny size on the CPU: SFT from scratch, the demo
preset's start made sometimes right from it, the shared start's held-out and pool evaluation,
GRPO runs of two schedulers x two seeds, the table."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "gpu_scheduler_comparison.py"


@pytest.mark.slow
def test_tiny_comparison_runs_end_to_end(tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("gpu_scheduler_comparison", SCRIPT)
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    argv = ["--tiny", "--seeds", "2", "--steps", "2", "--sft-steps", "6", "--out", str(tmp_path)]
    argv += ["--competence-by", "task"]
    table = script.main([*argv, "--schedulers", "envsched", "random"])
    assert set(table) == {"envsched", "random"}
    for row in table.values():
        for part in ("heldout", "pool"):
            assert 0.0 <= row[f"{part}_start"] <= 1.0
            assert row[f"{part}_end"]["n"] == 2
            assert row[f"{part}_change"]["n"] == 2
    assert table["envsched"]["heldout_minus_random"]["n"] == 2
    assert "heldout_minus_random" not in table["random"]
    assert json.loads((tmp_path / "comparison.json").read_text()) == json.loads(json.dumps(table))
    printed = capsys.readouterr().out
    assert "| envsched |" in printed and "| random |" in printed
    # the start: the SFT policy fine-tuned on the preset's competence mixture, rates by task
    mixture = json.loads((tmp_path / "start" / "policy" / "competence.json").read_text())
    assert mixture["profile"]["by"] == "task" and mixture["imperfect"] > 0
    runs = sorted(p.name for p in (tmp_path / "grpo").iterdir())
    assert runs == ["envsched-seed0", "envsched-seed1", "random-seed0", "random-seed1"]
