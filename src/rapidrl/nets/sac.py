"""SAC's networks: a tanh-squashed Gaussian actor and an ensemble of Q(s, a) critics computed as
one batched network.

The critics are ``n`` independent MLPs (two for SAC's clipped double Q) whose layers run as one
batched matmul each (``baddbmm`` over ``[n, in, out]`` weights): the same values as ``n``
separate ``nn.Linear`` stacks, in a third of the kernel launches, which is what a small MLP's
update costs on a CPU.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn
from torch.nn import functional as F

from rapidrl.nets.distributions import gaussian_logprob

__all__ = ["EnsembleLinear", "QEnsemble", "SquashedGaussianActor", "squashed_gaussian"]

_LOG_2 = math.log(2.0)


def squashed_gaussian(
    mean: torch.Tensor, log_std: torch.Tensor, noise: torch.Tensor
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(a, log pi(a))`` for ``a = tanh(u)``, ``u = mean + exp(log_std) * noise``: ``[B, A]``
    and ``[B]``. ``log pi(a) = log N(u) - sum log(1 - tanh(u)^2)``, the correction written as
    ``2 (log 2 - u - softplus(-2u))``, exact where ``1 - tanh(u)^2`` rounds to 0 in float32."""
    u = mean + log_std.exp() * noise
    logp = gaussian_logprob(mean, log_std, u)
    logp = logp - (2.0 * (_LOG_2 - u - F.softplus(-2.0 * u))).sum(-1)
    return torch.tanh(u), logp


def _mlp(in_dim: int, hidden: Sequence[int]) -> nn.Sequential:
    layers: list[nn.Module] = []
    for h in hidden:
        layers += [nn.Linear(in_dim, h), nn.ReLU()]
        in_dim = h
    return nn.Sequential(*layers)


class SquashedGaussianActor(nn.Module):
    """``obs [B, D] -> (mean, log_std) [B, A]`` of a Gaussian whose samples are squashed by
    tanh into ``(-1, 1)`` (the env's bounds are applied by the caller). ``log_std`` is
    state-dependent, mapped into ``[log_std_min, log_std_max]`` by a tanh (as CleanRL's SAC)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: Sequence[int] = (256, 256),
        log_std_min: float = -5.0,
        log_std_max: float = 2.0,
    ):
        super().__init__()
        self.torso = _mlp(obs_dim, hidden)
        width = hidden[-1] if hidden else obs_dim
        self.mean = nn.Linear(width, act_dim)
        self.log_std = nn.Linear(width, act_dim)
        self.log_std_min, self.log_std_max = float(log_std_min), float(log_std_max)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.torso(obs)
        log_std = torch.tanh(self.log_std(h))
        span = self.log_std_max - self.log_std_min
        return self.mean(h), self.log_std_min + 0.5 * span * (log_std + 1.0)

    def sample(
        self, obs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A sampled action in ``(-1, 1)`` ``[B, A]`` and its log-probability ``[B]``."""
        mean, log_std = self(obs)
        mean, log_std = mean.float(), log_std.float()  # bf16 under autocast: the math in fp32
        noise = torch.randn(mean.shape, generator=generator, device=mean.device)
        return squashed_gaussian(mean, log_std, noise)

    def deterministic(self, obs: torch.Tensor) -> torch.Tensor:
        """The policy's mode after squashing, ``tanh(mean)`` ``[B, A]`` (evaluation)."""
        return torch.tanh(self(obs)[0].float())


class EnsembleLinear(nn.Module):
    """``n`` independent ``nn.Linear(in_dim, out_dim)`` layers as one batched matmul:
    ``x [n, B, in] -> [n, B, out]``; each member drawn from ``nn.Linear``'s initial distribution."""

    def __init__(self, n: int, in_dim: int, out_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.empty(n, in_dim, out_dim))  # x @ weight[i]
        self.bias = nn.Parameter(torch.empty(n, 1, out_dim))
        # nn.Linear's distribution: kaiming_uniform(a=sqrt(5)) is U(+-1/sqrt(in)), as its bias.
        bound = 1.0 / math.sqrt(in_dim)
        nn.init.uniform_(self.weight, -bound, bound)
        nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, x, self.weight)


class QEnsemble(nn.Module):
    """``n`` critics ``Q_i(obs, action)`` as one network: ``(obs [B, D], actions [B, A]) ->
    [n, B]``. Each member is an MLP ``D + A -> hidden... -> 1`` with ReLUs."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: Sequence[int] = (256, 256), n: int = 2):
        super().__init__()
        self.n = int(n)
        dims = [obs_dim + act_dim, *hidden, 1]
        self.layers = nn.ModuleList(EnsembleLinear(n, i, o) for i, o in zip(dims[:-1], dims[1:]))

    def forward(self, obs: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
        x = torch.cat([obs, actions], dim=-1).expand(self.n, -1, -1)  # [n, B, D + A]
        for i, layer in enumerate(self.layers):
            x = layer(x)
            if i < len(self.layers) - 1:
                x = F.relu(x)
        return x.squeeze(-1).float()  # bf16 under autocast: the losses in fp32
