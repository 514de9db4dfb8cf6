"""A pool as verl's RL dataset (``data.train_files``), one row per task."""

from __future__ import annotations

from pathlib import Path

from envsched_gnn.envs.pool import Pool
from envsched_gnn.integrations.dataset import pool_rows
from envsched_gnn.training.agent_format import AgentConfig

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
