"""``EnvSchedPPOTrainer``: verl's synchronous V1 trainer with a scheduler choosing every batch.

Written against verl 0.9.1 (``verl.trainer.ppo.v1``). :func:`register_envsched_trainer`
registers it as ``trainer.v1.trainer_mode=envsched``; it is verl's ``PPOTrainerSync`` whatever
the name (verl's base class reads the mode to pick its replay buffer, refill and checkpoint
paths; this trainer answers ``sync``). Options (``+envsched.NAME=...``): ``graph`` (a
``graph.json``, required), ``scheduler`` (default ``envsched``), ``seed`` (default 0),
``pool`` (the pool folder, whose operation patterns ``envsched_ops`` reads) and ``sampling``
(``generation``, ``oversample``, ``headroom`` of a ``NAME+ds``); B = ``data.train_batch_size``.

**Batches.** Every batch of prompts handed to verl's rollout is one scheduler step
(:class:`~envsched_gnn.integrations.verl.generations.GenerationBatches`): each verl step's first
is the scheduler's ``next_batch`` (B tasks; G for a scheduler that over-samples), collated as
verl's dataloader would (rows found by ``extra_info.task_id``, see ``pool_parquet``), each row
with a fresh ``uid``.

**Dynamic sampling is verl's.** verl 0.9.1's sync trainer has DAPO's filter
(``algorithm.filter_groups.enable=true``, ``metric=reward``; ``ReplayBuffer.sample``): it evicts
each finished group whose rewards are all equal, refills two prompts for each (exactly the n
tasks it asks for, picked by the wrapped scheduler), and once B groups with spread are
finished it waits for those in flight, trains on the B oldest and drops the surplus. The
scheduler feeds that filter and does not filter again: a scheduler that over-samples
(``NAME+ds``, ``dapo``) is refused unless verl's filter is on, and then only sizes each step's
first generation batch by its rule (the composition's refill, surplus and
``max_generation_batches`` are verl's: ``max_inflight_gen_batches`` bounds the refills). Any
other scheduler runs with or without verl's filter.

**Observation.** Every group rolled out is observed when its verl step ends: the groups verl
trains and those its replay buffer clears (zero-variance groups evicted, the surplus; read just
before they are cleared). A sample's reward is the sum of its ``rm_scores``, read back from
TransferQueue under its key ``{uid}_{session}_{index}``; padding is left out.
``envsched_state.json`` (the scheduler's state and the next scheduler step) is kept next to
verl's ``data.pt`` in ``global_step_N/``. Rewards must be the verifier's, in [0, 1]; what is
tested: docs/trainers.md.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from envsched_gnn.integrations.schedulers import adapter_scheduler
from envsched_gnn.integrations.verl.generations import GenerationBatches
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.scheduler.dynamic_sampling import DynamicSamplingConfig

STATE_FILE = "envsched_state.json"
VERL_SAMPLING = ("generation", "oversample", "headroom")
"""The ``DynamicSamplingConfig`` fields a verl run sets; verl's filter owns the others."""


def sampling_from_options(options: Any) -> DynamicSamplingConfig | None:
    """``envsched.sampling`` as a :class:`DynamicSamplingConfig` (None when not given)."""
    if not options:
        return None
    given = dict(options)
    unknown = sorted(set(given) - set(VERL_SAMPLING))
    if unknown:
        raise ValueError(
            f"envsched.sampling: {unknown} cannot be set in verl, expected only {VERL_SAMPLING}: "
            "verl's own filter drops the surplus and bounds the refills "
            "(algorithm.filter_groups.max_inflight_gen_batches)"
        )
    return DynamicSamplingConfig(**given)


def build_scheduler_from_config(config: Any, filtering: bool):
    """The scheduler of ``config.envsched`` with B = ``data.train_batch_size``; ``filtering``:
    verl's ``algorithm.filter_groups`` is on (a scheduler that over-samples needs it)."""
    from envsched_gnn.envs.pool_io import load_pool
    from envsched_gnn.graph.task_graph import read_graph
    from envsched_gnn.scheduler.registry import check_scheduler_name, over_samples

    options = config.get("envsched", {})
    if not options.get("graph"):
        raise ValueError("set +envsched.graph=PATH (graph.json) for the envsched trainer")
    name = check_scheduler_name(str(options.get("scheduler", "envsched")))
    if over_samples(name) and not filtering:
        raise ValueError(
            f"envsched.scheduler={name} over-samples (dynamic sampling), which in verl is verl's "
            "own filter: set algorithm.filter_groups.enable=true "
            "algorithm.filter_groups.metric=reward (the scheduler then sizes and picks each "
            "step's first generation batch and picks verl's refills), or use "
            f"envsched.scheduler={name.removesuffix('+ds')} without it"
        )
    return adapter_scheduler(
        "verl",
        name,
        read_graph(options["graph"]),
        batch_size=int(config.data.train_batch_size),
        seed=int(options.get("seed", 0)),
        pool=load_pool(options["pool"]) if options.get("pool") else None,
        sampling=sampling_from_options(options.get("sampling")),
    )


def register_envsched_trainer(name: str = "envsched") -> type:
    """Define ``EnvSchedPPOTrainer`` and register it with verl as ``trainer.v1.trainer_mode=name``
    (idempotent). Call it in the process that runs verl's ``TaskRunner``."""
    import numpy as np
    import transfer_queue as tq
    from verl.trainer.ppo.v1 import register_trainer
    from verl.trainer.ppo.v1.replay_buffer import ReplayBuffer
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import collate_fn

    if name in TRAINER_REGISTRY:
        return TRAINER_REGISTRY[name]

    def sample_rewards(keys: list[str], partition_id: str) -> tuple[list[str], list[float]]:
        """Each sample's prompt uid (its key is ``{uid}_{session}_{index}``) and reward, the
        sum of its ``rm_scores``, as verl's filter reads them."""
        data = tq.kv_batch_get(keys=keys, partition_id=partition_id, select_fields=["rm_scores"])
        rewards = [float(scores.sum()) for scores in list(data["rm_scores"])]
        return [key.split("_")[0] for key in keys], rewards

    class ObservingReplayBuffer(ReplayBuffer):
        """verl's sync replay buffer, handing ``on_clear`` the rewards of every training group
        it clears (zero-variance groups evicted, the surplus) before they are gone."""

        on_clear = None

        def _clear_groups(self, partition_id: str, uids: set[str]) -> None:
            if partition_id == "train" and uids and self.on_clear is not None:
                keys = [k for k in self.partitions[partition_id] if k.split("_")[0] in uids]
                if keys:
                    self.on_clear(*sample_rewards(keys, partition_id))
            super()._clear_groups(partition_id, uids)

    class EnvSchedPPOTrainer(PPOTrainerSync):
        """verl's synchronous PPO/GRPO trainer with a scheduler choosing every batch."""

        @property
        def trainer_mode(self) -> str:
            """``sync``: what verl's base class reads for its replay buffer, refill and
            checkpoints, whatever name this trainer is registered under."""
            return "sync"

        @trainer_mode.setter
        def trainer_mode(self, configured: str) -> None:
            """verl assigns the configured name (this trainer's); it stays a sync trainer."""

        def _build_replay_buffer(self):
            buffer = super()._build_replay_buffer()
            if type(buffer) is not ReplayBuffer:
                raise ValueError(
                    f"the envsched trainer runs verl's sync ReplayBuffer, not {type(buffer)}: "
                    "unset trainer.v1.sampler.custom_sampler"
                )
            buffer.__class__ = ObservingReplayBuffer  # adds the observer only
            return buffer

        def init(self):
            super().init()
            self.init_envsched()

        def init_envsched(self) -> None:
            """The scheduler, its batches and the rows of its tasks (after verl's setup)."""
            filtering = self.replay_buffer.filter_groups_metric is not None
            scheduler = build_scheduler_from_config(self.config, filtering)
            self.generations = GenerationBatches(scheduler)
            self.replay_buffer.on_clear = self.generations.add
            self._index_of = {
                info["task_id"]: i
                for i, info in enumerate(self.train_dataset.dataframe["extra_info"])
            }
            missing = sorted(set(scheduler.task_ids) - set(self._index_of))
            if missing:
                raise ValueError(
                    f"{len(missing)} task(s) of envsched.graph are not rows of data.train_files "
                    f"(extra_info.task_id), e.g. {missing[:3]}"
                )
            self._load_envsched_state()

        @property
        def scheduler(self):
            return self.generations.scheduler

        def _next_train_batch(self, num_prompts=None):
            task_ids, uids = self.generations.choose(num_prompts)
            batch_dict = collate_fn([self.train_dataset[self._index_of[t]] for t in task_ids])
            batch_dict["uid"] = np.array(uids, dtype=object)
            batch = tu.get_tensordict(batch_dict)
            tu.assign_non_tensor_data(batch, "global_steps", self.global_steps)
            return batch

        def step(self, metrics, timing_raw):
            batch = super().step(metrics, timing_raw)
            self.observe_step(batch, metrics)
            return batch

        def observe_step(self, batch, metrics: dict) -> None:
            """Add the trained samples' rewards and observe every batch of the step."""
            uids, rewards = sample_rewards(batch.keys, batch.partition_id)
            padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
            self.generations.add(uids, rewards, padding)
            counts = self.generations.observe()
            metrics.update(self.scheduler.metrics())
            metrics.update(counts)

        def _state_path(self) -> Path:
            folder = f"global_step_{self.global_steps}"
            return Path(self.config.trainer.default_local_dir) / folder / STATE_FILE

        def _save_checkpoint(self):
            super()._save_checkpoint()
            state = self.generations.state_dict()
            write_json_atomically(self._state_path(), state, indent=None)

        def _load_envsched_state(self):
            if self.global_steps > 0 and self._state_path().is_file():
                self.generations.load_state_dict(json.loads(self._state_path().read_text()))

    EnvSchedPPOTrainer.__name__ = EnvSchedPPOTrainer.__qualname__ = "EnvSchedPPOTrainer"
    return register_trainer(name)(EnvSchedPPOTrainer)
