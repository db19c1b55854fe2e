"""A trainer with its own loader loop, which imports the general trainer."""

from torch.utils.data import DataLoader

from .general import GeneralTrainer
from .utils import *


class MultiTaskTrainer(GeneralTrainer):
    def train_tasks(self, datasets):
        for dataset in datasets:
            for batch in DataLoader(dataset, batch_size=16):  # expect: MEM003
                loss = get_outputs(batch, self.device, self.model).sum()  # expect: MEM003
                loss.backward()
                self.optimizer.step()
                self.optimizer.zero_grad()
