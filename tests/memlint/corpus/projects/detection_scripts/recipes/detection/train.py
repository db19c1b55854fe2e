import torch
from torch.utils.data import DataLoader

from loops import run_epoch, timed_eval


def collate(batch):
    return tuple(zip(*batch))


def main(model, train_set, val_set, epochs):
    device = torch.device("cuda")
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    train_loader = DataLoader(train_set, batch_size=4, num_workers=4, collate_fn=collate)  # expect: MEM003
    val_loader = DataLoader(val_set, batch_size=1, num_workers=2, collate_fn=collate)
    pinned_loader = DataLoader(train_set, batch_size=4, pin_memory=True, collate_fn=collate)
    for _ in range(epochs):
        run_epoch(model, optimizer, train_loader, device)
        run_epoch(model, optimizer, pinned_loader, device)
    timed_eval(model, val_loader, device)
