"""SAC's update, as pure functions of tensors: the critics' target and loss, the actor's loss,
the temperature's loss, and the soft target update."""

from __future__ import annotations

import torch

__all__ = ["actor_loss", "critic_loss", "critic_target", "soft_update", "temperature_loss"]


def critic_target(
    rewards: torch.Tensor,
    discounts: torch.Tensor,
    next_q: torch.Tensor,
    next_logp: torch.Tensor,
    alpha: float | torch.Tensor,
) -> torch.Tensor:
    """``y = r + discount * (min_i Q'_i(s', a') - alpha * log pi(a'|s'))`` ``[B]``, with
    ``a' ~ pi(s')``; ``next_q [n, B]`` from the target critics, ``discounts [B]`` from the
    replay (``gamma``, or 0 after a true termination)."""
    soft_value = next_q.min(dim=0).values - alpha * next_logp
    return rewards + discounts * soft_value


def critic_loss(q: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """The sum over the critics of their mean squared error against ``target``: ``q [n, B]``,
    ``target [B]`` (no gradient through it)."""
    return (q - target.detach()).square().mean(dim=1).sum()


def actor_loss(q_pi: torch.Tensor, logp: torch.Tensor, alpha: float | torch.Tensor) -> torch.Tensor:
    """``mean(alpha * log pi(a|s) - min_i Q_i(s, a))`` for ``a ~ pi(s)`` (reparameterized):
    ``q_pi [n, B]``, ``logp [B]``."""
    return (alpha * logp - q_pi.min(dim=0).values).mean()


def temperature_loss(
    log_alpha: torch.Tensor, logp: torch.Tensor, target_entropy: float
) -> torch.Tensor:
    """``-mean(alpha * (log pi(a|s) + target_entropy))``: alpha grows while the policy's entropy
    (``-log pi``) is below ``target_entropy`` and shrinks above it (as CleanRL's SAC)."""
    return -(log_alpha.exp() * (logp.detach() + target_entropy)).mean()


@torch.no_grad()
def soft_update(target: torch.nn.Module, online: torch.nn.Module, tau: float) -> None:
    """``target <- (1 - tau) * target + tau * online``, parameter by parameter (the critics'
    ensemble has 2 tensors per layer, so a plain loop costs a handful of kernels)."""
    for t, o in zip(target.parameters(), online.parameters(), strict=True):
        t.lerp_(o, tau)
