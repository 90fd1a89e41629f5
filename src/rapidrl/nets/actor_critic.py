"""Feed-forward actor-critic for PPO: ``torso -> (actor logits, critic value)`` for discrete
actions, ``torso -> (Gaussian mean, critic value)`` with a state-independent log std for continuous
ones (CleanRL's ``ppo_continuous_action.py``).

The same calls as :class:`rapidrl.nets.recurrent.RecurrentActorCritic` minus the state, so one
trainer drives both: ``act(obs)`` for rollouts (sample, log-prob, value), ``value(obs)`` for the
bootstrap of a time-limit end, ``evaluate(obs, actions)`` for the loss.

Initialization follows CleanRL's PPO (``layer_init``): orthogonal weights with gain sqrt(2) in the
torso (``orthogonal_init``, also applied to the recurrent net's torso by the trainer), 0.01 on the
policy head (near-uniform first policy), 1 on the value head, zero biases.
"""

from __future__ import annotations

import copy
import math
from typing import NamedTuple

import torch
from torch import nn

from rapidrl.nets.distributions import (
    categorical_entropy,
    categorical_logprob,
    gaussian_entropy,
    gaussian_logprob,
)
from rapidrl.nets.normalize import NormalizedActorCritic
from rapidrl.nets.torso import NATURE_CHANNELS, ConvTorso, make_torso, to_channels_last

__all__ = ["ActorCritic", "FFActOutput", "FFEvalOutput", "orthogonal_init"]


class FFActOutput(NamedTuple):
    action: torch.Tensor  # [n] int64; continuous: [n, A] float32, unclipped
    logprob: torch.Tensor  # [n]
    value: torch.Tensor  # [n]
    logits: torch.Tensor  # [n, A]; continuous: the Gaussian's mean


class FFEvalOutput(NamedTuple):
    logprob: torch.Tensor  # [n]
    entropy: torch.Tensor  # [n]
    values: torch.Tensor  # [n]


def orthogonal_init(module: nn.Module, gain: float = math.sqrt(2)) -> nn.Module:
    """Orthogonal weights (``gain``) and zero biases for every Linear/Conv2d inside ``module``."""
    for m in module.modules():
        if isinstance(m, (nn.Linear, nn.Conv2d)):
            nn.init.orthogonal_(m.weight, gain)
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return module


def _head(in_dim: int, out_dim: int, std: float | None) -> nn.Linear:
    """A linear head, orthogonal with gain ``std`` (None: PyTorch's default init)."""
    layer = nn.Linear(in_dim, out_dim)
    if std is not None:
        nn.init.orthogonal_(layer.weight, std)
        nn.init.zeros_(layer.bias)
    return layer


class ActorCritic(NormalizedActorCritic, nn.Module):
    """``torso -> actor logits [n, A]`` and ``-> critic value [n]``.

    Args:
        obs_shape: ``(C, 84, 84)`` uint8 frame stacks (Nature CNN, pixels scaled inside) or
            ``(D,)`` vectors (MLP), see :func:`rapidrl.nets.torso.make_torso`.
        num_actions: discrete actions ``A``, or with ``continuous`` the action's dims ``A``.
        continuous: a diagonal Gaussian policy over ``R^A``: the actor head gives the mean
            (initialized near 0, as the logits), ``log_std [A]`` is a parameter of its own
            (state-independent, starting at ``log_std_init``). Sampled actions are unclipped;
            whoever sends them to an env clips them to its bounds.
        log_std_init: the continuous policy's starting log std (0: std 1, CleanRL's).
        torso: a custom torso mapping ``[n, *obs_shape]`` to ``[n, torso.out_dim]``.
        shared_torso: one torso for both heads (Atari). ``False`` gives the critic its own copy
            (CleanRL's classic-control network): the value loss then cannot disturb the policy
            features.
        orthogonal: CleanRL's initialization (see the module docstring); False keeps PyTorch's
            default init of every layer, heads included (SB3's ``ortho_init=False``).
        channels_last: run the convolutions in ``torch.channels_last`` (faster with oneDNN on
            some CPUs); inputs are converted in ``forward``.
        torso_kind: the image torso when ``torso`` is None: ``nature`` or ``small`` (see
            :func:`rapidrl.nets.torso.make_torso`).
        torso_channels: the nature torso's convolution widths (when ``torso`` is None).
        torso_dim: the built torso's output features (None: its default, nature 512).
        obs_norm: each pixel of an image stack normalized by its running mean and standard
            deviation (``obs_rms``) instead of scaled to [0, 1], a float image input taken as
            already normalized (what :meth:`prepare` returns); vector observations normalized
            the same way, every input. See :class:`rapidrl.nets.normalize.NormalizedInput`.
        reward_norm: keep ``reward_rms``, the running statistics of the discounted return the
            trainer scales rewards by (:func:`rapidrl.nets.normalize.scale_rewards`).
        value_norm: the critic head predicts normalized returns (``value_rms``). ``forward``,
            ``act`` and ``value`` return values in the return scale (for GAE); ``evaluate``
            returns the head's output, in the normalized scale in which the loss compares it
            with normalized returns.

    The running statistics change only by ``obs_rms.update`` / ``value_rms.update`` (the PPO
    learner calls them once per rollout).
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        num_actions: int,
        *,
        torso: nn.Module | None = None,
        shared_torso: bool = True,
        orthogonal: bool = True,
        channels_last: bool = False,
        torso_kind: str = "nature",
        torso_channels: tuple[int, int, int] = NATURE_CHANNELS,
        torso_dim: int | None = None,
        obs_norm: bool = False,
        value_norm: bool = False,
        reward_norm: bool = False,
        continuous: bool = False,
        log_std_init: float = 0.0,
    ):
        super().__init__()
        self.obs_shape = tuple(obs_shape)
        self.num_actions = int(num_actions)
        self.continuous = bool(continuous)
        self.init_normalizers(
            self.obs_shape, obs_norm=obs_norm, value_norm=value_norm, reward_norm=reward_norm
        )
        if torso is None:
            torso = make_torso(
                self.obs_shape, out_dim=torso_dim, kind=torso_kind, channels=torso_channels
            )
        self.torso = torso
        if orthogonal:
            orthogonal_init(self.torso)
        self.critic_torso = None if shared_torso else copy.deepcopy(self.torso)
        if self.critic_torso is not None:  # its own draw, not a copy of the actor's
            if orthogonal:
                orthogonal_init(self.critic_torso)
            else:
                for m in self.critic_torso.modules():
                    if isinstance(m, (nn.Linear, nn.Conv2d)):
                        m.reset_parameters()
        feat = int(self.torso.out_dim)
        self.actor = _head(feat, self.num_actions, 0.01 if orthogonal else None)
        self.critic = _head(feat, 1, 1.0 if orthogonal else None)
        if self.continuous:
            self.log_std = nn.Parameter(torch.full((self.num_actions,), float(log_std_init)))
        self.channels_last = bool(channels_last) and len(self.obs_shape) == 3
        if self.channels_last:
            self.to(memory_format=torch.channels_last)

    def _in(self, obs: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        if self.channels_last and obs.dim() == 4:
            # The layout first, while the frames are uint8 (a quarter of the bytes): the
            # normalization keeps it.
            obs = to_channels_last(obs)
        return self.normalize_obs(obs, dtype)

    def _heads(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits [n, A], head values [n])``: the values as the critic head gives them
        (normalized with ``value_norm``)."""
        obs = self._in(obs)
        h = self.torso(obs)
        hv = h if self.critic_torso is None else self.critic_torso(obs)
        return self.actor(h), self.critic(hv).squeeze(-1)

    def forward(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(logits [n, A], values [n])``, the values in the return scale (what the Ray
        workers' ``ActorCriticPolicy`` and GAE take)."""
        logits, values = self._heads(obs)
        return logits, self.value_out(values)

    def value(self, obs: torch.Tensor) -> torch.Tensor:
        """``V(obs) [n]`` (the bootstrap of a time-limit end: ``value(final_obs)``)."""
        obs = self._in(obs)
        h = self.torso(obs) if self.critic_torso is None else self.critic_torso(obs)
        return self.value_out(self.critic(h).squeeze(-1))

    def act(
        self,
        obs: torch.Tensor,
        *,
        deterministic: bool = False,
        generator: torch.Generator | None = None,
    ) -> FFActOutput:
        """Sample (or, ``deterministic``, take the greedy: the mean when continuous) action for
        each row of ``obs``; call under ``torch.no_grad()``."""
        logits, value = self(obs)
        if self.continuous:
            mean = logits.float()
            action = mean
            if not deterministic:
                noise = torch.randn(
                    mean.shape, generator=generator, device=mean.device, dtype=mean.dtype
                )
                action = mean + self.log_std.exp() * noise
            return FFActOutput(action, gaussian_logprob(mean, self.log_std, action), value, mean)
        if deterministic:
            action = logits.argmax(-1)
        else:
            probs = torch.softmax(logits.float(), -1)
            action = torch.multinomial(probs, 1, generator=generator).squeeze(-1)
        return FFActOutput(action, categorical_logprob(logits, action), value, logits)

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs`` converted once for many forward passes (the PPO epochs over one rollout):
        channels-last, normalized with ``obs_norm`` and, for a Nature-CNN torso, scaled to its
        compute dtype. Forward passes on the result equal those on ``obs``."""
        if len(self.obs_shape) != 3:
            return obs  # vectors: normalized per minibatch in evaluate (cheap), never twice
        if not isinstance(self.torso, ConvTorso):
            return self._in(obs)
        # Normalized frames come out in the torso's compute dtype, so the bf16 cast is not a
        # pass of its own. A separate critic torso is a copy of this one (use_precision sets
        # both alike).
        return self.torso.prepare(self._in(obs, self.torso.compute_dtype or torch.float32))

    def evaluate(self, obs: torch.Tensor, actions: torch.Tensor) -> FFEvalOutput:
        """What the PPO loss needs: log-prob of ``actions``, entropy, values (the head's
        output: normalized with ``value_norm``)."""
        logits, values = self._heads(obs)
        if self.continuous:
            mean = logits.float()
            return FFEvalOutput(
                gaussian_logprob(mean, self.log_std, actions),
                gaussian_entropy(self.log_std, mean.shape[:-1]),
                values,
            )
        return FFEvalOutput(
            categorical_logprob(logits, actions), categorical_entropy(logits), values
        )
