"""Shapes met on a blind set of third-party code (MEM003, MEM010): a progress bar that is
optional around the loader, devices kept in a state mapping, and shape ops between a
factory and its move; with the near misses beside them."""

import torch
from torch.utils.data import DataLoader
from tqdm import tqdm

STATE_DEVICE = "device"


def collect_statistics(dataset, summarise, device, rank, quiet):
    loader = DataLoader(dataset, batch_size=1, num_workers=4, pin_memory=True)
    stats = []
    for record in tqdm(loader) if rank == 0 and not quiet else loader:
        record = record[0]
        image = record["image"].to(device)  # expect: MEM003
        label = record["label"].argmax(0) if record["label"].shape[0] > 1 else record["label"][0]
        stats.append(summarise(image, label.to(device)))  # expect: MEM003
    return stats


def augmented_predictions(samples, infer, device, show_progress, workers=2):
    loader = DataLoader(samples, batch_size=4, num_workers=workers)  # expect: MEM003
    outputs = []
    with torch.no_grad():
        for batch in (tqdm(loader, desc="tta") if show_progress else loader):
            outputs.extend(infer(batch["image"].to(device)).unbind(0))  # expect: MEM003
    return outputs


def pick_source(train_rows, eval_rows, training, device):
    # Plain lists picked by a condition: no DataLoader, nothing to pin or overlap.
    for row in train_rows if training else eval_rows:
        row.to(device)


class TargetsCallback:
    def __init__(self, n_classes):
        self.n_classes = n_classes

    def targets(self, state):
        picked = torch.randint(high=self.n_classes, size=(1, 1)).long().to(state["device"])  # expect: MEM010
        hot = torch.zeros(1, self.n_classes).to(state[STATE_DEVICE])  # expect: MEM010
        return hot.scatter_(1, picked, 1.0)

    def casts_only(self, state):
        # A dtype kept in the same mapping is a cast, not a move.
        return torch.ones(self.n_classes).to(state["dtype"])


def padding_mask(features, lengths):
    time_steps, batch = features.size(0), features.size(1)
    positions = torch.arange(time_steps).view(1, time_steps).expand(batch, -1).to(features.device)  # expect: MEM010
    return positions >= lengths.view(batch, 1)


def relative_offsets(length, like):
    grid = torch.arange(length).unsqueeze(0).repeat(2, 1)
    # Moved as a whole tensor later, after more host work: not a factory moved at once.
    grid = grid * 2
    return grid.to(like.device), torch.arange(length).view(-1, 1).to(like)  # expect: MEM010


def place_loaders(train_loaders, device):
    # Iterates the loaders themselves, not their batches: `to` here sets where a loader's
    # batches will go and copies nothing.
    for i, dl in enumerate(train_loaders):
        dl.to(device=device)
    return train_loaders
