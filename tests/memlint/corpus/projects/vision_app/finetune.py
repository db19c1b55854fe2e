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


def finetune_frozen_norm(model, loader, optimizer, criterion):
    from vision.engine.steps import forward_features

    for x, y in loader:
        optimizer.zero_grad()
        model.eval()  # keep batch-norm statistics frozen while fine-tuning
        loss = criterion(forward_features(model, x), y)
        loss.backward()
        optimizer.step()


def export_embeddings(model, images):
    from vision.engine.steps import embed

    model.eval()
    return embed(model, images).cpu().numpy()


def describe(model, images):
    from vision.engine.steps import forward_features

    model.eval()
    # forward_features also serves the training loop above: a shared helper, not inference.
    return forward_features(model, images).mean().item()
