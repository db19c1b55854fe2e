"""Losses combined before backward: per-step lists, chunked sums, REINFORCE, and one leak."""

import torch
import torch.nn.functional as F
from torch.distributions import Categorical


def multi_head_step(model, heads, loader, optimizer, weights):
    for images, targets in loader:
        optimizer.zero_grad()
        features = model(images)
        head_losses = []
        for head, target, w in zip(heads, targets, weights):
            head_losses.append(w * F.cross_entropy(head(features), target))
        loss = torch.stack(head_losses).sum()
        loss.backward()
        optimizer.step()


def chunked_sequence_loss(model, optimizer, sequence, chunk_len):
    optimizer.zero_grad()
    loss_sum = 0
    for start in range(0, sequence.size(1), chunk_len):
        chunk = sequence[:, start:start + chunk_len]
        logits = model(chunk[:, :-1])
        loss_sum = loss_sum + F.cross_entropy(logits.transpose(1, 2), chunk[:, 1:])
    loss_sum.backward()
    optimizer.step()
    return loss_sum.item()


def reinforce_episode(policy, env, optimizer, gamma=0.99):
    log_probs = []
    rewards = []
    state, _ = env.reset()
    done = False
    while not done:
        probs = policy(torch.as_tensor(state, dtype=torch.float32))
        dist = Categorical(probs)
        action = dist.sample()
        log_probs.append(dist.log_prob(action))
        state, reward, terminated, truncated, _ = env.step(action.item())
        rewards.append(reward)
        done = terminated or truncated
    returns = []
    running = 0.0
    for r in reversed(rewards):
        running = r + gamma * running
        returns.insert(0, running)
    returns = torch.tensor(returns)
    returns = (returns - returns.mean()) / (returns.std() + 1e-8)
    policy_loss = [-lp * ret for lp, ret in zip(log_probs, returns)]
    optimizer.zero_grad()
    torch.stack(policy_loss).sum().backward()
    optimizer.step()
    return sum(rewards)


def train_with_aux_terms(model, loader, optimizer, aux_weight):
    epoch_total = 0.0
    epoch_main = 0.0
    for x, y in loader:
        optimizer.zero_grad()
        out = model(x)
        terms = {"main": F.mse_loss(out, y)}
        terms["aux"] = aux_weight * out.pow(2).mean()
        loss = sum(terms.values())
        loss.backward()
        optimizer.step()
        epoch_main += terms["main"].item()  # expect: MEM013
        epoch_total = epoch_total + loss  # expect: MEM001
    return epoch_total / len(loader), epoch_main / len(loader)


def k_step_unroll(model, optimizer, batches):
    """Truncated unroll: accumulate k losses, backprop once per window."""
    window_loss = 0.0
    for t, (x, y) in enumerate(batches):
        window_loss += F.l1_loss(model(x), y)
        if (t + 1) % 4 == 0:
            optimizer.zero_grad()
            window_loss.backward()
            optimizer.step()
            window_loss = 0.0
