"""envsched-gnn: EnvSched rollout scheduling for agentic RL (arXiv 2610.37609)."""

__version__ = "0.1.0"
