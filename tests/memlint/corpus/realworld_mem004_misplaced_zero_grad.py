"""Training scripts where `zero_grad()` lands between `backward()` and `step()`, with near misses.

Each flagged clear wipes the gradients the backward pass just produced, so the following step
applies nothing. The near misses clear a different optimizer, discard gradients on purpose
before a second backward, skip a bad batch, or hand backward to a closure.
"""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


def train_classifier(model, loader, epochs, lr=1e-3):
    optimizer = torch.optim.SGD(model.parameters(), lr=lr, momentum=0.9)
    criterion = nn.CrossEntropyLoss()
    model.train()
    for epoch in range(epochs):
        for images, labels in loader:
            logits = model(images)
            loss = criterion(logits, labels)
            loss.backward()
            optimizer.zero_grad()  # expect: MEM004
            optimizer.step()
        print(f"epoch {epoch} done")


class Seq2SeqTrainer:
    """A per-step method called from `fit`: the model is cleared after backward."""

    def __init__(self, model, lr):
        self.model = model
        self.optimizer = torch.optim.AdamW(self.model.parameters(), lr=lr)
        self.scheduler = torch.optim.lr_scheduler.LambdaLR(self.optimizer, lambda s: 1.0)

    def training_step(self, batch):
        out = self.model(batch["src"], batch["tgt_in"])
        loss = F.cross_entropy(out.flatten(0, 1), batch["tgt_out"].flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(self.model.parameters(), 1.0)
        self.model.zero_grad(set_to_none=True)  # expect: MEM004
        self.optimizer.step()
        self.scheduler.step()
        return loss.detach()

    def fit(self, loader):
        for batch in loader:
            self.training_step(batch)


def amp_step(model, optimizer, scaler, images, targets):
    with torch.autocast("cuda", dtype=torch.float16):
        loss = F.mse_loss(model(images), targets)
    scaler.scale(loss).backward()
    scaler.unscale_(optimizer)
    optimizer.zero_grad()  # expect: MEM004
    scaler.step(optimizer)
    scaler.update()
    return loss.detach()


def train_amp(model, loader, optimizer):
    scaler = torch.amp.GradScaler("cuda")
    for images, targets in loader:
        amp_step(model, optimizer, scaler, images, targets)


def train_accumulated(model, loader, optimizer, accum_steps=4):
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y) / accum_steps
        loss.backward()
        if (i + 1) % accum_steps == 0:
            optimizer.zero_grad()  # expect: MEM004
            optimizer.step()


def train_accumulated_every_microstep(model, loader, optimizer, accum_steps=4):
    # One finding, with the accumulation message: the clear runs on every micro-step.
    for i, (x, y) in enumerate(loader):
        loss = F.cross_entropy(model(x), y) / accum_steps
        loss.backward()
        optimizer.zero_grad()  # expect: MEM004
        if (i + 1) % accum_steps == 0:
            optimizer.step()


# ---------------------------------------------------------------------------- near misses


def train_classifier_right(model, loader, optimizer):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=True)
        F.cross_entropy(model(x), y).backward()
        optimizer.step()


def train_clear_after_step(model, loader, optimizer, scheduler):
    for x, y in loader:
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
        optimizer.zero_grad()
        scheduler.step()


def train_gan(netG, netD, loader, nz):
    g_opt = torch.optim.Adam(netG.parameters(), lr=2e-4, betas=(0.5, 0.999))
    d_opt = torch.optim.Adam(netD.parameters(), lr=2e-4, betas=(0.5, 0.999))
    for real, _ in loader:
        noise = torch.randn(real.size(0), nz, 1, 1, device=real.device)
        fake = netG(noise)

        d_opt.zero_grad()
        d_real = netD(real)
        d_fake = netD(fake.detach())
        d_loss = F.softplus(-d_real).mean() + F.softplus(d_fake).mean()
        d_loss.backward()
        d_opt.step()

        g_opt.zero_grad()
        g_loss = F.softplus(-netD(fake)).mean()
        g_loss.backward()
        # The generator loss also filled the discriminator's gradients: drop them.
        d_opt.zero_grad()
        netD.zero_grad()
        g_opt.step()


def train_frozen_encoder(encoder, head, loader, freeze_encoder):
    params = list(encoder.parameters()) + list(head.parameters())
    optimizer = torch.optim.AdamW(params, lr=1e-4)
    for x, y in loader:
        optimizer.zero_grad()
        F.cross_entropy(head(encoder(x)), y).backward()
        if freeze_encoder:
            encoder.zero_grad()
        optimizer.step()


def train_with_gradient_probe(model, loader, optimizer, probe_loss):
    norms = []
    for x, y in loader:
        probe_loss(model(x)).backward()
        norms.append(math.sqrt(sum(p.grad.pow(2).sum() for p in model.parameters()).detach()))
        optimizer.zero_grad()
        F.cross_entropy(model(x), y).backward()
        optimizer.step()
    return norms


def train_skip_bad_batches(model, loader, optimizer):
    for x, y in loader:
        loss = F.cross_entropy(model(x), y)
        loss.backward()
        if not torch.isfinite(loss):
            optimizer.zero_grad()
            continue
        optimizer.step()
        optimizer.zero_grad()


def train_lbfgs(model, loader):
    optimizer = torch.optim.LBFGS(model.parameters(), lr=0.5)
    for x, y in loader:
        def closure(x=x, y=y):
            loss = F.mse_loss(model(x), y)
            loss.backward()
            return loss

        optimizer.zero_grad()
        optimizer.step(closure)


def test_zero_grad_step_leaves_weights_alone():
    model = nn.Linear(4, 2)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    before = model.weight.detach().clone()
    model(torch.ones(3, 4)).sum().backward()
    optimizer.zero_grad()
    optimizer.step()
    assert torch.equal(before, model.weight)
