"""Reward against rollouts on hand-made policy-learner runs: paired curves, rollouts to match."""

import math

import numpy as np
import pytest
from scipy.stats import t as student_t

from envsched_gnn.eval.ablation.config import STEP_METRICS, AblationConfig
from envsched_gnn.eval.ablation.curves import first_reach
from envsched_gnn.eval.ablation.curves_report import render_reward_curves
from envsched_gnn.eval.ablation.report import write_ablation_report
from envsched_gnn.eval.ablation.summary import summarise

CONFIG = AblationConfig(
    seeds=3,
    steps=4,
    batch_size=2,  # K = 8: 16 rollouts per budget step
    learner="policy",
    evaluations=2,  # evaluations at budget steps 0, 2, 4
    schedulers=("envsched", "random", "rho0"),
    k_grid=(),
    controls=("relabelled",),
)
PER_STEP = 16

# held-out reward at budget steps 0, 2, 4, per seed
HELD_OUT = {
    "random": [[0.50, 0.55, 0.60], [0.50, 0.60, 0.58], [0.50, 0.52, 0.62]],
    "envsched": [[0.50, 0.65, 0.70], [0.50, 0.58, 0.66], [0.50, 0.56, 0.61]],
    "rho0": [[0.50, 0.60, 0.60], [0.50, 0.58, 0.58], [0.50, 0.62, 0.60]],
    "envsched_relabelled": [[0.50, 0.60, 0.62], [0.50, 0.55, 0.60], [0.50, 0.55, 0.60]],
}


def _run(name: str, seed: int, scores: list[float]) -> dict:
    """A policy-learner run: the start, then one update per budget step, evaluated after every
    second one (the other records carry no reward); the pool reward is the held-out - 0.1."""
    records = [{"step": -1, "budget_step": 0.0, "score": scores[0], "pool_score": scores[0] - 0.1}]
    for step in range(4):
        score = scores[(step + 1) // 2] if step % 2 == 1 else None
        records.append(
            {
                "step": step,
                "budget_step": step + 1.0,
                "score": score,
                "pool_score": None if score is None else score - 0.1,
                "trained_groups": 2,
            }
            | dict.fromkeys(STEP_METRICS, 0.0)
        )
    return {"name": name, "seed": seed, "records": records, "wall_s": 1.0, "schedule_s": 0.1,
            "rollouts": 4 * PER_STEP}  # fmt: skip


RUNS = [_run(name, s, curve) for name, curves in HELD_OUT.items() for s, curve in enumerate(curves)]


def _t_interval(values) -> tuple[float, float]:
    """Reference: mean and t_{0.975, n-1} sd / sqrt(n), written out."""
    x = np.asarray(values, dtype=np.float64)
    return x.mean(), student_t.ppf(0.975, x.size - 1) * x.std(ddof=1) / math.sqrt(x.size)


@pytest.fixture(scope="module")
def results() -> dict:
    return summarise(RUNS, CONFIG)


def test_first_reach_interpolates_between_evaluations():
    steps = np.array([0.0, 2.0, 4.0])
    rewards = np.array([0.50, 0.65, 0.70])
    assert first_reach(steps, rewards, 0.60) == pytest.approx(0.0 + 0.10 / 0.15 * 2.0)
    assert first_reach(steps, rewards, 0.65) == 2.0  # exactly at an evaluation
    assert first_reach(steps, rewards, 0.40) == 0.0  # the start already reaches it
    assert first_reach(steps, rewards, 0.71) is None


def test_paired_differences_at_every_evaluation(results):
    for name in ("envsched", "rho0", "envsched_relabelled"):
        for reference in ("random", "envsched_relabelled"):
            if name == reference:
                continue
            for key, offset in (("score", 0.0), ("pool_score", 0.1)):
                margin = results[name]["curve_margins"][reference][key]
                assert margin["budget_step"] == [0.0, 2.0, 4.0] and margin["seeds"] == [0, 1, 2]
                for i in range(3):
                    diffs = [
                        (a[i] - offset) - (b[i] - offset)
                        for a, b in zip(HELD_OUT[name], HELD_OUT[reference], strict=True)
                    ]
                    mean, half = _t_interval(diffs)
                    assert margin["mean"][i] == pytest.approx(mean, abs=1e-12)
                    assert margin["ci95"][i] == pytest.approx(half, abs=1e-12)
    assert "random" not in results["random"]["curve_margins"]
    assert set(results["envsched_relabelled"]["curve_margins"]) == {"random"}
    # envsched - random at budget step 4: (0.10, 0.08, -0.01)
    assert results["envsched"]["curve_margins"]["random"]["score"]["mean"][2] == pytest.approx(
        0.17 / 3
    )


def test_rollouts_to_reach_randoms_final(results):
    """Random's finals 0.60, 0.58, 0.62 from a shared 0.50: lift 0.10, so its final (share 1 of
    the lift) is 0.60 in every seed."""
    envsched = results["envsched"]["compute_to_target"]
    per_seed = {s: m["rollouts"]["1.0"] for s, m in envsched["per_seed"].items()}
    # seed 0: between budget steps 0 (0.50) and 2 (0.65); seed 1: between 2 (0.58) and 4
    # (0.66); seed 2: between 2 (0.56) and 4 (0.61)
    reached = [0.10 / 0.15 * 2, 2 + 0.02 / 0.08 * 2, 2 + 0.04 / 0.05 * 2]
    assert [per_seed[s] for s in range(3)] == pytest.approx([b * PER_STEP for b in reached])
    final = envsched["rollouts_to"]["1.0"]
    assert (final["reached"], final["seeds"]) == (3, 3)
    assert final["median"] == pytest.approx(reached[1] * PER_STEP)
    # random itself: 0.60 at 4, at 2 exactly, and between 2 (0.52) and 4 (0.62)
    randoms = [4.0, 2.0, 2 + 0.08 / 0.10 * 2]
    ratio = envsched["versus"]["random"]["rollouts_to"]["1.0"]["ratio"]
    expected = math.exp(np.mean([math.log(r / e) for r, e in zip(randoms, reached, strict=True)]))
    assert ratio["mean"] == pytest.approx(expected) and ratio["n"] == 3

    rho0 = results["rho0"]["compute_to_target"]
    # 0.60 exactly at 2; never (0.58 at most); between 0 (0.50) and 2 (0.62)
    assert rho0["per_seed"][1]["rollouts"]["1.0"] is None
    assert [rho0["per_seed"][s]["rollouts"]["1.0"] for s in (0, 2)] == pytest.approx(
        [2 * PER_STEP, 0.10 / 0.12 * 2 * PER_STEP]
    )
    assert rho0["rollouts_to"]["1.0"]["reached"] == 2
    assert rho0["versus"]["random"]["rollouts_to"]["1.0"]["pairs"] == 2


def test_report_shows_curves_margins_and_compute_to_target(tmp_path, results):
    run_info = {
        "heldout": {"tasks": 4, "samples": 2, "seed": 0, "every_steps": 2},
        "sft_steps": 0,
        "starting_policy": "start",
        "policy": "start",
        "pool": {"train_tasks": 8, "held_out_tasks": 4, "envs": 2},
        "timings": {"runs_s": 1.0, "total_s": 1.0},
    }
    write_ablation_report(results, run_info, CONFIG, tmp_path)
    report = (tmp_path / "report.md").read_text()
    assert "Held-out reward against rollouts spent" in report
    assert "Pool reward minus envsched_relabelled, paired by seed" in report
    assert "| scheduler | 0 | 32 | 64 |" in report  # rollouts = budget step x B x K
    assert "| envsched | +0.0400 ± " in report  # envsched - random at 32 rollouts
    assert "Compute to a target. Start 0.5000; random's final lift +0.1000" in report
    assert "| 40 (3/3 seeds) |" in report  # the main table's column, envsched
    assert "| rho0 |" in report and "(2/3 seeds) |" in report
    for name in ("score.png", "pool_score.png", "paired_margins.png", "batch_metrics.png"):
        assert (tmp_path / name).read_bytes()[:4] == b"\x89PNG", name
        assert f"({name})" in report


def test_simulator_tables_keep_step_0_and_the_score_columns():
    """The simulator scores every step: its tables show step 0 and score@e, 3e, S only."""
    config = AblationConfig(seeds=2, steps=20, batch_size=2, schedulers=("envsched", "random"),
                            k_grid=())  # fmt: skip
    runs = []
    for name, slope in (("envsched", 0.02), ("random", 0.01)):
        for seed in range(2):
            records = [{"step": -1, "budget_step": 0.0, "score": 0.5}]
            records += [
                {"step": s, "budget_step": s + 1.0, "score": 0.5 + slope * (s + 1) + 0.001 * seed}
                | {"trained_groups": 2}
                | dict.fromkeys(STEP_METRICS, 0.0)
                for s in range(20)
            ]
            runs.append({"name": name, "seed": seed, "records": records, "wall_s": 1.0,
                         "schedule_s": 0.1, "rollouts": 20 * PER_STEP})  # fmt: skip
    results = summarise(runs, config)
    assert len(results["envsched"]["curve_margins"]["random"]["score"]["mean"]) == 21
    per_seed = results["envsched"]["compute_to_target"]["per_seed"]
    # random ends at 0.70 and 0.701: its final, averaged, is 0.7005; envsched gets there at
    # 10.025 and 9.975 budget steps
    reached = [per_seed[s]["rollouts"]["1.0"] / PER_STEP for s in (0, 1)]
    assert reached == pytest.approx([10.025, 9.975])
    text = render_reward_curves(results, config)
    assert "| scheduler | 0 | 64 | 192 | 320 |" in text
    assert "| envsched | +0.0400 ± 0.0000 | +0.1200 ± 0.0000 | +0.2000 ± 0.0000 |" in text
