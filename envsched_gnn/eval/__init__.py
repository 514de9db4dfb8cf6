"""Held-out evaluation, the learner simulator, predictor comparison and ablations."""
