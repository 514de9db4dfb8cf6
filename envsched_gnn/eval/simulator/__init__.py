"""The learner simulator: its config, its worlds (independent, structure) and the engine."""
