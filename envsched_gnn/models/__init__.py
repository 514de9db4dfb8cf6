"""Reward-variance predictors over the task graph: the analytic propagation and a learned one."""
