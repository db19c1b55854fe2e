"""Tensor helpers: no rule's trigger words here, so only the project model reads this file."""

import torch


def move_features(features, device):
    for name, value in features.items():
        if isinstance(value, torch.Tensor):
            features[name] = value.to(device)
    return features


def pad_lengths(lengths, size):
    return [size - n for n in lengths]
