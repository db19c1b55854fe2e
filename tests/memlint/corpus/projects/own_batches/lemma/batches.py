"""Batch classes named like loaders: one assembles its batches itself, one is a DataLoader."""
import torch
from torch.utils.data import DataLoader


class LemmaDataLoader:
    """Not a torch DataLoader: it cuts the document into batches and builds their tensors."""

    def __init__(self, doc, batch_size):
        self.data = [doc[i:i + batch_size] for i in range(0, len(doc), batch_size)]

    def __len__(self):
        return len(self.data)

    def __getitem__(self, key):
        batch = list(zip(*self.data[key]))
        return torch.LongTensor(batch[0]), torch.LongTensor(batch[1])

    def __iter__(self):
        for i in range(len(self)):
            yield self[i]


class PaddedDataLoader(DataLoader):
    """A DataLoader subclass: its workers could pin the batches."""

    def __init__(self, dataset, batch_size):
        super().__init__(dataset, batch_size=batch_size, collate_fn=pad)


def pad(items):
    return torch.stack(items)


def _make_data_loader(dataset, **kwargs):
    return DataLoader(dataset, **kwargs)


class ReplayDataLoader:
    """Not a DataLoader subclass, but it wraps two: its options reach them."""

    def __init__(self, data, buffer, **kwargs):
        self.loaders = [_make_data_loader(data, **kwargs), _make_data_loader(buffer, **kwargs)]

    def __iter__(self):
        for new, old in zip(*self.loaders):
            yield torch.cat([new, old])
