"""Sampling helpers called from the training loop every few hundred steps."""

import torch
from torchvision.utils import save_image


def sample_images(generator, step, latent_dim=100):
    z = torch.randn(16, latent_dim)
    images = generator(z)  # expect: MEM002
    save_image(images, f"samples/{step}.png", nrow=4)
