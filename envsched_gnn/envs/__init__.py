"""Pools of executable environments: format, validation, sandboxed runtime, generator, importers."""
