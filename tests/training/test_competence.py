"""The competence profile and the SFT mixture of a start that is sometimes right."""

import json
import re
from dataclasses import replace

import numpy as np
import pytest

from envsched_gnn.envs.generator import generate_pool
from envsched_gnn.envs.generator.mistakes import MISTAKE_KINDS
from envsched_gnn.envs.runtime import EnvRuntime
from envsched_gnn.envs.runtime_config import RuntimeConfig
from envsched_gnn.training.competence import COMPETENCE_FILE, mixture_runs
from envsched_gnn.training.competence_profile import CompetenceProfile, draw_rates
from envsched_gnn.training.sft import run_sft
from envsched_gnn.training.sft_config import SFTConfig
from envsched_gnn.training.sft_data import run_references
from envsched_gnn.training.warm_start import sft_fingerprint
from tests.training.tiny_policy import TINY, TINY_SFT


@pytest.fixture(scope="module")
def pool():
    return generate_pool(4, 16, seed=5, test_per_env=0, max_calls=2)


def test_rates_are_drawn_reproducibly_from_the_seed(pool):
    profile = CompetenceProfile(seed=3)
    rates = draw_rates(profile, pool.tasks)
    assert rates == draw_rates(CompetenceProfile(seed=3), list(reversed(pool.tasks)))
    assert rates != draw_rates(CompetenceProfile(seed=4), pool.tasks)
    assert sorted(rates) == sorted(f"{e}/{k}" for e in pool.envs for k in MISTAKE_KINDS)
    per_task = draw_rates(replace(profile, by="task"), pool.tasks)
    assert sorted(per_task) == sorted(t.task_id for t in pool.tasks)


def test_rates_follow_the_beta_of_the_profile(pool):
    many = [replace(t, task_id=f"{t.task_id}-{i}") for i in range(40) for t in pool.tasks]
    profile = CompetenceProfile(by="task", mean=0.3, concentration=2.0, seed=0)
    rates = np.array(list(draw_rates(profile, many).values()))
    # Beta(0.6, 1.4): mean 0.3, variance 0.3 * 0.7 / 3 = 0.07
    assert len(rates) == 2560 and ((rates > 0) & (rates < 1)).all()
    assert rates.mean() == pytest.approx(0.3, abs=0.02)
    assert rates.var() == pytest.approx(0.07, abs=0.01)


@pytest.mark.parametrize(
    "bad",
    [
        {"by": "domain"},
        {"mean": 0.0},
        {"mean": 1.0},
        {"concentration": 0.0},
        {"kinds": ("stop_early", "typo")},
        {"kinds": ()},
    ],
)
def test_a_bad_profile_is_refused(bad):
    [(field, value)] = bad.items()
    with pytest.raises(ValueError, match=rf"CompetenceProfile\.{field} = {re.escape(repr(value))}"):
        CompetenceProfile(**bad)


def test_every_imperfect_example_is_executed_and_scores_below_1(pool):
    profile = CompetenceProfile(mean=0.7, seed=1)
    with EnvRuntime(pool, RuntimeConfig(workers=2)) as runtime:
        runs, summary = mixture_runs(runtime, pool, pool.tasks, profile)
        again = run_references(runtime, [m.run.task for m in runs], keep_empty=True)
    imperfect = [m for m in runs if m.kind is not None]
    assert len(runs) == len(pool.tasks) and summary["imperfect"] == len(imperfect) > 10
    assert {m.kind for m in imperfect} >= {"stop_early", "wrong_value"}
    for mixed, replayed in zip(runs, again, strict=True):
        # what the example shows is what the environment answers, and its reward is real
        assert mixed.run.results == replayed.results
        assert mixed.run.reward == replayed.reward
        assert (mixed.run.reward < 1.0) == (mixed.kind is not None)
    for kind, counts in summary["kinds"].items():
        assert counts["kept"] == sum(m.kind == kind for m in imperfect) <= counts["planned"]
    by_task = {t.task_id: t for t in pool.tasks}
    correct = [m for m in runs if m.kind is None]
    assert all(m.run.task == by_task[m.run.task.task_id] for m in correct)


def test_the_fingerprint_covers_the_profile(pool):
    config = replace(SFTConfig(), extra_tasks_per_env=0)
    plain = sft_fingerprint(pool, config)
    profiled = replace(config, competence=CompetenceProfile())
    prints = {
        plain,
        sft_fingerprint(pool, profiled),
        sft_fingerprint(pool, replace(profiled, competence=CompetenceProfile(mean=0.4))),
        sft_fingerprint(pool, replace(profiled, competence=CompetenceProfile(by="task"))),
        sft_fingerprint(pool, replace(profiled, competence=CompetenceProfile(seed=1))),
    }
    assert len(prints) == 5
    assert sft_fingerprint(pool, profiled) == sft_fingerprint(pool, replace(profiled))


def test_sft_on_the_mixture_saves_the_profile_with_the_policy(tmp_path, pool):
    profile = CompetenceProfile(mean=0.6, seed=2)
    config = replace(
        TINY_SFT,
        max_steps=4,
        policy=replace(TINY, vocab_size=900),
        include_train_split=True,
        competence=profile,
    )
    policy = run_sft(pool, None, config, tmp_path)
    saved = json.loads((policy / COMPETENCE_FILE).read_text())
    summary = json.loads((tmp_path / "sft_summary.json").read_text())
    assert saved["profile"]["mean"] == 0.6 and saved["examples"] == summary["examples"]
    assert 0 < saved["imperfect"] < saved["examples"]
    assert saved["rates"] == draw_rates(profile, pool.split("train"))
