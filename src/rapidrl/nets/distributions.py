"""Policy distributions shared by the actor-critic networks and the PPO losses: categorical
(discrete actions) and diagonal Gaussian (continuous actions)."""

from __future__ import annotations

import math

import torch

__all__ = ["categorical_entropy", "categorical_logprob", "gaussian_entropy", "gaussian_logprob"]

_LOG_2PI = math.log(2.0 * math.pi)


def categorical_logprob(logits: torch.Tensor, actions: torch.Tensor) -> torch.Tensor:
    """``log pi(a)`` for a categorical policy: logits ``[..., A]``, integer actions ``[...]``.

    The same as ``torch.distributions.Categorical(logits=logits).log_prob(actions)`` without the
    distribution object's per-call overhead.
    """
    logp = torch.log_softmax(logits, dim=-1)
    return logp.gather(-1, actions.long().unsqueeze(-1)).squeeze(-1)


def categorical_entropy(logits: torch.Tensor) -> torch.Tensor:
    """Entropy ``-sum_a pi(a) log pi(a)`` per row of logits ``[..., A]``."""
    logp = torch.log_softmax(logits, dim=-1)
    return -(logp.exp() * logp).sum(-1)


def gaussian_logprob(
    mean: torch.Tensor, log_std: torch.Tensor, actions: torch.Tensor
) -> torch.Tensor:
    """``log pi(a)`` of a diagonal Gaussian, summed over the action dims: ``mean [..., A]``,
    ``log_std [A]`` (or broadcastable), ``actions [..., A]`` -> ``[...]``. The same as
    ``Normal(mean, log_std.exp()).log_prob(actions).sum(-1)`` without the object."""
    z = (actions - mean) * torch.exp(-log_std)
    return (-0.5 * z.square() - log_std - 0.5 * _LOG_2PI).sum(-1)


def gaussian_entropy(
    log_std: torch.Tensor, batch_shape: torch.Size | tuple[int, ...]
) -> torch.Tensor:
    """Entropy of a diagonal Gaussian, summed over the action dims, for each of
    ``batch_shape`` rows (state-independent ``log_std [A]``: the same for every row)."""
    per_row = (log_std + 0.5 * (1.0 + _LOG_2PI)).sum(-1)
    return per_row.expand(*batch_shape)
