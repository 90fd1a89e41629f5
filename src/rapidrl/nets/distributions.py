"""Categorical policy helpers shared by the actor-critic networks and the PPO losses."""

from __future__ import annotations

import torch

__all__ = ["categorical_entropy", "categorical_logprob"]


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
