"""Generalized advantage estimation (GAE) as one pure function.

Conventions (the same as the vector-env API, "same-step" autoreset):

- Index ``t`` is one agent step: in state ``s_t`` the policy acted, got ``rewards[t]`` and the flags
  ``terminated[t]`` / ``truncated[t]`` of that step.
- ``values[t] = V(s_t)``.
- ``next_values[t] = V(s_{t+1})`` *of the same episode*. Where step ``t`` ended an episode by a time
  limit (``truncated[t]``), the observation the env returned is already the next episode's first
  one, so the caller must pass ``V(final_obs)`` there. Where ``terminated[t]``, the value is
  ignored. For ``t < T - 1`` without an end, ``next_values[t] == values[t + 1]``; at ``t = T - 1``
  it is the bootstrap value of the observation after the rollout.

Then ``delta_t = r_t + gamma * (1 - terminated_t) * next_values_t - values_t`` and
``A_t = delta_t + gamma * lam * (1 - done_t) * A_{t+1}`` with ``done = terminated | truncated``:
``terminated`` stops bootstrapping, ``done`` ends the lambda-trace, a truncated step bootstraps from
``next_values``. ``returns = advantages + values`` (the value-function target).
"""

from __future__ import annotations

import torch

__all__ = ["gae"]


def gae(
    rewards: torch.Tensor,
    values: torch.Tensor,
    next_values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Advantages and returns for a rollout of shape ``[T, *batch]`` (usually ``[T, B]``).

    ``terminated`` / ``truncated`` may be bool or 0/1 floats. All tensors share one shape; the
    result has the dtype of ``values``. Pass detached tensors (the result is a training target).
    Vectorized over the batch dimensions; one step of a backward scan per ``t``.
    """
    shape = values.shape
    for name, x in (
        ("rewards", rewards),
        ("next_values", next_values),
        ("terminated", terminated),
        ("truncated", truncated),
    ):
        if x.shape != shape:
            raise ValueError(f"gae: {name} has shape {tuple(x.shape)}, values {tuple(shape)}")
    if values.dim() == 0:
        raise ValueError("gae: expected tensors of shape [T, ...], got scalars")
    dtype = values.dtype
    term = terminated.to(torch.bool)
    done = term | truncated.to(torch.bool)
    not_term = (~term).to(dtype)
    deltas = rewards.to(dtype) + gamma * not_term * next_values.to(dtype) - values
    trace = (gamma * lam) * (~done).to(dtype)  # 0 where the episode ended: cut the trace

    advantages = torch.empty_like(deltas)
    last = torch.zeros_like(deltas[0])
    for t in range(deltas.shape[0] - 1, -1, -1):
        last = deltas[t] + trace[t] * last
        advantages[t] = last
    return advantages, advantages + values
