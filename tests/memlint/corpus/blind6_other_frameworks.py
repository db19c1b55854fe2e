"""Shapes met on a sixth blind set: a library's JAX (or Warp) twin of its PyTorch agents.

The module imports jax and nothing from torch, so its ``.item()`` calls, its
``optimizer.step()`` without ``zero_grad()`` and its ``tape.backward(loss)`` are that
framework's, not torch's: no rule applies. The same update loop in a module that imports
torch is checked as usual (see the other corpus files).
"""

import jax
import jax.numpy as jnp
import optax

from agents.jax import Agent


class TD3(Agent):
    def update(self, batches, optimizer, state):
        for batch in batches:
            loss, grads = jax.value_and_grad(self.loss_fn)(state.params, batch)
            self.track_data("Loss / Critic loss", loss.item())
            updates, state.opt_state = optimizer.update(grads, state.opt_state)
            state.params = optax.apply_updates(state.params, updates)

    def act(self, observations, noise):
        actions = self.policy(observations)
        self.track_data("Exploration / noise (max)", noise.max().item())
        return jnp.clip(actions + noise, -1.0, 1.0)


def train_tape(tape_factory, model, optimizer, batches):
    # A gradient tape whose backward takes the loss, cleared with zero(): Warp's shape.
    for batch in batches:
        with tape_factory() as tape:
            loss = model(batch)
        tape.backward(loss)
        optimizer.step()
        tape.zero()
