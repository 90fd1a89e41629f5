"""What the probe scripts here share: PQN fast's network (64x64 frames, 6 actions) in either
layout, a batch of uint8 frames, and one training step (forward, MSE on the taken actions,
backward, RAdam)."""

import dataclasses

import torch

from rapidrl.algos.pqn.config import PRESETS
from rapidrl.algos.pqn.learner import make_pqn_network


def build(channels_last: bool, seed: int = 0) -> torch.nn.Module:
    torch.manual_seed(seed)
    cfg = dataclasses.replace(PRESETS["fast"], channels_last=channels_last)
    return make_pqn_network(cfg, (4, 64, 64), 6, torch.device("cpu"))


def batch(n: int = 128):
    """``(frames uint8 [n, 4, 64, 64], actions [n], targets [n])``."""
    x = torch.randint(0, 255, (n, 4, 64, 64), dtype=torch.uint8)
    return x, torch.randint(0, 6, (n,)), torch.randn(n)


def train_step(net: torch.nn.Module, x, a, y, lr: float = 1e-4):
    """A function doing one training step of ``net`` on ``(x, a, y)`` with its own RAdam."""
    opt = torch.optim.RAdam(net.parameters(), lr=lr)

    def step():
        q = net(x).gather(1, a[:, None]).squeeze(1)
        loss = (q - y).square().mean()
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return step
