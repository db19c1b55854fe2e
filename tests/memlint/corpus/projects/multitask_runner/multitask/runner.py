import torch

from multitask.modeling import score_batch, wrap_forward


def backpropagate(loss, optimizer):
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()


class Runner:
    def __init__(self, model, optimizer):
        self.model = model
        self.optimizer = optimizer

    def train_step(self, batch, task):
        self.model.train()
        loss = wrap_forward(self.model, batch, task).mean()
        backpropagate(loss, self.optimizer)


def run_val(model, batches, task):
    model.eval()
    total = 0.0
    for batch in batches:
        with torch.no_grad():
            out = wrap_forward(model, batch, task)
            total += float(score_batch(model, batch, task).sum())
        total += float(out.sum())
    return total


def run_scoring(model, batches, task):
    model.eval()
    return [float(score_batch(model, batch, task).sum()) for batch in batches]
