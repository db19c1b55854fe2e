"""Distillation on a small GPU: the teacher is swapped in and out of device memory every
step, the EMA copy lives on the host, and batches with masked-out or non-finite values are
inspected only when a mask says something is wrong."""

import copy

import torch
import torch.nn.functional as F


def distill(student, teacher, loader, optimizer, device, log_every=100):
    teacher.eval()
    history = []
    for step, (x, y, pad_mask) in enumerate(loader):
        x, y = x.to(device, non_blocking=True), y.to(device, non_blocking=True)
        pad_mask = pad_mask.to(device, non_blocking=True)
        teacher.to(device)
        with torch.no_grad():
            soft = teacher(x).softmax(-1)
        teacher.cpu()

        optimizer.zero_grad(set_to_none=True)
        logits = student(x)
        loss = F.cross_entropy(logits, y) + F.kl_div(
            logits.log_softmax(-1), soft, reduction="batchmean"
        )
        if (~pad_mask).all():
            print(f"step {step}: fully padded batch, loss {loss.item():.4f}")
        if torch.isnan(logits).any().item():
            print(f"step {step}: {torch.isnan(logits).sum().item()} NaN logits")
        loss.backward()
        optimizer.step()
        history.append(loss.item())  # expect: MEM013
        if step % log_every == 0:
            print(f"step {step} loss {loss.item():.4f}")
    return history


class OffloadedEMATrainer:
    """Keeps an exponential moving average of the model in host memory."""

    def __init__(self, model, optimizer, device, decay=0.999):
        self.model = model
        self.optimizer = optimizer
        self.device = device
        self.decay = decay
        self.ema_model = copy.deepcopy(model).cpu()

    def _update_ema(self):
        with torch.no_grad():
            for ema_p, p in zip(self.ema_model.parameters(), self.model.parameters()):
                ema_p.mul_(self.decay).add_(p.detach().to("cpu", non_blocking=True), alpha=1 - self.decay)

    def fit(self, loader, snapshot_every=1000):
        for step, (x, y) in enumerate(loader):
            x, y = x.to(self.device, non_blocking=True), y.to(self.device, non_blocking=True)
            self.optimizer.zero_grad(set_to_none=True)
            out = self.model(x)
            loss = F.mse_loss(out, y)
            loss.backward()
            self.optimizer.step()
            self._update_ema()
            if step % snapshot_every == 0:
                torch.save(self.model.cpu().state_dict(), f"model-{step}.pt")
                self.model.to(self.device)
            saturated = out.abs() > 1e3
            share = saturated.float().mean().item() if saturated.any() else 0.0
            if share > 0.5:
                raise RuntimeError(f"{share:.0%} of outputs saturated at step {step}")
            self.last_error = (out - y).detach().abs().max().cpu()  # expect: MEM013


def train_with_rollouts(policy, value_net, env_batches, optimizer, device):
    seen_returns = []
    for obs, actions, returns in env_batches:
        obs, returns = obs.to(device), returns.to(device)
        optimizer.zero_grad()
        dist = policy(obs)
        advantage = returns - value_net(obs).squeeze(-1)
        loss = -(dist.log_prob(actions.to(device)) * advantage.detach()).mean() + advantage.pow(2).mean()
        loss.backward()
        optimizer.step()
        # Rollout workers act on the host copy of the policy.
        policy.cpu()
        policy.to(device)
        seen_returns.extend(returns.tolist())  # expect: MEM013
        assert torch.isfinite(loss).all(), f"loss diverged: {loss.item()}"
    return seen_returns
