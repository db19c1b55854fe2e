"""Step-based training of an image classifier: loaders reached through progress bars, a
metric logger, infinite iterators and next(), next to loaders whose batches already live on
the GPU (Accelerate, a dataset moved to the device up front)."""

import math

import torch
import torch.nn.functional as F
from accelerate import Accelerator
from torch.utils.data import DataLoader, TensorDataset
from tqdm import tqdm

from .utils import MetricLogger, build_dataset


def cycle(loader):
    """Re-iterate a loader forever, one epoch after another."""
    while True:
        for batch in loader:
            yield batch


class InfiniteLoader:
    """Restarts the wrapped loader when an epoch runs out."""

    def __init__(self, loader):
        self.loader = loader
        self.iterator = iter(loader)

    def __iter__(self):
        return self

    def __next__(self):
        try:
            return next(self.iterator)
        except StopIteration:
            self.iterator = iter(self.loader)
            return next(self.iterator)


def train_one_epoch(model, optimizer, data_loader, device, epoch, print_freq=50):
    model.train()
    metric_logger = MetricLogger(delimiter="  ")
    header = f"Epoch: [{epoch}]"
    for images, targets in metric_logger.log_every(data_loader, print_freq, header):
        images = images.to(device)  # expect: MEM003
        targets = targets.to(device, non_blocking=True)
        loss = F.cross_entropy(model(images), targets)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        metric_logger.update(loss=loss.item())


def train_steps(model, optimizer, train_set, total_steps, device):
    train_loader = DataLoader(train_set, batch_size=128, shuffle=True, num_workers=8)  # expect: MEM003
    batches = cycle(train_loader)
    pbar = tqdm(range(total_steps), desc="steps")
    for step in pbar:
        images, labels = next(batches)
        images, labels = images.to(device), labels.to(device)  # expect: MEM003, MEM003
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        pbar.set_postfix(loss=f"{loss.item():.3f}")


def train_with_restarts(model, optimizer, unlabeled_loader, device, total_steps):
    stream = InfiniteLoader(unlabeled_loader)
    for step in range(total_steps):
        weak, strong = next(stream)
        weak = weak.cuda()  # expect: MEM003
        strong = strong.cuda(non_blocking=True)
        loss = F.mse_loss(model(strong), model(weak).detach())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def warmup_lr(model, optimizer, warmup_loader, device, warmup_steps=500):
    it = iter(warmup_loader)
    step = 0
    while True:
        try:
            batch = next(it)
        except StopIteration:
            it = iter(warmup_loader)
            batch = next(it)
        batch = [t.to(device) for t in batch]  # expect: MEM003
        inputs, labels = batch
        for group in optimizer.param_groups:
            group["lr"] = 1e-3 * min(1.0, step / warmup_steps)
        loss = F.cross_entropy(model(inputs), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        step += 1
        if step >= warmup_steps:
            break


def fine_tune(model, optimizer, loader, device, epochs):
    for epoch in range(epochs):
        progress = tqdm(loader, desc=f"epoch {epoch}")
        # Empty batches are dropped by a generator expression before the loop.
        usable = (batch for batch in progress if batch["pixels"].numel() > 0)
        for batch in usable:
            pixels = batch["pixels"].to(device)  # expect: MEM003
            labels = batch["labels"].to(device, non_blocking=True)
            loss = F.cross_entropy(model(pixels), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def overfit_one_batch(model, optimizer, loader, device, steps=100):
    # A single batch, moved once and reused: no stream of copies to overlap.
    images, labels = next(iter(loader))
    images, labels = images.to(device), labels.to(device)
    for step in range(steps):
        loss = F.cross_entropy(model(images), labels)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def visualise_each_epoch(model, optimizer, train_loader, val_loader, device, epochs):
    for epoch in range(epochs):
        # One fixed preview per epoch beside the real batch loop: not a streamed batch.
        preview = next(iter(val_loader))[0].to(device)
        save_grid(model, preview, epoch)
        for images, labels in train_loader:
            images = images.to(device, non_blocking=True)
            labels = labels.to(device, non_blocking=True)
            loss = F.cross_entropy(model(images), labels)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def train_accelerate(model, optimizer, train_set, resume_step=0, epochs=3):
    accelerator = Accelerator(mixed_precision="bf16")
    train_dataloader = DataLoader(train_set, batch_size=32, shuffle=True)
    model, optimizer, train_dataloader = accelerator.prepare(model, optimizer, train_dataloader)
    for epoch in range(epochs):
        if epoch == 0 and resume_step:
            active_dataloader = accelerator.skip_first_batches(train_dataloader, resume_step)
        else:
            active_dataloader = train_dataloader
        for step, batch in enumerate(tqdm(active_dataloader, disable=not accelerator.is_main_process)):
            batch = {k: v.to(accelerator.device) for k, v in batch.items()}
            loss = model(**batch).loss
            accelerator.backward(loss)
            optimizer.step()
            optimizer.zero_grad()


def fit_small_tabular(model, optimizer, features, targets, epochs=20):
    # The whole table fits on the GPU: move it once, then slice batches from device memory.
    device = torch.device("cuda")
    features = torch.as_tensor(features, dtype=torch.float32).to(device)
    targets = torch.as_tensor(targets).to(device)
    dataset = TensorDataset(features, targets)
    loader = DataLoader(dataset, batch_size=512, shuffle=True)
    for epoch in range(epochs):
        for xb, yb in loader:
            xb, yb = xb.to(device), yb.to(device)
            loss = F.cross_entropy(model(xb), yb)
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()


def main(model, optimizer, args):
    train_set = build_dataset(args.data, train=True)
    device = torch.device("cuda", args.local_rank)
    steps_per_epoch = math.ceil(len(train_set) / 128)
    train_steps(model, optimizer, train_set, args.epochs * steps_per_epoch, device)
