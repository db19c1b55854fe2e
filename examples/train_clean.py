"""The same training script as ``train_with_leaks.py``, with each memory mistake fixed.

memlint reports nothing here.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

features = torch.randn(1024, 32)
labels = torch.randint(0, 4, (1024,))
# Pinned host memory lets the copies below run asynchronously.
train_loader = DataLoader(TensorDataset(features, labels), batch_size=64, shuffle=True,
                          pin_memory=True)
val_loader = DataLoader(TensorDataset(features, labels), batch_size=256, pin_memory=True)

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


@torch.no_grad()
def evaluate(loader):
    model.eval()
    correct = 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        logits = model(x)
        correct += (logits.argmax(dim=1) == y).sum().item()
    return correct / len(loader.dataset)


history = []
for epoch in range(3):
    model.train()
    running_loss = 0.0
    for x, y in train_loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        optimizer.step()
        # Python floats: the graph is freed as soon as the step ends.
        history.append(loss.item())
        running_loss += loss.item()
    print(f"epoch {epoch}: loss {running_loss / len(train_loader):.4f}, "
          f"accuracy {evaluate(val_loader):.3f}")
