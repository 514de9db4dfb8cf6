"""Errors of the graph store."""

from __future__ import annotations


class StoreError(RuntimeError):
    """The store cannot be reached, refused the credentials, or refused a write."""
