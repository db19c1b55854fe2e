"""A base class of image-restoration models: its helpers serve every subclass's step."""

from collections import OrderedDict

import torch


class BaseModel:
    def __init__(self, opt):
        self.opt = opt
        self.device = torch.device("cuda")

    def reduce_loss_dict(self, loss_dict):
        """Averaged across ranks for logging: plain floats."""
        with torch.no_grad():
            log_dict = OrderedDict()
            for name, value in loss_dict.items():
                log_dict[name] = value.mean().item()
            return log_dict

    def gather_losses(self, loss_dict):
        """The loss tensors themselves, for a scheduler that reads them later."""
        kept = OrderedDict()
        for name, value in loss_dict.items():
            kept[name] = value
        return kept
