"""Step-based training over an endless stream of batches; data helpers live in vision.data."""

from torch.utils.data import DataLoader

from vision.data import infinite, to_device, to_device_async


def train(model, dataset, optimizer, steps, device):
    loader = DataLoader(dataset, batch_size=64, num_workers=4)  # expect: MEM003
    stream = infinite(loader)
    for _ in range(steps):
        batch = next(stream)
        images = batch["image"].to(device)  # expect: MEM003
        labels = batch["label"].to(device, non_blocking=True)
        optimizer.zero_grad()
        model.loss(images, labels).backward()
        optimizer.step()


def train_with_helper(model, loader, optimizer, device):
    for batch in loader:
        batch = to_device(batch, device)  # expect: MEM003
        optimizer.zero_grad()
        model.loss(**batch).backward()
        optimizer.step()


def train_with_async_helper(model, loader, optimizer, device):
    for batch in loader:
        batch = to_device_async(batch, device)
        optimizer.zero_grad()
        model.loss(**batch).backward()
        optimizer.step()


def inspect(loader):
    for batch in loader:
        print(to_device(batch, "cpu"))
        break
