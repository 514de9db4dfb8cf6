"""GRPO: the objective as pure functions, the update's batches and optimiser steps, the
training run with its config and commands, and several runs from one start."""
