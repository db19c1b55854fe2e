import time

import torch


def run_epoch(model, optimizer, data_loader, device, log_every=50):
    for step, (images, targets) in enumerate(data_loader):
        images = [image.to(device) for image in images]  # expect: MEM003
        losses = model(images, targets)
        optimizer.zero_grad()
        losses.backward()
        optimizer.step()
        if step % log_every == 0:
            print(step, losses.item())


@torch.no_grad()
def timed_eval(model, data_loader, device):
    for images, _ in data_loader:
        images = [image.to(device) for image in images]
        start = time.time()
        model(images)
        torch.cuda.synchronize()
        print(time.time() - start)
