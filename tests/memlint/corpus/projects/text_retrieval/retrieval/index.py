"""Builds the index after switching the encoder to eval mode."""

import torch

from .encoders import CachedEncoder, TextEncoder


class Index:
    def __init__(self, width, device):
        self.encoder = TextEncoder(width).to(device)

    def build(self, docs):
        self.encoder.eval()
        vectors = self.encoder.encode(docs, batch_size=256)
        self.vectors = vectors.cpu()

    def query(self, texts):
        self.encoder.eval()
        queries = self.encoder.encode_queries(texts)  # expect: MEM002
        return queries.cpu() @ self.vectors.T


class CachedIndex:
    def __init__(self, width):
        self.encoder = CachedEncoder(width)

    def build(self, docs):
        self.encoder.eval()
        vectors = self.encoder.encode(docs)
        return torch.stack([v for v in vectors])
