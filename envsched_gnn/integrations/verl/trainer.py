"""verl V1 recipe: a registered trainer whose prompts the scheduler chooses.

Written against verl 0.9.1 (``verl.trainer.ppo.v1``). :func:`register_envsched_trainer`
registers ``EnvSchedPPOTrainer`` (``trainer.v1.trainer_mode=envsched``), a ``PPOTrainerSync``
whose scheduler comes from ``envsched.graph`` (a ``graph.json``), ``envsched.scheduler``
(default ``envsched``) and ``envsched.seed`` (default 0), with B = ``data.train_batch_size``.
Step s = ``global_steps - 1`` collates the rows of ``next_batch(s)`` (``extra_info.task_id``,
see :func:`pool_parquet`) as verl's dataloader would, each with a fresh ``uid``; after verl's
step, the step's ``uid`` and ``rm_scores`` (a sequence's reward is their sum) are read back
from TransferQueue, grouped by ``uid`` without padding, and observed. ``envsched_state.json``
is kept next to verl's ``data.pt`` in ``global_step_N/``. Rewards must be the verifier's, in
[0, 1]; what is tested: README, "Use it from your trainer".
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Mapping, Sequence
from pathlib import Path

from envsched_gnn.envs.pool import Pool
from envsched_gnn.integrations.dataset import pool_rows
from envsched_gnn.json_files import write_json_atomically
from envsched_gnn.training.agent_format import AgentConfig

STATE_FILE = "envsched_state.json"
DATA_SOURCE = "envsched"


def pool_parquet(
    pool: Pool, path: str | Path, split: str | None = "train", agent: AgentConfig | None = None
) -> Path:
    """Write ``pool``'s tasks as a verl RL dataset (``data.train_files``): columns
    ``data_source``, ``prompt`` (chat messages), ``ability``, ``reward_model``
    (``ground_truth`` = the task id) and ``extra_info`` (``task_id``, ``env_id``, ``index``)."""
    import pandas as pd

    rows = pool_rows(pool, split, agent)
    frame = pd.DataFrame(
        {
            "data_source": [DATA_SOURCE] * len(rows["task_id"]),
            "prompt": rows["prompt"],
            "ability": ["agent"] * len(rows["task_id"]),
            "reward_model": [{"style": "rule", "ground_truth": t} for t in rows["task_id"]],
            "extra_info": [
                {"task_id": t, "env_id": e, "index": i}
                for i, (t, e) in enumerate(zip(rows["task_id"], rows["env_id"], strict=True))
            ],
        }
    )
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_parquet(path)
    return path


def step_groups(
    uids: Sequence[str],
    rewards: Sequence[float],
    task_of_uid: Mapping[str, str],
    padding: Sequence[bool] | None = None,
) -> dict[str, list[float]]:
    """``{task_id: [r_1..r_K]}`` of one step from per-sample ``uid`` and sequence reward."""
    padding = padding if padding is not None else [False] * len(uids)
    groups: dict[str, list[float]] = {}
    for uid, reward, pad in zip(uids, rewards, padding, strict=True):
        if pad:
            continue
        try:
            task_id = task_of_uid[str(uid)]
        except KeyError:
            raise ValueError(f"a sample of uid {uid!r}, which no prompt of this step has") from None
        groups.setdefault(task_id, []).append(float(reward))
    return groups


def register_envsched_trainer(name: str = "envsched") -> type:
    """Define ``EnvSchedPPOTrainer`` and register it with verl as ``trainer.v1.trainer_mode=name``
    (idempotent). Call it in the process that runs verl's ``TaskRunner``."""
    import numpy as np
    import transfer_queue as tq
    from verl.trainer.ppo.v1 import register_trainer
    from verl.trainer.ppo.v1.trainer_base import TRAINER_REGISTRY
    from verl.trainer.ppo.v1.trainer_sync import PPOTrainerSync
    from verl.utils import tensordict_utils as tu
    from verl.utils.dataset.rl_dataset import collate_fn

    from envsched_gnn.graph.task_graph import read_graph
    from envsched_gnn.scheduler.registry import make_scheduler

    if name in TRAINER_REGISTRY:
        return TRAINER_REGISTRY[name]

    class EnvSchedPPOTrainer(PPOTrainerSync):
        """verl's synchronous PPO/GRPO trainer with EnvSched choosing every batch."""

        def init(self):
            super().init()
            options = self.config.get("envsched", {})
            if not options.get("graph"):
                raise ValueError("set envsched.graph=PATH (graph.json) for the envsched trainer")
            self.scheduler = make_scheduler(
                options.get("scheduler", "envsched"),
                read_graph(options["graph"]),
                batch_size=int(self.config.data.train_batch_size),
                seed=int(options.get("seed", 0)),
            )
            self._index_of = {
                info["task_id"]: i
                for i, info in enumerate(self.train_dataset.dataframe["extra_info"])
            }
            self._task_of_uid: dict[str, str] = {}
            self._load_envsched_state()

        def _next_train_batch(self, num_prompts=None):
            num_prompts = num_prompts or int(self.config.data.train_batch_size)
            if num_prompts != self.scheduler.batch_size:
                raise ValueError(
                    f"asked for {num_prompts} prompts, the scheduler chooses "
                    f"B = {self.scheduler.batch_size}"
                )
            task_ids = self.scheduler.next_batch(self.global_steps - 1)
            batch_dict = collate_fn([self.train_dataset[self._index_of[t]] for t in task_ids])
            uids = [str(uuid.uuid4()) for _ in task_ids]
            self._task_of_uid = dict(zip(uids, task_ids, strict=True))
            batch_dict["uid"] = np.array(uids, dtype=object)
            batch = tu.get_tensordict(batch_dict)
            tu.assign_non_tensor_data(batch, "global_steps", self.global_steps)
            return batch

        def step(self, metrics, timing_raw):
            batch = super().step(metrics, timing_raw)
            data = tq.kv_batch_get(
                keys=batch.keys, partition_id=batch.partition_id, select_fields=["uid", "rm_scores"]
            )
            rewards = [float(scores.sum()) for scores in data["rm_scores"].unbind(0)]
            padding = [bool(tag.get("is_padding", False)) for tag in batch.tags]
            uids = data["uid"]
            uids = uids.tolist() if hasattr(uids, "tolist") else list(uids)
            groups = step_groups(uids, rewards, self._task_of_uid, padding)
            self.scheduler.observe(self.global_steps - 1, groups)
            metrics.update(self.scheduler.metrics())
            return batch

        def _state_path(self) -> Path:
            folder = f"global_step_{self.global_steps}"
            return Path(self.config.trainer.default_local_dir) / folder / STATE_FILE

        def _save_checkpoint(self):
            super()._save_checkpoint()
            write_json_atomically(self._state_path(), self.scheduler.state_dict(), indent=None)

        def _load_envsched_state(self):
            if self.global_steps > 0 and self._state_path().is_file():
                self.scheduler.load_state_dict(json.loads(self._state_path().read_text()))

    EnvSchedPPOTrainer.__name__ = EnvSchedPPOTrainer.__qualname__ = "EnvSchedPPOTrainer"
    return register_trainer(name)(EnvSchedPPOTrainer)
