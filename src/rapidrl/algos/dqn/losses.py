"""DQN-family losses as pure functions of tensors (no modules, no state).

Conventions (what ``ReplayBuffer.sample`` returns): ``rewards`` is the n-step return
``sum_{j<k} gamma**j r_{t+j}`` and ``discounts`` is ``gamma**k`` where the chain did not end by
``terminated`` and ``0`` where it did (truncated chains bootstrap from their final observation).
So every target is ``rewards + discounts * (value of next_obs)``.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F

__all__ = [
    "td_target",
    "td_loss",
    "categorical_projection",
    "categorical_target",
    "categorical_loss",
]


def td_target(
    rewards: torch.Tensor,
    discounts: torch.Tensor,
    next_q_target: torch.Tensor,
    next_q_online: torch.Tensor | None = None,
) -> torch.Tensor:
    """n-step TD target ``[B]``: ``rewards + discounts * Q_target(s', a*)``.

    ``a* = argmax_a Q_target(s', a)`` (DQN) or, with ``next_q_online`` given, ``argmax_a
    Q_online(s', a)`` (double DQN). Computed without gradient.
    """
    with torch.no_grad():
        chooser = next_q_target if next_q_online is None else next_q_online
        a_star = chooser.argmax(dim=1, keepdim=True)
        next_v = next_q_target.gather(1, a_star).squeeze(1)
        return rewards + discounts * next_v


def td_loss(
    q_taken: torch.Tensor,
    target: torch.Tensor,
    weights: torch.Tensor | None = None,
    kind: str = "huber",
    delta: float = 1.0,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, td_errors)``: weighted mean of Huber (``delta``) or squared errors.

    Args:
        q_taken: ``[B]`` ``Q_online(s, a)``.
        target: ``[B]`` (treated as a constant).
        weights: ``[B]`` importance weights (``None``: all ones).
        kind: ``"huber"`` or ``"mse"`` (``0.5 * td**2``).

    Returns:
        scalar loss ``mean(w * l(td))`` and the detached per-sample ``td = target - q_taken``
        (for ``PrioritizedReplayBuffer.update_priorities``).
    """
    target = target.detach()
    if kind == "huber":
        per = F.huber_loss(q_taken, target, reduction="none", delta=delta)
    elif kind == "mse":
        per = 0.5 * (q_taken - target) ** 2
    else:
        raise ValueError(f"kind must be 'huber' or 'mse', got {kind!r}")
    loss = per.mean() if weights is None else (weights * per).mean()
    return loss, (target - q_taken).detach()


def categorical_projection(
    next_probs: torch.Tensor,
    rewards: torch.Tensor,
    discounts: torch.Tensor,
    support: torch.Tensor,
) -> torch.Tensor:
    """Project the distribution ``rewards + discounts * Z'`` onto ``support`` (C51, Bellemare 2017).

    Args:
        next_probs: ``[B, K]`` probabilities of ``Z'`` on ``support`` (the chosen next action).
        rewards, discounts: ``[B]``.
        support: ``[K]`` evenly spaced atoms ``v_min .. v_max``.

    Each shifted atom ``Tz = clamp(r + d z_j, v_min, v_max)`` splits its mass between the two
    neighbouring atoms in proportion to closeness; an atom that lands exactly on a support point
    gives it all its mass. Returns target probabilities ``[B, K]`` (rows sum to 1), no gradient.
    """
    with torch.no_grad():
        k = support.numel()
        v_min, v_max = float(support[0]), float(support[-1])
        dz = (v_max - v_min) / (k - 1)
        tz = (rewards[:, None] + discounts[:, None] * support[None, :]).clamp(v_min, v_max)
        b = ((tz - v_min) / dz).clamp(0, k - 1)
        lower = b.floor()
        upper = b.ceil()
        w_upper = b - lower
        w_lower = 1.0 - w_upper  # == upper - b, and 1 where b is an atom (lower == upper)
        out = torch.zeros_like(next_probs)
        out.scatter_add_(1, lower.long(), next_probs * w_lower)
        out.scatter_add_(1, upper.long(), next_probs * w_upper)
        return out


def categorical_target(
    next_log_probs_target: torch.Tensor,
    rewards: torch.Tensor,
    discounts: torch.Tensor,
    support: torch.Tensor,
    next_q_online: torch.Tensor | None = None,
) -> torch.Tensor:
    """C51 target distribution ``[B, K]`` from the target net's ``log_probs [B, A, K]`` at ``s'``.

    The next action is ``argmax_a`` of the target net's Q (``sum_z p z``), or of ``next_q_online``
    when given (double DQN, as in Rainbow).
    """
    with torch.no_grad():
        next_probs = next_log_probs_target.exp()
        if next_q_online is None:
            chooser = (next_probs * support).sum(-1)
        else:
            chooser = next_q_online
        a_star = chooser.argmax(dim=1)
        chosen = next_probs[torch.arange(next_probs.shape[0], device=a_star.device), a_star]
        return categorical_projection(chosen, rewards, discounts, support)


def categorical_loss(
    log_probs_taken: torch.Tensor,
    target_probs: torch.Tensor,
    weights: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """``(loss, cross_entropy)``: per-sample ``-sum_z m(z) log p(z)`` and its weighted mean.

    ``log_probs_taken [B, K]`` are the online net's log-probabilities for the taken actions; the
    detached per-sample cross-entropy is the priority signal for prioritized replay (Rainbow).
    """
    ce = -(target_probs.detach() * log_probs_taken).sum(-1)
    loss = ce.mean() if weights is None else (weights * ce).mean()
    return loss, ce.detach()
