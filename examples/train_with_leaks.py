"""A small classifier training script with the four memory mistakes memlint is built for.

Run ``memlint examples/`` to see them reported; ``train_clean.py`` is the fixed version.
"""

import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cuda" if torch.cuda.is_available() else "cpu")

features = torch.randn(1024, 32)
labels = torch.randint(0, 4, (1024,))
train_loader = DataLoader(TensorDataset(features, labels), batch_size=64, shuffle=True)
val_loader = DataLoader(TensorDataset(features, labels), batch_size=256)

model = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 4)).to(device)
criterion = nn.CrossEntropyLoss()
optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)


def evaluate(loader):
    model.eval()
    correct = 0
    for x, y in loader:
        x, y = x.to(device), y.to(device)
        # Autograd records this forward pass although nothing will ever call backward().
        logits = model(x)
        correct += (logits.argmax(dim=1) == y).sum().item()
    return correct / len(loader.dataset)


history = []
for epoch in range(3):
    model.train()
    running_loss = 0.0
    for x, y in train_loader:
        # A blocking copy from pageable memory: the GPU waits for the host every batch.
        x, y = x.to(device), y.to(device)
        loss = criterion(model(x), y)
        loss.backward()
        # No zero_grad(): gradients of every step pile up in .grad.
        optimizer.step()
        # Keeps each step's whole autograd graph alive until the end of training.
        history.append(loss)
        running_loss += loss
    print(f"epoch {epoch}: loss {running_loss.item() / len(train_loader):.4f}, "
          f"accuracy {evaluate(val_loader):.3f}")
