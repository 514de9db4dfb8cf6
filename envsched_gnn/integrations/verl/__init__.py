"""verl V1 recipe (``pip install envsched-gnn[verl]``, written against verl 0.9.1): a registered
trainer whose prompts the scheduler chooses, with verl's own dynamic sampling.

:func:`pool_parquet` writes a pool as verl's RL dataset; :func:`register_envsched_trainer`
registers ``EnvSchedPPOTrainer`` (``trainer.v1.trainer_mode=envsched``), verl's synchronous
trainer with the scheduler choosing every generation batch (:mod:`.trainer`), its bookkeeping
in :class:`GenerationBatches`. Usage: docs/trainers.md.
"""

from envsched_gnn.integrations.verl.dataset import DATA_SOURCE, pool_parquet
from envsched_gnn.integrations.verl.generations import GenerationBatches
from envsched_gnn.integrations.verl.trainer import STATE_FILE, register_envsched_trainer

__all__ = [
    "DATA_SOURCE",
    "STATE_FILE",
    "GenerationBatches",
    "pool_parquet",
    "register_envsched_trainer",
]
