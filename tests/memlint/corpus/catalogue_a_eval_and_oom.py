"""Evaluation, inference and OOM-recovery code (catalogue corpus: MEM005, MEM006, MEM010)."""

import logging

import numpy as np
import torch
import torch.nn.functional as F
from torch.utils.data import DataLoader

logger = logging.getLogger(__name__)


def validate_leaky(model, val_loader, device):
    model.eval()
    all_logits = []
    for images, _ in val_loader:
        logits = model(images.to(device, non_blocking=True))  # expect: MEM002
        all_logits.append(logits.softmax(dim=-1).cpu())  # expect: MEM005
    return torch.cat(all_logits)


@torch.no_grad()
def validate(model, val_loader, device):
    model.eval()
    all_logits, all_labels = [], []
    for images, labels in val_loader:
        logits = model(images.to(device, non_blocking=True))
        all_logits.append(logits)  # expect: MEM016
        all_labels.append(labels)
    return torch.cat(all_logits), torch.cat(all_labels)


def predict_probs(model, loader, device):
    model.eval()
    probs = []
    for batch in loader:
        out = model(batch.to(device, non_blocking=True))  # expect: MEM002
        probs.append(F.softmax(out, dim=1).detach().cpu().numpy())
    return np.concatenate(probs)


def collect_predictions(model, loader, device):
    model.eval()
    preds, targets = [], []
    for x, y in loader:
        out = model(x.to(device, non_blocking=True))  # expect: MEM002
        preds.extend(out.argmax(dim=1).tolist())
        targets += [y]
    return preds, targets


def test_time_embeddings(encoder, test_loader):
    encoder.eval()
    feats = [encoder(x.cuda()) for x, _ in test_loader]  # expect: MEM005, MEM003
    return torch.cat(feats)


def infer_scores(model, loader):
    model.eval()
    with torch.inference_mode():
        scores = [model(x.cuda()).cpu() for x, _ in loader]  # expect: MEM003
    return scores


def eval_loss(model, loader, criterion):
    model.eval()
    losses = []
    for x, y in loader:
        losses.append(criterion(model(x), y))  # expect: MEM005, MEM002
    return torch.stack(losses).mean().item()


def run_phase(model, loader, optimizer, criterion, phase):
    outputs = []
    model.train(phase == "train")
    for x, y in loader:
        with torch.set_grad_enabled(phase == "train"):
            out = model(x)
            loss = criterion(out, y)
            if phase == "train":
                optimizer.zero_grad()
                loss.backward()
                optimizer.step()
        outputs.append(out)  # expect: MEM001
    return outputs


def forward_with_fallback(model, batch):
    try:
        return model(batch)
    except torch.OutOfMemoryError:
        logger.warning("OOM on a batch of %d; retrying on halves", len(batch))
        torch.cuda.empty_cache()
        half = len(batch) // 2
        return torch.cat([model(batch[:half]), model(batch[half:])])  # expect: MEM006


def find_batch_size(model, sample, start=256):
    batch_size = start
    while batch_size > 0:
        try:
            model(sample.expand(batch_size, *sample.shape[1:]))
            return batch_size
        except torch.cuda.OutOfMemoryError:
            batch_size //= 2
            torch.cuda.empty_cache()
    raise RuntimeError("no batch size fits")


def train_step_with_skip(model, batch, optimizer, criterion):
    try:
        loss = criterion(model(batch["x"]), batch["y"])
        loss.backward()
        optimizer.step()
    except RuntimeError as err:
        if "out of memory" not in str(err):
            raise
        logger.warning("skipping batch after OOM")
        optimizer.zero_grad(set_to_none=True)
        torch.cuda.empty_cache()
        return None
    optimizer.zero_grad()
    return loss.item()


def generate_with_cpu_fallback(model, inputs):
    try:
        return model.generate(**inputs, max_new_tokens=64)
    except RuntimeError as err:  # CUDA out of memory: fall back to the CPU
        model.to("cpu")
        return model.generate(**{k: v.cpu() for k, v in inputs.items()}, max_new_tokens=64)  # expect: MEM006


def encode_chunks(encoder, texts, chunk):
    oom = False
    try:
        out = encoder(texts)
    except torch.OutOfMemoryError:
        oom = True
    if oom:
        torch.cuda.empty_cache()
        out = torch.cat([encoder(texts[i:i + chunk]) for i in range(0, len(texts), chunk)])
    return out


def cast_with_fallback(model, x):
    try:
        return model(x)
    except RuntimeError:
        return model(x.float())


def build_masks(seq_len, device, batch):
    causal = torch.triu(torch.ones(seq_len, seq_len), diagonal=1).bool().to(device)  # expect: MEM010
    pad = torch.zeros(batch, seq_len, dtype=torch.bool).to(device)  # expect: MEM010
    positions = torch.arange(seq_len).to(device)  # expect: MEM010
    scale = torch.ones(1).to(torch.float16)
    staged = torch.empty(batch, seq_len, pin_memory=True).cuda(non_blocking=True)
    like = torch.zeros_like(positions).cuda()
    host = torch.ones(seq_len).to("cpu")
    ref = torch.zeros(seq_len).to(positions)  # expect: MEM010
    noise = torch.randn(batch, seq_len).cuda()  # expect: MEM010
    g = torch.Generator().manual_seed(0)
    fixed_noise = torch.randn(batch, seq_len, generator=g).to(device)
    return causal, pad, positions, scale, staged, like, host, ref, noise, fixed_noise


def make_loader(dataset):
    return DataLoader(dataset, batch_size=64, shuffle=False, pin_memory=True)
