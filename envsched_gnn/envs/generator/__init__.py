"""The built-in pool generator: 51 executable domains and their tasks (EnvScaler layout)."""

from envsched_gnn.envs.generator.tasks import (
    GeneratorError,
    generate_extra_tasks,
    generate_pool,
    write_pool_files,
)

__all__ = ["GeneratorError", "generate_extra_tasks", "generate_pool", "write_pool_files"]
