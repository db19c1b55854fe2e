"""A CPU-only baseline: tiny MLP on tabular data, run on laptops and CI runners."""

import pandas as pd
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, TensorDataset

device = torch.device("cpu")
torch.set_num_threads(4)


def load_frame(path):
    frame = pd.read_csv(path)
    features = torch.tensor(frame.drop(columns=["target"]).values, dtype=torch.float32)
    target = torch.tensor(frame["target"].values, dtype=torch.float32)
    return TensorDataset(features, target)


def make_model(n_features):
    return nn.Sequential(nn.Linear(n_features, 64), nn.ReLU(), nn.Linear(64, 1))


def fit(model, train_loader, val_loader, epochs=20):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
    for epoch in range(epochs):
        model.train()
        for xb, yb in train_loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = nn.functional.mse_loss(model(xb).squeeze(-1), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
        model.eval()
        with torch.no_grad():
            val = sum(
                nn.functional.mse_loss(model(xb.to(device)).squeeze(-1), yb.to(device)).item()
                for xb, yb in val_loader
            )
        print(f"epoch {epoch}: val mse {val / len(val_loader):.4f}")


if __name__ == "__main__":
    train_set = load_frame("train.csv")
    val_set = load_frame("val.csv")
    train_loader = DataLoader(train_set, batch_size=128, shuffle=True)
    val_loader = DataLoader(val_set, batch_size=512)
    net = make_model(train_set.tensors[0].shape[1]).to(device)
    fit(net, train_loader, val_loader)
