"""Ray (``pip install envsched-gnn[ray]``): the scheduler as an actor shared by many rollout
processes, and the environment runtime with Ray actors as its workers."""

from envsched_gnn.integrations.ray.env_runtime import (
    EnvWorker,
    EnvWorkerActor,
    RayEnvRuntime,
    RayRuntimeConfig,
)
from envsched_gnn.integrations.ray.scheduler_actor import EnvSchedActor, SchedulerService

__all__ = [
    "EnvSchedActor",
    "EnvWorker",
    "EnvWorkerActor",
    "RayEnvRuntime",
    "RayRuntimeConfig",
    "SchedulerService",
]
