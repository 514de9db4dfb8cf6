"""Errors of the graph store."""

from __future__ import annotations

from envsched_gnn.validation import UserError


class StoreError(UserError, RuntimeError):
    """The store cannot be reached, refused the credentials, or refused a write."""
