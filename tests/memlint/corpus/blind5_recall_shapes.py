"""Shapes met on a fifth blind set of script-style code (example folders, tutorials, book
companions, notebooks), with their near misses.

A translation trainer that falls back to an identity ``tqdm`` when the optional import fails,
so its loop runs over a same-file function that hands its argument back; a Bayesian
network's evaluation that draws Monte Carlo samples per batch into a list made afresh in the
batch loop and keeps only the stacked draws of each batch, on the device; a notebook-style
top level that evaluates a model, then trains it again in a later "cell".
"""

import torch
from torch.utils.data import DataLoader

from course.models import Net
from course.data import X_test, crit, opt, train_set

try:
    from tqdm.auto import tqdm
except ImportError:  # the stand-in keeps the loop running without the progress bar
    def tqdm(iterable, **kwargs):
        return iterable


def pick_second(first, second):
    return second


def train(model, train_loader, device, epochs):
    for epoch in range(epochs):
        for step, (src, tgt) in enumerate(tqdm(train_loader, desc=f"epoch {epoch}"), start=1):
            src = src.to(device)  # expect: MEM003
            tgt = tgt.to(device)  # expect: MEM003
            loss = crit(model(src), tgt)
            opt.zero_grad()
            loss.backward()
            opt.step()


def warm_up(model, train_loader, device):
    # Near miss: the same-file helper hands back its other argument, not the loader.
    for step in pick_second(train_loader, range(3)):
        model(torch.ones(2, device=device) * step)


def evaluate(model, val_loader, draws):
    model.eval()
    per_batch = []
    with torch.no_grad():
        for data, target in val_loader:
            data = data.cuda(non_blocking=True)
            samples = []  # Near miss: one batch's draws
            for _ in range(draws):
                output, kl = model(data)
                samples.append(output)
            per_batch.append(torch.stack(samples))  # expect: MEM016
    return per_batch


model = Net()
model.eval()
preds = model(X_test)  # expect: MEM002
accuracy = (preds.argmax(1) == 0).float().mean()

loader = DataLoader(train_set, batch_size=64, pin_memory=True)
for x, y in loader:
    x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
    opt.zero_grad()
    crit(model(x), y).backward()
    opt.step()
