"""Mixed-precision training in the styles found in older tutorials and newer code."""

import torch
import torch.nn.functional as F
from torch.cuda.amp import GradScaler, autocast

USE_AMP = torch.cuda.is_available()


def train_legacy(model, loader, optimizer, device, epochs):
    scaler = torch.cuda.amp.GradScaler(enabled=USE_AMP)  # expect: MEM015
    model.train()
    for _ in range(epochs):
        for x, y in loader:
            x = x.to(device, non_blocking=True)
            y = y.to(device, non_blocking=True)
            optimizer.zero_grad(set_to_none=True)
            with torch.cuda.amp.autocast(enabled=USE_AMP):  # expect: MEM015
                loss = F.cross_entropy(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(optimizer)
            scaler.update()


def train_imported_names(model, loader, optimizer, device):
    scaler = GradScaler()  # expect: MEM015
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        with autocast(dtype=torch.bfloat16):  # expect: MEM015
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def train_current(model, loader, optimizer, device):
    scaler = torch.amp.GradScaler("cuda")
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        with torch.autocast(device_type="cuda", dtype=torch.float16):
            loss = F.mse_loss(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()


def cpu_inference(model, x):
    with torch.no_grad(), torch.cpu.amp.autocast():  # expect: MEM015
        return model(x)


class AmpConfig:
    """Not torch: a project's own settings object that happens to have `amp` in its name."""

    def __init__(self, amp_dtype="bf16"):
        self.amp_dtype = amp_dtype

    def autocast(self):
        return torch.autocast("cuda", dtype=torch.bfloat16 if self.amp_dtype == "bf16" else torch.float16)
