import torch
from torch.utils.data import DataLoader

from seg import utils as imed_utils
from seg.utils import to_gpu


def train(model, dataset, optimizer, cuda_available):
    train_loader = DataLoader(dataset, batch_size=8, pin_memory=True)
    for batch in train_loader:
        input_samples = imed_utils.cuda(batch["input"], cuda_available)  # expect: MEM003
        gt_samples = imed_utils.cuda(batch["gt"], cuda_available, non_blocking=True)
        weights = imed_utils.cuda(batch["weights"], cuda_available, True)
        masks = imed_utils.cuda(batch["mask"], cuda_available, False)  # expect: MEM003
        extra = to_gpu(batch["extra"])
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(input_samples, extra, masks, weights),
                                            gt_samples)
        loss.backward()
        optimizer.step()
