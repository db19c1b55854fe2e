"""Detector training: the loss class lives in vision.loss."""

from vision.loss import DetectionLoss


def train(model, loader, optimizer, epochs=3):
    criterion = DetectionLoss()
    history, losses = [], []
    for _ in range(epochs):
        for images, targets in loader:
            optimizer.zero_grad()
            loss, parts = criterion(model(images), targets)
            loss.backward()
            optimizer.step()
            history.append(parts)
            losses.append(loss)  # expect: MEM001
    return history, losses
