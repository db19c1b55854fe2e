"""Data side of a retrieval project: tensor shards written by a preprocessing job, a feature
cache computed on the GPU, deep copies through a buffer, and the frozen encoder's weights."""

import io
import os

import torch
from torch.utils.data import Dataset


class ShardDataset(Dataset):
    def __init__(self, root):
        self.files = sorted(os.path.join(root, f) for f in os.listdir(root) if f.endswith(".pt"))
        self.index = torch.load(os.path.join(root, "index.pt"))

    def __len__(self):
        return len(self.index)

    def __getitem__(self, i):
        shard, offset = self.index[i]
        return torch.load(self.files[shard])[offset]


def load_split(root, split):
    """Token ids the preprocessing job wrote, one file per split."""
    tokens, labels = torch.load(os.path.join(root, f"{split}_tokens.pt"))
    return tokens, labels


class FeatureCache:
    def __init__(self, encoder, cache_dir, device):
        self.encoder = encoder
        self.cache_file = os.path.join(cache_dir, "features.pt")
        self.device = device

    def features(self, loader):
        if os.path.exists(self.cache_file):
            return torch.load(self.cache_file)
        feats = []
        with torch.no_grad():
            for batch in loader:
                feats.append(self.encoder(batch.to(self.device, non_blocking=True)))
        feats = torch.cat(feats)
        torch.save(feats, self.cache_file)
        return feats


def deep_copy_state(state):
    buffer = io.BytesIO()
    torch.save(state, buffer)
    buffer.seek(0)
    return torch.load(buffer)


def build_encoder(encoder_cls, weights_path, device):
    encoder = encoder_cls().to(device)
    encoder.load_state_dict(torch.load(weights_path))  # expect: MEM014
    encoder.eval()
    return encoder
