"""Training scripts with per-step host syncs, cache flushes and checkpoint loading."""

import json
import math

import torch
import torch.nn.functional as F


def load_state(model, path, device):
    state = torch.load(path)  # expect: MEM014
    model.load_state_dict(state["model"])
    resume = torch.load(path, map_location="cpu", weights_only=True)
    extra = torch.load(path, device)
    with open(path + ".json") as handle:
        meta = json.load(handle)
    return resume, extra, meta


def train_chatty(model, loader, optimizer, device, epochs):
    for epoch in range(epochs):
        running_loss = 0.0
        for step, (x, y) in enumerate(loader):
            x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
            optimizer.zero_grad()
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
            running_loss += loss.item()  # expect: MEM013
            print(f"epoch {epoch} step {step} loss {loss}")  # expect: MEM013
            torch.cuda.empty_cache()  # expect: MEM012
        print(epoch, running_loss / len(loader))
        torch.cuda.empty_cache()


def train_quiet(model, loader, optimizer, device, log_every=50):
    running = torch.zeros((), device=device)
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(x), y)
        if not math.isfinite(loss.item()):
            raise FloatingPointError(f"non-finite loss at step {step}")
        loss.backward()
        optimizer.step()
        running += loss.detach()
        if step % log_every == 0:
            print(f"step {step} loss {running.item() / (step + 1):.4f}")
            running.zero_()
    return running


def train_with_early_stop(model, loader, optimizer, device, patience=3):
    best, bad = float("inf"), 0
    for x, y in loader:
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = F.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        if loss.item() < best:
            best, bad = loss.item(), 0
        else:
            bad += 1
        if bad > patience:
            break
        if torch.isnan(loss):
            break


def train_step(model, batch, optimizer):
    optimizer.zero_grad()
    loss = F.cross_entropy(model(batch["x"]), batch["y"])
    loss.backward()
    optimizer.step()
    return loss.detach().cpu().item()  # expect: MEM013


def fit(model, loader, optimizer):
    history = []
    for batch in loader:
        history.append(train_step(model, batch, optimizer))
    return history


def collect_predictions(model, test_loader):
    model.eval()
    preds = []
    with torch.no_grad():
        for x, _ in test_loader:
            preds.extend(model(x).argmax(dim=1).cpu().tolist())
            torch.cuda.empty_cache()  # expect: MEM012
    return preds


def sweep(build_model, configs, loader, optimizer_for, report):
    for cfg in configs:
        model = build_model(cfg)
        optimizer = optimizer_for(model)
        for x, y in loader:
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        report(cfg.name, evaluate_model(model, loader))
        del model, optimizer
        torch.cuda.empty_cache()


def evaluate_model(model, loader):
    total = 0.0
    with torch.no_grad():
        for x, y in loader:
            total += F.mse_loss(model(x), y).item()
    return total / len(loader)


def recover_from_oom(model, loader, optimizer):
    for x, y in loader:
        try:
            optimizer.zero_grad()
            F.mse_loss(model(x), y).backward()
            optimizer.step()
        except torch.OutOfMemoryError:
            torch.cuda.empty_cache()
