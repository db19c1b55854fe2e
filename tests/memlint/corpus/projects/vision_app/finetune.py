"""Fine-tuning loops whose gradient clearing lives in vision.optim_utils."""

from vision.optim_utils import reset, zero_grads


def finetune(model, loader, optimizer, criterion):
    for x, y in loader:
        zero_grads(model.parameters())
        criterion(model(x), y).backward()
        optimizer.step()


def finetune_reset(model, loader, optimizer, criterion):
    for x, y in loader:
        reset(optimizer)
        criterion(model(x), y).backward()
        optimizer.step()


def finetune_forgetful(model, loader, optimizer, criterion):
    for x, y in loader:
        criterion(model(x), y).backward()
        optimizer.step()  # expect: MEM004
