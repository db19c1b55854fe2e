"""A subclass overriding the hook. It moves a projection module to the device, so it may
define a copy helper: the module that imports it summarises it for one, and the hook
must still be seen."""

from torch import nn

from .base import BaseTrainer
from .utils import *


class GeneralTrainer(BaseTrainer):
    def __init__(self, model, optimizer, device):
        super().__init__(model, optimizer, device)
        self.proj = nn.Linear(8, 8)
        self.proj.to(device)

    def train_on_batch(self, batch):
        outputs = get_outputs(batch, self.device, self.model)  # expect: MEM003
        return self.proj(outputs).sum()
