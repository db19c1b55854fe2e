"""Batch helpers every trainer module star-imports."""

import torch


def move_to_device(batch, device):
    return {key: value.to(device) for key, value in batch.items()}


def get_outputs(batch, device, model):
    batch = move_to_device(batch, device)
    with torch.autocast("cuda"):
        return model(**batch)
