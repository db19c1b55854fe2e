"""A multi-pair translation task in the style of sequence-modelling toolkits (MEM001): the
criterion returns (loss, sample size, logging record); only the loss carries a graph."""

from collections import defaultdict


class MultiPairTask:
    def __init__(self, pairs):
        self.pairs = pairs

    def _pair_loss(self, pair, model, criterion, sample):
        return criterion(model.models[pair], sample[pair])

    def train_step(self, sample, model, criterion, optimizer):
        model.train()
        agg_loss, agg_size = 0.0, 0
        agg_logging = defaultdict(float)
        for pair in self.pairs:
            loss, sample_size, logging_output = self._pair_loss(pair, model, criterion, sample)
            optimizer.backward(loss)
            agg_loss += loss  # expect: MEM001
            agg_size += sample_size
            for k in logging_output:
                agg_logging[k] += logging_output[k]
                agg_logging[f"{pair}:{k}"] += logging_output[k]
        return agg_loss, agg_size, agg_logging

    def valid_step(self, sample, model, criterion, history):
        for pair in self.pairs:
            loss, _, stats = criterion(model.models[pair], sample[pair])
            loss.backward()
            history.append(stats)
