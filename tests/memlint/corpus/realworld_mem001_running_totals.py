"""A multi-loss detector trainer with the bookkeeping real training scripts do per batch.

Per-loss running totals fed straight from the criterion's loss dict keep every batch's graph
(and the activations it saved) alive until the epoch ends; so do ``meters.get(k, 0) + v``
updates and ``defaultdict(float)`` accumulators. Counting tokens, images and correct
predictions only adds host numbers, and the same-file criterion hands back its per-term
values already detached, so the running mean of those is fine. The averager reads ``.data``.
"""

from collections import defaultdict

import torch
import torch.nn as nn


class DetectionCriterion:
    """Box and objectness terms; the second return value is for logging only."""

    def __init__(self, box_weight=0.05):
        self.bce = nn.BCEWithLogitsLoss()
        self.box_weight = box_weight

    def __call__(self, pred, targets):
        box = self.bce(pred[..., :4], targets[..., :4]) * self.box_weight
        obj = self.bce(pred[..., 4], targets[..., 4])
        total = box + obj
        return total * pred.shape[0], torch.stack((box, obj, total)).detach()


class Averager:
    """Mean of many tensors, kept as host-side sums."""

    def __init__(self):
        self.count = 0
        self.total = 0.0

    def add(self, value):
        self.count += value.data.numel()
        self.total += value.data.sum()

    def mean(self):
        return self.total / max(self.count, 1)


def train_one_epoch(model, loader, optimizer, criterion, device):
    totals = {"box": 0.0, "obj": 0.0, "cls": 0.0}
    images_seen = 0
    for images, targets in loader:
        images = images.to(device, non_blocking=True)
        optimizer.zero_grad(set_to_none=True)
        loss_dict = criterion(model(images), targets)
        loss = sum(loss_dict.values())
        loss.backward()
        optimizer.step()
        batch_size = images.size(0)
        images_seen += batch_size
        for name, loss_val in loss_dict.items():
            totals[name] += loss_val * batch_size  # expect: MEM001
    return {name: value / images_seen for name, value in totals.items()}


def train_with_meters(model, loader, optimizer, log_every=100):
    meters = {}
    for step, batch in enumerate(loader):
        optimizer.zero_grad()
        losses = model(batch)
        sum(losses.values()).backward()
        optimizer.step()
        for k, v in losses.items():
            meters[k] = meters.get(k, 0) + v  # expect: MEM001
        if step % log_every == 0:
            print({k: float(v) / (step + 1) for k, v in meters.items()})
    return meters


def train_with_stats(model, loader, optimizer, loss_fn):
    stats = defaultdict(float)
    for inputs, labels in loader:
        optimizer.zero_grad()
        logits = model(inputs)
        ce = loss_fn(logits, labels)
        ce.backward()
        optimizer.step()
        stats["ce"] += ce  # expect: MEM001
        stats["ce_host"] += ce.item()
    return dict(stats)


def train_language_model(model, loader, optimizer, criterion, vocab_size):
    total_tokens = 0
    sentences = 0
    words = 0
    correct = 0
    total = 0
    loss_sum = 0.0
    for batch in loader:
        optimizer.zero_grad()
        logits = model(batch["input_ids"])
        loss = criterion(logits.view(-1, vocab_size), batch["labels"].view(-1))
        loss.backward()
        optimizer.step()
        total_tokens += batch["input_ids"].numel()
        sentences += len(batch["input_ids"])
        words += sum(len(row) for row in logits)
        words += sum(mask.sum().item() for mask in batch["attention_mask"])
        pred = logits.argmax(dim=-1)
        correct += (pred == batch["labels"]).sum().item()
        total += batch["labels"].shape[0]
        loss_sum += loss.item() * batch["labels"].size(0)
    return loss_sum / max(total, 1), correct / max(total_tokens, 1), sentences, words


def train_detector(model, loader, optimizer, device, epochs=3):
    criterion = DetectionCriterion()
    loss_avg = Averager()
    for epoch in range(epochs):
        mean_items = torch.zeros(3, device=device)
        for i, (imgs, targets) in enumerate(loader):
            imgs = imgs.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss, loss_items = criterion(model(imgs), targets.to(device, non_blocking=True))
            loss.backward()
            optimizer.step()
            mean_items = (mean_items * i + loss_items) / (i + 1)
            loss_avg.add(loss)
        print(f"epoch {epoch}: {mean_items.tolist()} avg {loss_avg.mean():.4f}")
