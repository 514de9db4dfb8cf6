"""Batch selectors behind one interface: EnvSched and the baselines it is compared with."""
