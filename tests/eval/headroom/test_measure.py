"""Headroom on hand-made groups (the numbers computed by hand), and ``eval headroom`` end to
end: the tiny policy on the hand-made pool, K samples in the real runtime."""

from __future__ import annotations

import json

import pytest

from envsched_gnn.cli import main
from envsched_gnn.envs.pool_io import load_pool
from envsched_gnn.eval.headroom.measure import (
    group_headroom,
    headroom_table,
    summarize_headroom,
    variance_table,
)
from tests.envs.handmade_pool import write_handmade_pool
from tests.training.tiny_policy import trained_policy_dir

GROUPS = {
    "a": [0.0, 1.0, 0.5, 0.5],  # mean 0.5, best 1, spread 1, headroom 0.5
    "b": [1.0, 1.0, 1.0, 1.0],  # all ones: headroom 0, zero variance
    "c": [0.0, 0.0, 0.0, 0.0],  # all zeros: headroom 0, zero variance
    "d": [0.25, 0.75, 0.75, 0.25],  # mean 0.5, best 0.75, spread 0.5, headroom 0.25
}


def test_one_group():
    assert group_headroom(GROUPS["a"]) == {"mean": 0.5, "best": 1.0, "spread": 1.0, "headroom": 0.5}
    assert group_headroom(GROUPS["d"])["headroom"] == 0.25
    with pytest.raises(ValueError, match="K >= 2"):
        group_headroom([1.0])


def test_summary_by_hand():
    summary = summarize_headroom(GROUPS)
    assert summary["tasks"] == 4
    assert summary["mean_reward"] == pytest.approx(0.5)  # (0.5 + 1 + 0 + 0.5) / 4
    assert summary["mean_best"] == pytest.approx(0.6875)  # (1 + 1 + 0 + 0.75) / 4
    assert summary["headroom"] == pytest.approx(0.1875)  # (0.5 + 0 + 0 + 0.25) / 4
    # sd of (0.5, 0, 0, 0.25) = sqrt(0.171875 / 3) = 0.239357; t(0.975, 3) = 3.182446
    assert summary["headroom_ci95"] == pytest.approx(3.182446 * 0.239357 / 2, abs=1e-5)
    assert summary["mean_spread"] == pytest.approx(0.375)
    assert summary["zero_variance_share"] == 0.5
    assert summary["all_ones_share"] == 0.25
    assert summary["all_zeros_share"] == 0.25


def test_table_groups_tasks():
    table = headroom_table(GROUPS, {"kind": lambda t: "x" if t in "ab" else "y"})
    assert table["overall"]["headroom"] == pytest.approx(0.1875)
    x, y = table["by_kind"]["x"], table["by_kind"]["y"]
    assert (x["tasks"], x["mean_reward"], x["headroom"]) == (2, 0.75, 0.25)
    assert (y["tasks"], y["mean_reward"], y["headroom"]) == (2, 0.25, 0.125)
    assert x["zero_variance_share"] == 0.5 and y["all_zeros_share"] == 0.5


def test_a_task_with_several_kinds_is_in_each_of_their_groups():
    kinds = {"a": ("create", "update"), "b": ("update",), "c": "create", "d": ("delete",)}
    table = headroom_table(GROUPS, {"operation": lambda t: kinds[t]})
    assert {k: v["tasks"] for k, v in table["by_operation"].items()} == {
        "create": 2,
        "delete": 1,
        "update": 2,
    }
    assert table["by_operation"]["update"]["mean_reward"] == pytest.approx(0.75)  # a, b


def test_the_variance_table_splits_every_statistic_by_every_partition():
    table = variance_table(GROUPS, {"kind": lambda t: "x" if t in "ab" else "y"})
    # means (0.5, 1, 0, 0.5): x (0.5, 1) and y (0, 0.5); SS_t = 0.5, SS_b = 2 * 0.25^2 * 2
    assert table["mean_reward"]["kind"]["eta2"] == pytest.approx(0.25 / 0.5)
    # zero variance (0, 1, 1, 0): the same mean 0.5 in both groups
    assert table["zero_variance"]["kind"]["eta2"] == pytest.approx(0.0)
    # all zeros (0, 0, 1, 0): x (0, 0), y (1, 0); SS_t = 0.75, SS_b = 2 * 0.25^2 * 2 = 0.25
    assert table["all_zeros"]["kind"]["eta2"] == pytest.approx(0.25 / 0.75)
    # all ones (0, 1, 0, 0): x (0, 1), y (0, 0); the same shares
    assert table["all_ones"]["kind"]["eta2"] == pytest.approx(0.25 / 0.75)


def test_eval_headroom_command(tmp_path):
    pool_dir = write_handmade_pool(tmp_path / "pool")
    out = tmp_path / "headroom"
    code = main(
        [
            "eval", "headroom", "--pool", str(pool_dir), "--model", str(trained_policy_dir()),
            "--splits", "train", "test", "--k", "3", "--temperatures", "1.0", "1.5",
            "--out", str(out), "--workers", "1",
        ]
    )  # fmt: skip
    assert code == 0
    data = json.loads((out / "headroom.json").read_text())
    pool = load_pool(pool_dir)
    assert [run["temperature"] for run in data["runs"]] == [1.0, 1.5]
    for run in data["runs"]:
        assert set(run["per_task"]) == {t.task_id for t in pool.tasks}
        assert all(len(r) == 3 for r in run["per_task"].values())
        assert run["overall"] == pytest.approx(summarize_headroom(run["per_task"]))
        assert set(run["by_split"]) == {"train", "test"}
        assert sum(row["tasks"] for row in run["by_env"].values()) == len(pool.tasks)
        assert set(run["variance"]) == {"mean_reward", "zero_variance", "all_zeros", "all_ones"}
        assert set(run["variance"]["mean_reward"]) == {"env", "calls", "pattern"}
        assert run["variance"]["mean_reward"]["env"]["groups"] == len(pool.envs)
    markdown = (out / "headroom.md").read_text()
    assert "## By calls" in markdown and "| 1.5 |" in markdown
    assert "## Where the variance lies" in markdown and "## By operation" in markdown
    assert (out / "headroom.png").stat().st_size > 0


def test_eval_headroom_under_the_success_reward(tmp_path):
    """The same seeded samples under both rewards: a success is a fraction of 1, all else 0."""
    pool_dir = write_handmade_pool(tmp_path / "pool")
    per_task = {}
    for reward in ("fraction", "success"):
        out = tmp_path / reward
        code = main(
            [
                "eval", "headroom", "--pool", str(pool_dir), "--model", str(trained_policy_dir()),
                "--splits", "train", "test", "--k", "4", "--out", str(out), "--workers", "1",
                "--reward", reward,
            ]
        )  # fmt: skip
        assert code == 0
        data = json.loads((out / "headroom.json").read_text())
        assert data["runs"][0]["reward"] == reward
        assert data["header"][-1].endswith(f"--reward {reward}")
        per_task[reward] = data["runs"][0]["per_task"]
    fraction = per_task["fraction"]
    assert per_task["success"] == {t: [float(r == 1.0) for r in rs] for t, rs in fraction.items()}
    assert any(0.0 < r < 1.0 for rs in fraction.values() for r in rs)  # the rewards differ
