"""Training through engines and closures that own gradient clearing, and one AMP loop that forgets it."""

import torch
import torch.nn as nn

import deepspeed


def deepspeed_loop(args, model, train_loader):
    model_engine, optimizer, _, _ = deepspeed.initialize(
        args=args, model=model, model_parameters=model.parameters()
    )
    losses = []
    for step, batch in enumerate(train_loader):
        inputs = batch["input_ids"].to(model_engine.local_rank, non_blocking=True)
        labels = batch["labels"].to(model_engine.local_rank, non_blocking=True)
        outputs = model_engine(inputs, labels=labels)
        loss = outputs.loss
        model_engine.backward(loss)
        model_engine.step()
        losses.append(loss.item())  # expect: MEM013
    return losses


def lbfgs_fit(model, inputs, targets, max_iter=20):
    optimizer = torch.optim.LBFGS(model.parameters(), lr=1, max_iter=max_iter)
    criterion = nn.MSELoss()
    history = []
    for epoch in range(10):
        def closure():
            optimizer.zero_grad()
            loss = criterion(model(inputs), targets)
            loss.backward()
            return loss
        loss = optimizer.step(closure)
        history.append(float(loss))
    return history


def amp_loop_forgets_to_clear(model, loader, optimizer, device):
    scaler = torch.amp.GradScaler("cuda")
    loss_fn = nn.CrossEntropyLoss()
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)  # expect: MEM004
        scaler.update()


def amp_loop_clears_through_model(model, loader, optimizer, device):
    scaler = torch.amp.GradScaler("cuda")
    loss_fn = nn.CrossEntropyLoss()
    running = torch.zeros((), device=device)
    for x, y in loader:
        x = x.to(device, non_blocking=True)
        y = y.to(device, non_blocking=True)
        model.zero_grad(set_to_none=True)
        with torch.autocast(device_type="cuda", dtype=torch.bfloat16):
            loss = loss_fn(model(x), y)
        scaler.scale(loss).backward()
        scaler.step(optimizer)
        scaler.update()
        running += loss.detach()
    return running.item() / len(loader)


def manual_sgd(model, loader, lr=0.01):
    """No optimizer object: parameters are updated and cleared by hand."""
    for x, y in loader:
        loss = nn.functional.mse_loss(model(x), y)
        loss.backward()
        with torch.no_grad():
            for p in model.parameters():
                p -= lr * p.grad
                p.grad = None


def compare_step_sizes(make_model, batch, criterion, lrs):
    """A fresh model and optimizer per learning rate: nothing accumulates across iterations."""
    results = {}
    for lr in lrs:
        model = make_model()
        optimizer = torch.optim.SGD(model.parameters(), lr=lr)
        criterion(model(batch[0]), batch[1]).backward()
        optimizer.step()
        results[lr] = [p.detach().clone() for p in model.parameters()]
    return results
