"""A plugin-style strategy that keeps the current step's tensors on ``self``.

Callbacks read ``self.out`` and ``self.loss`` while the step runs, so the strategy stores
them as attributes. Each iteration starts the loss afresh, and the step's own backward
(``self.backward()``, inherited from a base class that calls ``self.loss.backward()``) runs
after the stores, so no graph outlives its iteration. A value stored after the backward, or
a total that is never reset, does keep one step's (or every step's) tensors alive.
"""

import torch

from strategies import BaseStrategy


class StepStrategy(BaseStrategy):
    def __init__(self, model, optimizer, criterion, callbacks):
        self.model = model
        self.optimizer = optimizer
        self.criterion = criterion
        self.callbacks = callbacks
        self.loss = None
        self.out = None
        self.epoch_loss = 0.0

    def _fresh_total(self):
        return torch.zeros((), requires_grad=False)

    def _notify(self, event):
        for callback in self.callbacks:
            getattr(callback, event)(self)

    def run_epoch(self, loader):
        for x, y in loader:
            self.optimizer.zero_grad()
            self.loss = self._fresh_total()
            self.out = self.model(x)
            self._notify("after_forward")
            self.loss += self.criterion(self.out, y)
            self._notify("before_backward")
            self.backward()
            self.optimizer.step()
            self.last_out = self.out  # expect: MEM001
            self.epoch_loss += self.criterion(self.out, y)  # expect: MEM001
