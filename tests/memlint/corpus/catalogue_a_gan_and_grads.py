"""GAN, gradient penalty and gradient surgery loops (catalogue corpus: MEM008, MEM009, MEM010)."""

import torch
import torch.nn as nn


def train_gan(netG, netD, loader, optD, optG, nz, device):
    criterion = nn.BCEWithLogitsLoss()
    for real, _ in loader:
        real = real.to(device, non_blocking=True)
        b = real.size(0)
        z = torch.randn(b, nz, 1, 1, device=device)
        fake = netG(z)
        ones = torch.ones(b, device=device)
        zeros = torch.zeros(b, device=device)
        optD.zero_grad()
        d_loss = criterion(netD(real).view(-1), ones) + criterion(netD(fake).view(-1), zeros)
        d_loss.backward(retain_graph=True)
        optD.step()
        optG.zero_grad()
        g_loss = criterion(netD(fake).view(-1), ones)
        g_loss.backward()
        optG.step()


def train_gan_retaining(netG, netD, loader, optD, optG, nz):
    criterion = nn.BCEWithLogitsLoss()
    for real, _ in loader:
        real = real.cuda(non_blocking=True)
        b = real.size(0)
        noise = torch.randn(b, nz, 1, 1).cuda()  # expect: MEM010
        label = torch.full((b,), 1.0).cuda()  # expect: MEM010
        fake = netG(noise)
        optG.zero_grad()
        g_loss = criterion(netD(fake).view(-1), label)
        g_loss.backward(retain_graph=True)  # expect: MEM008
        optG.step()


def gradient_penalty_step(critic, real, fake, opt, lam):
    for _ in range(5):
        alpha = torch.rand(real.size(0), 1, 1, 1, device=real.device)
        mixed = (alpha * real + (1 - alpha) * fake).requires_grad_(True)
        scores = critic(mixed)
        grads = torch.autograd.grad(scores.sum(), mixed, create_graph=True, retain_graph=True)[0]
        penalty = lam * ((grads.flatten(1).norm(dim=1) - 1) ** 2).mean()
        loss = critic(fake).mean() - critic(real).mean() + penalty
        opt.zero_grad()
        loss.backward()
        opt.step()


def input_jacobian(model, x):
    x = x.clone().requires_grad_(True)
    y = model(x)
    rows = []
    for i in range(y.shape[1]):
        y[:, i].sum().backward(retain_graph=True)
        rows.append(x.grad.detach().clone())
        x.grad = None
    return torch.stack(rows, dim=1)


def higher_order_loop(model, loader, opt):
    for x, y in loader:
        loss = ((model(x) - y) ** 2).mean()
        loss.backward(retain_graph=True, create_graph=True)
        opt.step()
        opt.zero_grad()


def multitask_step(model, heads, loader, opt, weights):
    for x, targets in loader:
        shared = model(x)
        opt.zero_grad(set_to_none=False)  # expect: MEM009
        for head, target, w in zip(heads, targets, weights):
            task_loss = w * nn.functional.mse_loss(head(shared), target)
            task_loss.backward(retain_graph=True)
        opt.step()


def projected_grads(model, loader, opt, ref_grads):
    for x, y in loader:
        opt.zero_grad(set_to_none=False)
        loss = nn.functional.cross_entropy(model(x), y)
        loss.backward()
        for p, g in zip(model.parameters(), ref_grads):
            dot = (p.grad * g).sum()
            if dot < 0:
                p.grad -= dot / g.pow(2).sum() * g
        opt.step()


def tables(n, device):
    eye = torch.eye(n).cuda(0)  # expect: MEM010
    grid = torch.linspace(-1, 1, n).to(device=device)  # expect: MEM010
    explicit = torch.zeros(n, device="cpu").cuda()
    weights = torch.tensor([0.2, 0.3, 0.5], requires_grad=True).cuda()
    as_half = torch.arange(n).to(device, torch.float16)  # expect: MEM010
    return eye, grid, explicit, weights, as_half
