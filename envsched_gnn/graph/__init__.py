"""The dual-relation task graph (spec sections 3 and 8), apart from the store that persists it."""
