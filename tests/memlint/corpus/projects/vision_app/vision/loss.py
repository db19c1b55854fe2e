"""The detection loss: one tensor to backpropagate, and its parts detached for logging."""

import torch


class DetectionLoss:
    def __init__(self, box_weight=7.5, cls_weight=0.5):
        self.box_weight = box_weight
        self.cls_weight = cls_weight

    def __call__(self, preds, targets):
        box = (preds[..., :4] - targets[..., :4]).abs().mean()
        cls = torch.nn.functional.binary_cross_entropy_with_logits(preds[..., 4:], targets[..., 4:])
        parts = torch.stack((box, cls)).detach()
        return box * self.box_weight + cls * self.cls_weight, parts
