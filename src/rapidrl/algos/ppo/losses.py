"""PPO loss terms as pure functions (no module state, no optimizer), each testable on its own.

The clipped surrogate of Schulman et al. (2017) in the form most implementations use (CleanRL,
SB3): the policy loss is ``mean(max(-A * r, -A * clip(r, 1 - eps, 1 + eps)))`` with
``r = exp(logp_new - logp_old)``; the value loss is ``0.5 * mean((V - R)^2)``, or with value
clipping ``0.5 * mean(max((V - R)^2, (V_old + clip(V - V_old, -eps_v, eps_v) - R)^2))``; the total
is ``policy - ent_coef * entropy + vf_coef * value``.
"""

from __future__ import annotations

import torch

# Re-exported: the categorical helpers live with the networks that use them (nets/ must not
# import an algorithm package).
from rapidrl.nets.distributions import categorical_entropy, categorical_logprob

__all__ = [
    "categorical_entropy",
    "categorical_logprob",
    "normalize_advantages",
    "policy_loss",
    "ppo_loss",
    "value_loss",
]


def normalize_advantages(advantages: torch.Tensor, eps: float = 1e-8) -> torch.Tensor:
    """``(A - mean) / (std + eps)`` over all elements (unbiased std, as in CleanRL/SB3).

    A single element has no spread: it becomes 0 instead of NaN.
    """
    if advantages.numel() < 2:
        return advantages - advantages.mean()
    return (advantages - advantages.mean()) / (advantages.std() + eps)


def policy_loss(
    new_logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    clip_coef: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Clipped surrogate loss (to minimize) and the log-ratio ``logp_new - logp_old``."""
    logratio = new_logprob - old_logprob
    ratio = logratio.exp()
    unclipped = -advantages * ratio
    clipped = -advantages * ratio.clamp(1.0 - clip_coef, 1.0 + clip_coef)
    return torch.max(unclipped, clipped).mean(), logratio


def value_loss(
    new_values: torch.Tensor,
    returns: torch.Tensor,
    old_values: torch.Tensor | None = None,
    clip_coef: float | None = None,
) -> torch.Tensor:
    """``0.5 * mean((V - R)^2)``; with ``clip_coef`` (and ``old_values``) the clipped variant."""
    unclipped = (new_values - returns).square()
    if clip_coef is None:
        return 0.5 * unclipped.mean()
    if old_values is None:
        raise ValueError("value_loss: clip_coef needs old_values")
    v_clipped = old_values + (new_values - old_values).clamp(-clip_coef, clip_coef)
    return 0.5 * torch.max(unclipped, (v_clipped - returns).square()).mean()


def ppo_loss(
    new_logprob: torch.Tensor,
    old_logprob: torch.Tensor,
    advantages: torch.Tensor,
    new_values: torch.Tensor,
    old_values: torch.Tensor,
    returns: torch.Tensor,
    entropy: torch.Tensor,
    *,
    clip_coef: float = 0.1,
    vf_coef: float = 0.5,
    ent_coef: float = 0.01,
    clip_vloss: bool = True,
    vf_clip_coef: float | None = None,
    norm_adv: bool = True,
) -> dict[str, torch.Tensor]:
    """The full PPO minibatch loss and its diagnostics.

    All inputs have one shape (e.g. ``[T, B]`` or flat ``[N]``); the ``old_*``, ``advantages`` and
    ``returns`` come from the rollout (detached). ``vf_clip_coef`` defaults to ``clip_coef``
    (CleanRL). ``norm_adv`` normalizes the advantages over this minibatch.

    Returns ``loss`` (to ``backward()``), ``policy_loss``, ``value_loss``, ``entropy`` (mean) and,
    detached, ``approx_kl`` (``mean((r - 1) - log r)``, Schulman's low-variance estimator),
    ``old_approx_kl`` (``mean(-log r)``) and ``clipfrac`` (share of elements with
    ``|r - 1| > clip_coef``).
    """
    if norm_adv:
        advantages = normalize_advantages(advantages)
    pg_loss, logratio = policy_loss(new_logprob, old_logprob, advantages, clip_coef)
    v_clip = (clip_coef if vf_clip_coef is None else vf_clip_coef) if clip_vloss else None
    v_loss = value_loss(new_values, returns, old_values, v_clip)
    ent = entropy.mean()
    loss = pg_loss - ent_coef * ent + vf_coef * v_loss
    with torch.no_grad():
        ratio = logratio.exp()
        approx_kl = ((ratio - 1.0) - logratio).mean()
        old_approx_kl = (-logratio).mean()
        clipfrac = ((ratio - 1.0).abs() > clip_coef).to(ratio.dtype).mean()
    return {
        "loss": loss,
        "policy_loss": pg_loss,
        "value_loss": v_loss,
        "entropy": ent,
        "approx_kl": approx_kl,
        "old_approx_kl": old_approx_kl,
        "clipfrac": clipfrac,
    }
