"""Its loaders are DataLoaders: the base's loops copy their batches through its hooks."""
import torch
from torch.utils.data import DataLoader

from anomaly.base import BaseDetector


class Deviation(BaseDetector):
    def training_prepare(self, X, y):
        train_loader = DataLoader(X, batch_size=self.batch_size, shuffle=True)  # expect: MEM003
        net = torch.nn.Linear(8, 1).to(self.device)
        return train_loader, net, torch.nn.MSELoss()

    def inference_prepare(self, X):
        return DataLoader(X, batch_size=self.batch_size, shuffle=False)  # expect: MEM003

    def training_forward(self, batch_x, net, criterion):
        batch_x = batch_x.float().to(self.device)  # expect: MEM003
        return criterion(net(batch_x), torch.zeros_like(batch_x[:, :1]))

    def inference_forward(self, batch_x, net, criterion):
        batch_x = batch_x.float().to(self.device)  # expect: MEM003
        return net(batch_x).view(-1)
