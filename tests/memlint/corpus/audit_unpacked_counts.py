"""A trainer whose model returns its loss together with how many items it covered.

The item count unpacked next to the loss is a plain number, so running totals of it keep no
graph alive; only the loss itself does. Values turned into host arrays (``.asnumpy()``, as
some non-torch array libraries spell ``.numpy()``) carry no graph either.
"""

import torch


def run_epochs(model, loader, optimizer, epochs, log_every=50):
    seen_total = 0
    loss_total = 0.0
    raw_losses = []
    for epoch in range(epochs):
        for step, batch in enumerate(loader):
            optimizer.zero_grad()
            loss, item_count = model.forward_loss(batch)
            seen_total += item_count
            loss.backward()
            optimizer.step()
            if step % log_every == 0:
                loss_total += loss.item()
            raw_losses.append(loss)  # expect: MEM001
    return seen_total, loss_total, raw_losses


def run_with_sizes(model, loader, optimizer):
    tokens = 0
    for batch in loader:
        optimizer.zero_grad()
        loss, n_tokens, batch_size = model.forward_loss(batch)
        (loss / batch_size).backward()
        optimizer.step()
        tokens += n_tokens
    return tokens


def collect_host_scores(net, loader, optimizer):
    host = []
    for x, y in loader:
        optimizer.zero_grad()
        out = net(x)
        loss = torch.nn.functional.mse_loss(out, y)
        loss.backward()
        optimizer.step()
        host.append(out.asnumpy())
    return host
