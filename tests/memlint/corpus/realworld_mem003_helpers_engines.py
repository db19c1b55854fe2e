"""A graph/sequence training package: batches reach the GPU inside helpers, callbacks and
ignite-style step functions; some helpers run on values the loop already moved, or on the
host."""

import torch
import torch.nn.functional as F
from ignite.engine import Engine, Events, create_supervised_trainer
from torch.utils.data import DataLoader
from tqdm import tqdm


def to_device(batch, device):
    """Move a nested batch (tensors, dicts, lists) to ``device``."""
    if isinstance(batch, torch.Tensor):
        return batch.to(device)  # expect: MEM003
    if isinstance(batch, dict):
        return {key: to_device(value, device) for key, value in batch.items()}
    if isinstance(batch, (list, tuple)):
        return type(batch)(to_device(item, device) for item in batch)
    return batch


def apply_to_sample(fn, sample):
    if torch.is_tensor(sample):
        return fn(sample)
    if isinstance(sample, dict):
        return {key: apply_to_sample(fn, value) for key, value in sample.items()}
    if isinstance(sample, list):
        return [apply_to_sample(fn, item) for item in sample]
    return sample


def move_to_cuda(sample):
    def _move_to_cuda(tensor):
        return tensor.cuda()  # expect: MEM003

    return apply_to_sample(_move_to_cuda, sample)


def masked_token_loss(logits, labels, pad_id):
    labels = labels.to(logits.device)
    mask = labels != pad_id
    return F.cross_entropy(logits[mask], labels[mask])


def train_epoch(model, optimizer, loader, device, pad_id=0):
    model.train()
    for batch in loader:
        batch = to_device(batch, device)
        logits = model(batch["input_ids"], attention_mask=batch["attention_mask"])
        # The labels were moved with the rest of the batch: this second .to() is a no-op.
        loss = masked_token_loss(logits, batch["labels"], pad_id)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def train_translation(model, optimizer, train_loader):
    for sample in tqdm(train_loader, desc="train", leave=False):
        sample = move_to_cuda(sample)
        loss = model(**sample["net_input"]).loss
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def collect_embeddings(encoder, loader):
    encoder.eval()
    outputs = []
    with torch.no_grad():
        for batch in loader:
            tokens = apply_to_sample(lambda t: t.cuda(), batch["tokens"])  # expect: MEM003
            outputs.append(encoder(tokens).cpu())
    return torch.cat(outputs)


def train_graphs(model, optimizer, graph_loader, device):
    for data in graph_loader:
        data.x = data.x.to(device, non_blocking=True)
        data.edge_index = data.edge_index.to(device, non_blocking=True)
        # Already on the device from the lines above: copies nothing.
        out = model(data.x.to(device), data.edge_index)
        loss = F.nll_loss(out, data.y.to(device))  # expect: MEM003
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def export_predictions(model, loader, path):
    # Moves batches to the host for saving: nothing to overlap.
    rows = []
    with torch.no_grad():
        for batch in loader:
            host = to_device(batch, "cpu")
            rows.append(host)
    torch.save(rows, path)


def run_ignite(model, optimizer, train_set, val_set, device, epochs=10):
    train_loader = DataLoader(train_set, batch_size=64, shuffle=True, num_workers=4)  # expect: MEM003
    val_loader = DataLoader(val_set, batch_size=256, num_workers=4, pin_memory=True)

    def train_step(engine, batch):
        model.train()
        images, targets = batch
        images = images.to(device)  # expect: MEM003
        targets = targets.to(device, non_blocking=True)
        optimizer.zero_grad()
        loss = F.cross_entropy(model(images), targets)
        loss.backward()
        optimizer.step()
        return loss.item()

    def eval_step(engine, batch):
        model.eval()
        with torch.no_grad():
            images, targets = batch
            images = images.to(device, non_blocking=True)
            return model(images), targets.to(device)  # expect: MEM003

    trainer = Engine(train_step)
    evaluator = Engine(eval_step)

    @trainer.on(Events.EPOCH_COMPLETED)
    def validate(engine):
        evaluator.run(val_loader)

    trainer.run(train_loader, max_epochs=epochs)


def prepare_batch(batch, device=None, non_blocking=False):
    inputs, targets = batch
    return inputs.to(device), targets.to(device)  # expect: MEM003, MEM003


def run_supervised(model, optimizer, loader, device, epochs=5):
    trainer = create_supervised_trainer(
        model, optimizer, F.cross_entropy, device=device, prepare_batch=prepare_batch
    )
    trainer.run(loader, max_epochs=epochs)
