"""Running mean and variance as a module, for input and value normalization (rl_games'
``normalize_input`` / ``normalize_value``, SB3's ``VecNormalize``).

The statistics are buffers, so they travel with the network: checkpoints, ``rapidrl eval`` and
the Ray workers' weights carry them. They change only through :meth:`RunningMeanStd.update`
(called by the learner once per rollout), never in ``forward``: acting and the loss of one update
see the same statistics.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = ["RunningMeanStd"]


class RunningMeanStd(nn.Module):
    """Mean and variance of every element of ``shape`` over all samples seen so far.

    ``update(x)`` merges a batch ``x [n, *shape]`` with the parallel-variance formula of Chan et
    al. (the batch's mean and population variance, weighted by counts), in float64. It starts
    from mean 0, variance 1 and a count of ``eps`` (as SB3 and rl_games), so the first batch
    sets the statistics almost alone.

    ``normalize(x)`` = ``(x - mean) / sqrt(var + eps)``, clamped to ``[-clip, clip]`` when
    ``clip`` is set; ``denormalize`` is its inverse (without the clamp).
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: tuple[int, ...] = (), eps: float = 1e-5, clip: float | None = None):
        super().__init__()
        self.shape = tuple(shape)
        self.eps = float(eps)
        self.clip = clip
        self.register_buffer("mean", torch.zeros(self.shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(self.shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the samples ``x [n, *shape]`` (any dtype) into the statistics."""
        if tuple(x.shape[1:]) != self.shape:
            raise ValueError(
                f"RunningMeanStd.update: samples of shape {tuple(x.shape[1:])}, expected "
                f"{self.shape} (x is [n, *shape])"
            )
        n = x.shape[0]
        if n == 0:
            return
        # Sums in float64 over chunks of ~4M elements: a rollout of frame stacks (e.g. 8,192 x
        # [2, 52, 52] uint8) is never copied whole to float64.
        per = max(1, x[0].numel())
        s1 = torch.zeros(self.shape, dtype=torch.float64, device=self.mean.device)
        s2 = torch.zeros_like(s1)
        for chunk in x.split(max(1, 2**22 // per)):
            c = chunk.to(self.mean.device, torch.float64)
            s1 += c.sum(0)
            s2 += c.square().sum(0)
        b_mean = s1 / n
        b_var = (s2 / n - b_mean.square()).clamp_(min=0.0)
        total = self.count + n
        delta = b_mean - self.mean
        self.mean += delta * (n / total)
        m2 = self.var * self.count + b_var * n + delta.square() * (self.count * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor) -> torch.Tensor:
        """``(x - mean) / sqrt(var + eps)`` in float32 (clamped to ``±clip`` if set)."""
        mean = self.mean.to(torch.float32)
        std = (self.var + self.eps).sqrt().to(torch.float32)
        y = (x.to(torch.float32) - mean) / std
        return y if self.clip is None else y.clamp(-self.clip, self.clip)

    def denormalize(self, y: torch.Tensor) -> torch.Tensor:
        """``y * sqrt(var + eps) + mean`` in float32."""
        std = (self.var + self.eps).sqrt().to(torch.float32)
        return y.to(torch.float32) * std + self.mean.to(torch.float32)

    def extra_repr(self) -> str:
        return f"shape={self.shape}, clip={self.clip}"
