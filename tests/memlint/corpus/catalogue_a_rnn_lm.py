"""Word-level language model with truncated BPTT (catalogue corpus: MEM007, MEM008, MEM009)."""

import argparse

import torch
import torch.nn as nn
import torch.nn.functional as F


class RNNModel(nn.Module):
    def __init__(self, ntoken, ninp, nhid, nlayers, dropout=0.2):
        super().__init__()
        self.drop = nn.Dropout(dropout)
        self.encoder = nn.Embedding(ntoken, ninp)
        self.rnn = nn.LSTM(ninp, nhid, nlayers, dropout=dropout)
        self.decoder = nn.Linear(nhid, ntoken)
        self.nlayers = nlayers
        self.nhid = nhid

    def forward(self, tokens, hidden):
        emb = self.drop(self.encoder(tokens))
        output, hidden = self.rnn(emb, hidden)
        return self.decoder(self.drop(output)), hidden

    def init_hidden(self, bsz):
        weight = next(self.parameters())
        return (weight.new_zeros(self.nlayers, bsz, self.nhid),
                weight.new_zeros(self.nlayers, bsz, self.nhid))


def repackage_hidden(h):
    if isinstance(h, torch.Tensor):
        return h.detach()
    return tuple(repackage_hidden(v) for v in h)


def get_batch(source, i, bptt):
    seq_len = min(bptt, len(source) - 1 - i)
    return source[i:i + seq_len], source[i + 1:i + 1 + seq_len].reshape(-1)


def train_epoch_good(model, train_data, optimizer, args):
    model.train()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i, args.bptt)
        hidden = repackage_hidden(hidden)
        optimizer.zero_grad()
        output, hidden = model(data, hidden)
        loss = F.cross_entropy(output.view(-1, output.size(-1)), targets)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), args.clip)
        optimizer.step()


def train_epoch_leaky(model, train_data, optimizer, args):
    model.train()
    hidden = model.init_hidden(args.batch_size)
    for batch, i in enumerate(range(0, train_data.size(0) - 1, args.bptt)):
        data, targets = get_batch(train_data, i, args.bptt)
        optimizer.zero_grad(set_to_none=False)  # expect: MEM009
        output, hidden = model(data, hidden)  # expect: MEM007
        loss = F.cross_entropy(output.view(-1, output.size(-1)), targets)
        loss.backward(retain_graph=True)  # expect: MEM008
        optimizer.step()


def train_inplace_detach(model, loader, optimizer):
    h, c = model.init_hidden(32)
    for x, y in loader:
        h.detach_()
        c.detach_()
        out, (h, c) = model.rnn(model.encoder(x), (h, c))
        loss = F.cross_entropy(model.decoder(out).flatten(0, 1), y.flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def train_fresh_state(model, loader, optimizer, seq_len):
    for x, y in loader:
        hidden = model.init_hidden(x.size(1))
        for t in range(0, x.size(0), seq_len):
            out, hidden = model(x[t:t + seq_len], hidden)
        loss = F.cross_entropy(out.flatten(0, 1), y[-1].flatten())
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


def evaluate(model, data_source, args):
    model.eval()
    total = 0.0
    hidden = model.init_hidden(args.eval_batch_size)
    with torch.no_grad():
        for i in range(0, data_source.size(0) - 1, args.bptt):
            data, targets = get_batch(data_source, i, args.bptt)
            output, hidden = model(data, hidden)
            total += len(data) * F.cross_entropy(output.view(-1, output.size(-1)), targets).item()
    return total / (len(data_source) - 1)


def accumulate_noisy_grads(model, optimizer, loader, sigma):
    for x, y in loader:
        optimizer.zero_grad(set_to_none=False)
        out, _ = model(x, None)
        F.cross_entropy(out.flatten(0, 1), y.flatten()).backward()
        for p in model.parameters():
            p.grad.add_(torch.randn_like(p.grad) * sigma)
        optimizer.step()


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--batch-size", type=int, default=20)
    parser.add_argument("--bptt", type=int, default=35)
    parser.add_argument("--clip", type=float, default=0.25)
    args = parser.parse_args()
    model = RNNModel(10000, 200, 200, 2).cuda()
    optimizer = torch.optim.SGD(model.parameters(), lr=20.0)
    train_data = torch.randint(0, 10000, (5000, args.batch_size)).cuda()  # expect: MEM010
    train_epoch_good(model, train_data, optimizer, args)


if __name__ == "__main__":
    main()
