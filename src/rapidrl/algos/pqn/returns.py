"""Q(lambda) returns, PQN's regression targets, as one pure function.

Conventions (the same as :mod:`rapidrl.algos.ppo.gae` and the vector-env API, "same-step"
autoreset):

- Index ``t`` is one agent step: in state ``s_t`` the agent acted, got ``rewards[t]`` and the flags
  ``terminated[t]`` / ``truncated[t]`` of that step.
- ``next_max_q[t] = max_a Q(s_{t+1}, a)`` *of the same episode*, from the current network. Where
  step ``t`` ended an episode by a time limit (``truncated[t]``) the observation the env returned
  is already the next episode's first one, so the caller passes the max-Q of
  ``infos["final_obs"]`` there; at the rollout's last step, the max-Q of the observation held after
  the rollout; elsewhere the max-Q recorded when acting at ``t + 1``. Where ``terminated[t]`` the
  value is ignored.
- ``cut[t]`` ends the lambda-trace at ``t`` without stopping the bootstrap: a time limit
  (``truncated``) or the rollout's last step (what follows is not in the rollout).

Then, backwards over ``t``::

    G_t = r_t + gamma * (1 - terminated_t) * ((1 - lam) * next_max_q_t + lam * G'_{t+1})
    G'_{t+1} = next_max_q_t  where cut_t,  else  G_{t+1}

``lam = 0`` gives one-step Q-learning targets ``r_t + gamma * max_a Q(s_{t+1}, a)``; ``lam = 1``
gives discounted Monte-Carlo returns, bootstrapped with the max-Q only at cuts. ``terminated`` and
``cut`` may both be set (a true end on the last step): no bootstrap. The last step always ends
the trace (there is no ``G_T``), whatever ``cut[T - 1]`` says.
"""

from __future__ import annotations

import torch

__all__ = ["q_lambda_returns"]


def q_lambda_returns(
    rewards: torch.Tensor,
    next_max_q: torch.Tensor,
    terminated: torch.Tensor,
    cut: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Q(lambda) returns ``[T, *batch]`` (usually ``[T, N]``) of one rollout (see the module
    docstring).

    ``terminated`` / ``cut`` may be bool or 0/1 floats. All tensors share one shape; the result
    has the dtype of ``next_max_q``. Pass detached tensors (the result is a training target).
    Vectorized over the batch dimensions; one step of a backward scan per ``t``.
    """
    shape = next_max_q.shape
    for name, x in (("rewards", rewards), ("terminated", terminated), ("cut", cut)):
        if x.shape != shape:
            raise ValueError(
                f"q_lambda_returns: {name} has shape {tuple(x.shape)}, next_max_q {tuple(shape)}"
            )
    if next_max_q.dim() == 0:
        raise ValueError("q_lambda_returns: expected tensors of shape [T, ...], got scalars")
    dtype = next_max_q.dtype
    rewards = rewards.to(dtype)
    discount = gamma * (~terminated.to(torch.bool)).to(dtype)  # 0 after a true end
    cut = cut.to(torch.bool)

    returns = torch.empty_like(next_max_q)
    later = next_max_q[-1]  # at t = T - 1 there is no G_T: the trace ends there, cut or not
    for t in range(shape[0] - 1, -1, -1):
        q = next_max_q[t]
        trace = torch.where(cut[t], q, later)
        later = rewards[t] + discount[t] * ((1.0 - lam) * q + lam * trace)
        returns[t] = later
    return returns
