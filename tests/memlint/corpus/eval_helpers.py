"""Evaluation helpers of a small image-classification project, the way they accumulate over time."""

from __future__ import annotations

import time

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import f1_score

from .models import build_model
from .utils import AverageMeter, load_checkpoint


@torch.no_grad()
def evaluate(model, loader, device):
    model.eval()
    losses = AverageMeter()
    correct = 0
    for images, targets in loader:
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        logits = model(images)
        losses.update(F.cross_entropy(logits, targets).item(), images.size(0))
        correct += (logits.argmax(1) == targets).sum().item()
    return losses.avg, correct / len(loader.dataset)


@torch.inference_mode()
def predict_proba(model, loader, device):
    model.eval()
    probs = []
    for images, _ in loader:
        probs.append(model(images.to(device, non_blocking=True)).softmax(-1).cpu())
    return torch.cat(probs)


def predict(model, loader, device):
    model.eval()
    preds = []
    for images, _ in loader:
        images = images.to(device, non_blocking=True)
        out = model(images)  # expect: MEM002
        preds.append(out.argmax(-1).cpu())
    return torch.cat(preds)


def infer_single(model, image, device):
    model.eval()
    batch = image.unsqueeze(0).to(device)
    return model(batch).argmax(-1).item()  # expect: MEM002


@torch.set_grad_enabled(False)
def evaluate_f1(model, loader, device):
    model.eval()
    y_true, y_pred = [], []
    for images, targets in loader:
        logits = model(images.to(device, non_blocking=True))
        y_true.append(targets.numpy())
        y_pred.append(logits.argmax(-1).cpu().numpy())
    return f1_score(np.concatenate(y_true), np.concatenate(y_pred), average="macro")


def eval_epoch(model, loader, device):
    # Every caller below wraps this in no_grad, so the forward here is fine.
    total, n = 0.0, 0
    for images, targets in loader:
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        total += F.cross_entropy(model(images), targets, reduction="sum").item()
        n += images.size(0)
    return total / n


def run_validation(model, loader, device, epoch):
    model.eval()
    start = time.time()
    with torch.no_grad():
        val_loss = eval_epoch(model, loader, device)
    print(f"epoch {epoch}: val loss {val_loss:.4f} ({time.time() - start:.1f}s)")
    return val_loss


def evaluate_checkpoint(path, loader, device):
    # Loading and building are helpers named after a model, not forwards.
    model = build_model("resnet18", num_classes=10)
    load_checkpoint(model, path)
    model = model.to(device)
    model.eval()
    with torch.no_grad():
        return eval_epoch(model, loader, device)


def validate_config(cfg):
    if cfg.batch_size <= 0:
        raise ValueError("batch size must be positive")
    return cfg


def evaluate_ensemble(models, loader, device):
    for m in models:
        m.eval()
    scores = []
    for images, _ in loader:
        images = images.to(device, non_blocking=True)
        with torch.no_grad():
            logits = torch.stack([m(images) for m in models]).mean(0)
        scores.append(logits.softmax(-1).cpu())
    return torch.cat(scores)


def test(model, loader, device):
    model.eval()
    correct = 0
    for images, targets in loader:
        images = images.to(device, non_blocking=True)
        targets = targets.to(device, non_blocking=True)
        output = model(images)  # expect: MEM002
        correct += output.argmax(1).eq(targets).sum().item()
        loss = F.cross_entropy(model(images), targets)  # expect: MEM002
        print(loss.item())
    return correct


def test_predict_shapes():
    # A pytest test: tiny forwards with grad on are fine here.
    model = build_model("resnet18", num_classes=10)
    model.eval()
    out = model(torch.zeros(2, 3, 32, 32))
    assert out.shape == (2, 10)


class TemperatureScaledClassifier(torch.nn.Module):
    """Model code: predict() is part of the forward pass, not an evaluation routine."""

    def __init__(self, backbone, classifier):
        super().__init__()
        self.backbone = backbone
        self.classifier = classifier
        self.temperature = torch.nn.Parameter(torch.ones(1))

    def forward(self, images):
        return self.predict(self.backbone(images))

    def predict(self, features):
        return self.classifier(features) / self.temperature


class Predictor:
    """A serving wrapper: eval mode set once, inference run many times."""

    def __init__(self, model, device):
        self.model = model.to(device).eval()
        self.device = device

    def predict(self, images):
        logits = self.model(images.to(self.device))  # expect: MEM002
        return logits.softmax(-1)

    @torch.inference_mode()
    def predict_top1(self, images):
        return self.model(images.to(self.device)).argmax(-1)
