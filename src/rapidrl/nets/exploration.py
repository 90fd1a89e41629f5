"""Epsilon-greedy acting, written once: the NumPy form (DQN's learner and actor processes draw
from a ``np.random.Generator`` that checkpoints save) and the torch form (Ray's ``QPolicy`` and
PQN draw on the acting device).

Both draw the explore coins first, then the random actions, one of each per env, whatever the
greedy actions are: the streams of a seeded run do not depend on the network.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch

__all__ = ["epsilon_greedy", "epsilon_greedy_torch"]


def epsilon_greedy(
    rng: np.random.Generator,
    epsilon: float,
    n_actions: int,
    n: int,
    greedy: Callable[[], np.ndarray],
) -> np.ndarray:
    """``n`` actions: each uniform random with probability ``epsilon``, else ``greedy()[i]``.
    ``greedy`` (the network's argmax, ``[n]``) is called only when some env acts greedily, so a
    fully random step (epsilon 1 early on) costs no forward pass."""
    explore = rng.random(n) < epsilon  # [n]
    random_actions = rng.integers(n_actions, size=n)
    if explore.all():
        return random_actions
    return np.where(explore, random_actions, greedy())


def epsilon_greedy_torch(
    greedy: torch.Tensor,
    epsilon: float | torch.Tensor,
    n_actions: int,
    generator: torch.Generator | None = None,
) -> torch.Tensor:
    """``greedy [B]`` with each entry replaced by a uniform random action with probability
    ``epsilon`` (a float, or ``[B]`` per-env rates); drawn from ``generator`` (None: torch's
    global generator) on ``greedy``'s device."""
    b, device = greedy.shape[0], greedy.device
    explore = torch.rand(b, generator=generator, device=device) < epsilon
    random = torch.randint(n_actions, (b,), generator=generator, device=device)
    return torch.where(explore, random, greedy)
