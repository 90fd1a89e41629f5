"""The acting interface a rollout worker needs from a trainer's network, and two adapters.

Policy protocol
---------------
A policy is an ``nn.Module`` built by a *picklable* ``policy_factory()`` (a module-level function
or a ``functools.partial`` of one: it is shipped to every Ray actor and called there) with one
method::

    act(obs: Tensor[B, *obs_shape], epsilon: Tensor[B] | None) -> dict[str, Tensor]

called under ``torch.no_grad()`` with the observations exactly as the env returns them (uint8
frames stay uint8: the torso scales them). It returns at least

- ``"actions"`` ``[B]`` (int64 for Discrete) -- always;
- ``"logprobs"`` ``[B]`` and ``"values"`` ``[B]`` -- for PPO collection (``epsilon is None``).

DQN collection passes ``epsilon`` (per env, float32 ``[B]``) and needs only ``"actions"``.
Extra keys are ignored. Optional::

    values(obs: Tensor[B, *obs_shape]) -> Tensor[B]

the bootstrap values alone (of the observation after a PPO rollout and of each time limit's
final observation): without it the worker takes ``act(obs, None)["values"]``, which also draws
actions from the worker's random stream.

Weights travel as the module's ``state_dict()`` (converted to numpy): the learner keeps an
instance built by the same factory, trains it (or the network inside it) and hands that module
to ``sampler.set_weights``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol, runtime_checkable

import numpy as np
import torch
from torch import nn

from rapidrl.nets.exploration import epsilon_greedy_torch

__all__ = [
    "ActorCriticPolicy",
    "Policy",
    "QLambdaPolicy",
    "QPolicy",
    "apex_epsilons",
    "make_actor_critic_policy",
    "make_q_policy",
    "weights_to_numpy",
]


@runtime_checkable
class Policy(Protocol):
    """What a rollout worker calls; see the module docstring."""

    def act(self, obs: torch.Tensor, epsilon: torch.Tensor | None = None) -> dict: ...

    def state_dict(self) -> Mapping[str, Any]: ...

    def load_state_dict(self, state_dict: Mapping[str, Any], strict: bool = True) -> Any: ...


def apex_epsilons(num_actors: int, base: float = 0.4, alpha: float = 7.0) -> np.ndarray:
    """Ape-X per-actor exploration: ``eps_i = base ** (1 + alpha * i / (N - 1))``.

    ``N = 1`` gives ``[base]``. Actor 0 explores most (0.4), actor ``N - 1`` least (0.4**8).
    """
    if num_actors < 1:
        raise ValueError(f"num_actors must be >= 1, got {num_actors}")
    if num_actors == 1:
        return np.array([base], dtype=np.float64)
    i = np.arange(num_actors, dtype=np.float64)
    return base ** (1.0 + alpha * i / (num_actors - 1))


def weights_to_numpy(weights: nn.Module | Mapping[str, Any]) -> dict[str, np.ndarray]:
    """A module or state dict -> ``{name: np.ndarray}`` on the CPU (views where possible).

    numpy arrays travel through the Ray object store without a copy on read (torch tensors are
    pickled), so weights are broadcast in this form.
    """
    sd = weights.state_dict() if isinstance(weights, nn.Module) else weights
    out = {}
    for k, v in sd.items():
        if isinstance(v, torch.Tensor):
            out[k] = v.detach().cpu().numpy()
        else:
            out[k] = np.asarray(v)
    return out


class QPolicy(nn.Module):
    """Epsilon-greedy acting over a Q-network ``q(obs) -> [B, A]`` (e.g. ``rapidrl.nets.QNetwork``).

    With ``epsilon`` each env explores (uniform random action) with its own probability; with
    ``None`` the action is greedy. A noisy network (``q.noisy``) draws new noise per call. The
    weights are ``q``'s under the prefix ``q.``: train ``policy.q`` and publish ``policy``.
    """

    def __init__(self, q: nn.Module, n_actions: int | None = None):
        super().__init__()
        self.q = q
        self.n_actions = int(n_actions if n_actions is not None else q.n_actions)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, epsilon: torch.Tensor | None = None) -> dict:
        if getattr(self.q, "noisy", False):
            self.q.reset_noise()
        greedy = self.q(obs).argmax(-1)
        if epsilon is None:
            return {"actions": greedy}
        eps = torch.as_tensor(epsilon, dtype=torch.float32).expand(greedy.shape[0])
        return {"actions": epsilon_greedy_torch(greedy, eps, self.n_actions)}


class QLambdaPolicy(nn.Module):
    """On-policy epsilon-greedy acting over a Q-network for PQN's rollouts: one exploration
    rate for every env, held in the buffer ``epsilon`` so that the published weights carry the
    schedule's current value; ``values`` are each observation's max-Q, what the Q(lambda)
    targets bootstrap from (so a worker's rollout has the max-Q of every observation acted on,
    of the final observation at a time limit and of the observation after the rollout). The
    weights are ``q``'s under the prefix ``q.``."""

    def __init__(self, q: nn.Module, n_actions: int | None = None):
        super().__init__()
        self.q = q
        self.n_actions = int(n_actions if n_actions is not None else q.n_actions)
        self.register_buffer("epsilon", torch.zeros(()))

    @torch.no_grad()
    def act(self, obs: torch.Tensor, epsilon: torch.Tensor | None = None) -> dict:
        max_q, greedy = self.q(obs).float().max(dim=1)
        actions = epsilon_greedy_torch(greedy, self.epsilon.item(), self.n_actions)
        return {"actions": actions, "logprobs": torch.zeros_like(max_q), "values": max_q}

    @torch.no_grad()
    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """Each observation's max-Q ``[B]``, without acting (the bootstrap pass)."""
        return self.q(obs).float().max(dim=1).values


class ActorCriticPolicy(nn.Module):
    """Categorical sampling over ``net(obs) -> (logits [B, A], values [B] or [B, 1])``; a net
    with ``continuous`` set (PPO's Gaussian policy) samples through its own ``act`` (actions
    ``[B, A]`` unclipped: the worker clips what it sends to the env's bounds)."""

    def __init__(self, net: nn.Module):
        super().__init__()
        self.net = net

    @torch.no_grad()
    def act(self, obs: torch.Tensor, epsilon: torch.Tensor | None = None) -> dict:
        if getattr(self.net, "continuous", False):
            out = self.net.act(obs)
            return {"actions": out.action, "logprobs": out.logprob, "values": out.value.reshape(-1)}
        logits, values = self.net(obs)
        logp_all = torch.log_softmax(logits, dim=-1)
        actions = torch.multinomial(logp_all.exp(), 1).squeeze(-1)
        logprobs = logp_all.gather(-1, actions.unsqueeze(-1)).squeeze(-1)
        return {"actions": actions, "logprobs": logprobs, "values": values.reshape(-1)}

    @torch.no_grad()
    def values(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs) [B]``, without sampling actions (the bootstrap pass)."""
        return self.net(obs)[1].reshape(-1)


class _ActorCriticNet(nn.Module):
    """``make_torso(obs_shape)`` shared by an actor and a critic head."""

    def __init__(self, obs_shape: tuple[int, ...], n_actions: int):
        super().__init__()
        from rapidrl.nets.torso import make_torso

        self.torso = make_torso(tuple(obs_shape))
        self.actor = nn.Linear(self.torso.out_dim, n_actions)
        self.critic = nn.Linear(self.torso.out_dim, 1)
        nn.init.orthogonal_(self.actor.weight, 0.01)
        nn.init.zeros_(self.actor.bias)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        h = self.torso(obs)
        return self.actor(h), self.critic(h).squeeze(-1)


def make_q_policy(obs_shape: tuple[int, ...], n_actions: int, **qnetwork_kwargs: Any) -> QPolicy:
    """``QPolicy(QNetwork(obs_shape, n_actions, **kwargs))``; use as
    ``functools.partial(make_q_policy, obs_shape, n_actions, dueling=True)``."""
    from rapidrl.nets.q import QNetwork

    return QPolicy(QNetwork(tuple(obs_shape), n_actions, **qnetwork_kwargs))


def make_actor_critic_policy(obs_shape: tuple[int, ...], n_actions: int) -> ActorCriticPolicy:
    """A small feed-forward actor-critic (shared ``make_torso`` + two linear heads)."""
    return ActorCriticPolicy(_ActorCriticNet(obs_shape, n_actions))
