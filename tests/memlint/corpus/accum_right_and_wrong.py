"""Gradient accumulation written several ways: correct, defeated, never cleared, guarded."""

import torch
from torch import nn
from torch.cuda.amp import GradScaler


def accumulate_correctly(model, loader, optimizer, criterion, accum_steps, device):
    model.train()
    optimizer.zero_grad(set_to_none=True)
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()
            optimizer.zero_grad(set_to_none=True)


def accumulate_but_zero_every_step(model, loader, optimizer, criterion, accum_steps, device):
    model.train()
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()  # expect: MEM004
        loss = criterion(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()


def accumulate_never_cleared(model, loader, optimizer, criterion, accum_steps, device):
    for i, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        (criterion(model(x), y) / accum_steps).backward()
        if (i + 1) % accum_steps == 0:
            optimizer.step()  # expect: MEM004


def amp_accumulation(model, loader, optimizer, criterion, accum_steps, device):
    scaler = GradScaler()  # expect: MEM015
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        with torch.autocast("cuda", dtype=torch.float16):
            loss = criterion(model(x), y) / accum_steps
        scaler.scale(loss).backward()
        if (step + 1) % accum_steps != 0:
            continue
        scaler.unscale_(optimizer)
        nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        scaler.step(optimizer)
        scaler.update()
        optimizer.zero_grad(set_to_none=True)


def skip_non_finite_steps(model, loader, optimizer, criterion, device):
    """The step is conditional, but for NaN skipping; zeroing every step is right here."""
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = criterion(model(x), y)
        loss.backward()
        grad_norm = nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        if torch.isfinite(grad_norm):
            optimizer.step()


def accelerate_accumulation(accelerator, model, loader, optimizer, criterion, lr_scheduler):
    model, optimizer, loader = accelerator.prepare(model, optimizer, loader)
    for batch in loader:
        with accelerator.accumulate(model):
            outputs = model(batch["input"])
            loss = criterion(outputs, batch["label"])
            accelerator.backward(loss)
            optimizer.step()
            lr_scheduler.step()
            optimizer.zero_grad()


def accumulate_with_reset_in_outer_loop(model, micro_batches_per_step, optimizer, criterion):
    for macro in micro_batches_per_step:
        optimizer.zero_grad()
        for x, y in macro:
            criterion(model(x), y).backward()
        optimizer.step()


def micro_loop_steps_every_chunk(model, loader, optimizer, criterion, chunks):
    for x, y in loader:
        for xc, yc in zip(x.chunk(chunks), y.chunk(chunks)):
            criterion(model(xc), yc).backward()
            optimizer.step()  # expect: MEM004
