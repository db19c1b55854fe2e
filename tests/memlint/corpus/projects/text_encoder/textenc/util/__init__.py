"""Helpers re-exported for the rest of the package."""

from .tensors import move_features, pad_lengths

__all__ = ["move_features", "pad_lengths"]
