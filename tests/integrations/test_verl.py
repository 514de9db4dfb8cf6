"""The verl recipe. Everywhere: the dataset and the generation-batch bookkeeping. Where verl is
installed (``.ci/run`` runs this file in a venv of its own with ``.[verl]``; verl pins
transformers<5.11, so the test extra leaves it out): the trainer's registration, verl's own
dataset / collate path on our rows, and one verl step's sampling on a local Ray with verl's
TransferQueue and its sync ``ReplayBuffer`` (DAPO's ``filter_groups`` included), the rollouts
scored in the environment runtime. verl's PPO update (GPU workers, vLLM/SGLang rollout) is not
run here."""

from __future__ import annotations

from pathlib import Path

import pytest

from envsched_gnn.integrations.schedulers import adapter_scheduler, exact_batch
from envsched_gnn.integrations.verl import DATA_SOURCE, GenerationBatches, pool_parquet
from envsched_gnn.scheduler.dynamic_sampling import DynamicSampling, DynamicSamplingConfig
from tests.integrations.small_setup import rollout_rewards, small_graph, small_pool

B, K = 4, 3


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


TWO_B = DynamicSamplingConfig(oversample=2)
"""A fixed generation batch of 2B (verl's DAPO recipe's size)."""


def test_generation_batches_group_rewards_by_uid_and_observe_every_batch():
    scheduler = adapter_scheduler("verl", "random+ds", small_graph(), batch_size=B, sampling=TWO_B)
    batches = GenerationBatches(scheduler)
    first, first_uids = batches.choose()  # the composition's own: 2B
    refill, refill_uids = batches.choose(3)  # verl's refill: exactly 3
    assert (len(first), len(refill)) == (2 * B, 3) and len(set(first_uids + refill_uids)) == 11
    # K samples of each prompt, in any order; a padding copy is left out
    spread = {t: [0.0, 1.0, 1.0] for t in first[:3]}
    samples = [
        (u, r, False)
        for u, t in zip(first_uids, first, strict=True)
        for r in spread.get(t, [1.0] * K)
    ]
    samples += [(refill_uids[0], 0.5, False), (refill_uids[0], 0.5, False)]
    samples += [(refill_uids[0], 0.0, True), (refill_uids[1], 1.0, False)]  # one reward: no group
    uids, rewards, padding = zip(*reversed(samples), strict=True)
    batches.add(uids, rewards, padding)
    with pytest.raises(ValueError, match="uid 'nope'"):
        batches.add(["nope"], [1.0])
    assert batches.observe() == {
        "verl/generation_batches": 2.0,
        "verl/groups_generated": 11.0,
        "verl/groups_observed": 9.0,
    }
    observed = {(o.step, o.task_id): sorted(o.rewards) for o in scheduler.log.observations()}
    expected = {(0, t): sorted(spread.get(t, [1.0] * K)) for t in first}
    assert observed == {**expected, (1, refill[0]): [0.5, 0.5]}
    assert scheduler.last_zero_share == 1.0  # the last batch's only group: zero-variance
    assert batches.observe()["verl/groups_observed"] == 0.0  # nothing is observed twice

    restored = GenerationBatches(
        adapter_scheduler("verl", "random+ds", small_graph(), batch_size=B, sampling=TWO_B)
    )
    restored.load_state_dict(batches.state_dict())
    assert restored.next_step == 2 and restored.choose()[0] == batches.choose()[0]


def verl_config(graph: Path, scheduler: str, *overrides: str):
    """verl's own default PPO config (hydra) with B, K, the envsched trainer and ``overrides``."""
    import verl
    from hydra import compose, initialize_config_dir

    folder = str(Path(verl.__file__).parent / "trainer" / "config")
    with initialize_config_dir(config_dir=folder, version_base=None):
        return compose(
            config_name="ppo_trainer",
            overrides=[
                f"data.train_batch_size={B}",
                f"actor_rollout_ref.rollout.n={K}",
                "trainer.v1.trainer_mode=envsched",
                f"+envsched.graph={graph}",
                f"+envsched.scheduler={scheduler}",
                "transfer_queue.backend.SimpleStorage.num_data_storage_units=1",
                *overrides,
            ],
        )


FILTER = ("algorithm.filter_groups.enable=true", "algorithm.filter_groups.metric=reward")
OVERSAMPLE_2B = "+envsched.sampling.oversample=2"
"""A fixed generation batch of 2B, verl's DAPO recipe (the composition's default is B)."""


@pytest.fixture
def graph_file(tmp_path):
    from envsched_gnn.graph.task_graph import write_graph

    write_graph(tmp_path / "graph.json", small_graph())
    return tmp_path / "graph.json"


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


def test_the_trainer_is_verls_sync_trainer_and_keeps_verls_filter(graph_file):
    pytest.importorskip("verl", reason="verl is an optional extra (pins transformers<5.11)")
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer

    from envsched_gnn.integrations.verl import register_envsched_trainer

    trainer = register_envsched_trainer()(verl_config(graph_file, "envsched_spread+ds", *FILTER))
    # verl picks the async replay buffer for any mode but "sync"; this trainer is sync
    assert trainer.trainer_mode == "sync" and isinstance(trainer.replay_buffer, ReplayBuffer)
    buffer = trainer.replay_buffer
    assert (buffer.filter_groups_metric, buffer.train_batch_size, buffer.gen_batch_size) == (
        "reward",
        B,
        1,
    )


def test_over_sampling_without_verls_filter_is_refused(graph_file):
    pytest.importorskip("verl", reason="verl is an optional extra (pins transformers<5.11)")
    from envsched_gnn.integrations.verl.trainer import build_scheduler_from_config

    config = verl_config(graph_file, "envsched_spread+ds")
    with pytest.raises(ValueError, match="algorithm.filter_groups.enable=true") as refused:
        build_scheduler_from_config(config, filtering=False)
    assert "envsched.scheduler=envsched_spread without it" in str(refused.value)
    with pytest.raises(ValueError, match="surplus"):
        build_scheduler_from_config(
            verl_config(graph_file, "random+ds", "+envsched.sampling.surplus=keep"), True
        )
    greso = verl_config(graph_file, "random+ds", "+envsched.sampling.generation=greso")
    assert build_scheduler_from_config(greso, True).config.generation == "greso"
    with pytest.raises(ValueError, match="operation patterns.*envsched.pool"):
        build_scheduler_from_config(verl_config(graph_file, "envsched_ops"), False)


@pytest.fixture(scope="module")
def transfer_queue(tmp_path_factory):
    """A local Ray (loopback only) with verl's TransferQueue: its controller and one storage
    unit, one logical CPU each."""
    pytest.importorskip("verl", reason="verl is an optional extra (pins transformers<5.11)")
    import ray
    import transfer_queue as tq

    graph = tmp_path_factory.mktemp("tq") / "graph.json"
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _node_ip_address="127.0.0.1")
    tq.init(verl_config(graph, "random").transfer_queue)
    yield tq
    tq.close()
    ray.shutdown()


class EnvironmentRollouts:
    """verl's agent loop manager for the test: K rollouts of each prompt scored in the
    environment runtime (``rollout_rewards``: prefixes of the reference solution, no policy),
    written to TransferQueue as verl's agent loop writes them (``{uid}_{session}_0`` with
    ``rm_scores``, then the prompt's status ``finished``)."""

    def __init__(self, trainer, runtime, tq) -> None:
        self.trainer, self.runtime, self.tq = trainer, runtime, tq
        self.batches: list[list[str]] = []
        self.rolled: dict[tuple[int, str], list[float]] = {}
        self.group_of: dict[str, tuple[int, str]] = {}

    def generate_sequences(self, batch) -> None:
        import torch
        from tensordict import TensorDict

        tasks = []
        for uid in batch["uid"]:
            step, task_id = self.trainer.generations.of_uid[uid]
            rewards = torch.tensor(rollout_rewards(self.runtime, [task_id], step, K)[task_id])
            scores = torch.stack([torch.zeros(K), rewards], dim=1).float()  # reward: last token
            self.rolled[step, task_id] = scores.sum(dim=1).tolist()
            self.group_of[uid] = (step, task_id)
            keys = [f"{uid}_{j}_0" for j in range(K)]
            tags = [{"status": "success", "global_steps": self.trainer.global_steps}] * K
            fields = TensorDict({"rm_scores": scores}, batch_size=K)
            self.tq.kv_batch_put(keys=keys, partition_id="train", fields=fields, tags=tags)
            self.tq.kv_put(key=uid, partition_id="train", tag={"status": "finished"})
            tasks.append(task_id)
        self.batches.append(tasks)


@pytest.mark.slow
@pytest.mark.parametrize(
    "scheduler, overrides",
    [("envsched_spread+ds", (*FILTER, OVERSAMPLE_2B)), ("envsched", ())],
    ids=["over-sampling, verl filters", "plain, no filter"],
)
def test_one_verl_step_feeds_verls_filter_and_observes_every_group(
    transfer_queue, graph_file, tmp_path, scheduler, overrides
):
    from omegaconf import OmegaConf
    from verl.utils.dataset.rl_dataset import RLHFDataset

    from envsched_gnn.envs.runtime import EnvRuntime
    from envsched_gnn.envs.runtime_config import RuntimeConfig
    from envsched_gnn.integrations.verl import register_envsched_trainer
    from envsched_gnn.training.policy import load_policy
    from tests.integrations.small_setup import small_policy_dir

    trainer = register_envsched_trainer()(verl_config(graph_file, scheduler, *overrides))
    _, tokenizer = load_policy(small_policy_dir())
    parquet = pool_parquet(small_pool(), tmp_path / "train.parquet")
    options = OmegaConf.create({"max_prompt_length": 4096, "filter_overlong_prompts": False})
    trainer.train_dataset = RLHFDataset(str(parquet), tokenizer, options)  # as verl's setup
    trainer.global_steps = 1
    trainer.init_envsched()
    with EnvRuntime(small_pool(), RuntimeConfig(workers=1)) as runtime:
        rollouts = trainer.agent_loop_manager = EnvironmentRollouts(
            trainer, runtime, transfer_queue
        )
        trainer.prepare_step()  # verl's step: submit, then sample what trains (filter, refill)
        batch, verl_metrics = trainer.replay_buffer.sample(1, "train", B)
        metrics: dict = {}
        trainer.observe_step(batch, metrics)
    transfer_queue.kv_clear(keys=batch.keys, partition_id="train")

    # every group rolled out was observed once, at its generation batch, with its rewards
    observed = {(o.step, o.task_id): list(o.rewards) for o in trainer.scheduler.log.observations()}
    assert {key: sorted(r) for key, r in observed.items()} == {
        key: sorted(r) for key, r in rollouts.rolled.items()
    }
    assert metrics["verl/groups_observed"] == len(rollouts.rolled)
    trained = {rollouts.group_of[key.split("_")[0]] for key in batch.keys}
    assert len(trained) == B

    # the batches are the scheduler's: its own first, verl's refills exactly as asked
    composed = isinstance(trainer.scheduler, DynamicSampling)
    sampling = trainer.scheduler.config if composed else None
    replica = adapter_scheduler("verl", scheduler, small_graph(), batch_size=B, sampling=sampling)
    assert rollouts.batches[0] == replica.next_batch(0)
    for step, refill in enumerate(rollouts.batches[1:], start=1):
        assert refill == exact_batch(replica, step, len(refill))
    spread = {key for key, r in rollouts.rolled.items() if min(r) != max(r)}
    if composed:
        assert sampling.oversample == 2 and len(rollouts.batches[0]) == 2 * B  # its batch
        # verl evicted every zero-variance group, refilled, trained B with spread and
        # dropped the surplus
        assert trained <= spread
        zero = len(rollouts.rolled) - len(spread)
        assert zero > 0 and len(rollouts.batches) > 1, "no refill: pick a case that has one"
        assert verl_metrics["training/filter_groups/evicted_samples"] == zero
        assert verl_metrics["training/filter_groups/discarded_surplus_samples"] == len(spread) - B
        last = rollouts.batches[-1]
        last_spread = sum((len(rollouts.batches) - 1, t) in spread for t in last)
        assert trainer.scheduler.last_zero_share == 1 - last_spread / len(last)
    else:
        assert rollouts.batches == [rollouts.batches[0]] and len(rollouts.batches[0]) == B
        assert verl_metrics == {} and len(rollouts.rolled) == B
    assert trainer.generations.state_dict()["next_step"] == len(rollouts.batches)
