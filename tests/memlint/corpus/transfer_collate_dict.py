"""Text classification fine-tuning with dict batches from a custom collate function."""

import random

import numpy as np
import torch
import torch.nn as nn
from torch.utils.data import DataLoader, Dataset


class ReviewDataset(Dataset):
    def __init__(self, encodings, labels):
        self.encodings = encodings
        self.labels = labels

    def __len__(self):
        return len(self.labels)

    def __getitem__(self, idx):
        item = {key: torch.tensor(val[idx]) for key, val in self.encodings.items()}
        item["labels"] = torch.tensor(self.labels[idx])
        return item


def collate(items):
    return {key: torch.stack([it[key] for it in items]) for key in items[0]}


class Classifier(nn.Module):
    def __init__(self, encoder, hidden, num_labels):
        super().__init__()
        self.encoder = encoder
        self.head = nn.Linear(hidden, num_labels)

    def forward(self, input_ids, attention_mask):
        hidden = self.encoder(input_ids=input_ids, attention_mask=attention_mask)[0]
        mask = attention_mask.unsqueeze(-1).to(hidden.dtype)
        pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-6)
        return self.head(pooled.to(self.head.weight.dtype))


def set_seed(seed):
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def train(model, train_set, val_set, device, epochs=3, lr=2e-5, grad_accum=2):
    train_loader = DataLoader(train_set, batch_size=16, shuffle=True, num_workers=2,  # expect: MEM003
                              collate_fn=collate)
    val_loader = DataLoader(val_set, batch_size=64, collate_fn=collate, num_workers=2,
                            pin_memory=True)
    optimizer = torch.optim.AdamW(model.parameters(), lr=lr)
    loss_fn = nn.CrossEntropyLoss()
    scaler = torch.amp.GradScaler("cuda")

    for epoch in range(epochs):
        model.train()
        for step, batch in enumerate(train_loader):
            batch = {k: v.to(device) for k, v in batch.items()}  # expect: MEM003
            labels = batch.pop("labels").to(torch.long)
            with torch.autocast("cuda", dtype=torch.bfloat16):
                logits = model(**batch)
                loss = loss_fn(logits.float(), labels) / grad_accum
            scaler.scale(loss).backward()
            if (step + 1) % grad_accum == 0:
                scaler.step(optimizer)
                scaler.update()
                optimizer.zero_grad(set_to_none=True)

        model.eval()
        correct = total = 0
        with torch.no_grad():
            for batch in val_loader:
                batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
                labels = batch.pop("labels")
                preds = model(**batch).argmax(-1)
                correct += (preds == labels).sum()
                total += labels.numel()
        print(f"epoch {epoch}: accuracy {(correct / total).item():.3f}")


def train_tuple_batches(model, loader, device, optimizer):
    # TensorDataset-style batches: (input_ids, attention_mask, labels).
    model.train()
    for batch in loader:
        batch = tuple(t.to(device) for t in batch)  # expect: MEM003
        input_ids, attention_mask, labels = batch
        logits = model(input_ids, attention_mask)
        loss = nn.functional.cross_entropy(logits, labels)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def train_half_inputs(model, loader, device, optimizer):
    model.train()
    for features, target in loader:
        features = features.to(torch.float16)
        target = target.to(features)
        features = features.to(device=device, non_blocking=True)
        target = target.to(device, non_blocking=True)
        loss = nn.functional.mse_loss(model(features, None), target)
        loss.backward()
        optimizer.step()
        optimizer.zero_grad()


def export_predictions(model, loader, device):
    model.eval()
    rows = []
    with torch.no_grad():
        for batch in loader:
            batch = {k: v.to(device, non_blocking=True) for k, v in batch.items()}
            logits = model(batch["input_ids"], batch["attention_mask"])
            rows.extend(logits.argmax(-1).cpu().tolist())
            probs = logits.softmax(-1).to("cpu")
            rows.append(probs.numpy())
    return rows
