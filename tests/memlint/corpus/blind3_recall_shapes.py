"""Shapes met on a third blind set of hand-written training code, with their near misses.

A GAN trainer whose loss functions are picked per side (``D_loss_fn``, ``G_loss_fn``) and whose
running totals are tensors on the device; an accumulation step inside a ``try``; loaders
iterated through a progress reporter that takes them beside other arguments, or through a
progress bar chosen by a conditional expression bound to a name first.
"""

import torch
import torch.nn as nn
from progress_tools import LogProgress, ProgressBar
from torch.utils.data import DataLoader
from tqdm import tqdm


class FocalLoss(nn.Module):
    def forward(self, logits, target):
        return logits.sub(target).pow(2).mean()


def hinge_d(real, fake):
    return (1 - real).clamp(min=0).mean() + (1 + fake).clamp(min=0).mean()


def hinge_g(fake):
    return -fake.mean()


class GanTrainer:
    def __init__(self, D, G, d_opt, g_opt, loader, accumulate, latent_dim):
        self.D, self.G = D, G
        self.d_opt, self.g_opt = d_opt, g_opt
        self.loader = loader
        self.accumulate = accumulate
        self.latent_dim = latent_dim

    def step(self, device):
        D_loss_fn, G_loss_fn = hinge_d, hinge_g
        total_d = torch.zeros([], device=device)
        total_g = torch.zeros([], device=device)

        self.d_opt.zero_grad()
        for _ in range(self.accumulate):
            real = next(self.loader)
            z = torch.randn(real.shape[0], self.latent_dim, device=device)
            with torch.no_grad():
                fake = self.G(z)
            divergence = D_loss_fn(self.D(real), self.D(fake))
            d_loss = divergence / self.accumulate
            d_loss.backward()
            total_d += divergence  # expect: MEM001
        self.d_opt.step()

        self.g_opt.zero_grad()
        for _ in range(self.accumulate):
            z = torch.randn(8, self.latent_dim, device=device)
            loss = G_loss_fn(self.D(self.G(z)))
            (loss / self.accumulate).backward()
            total_g += loss.detach()  # detached: nothing kept
        self.g_opt.step()
        return float(total_d.item()), float(total_g.item())

    def pick_criteria(self, names):
        # Class names build losses; storing the module keeps no graph.
        criteria = []
        for name in names:
            self.d_opt.zero_grad()
            criteria.append(FocalLoss())
            self.d_opt.step()
        return criteria


def auxiliary_phase(agent, old_agent, optimizer, aux_obs, returns, n_accum, device):
    """PPG's auxiliary phase: the step is wrapped in a try that only adds an out-of-memory hint."""
    for i, start in enumerate(range(0, len(aux_obs), 256)):
        try:
            obs = aux_obs[start:start + 256].to(device)
            target = returns[start:start + 256].to(device)
            with torch.no_grad():
                old = old_agent(obs)
            loss = ((agent(obs) - target) ** 2).mean() + (agent(obs) - old).abs().mean()
            optimizer.zero_grad()  # expect: MEM004
            (loss / n_accum).backward()
            if (i + 1) % n_accum == 0:
                optimizer.step()
        except RuntimeError as error:
            raise RuntimeError("out of memory: raise n_accum") from error


def skip_failed_batches(model, optimizer, batches, n_accum):
    """Gradients are dropped only when a micro-batch fails: the clear is in the handler."""
    for i, (x, y) in enumerate(batches):
        try:
            (((model(x) - y) ** 2).mean() / n_accum).backward()
        except RuntimeError:
            optimizer.zero_grad()
            continue
        if (i + 1) % n_accum == 0:
            optimizer.step()
            optimizer.zero_grad()


class Solver:
    def __init__(self, model, loaders, logger, device):
        self.model, self.loaders, self.logger, self.device = model, loaders, logger, device

    def run_epoch(self, train):
        data_loader = self.loaders["train"] if train else self.loaders["valid"]
        progress = LogProgress(self.logger, data_loader, total=len(data_loader), name="epoch")
        for step, sources in enumerate(progress):
            sources = sources.to(self.device)  # expect: MEM003
            mix = sources.sum(dim=1)  # a part of the moved batch: already on the device
            self.model(mix.to(self.device), sources[:, 1:].to(self.device))

    def log_counts(self, counts):
        # A progress reporter over plain numbers: no loader, nothing copied from one.
        for count in ProgressBar(self.logger, counts):
            torch.tensor(count).to(self.device)


class Detector:
    def __init__(self, model, device):
        self.model, self.device = model, device

    def _to_device(self, images, targets):
        images = [image.to(self.device) for image in images]  # expect: MEM003
        targets = [{k: v.to(self.device) for k, v in t.items()} for t in targets]  # expect: MEM003
        return images, targets

    def fit(self, dataset, optimizer, epochs=10, verbose=True):
        if not isinstance(dataset, DataLoader):
            dataset = DataLoader(dataset, shuffle=True)  # expect: MEM003
        for _ in range(epochs):
            batches = tqdm(dataset, leave=True) if verbose else dataset
            for images, targets in batches:
                images, targets = self._to_device(images, targets)
                loss = sum(self.model(images, targets).values())
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()


def copy_fields(rows, image_key, label_key, device):
    """Two fields of one batch under keys held in variables: moving one says nothing of the
    other, so both copies are reported."""
    loader = DataLoader(rows, batch_size=1, num_workers=2, pin_memory=True)
    for batch in loader:
        batch[image_key] = batch[image_key].to(device)  # expect: MEM003
        label = batch[label_key]
        batch[label_key] = label.argmax(0).to(device)  # expect: MEM003
