"""``eval ablate --learner policy``: real GRPO runs of a tiny policy, reported like the sim."""

import json
import math

import pytest

from envsched_gnn.eval.ablation.ablate import run_ablation
from envsched_gnn.eval.ablation.config import STEP_METRICS, AblationConfig, PolicyLearnerConfig
from envsched_gnn.eval.simulator.config import SimulatorConfig
from envsched_gnn.training.grpo.config import GRPOConfig
from tests.training import grpo_setup
from tests.training.grpo_setup import AGENT, POOL, RUNTIME
from tests.training.tiny_policy import trained_policy_dir


@pytest.mark.slow  # real GRPO runs
def test_dapo_at_equal_rollouts_counts_dropped_groups_and_stops_at_the_budget(tmp_path):
    """Issue 37, the real learner: DAPO with B = 3 of the 4 train tasks (generation batches of
    all 4) makes 3 steps of the budget S = 4 (S B K = 48 rollouts); every rollout it generates
    (zero-variance, dropped or pending) counts, its run stops at S B K rollouts as random's
    does, a step short of B groups with spread makes no update, and the last step trains
    what is pending."""
    budget = 4 * 3 * 4
    runs = {}
    for name in ("random", "dapo"):
        grpo = grpo_setup.small_config(scheduler=name, batch_size=3, steps=4)
        runs[name] = grpo_setup.run(grpo, tmp_path / name)
    dapo = runs["dapo"]
    assert len(dapo.steps) == 3 and len(runs["random"].steps) == 4
    assert dapo.rollouts == runs["random"].rollouts == budget
    assert [m["batch/rollouts"] for m in dapo.steps] == [16, 16, 16]
    last = dapo.steps[-1]
    assert last["train/rollouts_total"] == last["sampling/rollouts_spent_total"] == budget
    assert last["sampling/groups_pending"] == 0 and last["batch/kept_groups"] > 0
    dropped = sum(
        m["sampling/groups_zero_variance"] + m["sampling/groups_dropped"] for m in dapo.steps
    )
    trained = sum(m["batch/kept_groups"] for m in dapo.steps)
    assert dropped > 0 and last["sampling/rollouts_wasted_total"] == 4 * dropped
    assert last["sampling/rollouts_trained_total"] == 4 * trained == budget - 4 * dropped
    idle = [m for m in dapo.steps if m["batch/kept_groups"] == 0]
    assert idle and all(m["sampling/groups_pending"] > 0 for m in idle)
    assert all(math.isnan(m["train/loss"]) for m in idle)  # nothing trained, nothing measured


@pytest.mark.slow
def test_policy_ablation_reports_the_runs_own_numbers(tmp_path):
    """Two runs at a time in worker processes; every record is the run's own."""
    policy = PolicyLearnerConfig(
        model=str(trained_policy_dir()),
        sft_steps=0,
        recipe=GRPOConfig(lr=1e-3, micro_batch_size=3),
        workers=2,
        eval_tasks=2,
        eval_samples=2,
        accelerator="cpu",
        agent=AGENT,
        runtime=RUNTIME,
    )
    config = AblationConfig(
        seeds=2,
        steps=2,
        batch_size=2,
        learner="policy",
        schedulers=("envsched", "envsched_spread", "random"),
        k_grid=(),
        controls=("relabelled", "permuted"),
        simulator=SimulatorConfig(rollouts=2),
        policy=policy,
    )
    out = tmp_path / "out"
    run_ablation(POOL, config, out)

    results = json.loads((out / "results.json").read_text())
    # the primary and a secondary control run too, each seed on its own draw
    assert set(results) == {
        "envsched",
        "envsched_spread",
        "random",
        "envsched_relabelled",
        "envsched_permuted",
    }
    for target in ("envsched", "envsched_spread"):
        for control in ("envsched_relabelled", "envsched_permuted"):
            assert set(results[target]["margin_over_controls"][control]) == {"1", "2"}
    step0 = None
    for name, entry in results.items():
        assert entry["learner"] == "policy (real GRPO)"
        assert entry["seeds"] == [0, 1] and entry["rollouts"] == 2 * 2 * 2, name
        assert entry["curve"]["budget_step"] == [0.0, 1.0, 2.0]  # evaluations every ceil(2/5)
        for seed, run in zip((0, 1), entry["runs"], strict=True):
            grpo = json.loads(
                (out / "runs" / name / f"seed{seed}" / "grpo_result.json").read_text()
            )
            evals = [e["mean_reward"] for e in grpo["evals"]]
            assert [e["step"] for e in grpo["evals"]] == [0, 1, 2]
            assert [r["score"] for r in run["records"]] == evals  # the run's own evaluations
            assert [r["trained_groups"] for r in run["records"][1:]] == [2, 2]
            # the run's own groups, with how each task was picked
            assert [g["task_ids"] for g in run["groups"]] == grpo["batches"]
            assert [g["rewards"] for g in run["groups"]] == [
                list(step.values()) for step in grpo["rewards"]
            ]
            for group in run["groups"]:
                scored = name != "random"  # EnvSched's q at the pick; random ranks by none
                assert (group["score"] is not None) == scored, name
                assert len(group["stage"]) == len(group["task_ids"])
            for record, step in zip(run["records"][1:], grpo["steps"], strict=True):
                assert {m: record[m] for m in STEP_METRICS} == {m: step[m] for m in STEP_METRICS}
            # one starting policy, one fixed held-out set: the same step-0 result everywhere
            step0 = step0 or grpo["evals"][0]
            assert grpo["evals"][0] == step0
        for column in ("1", "2"):
            per_seed = [
                next(r["score"] for r in run["records"] if r["step"] == int(column) - 1)
                for run in entry["runs"]
            ]
            assert entry["score"][column]["per_seed"] == per_seed
            assert entry["score"][column]["ci95"] is not None
        for metric in STEP_METRICS:
            assert math.isfinite(entry["metrics"][metric]["mean"]), (name, metric)
        assert set(entry["margin_over_random"]) == {"1", "2"}
        # the pick diagnosis of every run: 2 steps x 2 groups, the first step all first visits
        picks = entry["picks"]
        assert set(picks["per_seed"]) == {"0", "1"}
        assert all(p["groups"] == 4 and p["first_visits"] >= 2 for p in picks["per_seed"].values())
        if name == "random":
            assert picks["auc_first"] is None and "informative_first_minus_random" not in picks
    report = (out / "report.md").read_text()
    assert "learner: policy (real GRPO)" in report and "| envsched |" in report
    assert "First visits" in report and "| envsched_spread |" in report
    assert (out / "score.png").read_bytes()[:4] == b"\x89PNG"
    assert (out / "batch_metrics.png").read_bytes()[:4] == b"\x89PNG"
    run_info = json.loads((out / "run.json").read_text())
    assert run_info["heldout"]["step0"]["mean_reward"] == step0["mean_reward"]
