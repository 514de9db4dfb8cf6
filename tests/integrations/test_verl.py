"""The verl recipe: the dataset and reward grouping everywhere; the trainer's registration
and verl's own dataset / collate path where verl is installed: ``.ci/run`` runs this file in a
venv of its own with ``.[verl]`` (verl pins transformers<5.11, so the test extra leaves it
out). verl's training loop (Ray workers, vLLM/SGLang rollout) is not run here."""

from __future__ import annotations

import pytest

from envsched_gnn.integrations.verl import DATA_SOURCE, pool_parquet, step_groups
from tests.integrations.small_setup import small_pool


def test_pool_parquet_rows(tmp_path):
    import pandas as pd

    path = pool_parquet(small_pool(), tmp_path / "train.parquet")
    frame = pd.read_parquet(path)
    train = small_pool().split("train")
    assert list(frame["extra_info"].map(lambda info: info["task_id"])) == [t.task_id for t in train]
    assert set(frame["data_source"]) == {DATA_SOURCE}
    first = frame.iloc[0]
    assert [m["role"] for m in first["prompt"]] == ["system", "user"]
    assert first["prompt"][1]["content"] == train[0].task.strip()


def test_step_groups_by_uid_without_padding():
    groups = step_groups(
        ["u1", "u2", "u1", "u2", "u1"],
        [1.0, 0.0, 0.5, 0.25, 0.0],
        {"u1": "task-a", "u2": "task-b"},
        padding=[False, False, False, False, True],
    )
    assert groups == {"task-a": [1.0, 0.5], "task-b": [0.0, 0.25]}
    with pytest.raises(ValueError, match="uid 'u3'"):
        step_groups(["u3"], [1.0], {"u1": "task-a"})


def test_trainer_registers_and_reads_the_pool_dataset_as_verl_does(tmp_path):
    pytest.importorskip("verl", reason="verl is an optional extra (pins transformers<5.11)")
    from omegaconf import OmegaConf
    from verl.trainer.ppo.v1 import get_trainer_cls
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.utils.dataset.rl_dataset import RLHFDataset, collate_fn

    from envsched_gnn.integrations.verl import register_envsched_trainer
    from envsched_gnn.training.policy import load_policy
    from tests.integrations.small_setup import small_policy_dir

    cls = register_envsched_trainer()
    assert get_trainer_cls("envsched") is cls and issubclass(cls, PPOTrainerSync)
    assert register_envsched_trainer() is cls

    _, tokenizer = load_policy(small_policy_dir())
    path = pool_parquet(small_pool(), tmp_path / "train.parquet")
    config = OmegaConf.create({"max_prompt_length": 4096, "filter_overlong_prompts": False})
    dataset = RLHFDataset(str(path), tokenizer, config)
    index_of = {info["task_id"]: i for i, info in enumerate(dataset.dataframe["extra_info"])}
    chosen = [t.task_id for t in small_pool().split("train")][:3]
    batch = collate_fn([dataset[index_of[t]] for t in chosen])
    assert [info["task_id"] for info in batch["extra_info"]] == chosen
    assert [list(m["content"] for m in p) for p in batch["raw_prompt"]][0][1] == small_pool().task(
        chosen[0]
    ).task.strip()
