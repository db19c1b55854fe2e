"""Model code from a decoder-only transformer: device and dtype alignment, not input copies."""

import math

import torch
import torch.nn as nn
import torch.nn.functional as F


class RotaryEmbedding(nn.Module):
    def __init__(self, dim, base=10000):
        super().__init__()
        inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, x, position_ids):
        inv_freq = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        inv_freq = inv_freq.to(x.device)
        positions = position_ids[:, None, :].float()
        freqs = (inv_freq @ positions).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        return emb.cos().to(x.dtype), emb.sin().to(x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden))
        self.eps = eps

    def forward(self, hidden_states):
        input_dtype = hidden_states.dtype
        hidden_states = hidden_states.to(torch.float32)
        variance = hidden_states.pow(2).mean(-1, keepdim=True)
        hidden_states = hidden_states * torch.rsqrt(variance + self.eps)
        return self.weight * hidden_states.to(input_dtype)


class Attention(nn.Module):
    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(hidden, 3 * hidden, bias=False)
        self.out = nn.Linear(hidden, hidden, bias=False)

    def forward(self, x, mask=None):
        b, t, c = x.shape
        q, k, v = self.qkv(x).split(c, dim=2)
        q = q.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        k = k.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        v = v.view(b, t, self.heads, c // self.heads).transpose(1, 2)
        scores = (q @ k.transpose(-2, -1)) / math.sqrt(k.size(-1))
        if mask is not None:
            scores = scores.masked_fill(mask.to(scores.device) == 0, float("-inf"))
        attn = F.softmax(scores.float(), dim=-1).to(q.dtype)
        return self.out((attn @ v).transpose(1, 2).reshape(b, t, c))


class Decoder(nn.Module):
    def __init__(self, vocab, hidden, heads, layers):
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.layers = nn.ModuleList(Attention(hidden, heads) for _ in range(layers))
        self.norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def forward(self, input_ids, attention_mask=None):
        hidden = self.embed(input_ids)
        causal = torch.tril(torch.ones(input_ids.size(1), input_ids.size(1), device=hidden.device))
        for layer in self.layers:
            # Pipeline-parallel layers can sit on different GPUs.
            device = next(layer.parameters()).device
            hidden = hidden.to(device)
            hidden = hidden + layer(hidden, causal)
        hidden = self.norm(hidden.to(self.lm_head.weight.device))
        return self.lm_head(hidden)

    def split_across_gpus(self, devices):
        per_device = math.ceil(len(self.layers) / len(devices))
        for i, layer in enumerate(self.layers):
            layer.to(devices[i // per_device])
        self.norm.to(devices[-1])
        self.lm_head.to(devices[-1])

    def cache_to(self, past_key_values, device):
        return [tuple(t.to(device) for t in layer_past) for layer_past in past_key_values]
