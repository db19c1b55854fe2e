"""Training on (inputs, targets) pairs moved by helpers of other modules that no rule or
summary gate selects on their own (vision.transfer, vision.prep)."""

from torch.utils.data import DataLoader

from vision.prep import prepare
from vision.transfer import move_pair, move_pair_async, move_unpacked


def train(model, dataset, optimizer, device, mode):
    loader = DataLoader(dataset, batch_size=32, shuffle=True, pin_memory=True)
    for pair in loader:
        if mode == "list":
            inputs, targets = move_pair(pair, device)  # expect: MEM003
        elif mode == "async":
            inputs, targets = move_pair_async(pair, device)
        elif mode == "unpacked":
            inputs, targets = move_unpacked(pair, device)  # expect: MEM003
        else:
            inputs, targets = prepare(pair)  # expect: MEM003
        optimizer.zero_grad()
        model.loss(inputs, targets).backward()
        optimizer.step()
