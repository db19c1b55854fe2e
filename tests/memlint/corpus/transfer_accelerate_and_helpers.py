"""Segmentation training: an accelerate path, a manual path, and loader factory helpers."""

import os

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, DistributedSampler


def build_loader(dataset, batch_size, train=True, **loader_kwargs):
    return DataLoader(dataset, batch_size=batch_size, shuffle=train, **loader_kwargs)


def build_eval_loader(dataset, batch_size, workers):
    return DataLoader(dataset, batch_size=batch_size, num_workers=workers,
                      pin_memory=torch.cuda.is_available())


def train_accelerate(model, train_set, epochs=10):
    accelerator = Accelerator(mixed_precision="bf16")
    optimizer = torch.optim.AdamW(model.parameters(), lr=3e-4)
    train_dataloader = DataLoader(train_set, batch_size=16, shuffle=True, num_workers=4)
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    for epoch in range(epochs):
        model.train()
        for images, masks in train_dataloader:
            logits = model(images)
            loss = F.cross_entropy(logits, masks)
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()


def train_manual(model, loader, optimizer, epochs=10):
    device = torch.device(f"cuda:{int(os.environ.get('LOCAL_RANK', 0))}")
    model.to(device)
    for epoch in range(epochs):
        if isinstance(loader.sampler, DistributedSampler):
            loader.sampler.set_epoch(epoch)
        for images, masks in loader:
            images = images.to(device)  # expect: MEM003
            masks = masks.to(device, non_blocking=True).long()
            loss = F.cross_entropy(model(images), masks)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def run_manual(model, train_set, val_set):
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    sampler = DistributedSampler(train_set)
    seg_loader = DataLoader(train_set, batch_size=8, sampler=sampler, num_workers=4)  # expect: MEM003
    train_manual(model, seg_loader, optimizer)
    quick_loader = build_loader(val_set, 8, train=False, num_workers=2)
    train_manual(model, quick_loader, optimizer, epochs=1)
    eval_loader = build_eval_loader(val_set, 8, workers=2)
    print(mean_iou(model, eval_loader))


@torch.no_grad()
def mean_iou(model, loader, num_classes=21):
    model.eval()
    device = next(model.parameters()).device
    inter = torch.zeros(num_classes, device=device)
    union = torch.zeros(num_classes, device=device)
    for images, masks in loader:
        images = images.to(device)  # expect: MEM003
        masks = masks.to(device, non_blocking=True)
        preds = model(images).argmax(1)
        for c in range(num_classes):
            inter[c] += ((preds == c) & (masks == c)).sum()
            union[c] += ((preds == c) | (masks == c)).sum()
    return (inter / union.clamp(min=1)).mean().item()


def overfit_one_batch(model, loader, optimizer, steps=200):
    # A debugging aid: one fixed batch, moved once, reused every step.
    device = "cuda"
    images, masks = next(iter(loader))
    images, masks = images.to(device), masks.to(device)
    for step in range(steps):
        loss = F.cross_entropy(model(images), masks)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def train_on_tensors(model, images, masks, optimizer, batch_size=8):
    # Already-materialised tensors, not a DataLoader: sliced and moved per step.
    for start in range(0, len(images), batch_size):
        x = images[start:start + batch_size].to("cuda")
        y = masks[start:start + batch_size].to("cuda")
        loss = F.cross_entropy(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def prefetch_loop(model, loader):
    stream = torch.cuda.Stream()
    it = iter(loader)
    batch = next(it)
    while batch is not None:
        with torch.cuda.stream(stream):
            images = batch[0].to("cuda", non_blocking=True)
        torch.cuda.current_stream().wait_stream(stream)
        model(images)
        batch = next(it, None)


def collect_embeddings(encoder, loader):
    encoder.eval()
    feats = []
    with torch.no_grad():
        for images, _ in loader:
            feats.append(encoder(images.cuda(non_blocking=True)).cpu())
    return torch.cat(feats)


def finetune_with_redundant_moves(model, train_set, epochs=1):
    # Accelerate already puts prepared batches on the device; the extra .to() copies nothing.
    accelerator = Accelerator()
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-4)
    dataloader = DataLoader(train_set, batch_size=16, shuffle=True)
    model, optimizer, dataloader = accelerator.prepare(model, optimizer, dataloader)
    for epoch in range(epochs):
        for batch in dataloader:
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()
