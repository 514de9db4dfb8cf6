"""The main job end to end at toy sizes, against the session's real store server: pool,
graph in the store, SFT, GRPO with EnvSched and random at equal rollouts, evaluations,
the report folder."""

from __future__ import annotations

import json
import math

import pytest

from envsched_gnn.models.evidence_picture import read_png_data
from envsched_gnn.pipeline.job import RunOptions, run_pipeline
from envsched_gnn.pipeline.presets import Preset, StartRecipe
from envsched_gnn.pipeline.report import summarize
from envsched_gnn.scheduler.dynamic_sampling import DynamicSamplingConfig
from envsched_gnn.training.competence import COMPETENCE_FILE
from envsched_gnn.training.competence_profile import CompetenceProfile
from envsched_gnn.training.grpo.config import GRPOConfig

pytestmark = [pytest.mark.slow, pytest.mark.store]

TOY = Preset(
    envs=3,
    tasks_per_env=8,
    test_per_env=2,
    sft_steps=10,
    sft_extra_tasks_per_env=0,
    sft_include_train_split=True,
    grpo=GRPOConfig(
        batch_size=4,
        group_size=2,
        steps=2,
        lr=1e-3,
        eval_every=2,
        eval_tasks=3,
        eval_samples=2,
        pool_eval_samples=2,
        pool_eval_tasks=4,
    ),  # fmt: skip
    max_calls=2,
    base_max_calls=3,
    start=StartRecipe(steps=2, extra_tasks_per_env=3, competence=CompetenceProfile(mean=0.6)),
)


def test_main_job_writes_a_report_of_its_own_numbers(tmp_path, store_server, monkeypatch):
    monkeypatch.setenv("NEO4J_USER", store_server.auth[0])
    monkeypatch.setenv("NEO4J_PASSWORD", store_server.auth[1])
    monkeypatch.setenv("NEO4J_DATABASE", store_server.database)
    monkeypatch.chdir(tmp_path)
    options = RunOptions(
        out=str(tmp_path / "report"),
        store=store_server.uri,
        reset_store=True,
        schedulers=["envsched", "random", "random+ds"],
        sampling=DynamicSamplingConfig(oversample=2),
    )

    results = run_pipeline(options, TOY)

    out = tmp_path / "report"
    on_disk = json.loads((out / "results.json").read_text())
    assert on_disk["schedulers"].keys() == {"envsched", "random", "random+ds"}
    for name, result in on_disk["schedulers"].items():
        # equal rollouts: random behind dynamic sampling spends them in one batch of 2B
        steps = 1 if name == "random+ds" else 2
        assert [e["step"] for e in result["eval"]] == [0, steps], name
        assert len(result["steps"]) == steps and result["rollouts"] == 2 * 4 * 2
        assert {"batch/mean_reward_variance", "batch/envs_covered"} <= set(result["steps"][0])
    # both start from the same start, made from the SFT policy on imperfect demonstrations,
    # evaluated once: held-out and 4 train tasks x 2, whose headroom the report shows
    envsched, random = (on_disk["schedulers"][n]["eval"][0] for n in ("envsched", "random"))
    assert envsched == random and len(envsched["pool"]["per_task"]) == 4
    start = on_disk["config"]["start"]
    assert start["source"] == "sft" and start["sft"]["competence"]["mean"] == 0.6
    mixture = json.loads((out / "start" / "policy" / COMPETENCE_FILE).read_text())
    assert mixture["examples"] > mixture["imperfect"] > 0
    assert on_disk["config"]["warm_start"]["fingerprint"] != start["fingerprint"]
    assert (
        on_disk["schedulers"]["envsched"]["rewards"] == results["schedulers"]["envsched"]["rewards"]
    )
    report = (out / "report.md").read_text()
    assert "| envsched |" in report and "| random |" in report
    # every group trains without the filter; behind it, the groups with no spread do not
    rows = {name: summarize(result) for name, result in on_disk["schedulers"].items()}
    assert rows["envsched"]["updates"] == 2 and rows["envsched"]["rolled_per_trained"] == 1.0
    behind = on_disk["schedulers"]["random+ds"]
    rolled = sum(len(groups) for groups in behind["rewards"])
    trained = behind["steps"][0]["batch/kept_groups"]
    expected = rolled / trained if trained else math.nan  # no group with spread: no update
    assert rolled == 2 * 4 and rows["random+ds"]["updates"] == int(trained > 0)
    assert rows["random+ds"]["rolled_per_trained"] == pytest.approx(expected, nan_ok=True)
    assert "groups rolled / trained" in report and "random+ds: dynamic sampling" in report
    assert "sometimes right" in report and "Headroom of the pool" in report
    for plot in ("heldout_reward.png", "reward_variance.png", "envs_covered.png"):
        assert (out / plot).read_bytes()[:4] == b"\x89PNG"
    # the evidence picture of the task rated highest at the last step, from the first
    # scheduler's observations
    evidence = on_disk["evidence"]
    assert evidence["step"] == 1 and f"![evidence]({evidence['file']})" in report
    drawn = read_png_data(out / evidence["file"])
    assert drawn["task_id"] == evidence["task"] and drawn["u_path"]["q"] == evidence["q"]
    assert drawn["num_tasks"] == 3 * (8 - 2)  # the scheduler's graph: the train split
    # the EnvSched run's observations are in the store, exactly once each
    with store_server.connect() as store:
        stored = {(o.task_id, o.step): o.rewards for o in store.read_observations()}
        assert store.count_tasks() == 3 * 8
    rewards = on_disk["schedulers"]["envsched"]["rewards"]
    expected = {(t, s): tuple(r) for s, step in enumerate(rewards) for t, r in step.items()}
    assert stored == expected


def test_unknown_preset_is_refused(tmp_path):
    with pytest.raises(ValueError, match="unknown preset 'huge'"):
        run_pipeline(RunOptions(preset="huge", out=str(tmp_path)))
