"""Greedy decoding; its callers put the model in eval mode first."""

import torch


def greedy_decode(model, src, max_len=32):
    tokens = src[:, :1]
    for _ in range(max_len):
        logits = model(src, tokens)  # expect: MEM002
        tokens = torch.cat([tokens, logits[:, -1:].argmax(-1)], dim=1)
    return tokens
