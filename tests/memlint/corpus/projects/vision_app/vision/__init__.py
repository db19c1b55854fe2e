"""A small detection/generation project whose grad-mode facts live in other modules."""

from .utils.torch_utils import smart_inference_mode

__all__ = ["smart_inference_mode"]
