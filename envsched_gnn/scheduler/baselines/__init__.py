"""Baselines EnvSched is compared with, behind the same ``Scheduler`` interface."""
