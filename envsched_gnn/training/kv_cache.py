"""A KV cache for many short decode steps: preallocated ``(B, H, capacity, D)`` buffers per
layer that double when full (transformers' ``DynamicLayer`` copies the cache every token).
"""

from __future__ import annotations

import torch
from transformers.cache_utils import Cache, DynamicLayer

MIN_CAPACITY = 256


class GrowingLayer(DynamicLayer):
    """One attention layer's keys and values in buffers of doubling capacity."""

    def lazy_initialization(self, key_states: torch.Tensor, value_states: torch.Tensor) -> None:
        self.device = key_states.device
        self.length = 0
        self.keys = key_states.new_empty((*key_states.shape[:2], 0, key_states.shape[-1]))
        self.values = value_states.new_empty((*value_states.shape[:2], 0, value_states.shape[-1]))
        self.is_initialized = True

    def _reserve(self, needed: int) -> None:
        capacity = self.keys.shape[-2]
        if needed <= capacity:
            return
        capacity = max(MIN_CAPACITY, 2 * capacity, needed)
        keys = self.keys.new_empty((*self.keys.shape[:2], capacity, self.keys.shape[-1]))
        values = self.values.new_empty((*self.values.shape[:2], capacity, self.values.shape[-1]))
        keys[:, :, : self.length] = self.keys[:, :, : self.length]
        values[:, :, : self.length] = self.values[:, :, : self.length]
        self.keys, self.values = keys, values

    def update(
        self, key_states: torch.Tensor, value_states: torch.Tensor, *args, **kwargs
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Write ``(B, H, T, D)`` new states after the filled columns; return the filled views."""
        if not self.is_initialized:
            self.lazy_initialization(key_states, value_states)
        end = self.length + key_states.shape[-2]
        self._reserve(end)
        self.keys[:, :, self.length : end] = key_states
        self.values[:, :, self.length : end] = value_states
        self.length = end
        return self.keys[:, :, :end], self.values[:, :, :end]

    def get_seq_length(self) -> int:
        return self.length if self.is_initialized else 0

    def reset(self) -> None:
        self.length = 0
        super().reset()

    def crop(self, tokens_to_remove: int) -> None:
        if tokens_to_remove > 0:
            raise ValueError(f"crop takes a negative token count, got {tokens_to_remove}")
        if self.is_initialized:
            self.length = max(self.length + tokens_to_remove, 0)

    def batch_repeat_interleave(self, repeats: int) -> None:
        if self.get_seq_length() > 0:
            self.keys = self.keys[:, :, : self.length].repeat_interleave(repeats, dim=0)
            self.values = self.values[:, :, : self.length].repeat_interleave(repeats, dim=0)

    def batch_select_indices(self, indices: torch.Tensor) -> None:
        if self.get_seq_length() > 0:
            self.keys = self.keys[indices]
            self.values = self.values[indices]


def growing_cache() -> Cache:
    """An empty cache whose layers are :class:`GrowingLayer`s (created on first use)."""
    return Cache(layer_class_to_replicate=GrowingLayer)
