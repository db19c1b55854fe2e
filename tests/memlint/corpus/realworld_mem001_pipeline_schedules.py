"""Schedules that keep forward outputs on purpose: their graphs are needed by a later backward.

A one-forward-one-backward pipeline stage runs a few micro-batches ahead, stashes their
outputs, and backpropagates each one when its gradient arrives from the next stage, through
a helper or a method of the schedule. A multi-head step collects the heads' losses in a
list it resets every step and backpropagates at the end of it. None of these lists outlive
the graphs they hold. Logging the outputs instead of backpropagating them does leak.
"""

import torch


def backward_step(input_tensor, output_tensor, output_grad):
    """Backpropagate one micro-batch and return the gradient for the previous stage."""
    if input_tensor is not None:
        input_tensor.retain_grad()
    torch.autograd.backward(output_tensor, grad_tensors=output_grad)
    return None if input_tensor is None else input_tensor.grad


def one_forward_one_backward(model, micro_batches, recv_grad, send_grad, optimizer, warmup):
    input_tensors = []
    output_tensors = []
    optimizer.zero_grad()
    for i, micro in enumerate(micro_batches):
        micro = micro.requires_grad_()
        output = model(micro)
        input_tensors.append(micro)
        output_tensors.append(output)
        if i >= warmup:
            send_grad(backward_step(input_tensors.pop(0), output_tensors.pop(0), recv_grad()))
    while output_tensors:
        send_grad(backward_step(input_tensors.pop(0), output_tensors.pop(0), recv_grad()))
    optimizer.step()


class InterleavedSchedule:
    """Forward and backward passes as separate instructions of one schedule."""

    def __init__(self, module, optimizer, num_micro_batches):
        self.module = module
        self.optimizer = optimizer
        self.num_micro_batches = num_micro_batches
        self.outputs = {}

    def forward_pass(self, buffer_id, inputs):
        self.outputs[buffer_id] = self.module(inputs)

    def backward_pass(self, buffer_id, grad):
        output = self.outputs.pop(buffer_id)
        torch.autograd.backward(tensors=(output,), grad_tensors=(grad,))

    def train_batch(self, micro_batches, grads):
        self.optimizer.zero_grad()
        for i, inputs in enumerate(micro_batches):
            self.forward_pass(i, inputs)
            if i >= 1:
                self.backward_pass(i - 1, grads[i - 1])
        self.backward_pass(len(micro_batches) - 1, grads[-1])
        self.optimizer.step()


class MultiHeadTrainer:
    """Each step sums the heads' losses over micro-batches and backpropagates once."""

    def __init__(self, model, heads, optimizer, criterion):
        self.model = model
        self.heads = heads
        self.optimizer = optimizer
        self.criterion = criterion
        self.losses = []
        self.history = []

    def _micro_step(self, micro):
        features = self.model(micro["x"])
        for name, head in self.heads.items():
            self.losses.append(self.criterion(head(features), micro[name]))

    def train_step(self, batch, chunks=4):
        self.losses = []
        self.optimizer.zero_grad()
        for micro in batch.split(chunks):
            self._micro_step(micro)
        total = torch.stack(self.losses).sum()
        total.backward()
        self.optimizer.step()
        self.history.append(total.item())
        return total.detach()

    def fit(self, loader):
        for batch in loader:
            self.train_step(batch)


def pipeline_with_logging(model, micro_batches, recv_grad, optimizer):
    stashed = []
    logged = []
    for micro in micro_batches:
        output = model(micro)
        stashed.append(output)
        logged.append(output)  # expect: MEM001
        backward_step(None, stashed.pop(0), recv_grad())
    optimizer.step()
    return logged
