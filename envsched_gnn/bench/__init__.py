"""Benchmarks that print speed and memory numbers."""
