import torch
from torch.utils.data import DataLoader

from seg.agent_abstract import NetRunAgent


class SegmentationAgent(NetRunAgent):
    def training(self, dataset, net, optimizer):
        loader = DataLoader(dataset, batch_size=4, pin_memory=True)
        for data in loader:
            inputs = self.convert_tensor_type(data["image"])
            labels = self.convert_tensor_type(data["label"])
            inputs = inputs.to(self.device)  # expect: MEM003
            labels = labels.to(self.device, non_blocking=True)
            weights = self.send(data["weight"]).to(self.device)
            optimizer.zero_grad()
            loss = torch.nn.functional.mse_loss(net(inputs) * weights, labels)
            loss.backward()
            optimizer.step()
