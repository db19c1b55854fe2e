"""Evaluation through the file's own context managers (MEM002, MEM005): a manager that
yields under no-grad switches grad off for the ``with`` body; one that only calls
``.eval()``, or passes ``True`` to ``set_grad_enabled``, does not."""

import contextlib

import torch


@contextlib.contextmanager
def evaluating(net):
    was_training = net.training
    net.eval()
    with torch.no_grad():
        yield net
    net.train(was_training)


@contextlib.contextmanager
def eval_mode_only(net):
    net.eval()
    yield net
    net.train()


def predict_all(model, loader):
    with evaluating(model):
        return [model(x).argmax(-1) for x, _ in loader]


def evaluate_embeddings(model, loader):
    features = []
    with eval_mode_only(model):
        for x, _ in loader:
            features.append(model(x))  # expect: MEM002, MEM005
    return torch.cat(features)


class Estimator:
    def __init__(self, network):
        self.network = network

    @contextlib.contextmanager
    def _training_mode(self, training):
        previous = self.network.training
        self.network.train(training)
        with torch.set_grad_enabled(training):
            yield
        self.network.train(previous)

    def predict(self, loader):
        outputs = []
        with self._training_mode(False):
            for x in loader:
                outputs.append(self.network(x))
        return outputs

    def probe(self, loader):
        outputs = []
        with self._training_mode(True):
            self.network.eval()
            for x in loader:
                outputs.append(self.network(x))  # expect: MEM002, MEM005
        return outputs
