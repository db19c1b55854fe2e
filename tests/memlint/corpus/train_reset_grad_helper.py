"""A GAN trainer object with a reset_grad() helper and loss bookkeeping on self."""

import torch
import torch.nn as nn


class LossTracker:
    def __init__(self):
        self.running_loss = 0.0
        self.count = 0

    def update(self, loss):
        # Called with the live loss from the training loop below.
        self.running_loss += loss  # expect: MEM001
        self.count += 1

    def mean(self):
        return float(self.running_loss) / max(self.count, 1)


class Solver:
    def __init__(self, G, D, g_lr, d_lr, device):
        self.G = G
        self.D = D
        self.device = device
        self.g_optimizer = torch.optim.Adam(self.G.parameters(), g_lr, (0.5, 0.999))
        self.d_optimizer = torch.optim.Adam(self.D.parameters(), d_lr, (0.5, 0.999))
        self.criterion = nn.BCEWithLogitsLoss()
        self.tracker = LossTracker()
        self.log = []

    def reset_grad(self):
        self.g_optimizer.zero_grad()
        self.d_optimizer.zero_grad()

    def backward_d(self, real, fake):
        pred_real = self.D(real)
        pred_fake = self.D(fake.detach())
        self.loss_d_real = self.criterion(pred_real, torch.ones_like(pred_real))
        self.loss_d_fake = self.criterion(pred_fake, torch.zeros_like(pred_fake))
        self.loss_d = (self.loss_d_real + self.loss_d_fake) * 0.5
        self.loss_d.backward()

    def backward_g(self, fake):
        pred_fake = self.D(fake)
        self.loss_g = self.criterion(pred_fake, torch.ones_like(pred_fake))
        self.loss_g.backward()

    def train(self, data_loader, num_iters):
        data_iter = iter(data_loader)
        for i in range(num_iters):
            try:
                real, _ = next(data_iter)
            except StopIteration:
                data_iter = iter(data_loader)
                real, _ = next(data_iter)
            real = real.to(self.device, non_blocking=True)
            z = torch.randn(real.size(0), 128, device=self.device)
            fake = self.G(z)

            self.backward_d(real, fake)
            self.d_optimizer.step()
            self.reset_grad()

            self.backward_g(fake)
            self.g_optimizer.step()
            self.reset_grad()

            self.tracker.update(self.loss_g)
            self.last_d_loss = self.loss_d.item()  # expect: MEM013
            if (i + 1) % 100 == 0:
                self.log.append({"iter": i + 1, "d": self.last_d_loss, "g": self.tracker.mean()})
        return self.log
