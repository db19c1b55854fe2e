"""The training script, run from the repository root."""

import torch

from vision.decode import greedy_decode
from vision.engine.validator import evaluate_slow, score, validate
from vision.viz import sample_images


def train(generator, discriminator, loader, opt_g, opt_d, criterion, epochs=10):
    for epoch in range(epochs):
        for step, (real, _) in enumerate(loader):
            opt_d.zero_grad()
            fake = generator(torch.randn(real.size(0), 100))
            d_loss = criterion(discriminator(real), discriminator(fake.detach()))
            d_loss.backward()
            opt_d.step()
            if step % 500 == 0:
                sample_images(generator, step)
        validate(discriminator, loader)
        score(discriminator, loader)
        evaluate_slow(discriminator, loader)


if __name__ == "__main__":
    model = torch.load("seq2seq.pt", map_location="cpu", weights_only=False)
    model.eval()
    print(greedy_decode(model, torch.zeros(1, 8, dtype=torch.long)))
