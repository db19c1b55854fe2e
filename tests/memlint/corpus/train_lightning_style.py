"""Lightning-style modules: automatic optimization, manual optimization, epoch-end hooks."""

import torch
import torch.nn.functional as F
from torch import nn

import lightning as L


class LitClassifier(L.LightningModule):
    def __init__(self, backbone, num_classes, lr=1e-3):
        super().__init__()
        self.backbone = backbone
        self.head = nn.Linear(512, num_classes)
        self.lr = lr
        self.validation_step_outputs = []

    def forward(self, x):
        return self.head(self.backbone(x))

    def training_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.log("train_loss", loss, prog_bar=True)
        # Automatic optimization: Lightning runs backward and step on the returned loss.
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        logits = self(x)
        loss = F.cross_entropy(logits, y)
        self.validation_step_outputs.append(loss.detach())
        return loss

    def on_validation_epoch_end(self):
        mean_loss = torch.stack(self.validation_step_outputs).mean()
        self.log("val_loss", mean_loss)
        self.validation_step_outputs.clear()

    def configure_optimizers(self):
        return torch.optim.AdamW(self.parameters(), lr=self.lr)


class LitGAN(L.LightningModule):
    """Manual optimization with two optimizers, each zeroed before its backward."""

    def __init__(self, generator, discriminator, latent_dim=100):
        super().__init__()
        self.automatic_optimization = False
        self.generator = generator
        self.discriminator = discriminator
        self.latent_dim = latent_dim
        self.g_losses = []

    def adversarial_loss(self, y_hat, y):
        return F.binary_cross_entropy_with_logits(y_hat, y)

    def training_step(self, batch, batch_idx):
        imgs, _ = batch
        opt_g, opt_d = self.optimizers()
        z = torch.randn(imgs.shape[0], self.latent_dim, device=self.device)

        self.toggle_optimizer(opt_g)
        fake = self.generator(z)
        valid = torch.ones(imgs.size(0), 1, device=self.device)
        g_loss = self.adversarial_loss(self.discriminator(fake), valid)
        opt_g.zero_grad()
        self.manual_backward(g_loss)
        opt_g.step()
        self.untoggle_optimizer(opt_g)
        self.g_losses.append(g_loss)  # expect: MEM001

        self.toggle_optimizer(opt_d)
        real_loss = self.adversarial_loss(self.discriminator(imgs), valid)
        fake_loss = self.adversarial_loss(self.discriminator(fake.detach()), 1 - valid)
        d_loss = (real_loss + fake_loss) / 2
        opt_d.zero_grad()
        self.manual_backward(d_loss)
        opt_d.step()
        self.untoggle_optimizer(opt_d)
        self.log_dict({"g_loss": g_loss, "d_loss": d_loss}, prog_bar=True)

    def configure_optimizers(self):
        opt_g = torch.optim.Adam(self.generator.parameters(), lr=2e-4, betas=(0.5, 0.999))
        opt_d = torch.optim.Adam(self.discriminator.parameters(), lr=2e-4, betas=(0.5, 0.999))
        return [opt_g, opt_d], []
