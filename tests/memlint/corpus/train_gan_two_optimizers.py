"""A DCGAN-style loop: two networks, two optimizers, each zeroed through its model."""

import torch
import torch.nn as nn
import torch.optim as optim

nz = 100
real_label = 1.0
fake_label = 0.0


def weights_init(m):
    classname = m.__class__.__name__
    if classname.find("Conv") != -1:
        nn.init.normal_(m.weight.data, 0.0, 0.02)
    elif classname.find("BatchNorm") != -1:
        nn.init.normal_(m.weight.data, 1.0, 0.02)
        nn.init.constant_(m.bias.data, 0)


def train(netG, netD, dataloader, device, num_epochs=5):
    criterion = nn.BCELoss()
    fixed_noise = torch.randn(64, nz, 1, 1, device=device)
    optimizerD = optim.Adam(netD.parameters(), lr=0.0002, betas=(0.5, 0.999))
    optimizerG = optim.Adam(netG.parameters(), lr=0.0002, betas=(0.5, 0.999))

    img_list = []
    G_losses = []
    D_losses = []
    D_totals = []
    iters = 0

    for epoch in range(num_epochs):
        for i, data in enumerate(dataloader, 0):
            # (1) Update D: maximize log(D(x)) + log(1 - D(G(z)))
            netD.zero_grad()
            real_cpu = data[0].to(device, non_blocking=True)
            b_size = real_cpu.size(0)
            label = torch.full((b_size,), real_label, dtype=torch.float, device=device)
            output = netD(real_cpu).view(-1)
            errD_real = criterion(output, label)
            errD_real.backward()
            D_x = output.mean().item()  # expect: MEM013

            noise = torch.randn(b_size, nz, 1, 1, device=device)
            fake = netG(noise)
            label.fill_(fake_label)
            output = netD(fake.detach()).view(-1)
            errD_fake = criterion(output, label)
            errD_fake.backward()
            D_G_z1 = output.mean().item()  # expect: MEM013
            errD = errD_real + errD_fake
            optimizerD.step()

            # (2) Update G: maximize log(D(G(z)))
            netG.zero_grad()
            label.fill_(real_label)
            output = netD(fake).view(-1)
            errG = criterion(output, label)
            errG.backward()
            D_G_z2 = output.mean().item()  # expect: MEM013
            optimizerG.step()

            if i % 50 == 0:
                print(
                    f"[{epoch}/{num_epochs}][{i}/{len(dataloader)}] "
                    f"Loss_D: {errD.item():.4f} Loss_G: {errG.item():.4f} "
                    f"D(x): {D_x:.4f} D(G(z)): {D_G_z1:.4f} / {D_G_z2:.4f}"
                )

            G_losses.append(errG.item())  # expect: MEM013
            D_losses.append(errD)  # expect: MEM001
            D_totals.append(errD.detach().cpu())  # expect: MEM013

            if (iters % 500 == 0) or ((epoch == num_epochs - 1) and (i == len(dataloader) - 1)):
                with torch.no_grad():
                    fake = netG(fixed_noise).detach().cpu()
                img_list.append(fake)
            iters += 1

    return G_losses, D_losses, img_list


def train_wgan_without_reset(netG, netD, loader, device, n_critic=5):
    """The critic is never zeroed; the generator is, through its optimizer."""
    opt_d = optim.RMSprop(netD.parameters(), lr=5e-5)
    opt_g = optim.RMSprop(netG.parameters(), lr=5e-5)
    for step, (real, _) in enumerate(loader):
        real = real.to(device, non_blocking=True)
        z = torch.randn(real.size(0), nz, 1, 1, device=device)
        loss_d = netD(netG(z).detach()).mean() - netD(real).mean()
        loss_d.backward()
        opt_d.step()  # expect: MEM004
        for p in netD.parameters():
            p.data.clamp_(-0.01, 0.01)
        if step % n_critic == 0:
            opt_g.zero_grad()
            loss_g = -netD(netG(z)).mean()
            loss_g.backward()
            opt_g.step()
