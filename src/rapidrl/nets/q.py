"""Q-networks for the DQN family and PQN: plain, dueling, noisy, distributional (C51), by flags.

``QNetwork`` = ``make_torso(obs_shape)`` (Nature CNN for ``[C, 84, 84]`` uint8 stacks, MLP for flat
vectors) followed by a head. Every combination of ``dueling``, ``noisy`` and ``distributional``
works; all three on is the Rainbow network (its torso layer stays deterministic: noise lives in
the head, including the optional ``head_hidden`` layer). PQN's network is the plain head on a
torso with ``layer_norm`` (a LayerNorm after every torso layer), any ``torso_kind``.
"""

from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from rapidrl.nets.normalize import NormalizedInput
from rapidrl.nets.torso import (
    NATURE_CHANNELS,
    ConvTorso,
    make_torso,
    to_channels_last,
    use_precision,
)

__all__ = ["NoisyLinear", "QNetwork"]


class NoisyLinear(nn.Module):
    """Linear layer with factorized Gaussian noise (Fortunato et al. 2018).

    ``W = mu_W + sigma_W * (f(eps_out) f(eps_in)^T)``, ``b = mu_b + sigma_b * f(eps_out)``,
    ``f(x) = sign(x) sqrt(|x|)``. The noise is fixed until ``reset_noise()``; in ``eval()`` mode
    the layer uses the means only.
    """

    def __init__(self, in_features: int, out_features: int, sigma0: float = 0.5):
        super().__init__()
        self.in_features = in_features
        self.out_features = out_features
        self.sigma0 = sigma0
        self.weight_mu = nn.Parameter(torch.empty(out_features, in_features))
        self.weight_sigma = nn.Parameter(torch.empty(out_features, in_features))
        self.bias_mu = nn.Parameter(torch.empty(out_features))
        self.bias_sigma = nn.Parameter(torch.empty(out_features))
        self.register_buffer("eps_in", torch.zeros(in_features))
        self.register_buffer("eps_out", torch.zeros(out_features))
        self.reset_parameters()
        self.reset_noise()

    def reset_parameters(self) -> None:
        bound = 1.0 / math.sqrt(self.in_features)
        nn.init.uniform_(self.weight_mu, -bound, bound)
        nn.init.uniform_(self.bias_mu, -bound, bound)
        nn.init.constant_(self.weight_sigma, self.sigma0 / math.sqrt(self.in_features))
        nn.init.constant_(self.bias_sigma, self.sigma0 / math.sqrt(self.in_features))

    @staticmethod
    def _f(x: torch.Tensor) -> torch.Tensor:
        return x.sign() * x.abs().sqrt()

    @torch.no_grad()
    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        dev = self.eps_in.device
        self.eps_in.copy_(self._f(torch.randn(self.in_features, generator=generator)).to(dev))
        self.eps_out.copy_(self._f(torch.randn(self.out_features, generator=generator)).to(dev))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if not self.training:
            return F.linear(x, self.weight_mu, self.bias_mu)
        weight = self.weight_mu + self.weight_sigma * torch.outer(self.eps_out, self.eps_in)
        bias = self.bias_mu + self.bias_sigma * self.eps_out
        return F.linear(x, weight, bias)

    def extra_repr(self) -> str:
        return f"in_features={self.in_features}, out_features={self.out_features}, sigma0={self.sigma0}"


class QNetwork(NormalizedInput, nn.Module):
    """Q-network: torso + (dueling?) head of (noisy?) layers, scalar or categorical (C51) values.

    Args:
        obs_shape: ``(C, 84, 84)`` for uint8 frame stacks (scaled inside the torso) or ``(D,)``.
        n_actions: number of discrete actions ``A``.
        dueling: ``Q = V + A - mean_a A`` (per atom when distributional).
        noisy: head layers are ``NoisyLinear`` (call ``reset_noise()``; eval mode = means).
        distributional: C51 head with ``num_atoms`` atoms on ``linspace(v_min, v_max)``.
        head_hidden: width of an extra hidden layer per stream in the head (0: none).
        channels_last: run convolutions in ``torch.channels_last`` memory format (faster with
            oneDNN on CPU); inputs are converted in ``forward``.
        sigma0: initial noise scale of ``NoisyLinear``.
        compute_dtype: run the conv torso under autocast to this dtype (``torch.bfloat16``; see
            :func:`rapidrl.nets.torso.resolve_precision`); None: float32.
        torso_kind: the image torso, ``nature`` or ``small`` (see
            :func:`rapidrl.nets.torso.make_torso`; ignored for flat observations).
        layer_norm: a LayerNorm after every torso layer, before its activation (PQN).
        torso_channels: the nature torso's three convolution widths.
        torso_dim: features out of the torso (None: the torso's own, nature 512, small 256).
        obs_norm: image observations only: each pixel of the stack normalized by its running
            mean and standard deviation (``obs_rms``, updated by the learner) instead of scaled
            to [0, 1]; see :class:`rapidrl.nets.normalize.NormalizedInput`.

    ``forward(obs)`` returns Q-values ``[B, A]``. ``forward_dist(obs)`` returns ``(q, log_probs)``
    with ``log_probs [B, A, num_atoms]`` (distributional only); ``q = sum_z p(z) z``.
    """

    def __init__(
        self,
        obs_shape: tuple[int, ...],
        n_actions: int,
        *,
        dueling: bool = False,
        noisy: bool = False,
        distributional: bool = False,
        num_atoms: int = 51,
        v_min: float = -10.0,
        v_max: float = 10.0,
        head_hidden: int = 0,
        channels_last: bool = False,
        sigma0: float = 0.5,
        compute_dtype: torch.dtype | None = None,
        torso_kind: str = "nature",
        layer_norm: bool = False,
        torso_channels: tuple[int, int, int] = NATURE_CHANNELS,
        torso_dim: int | None = None,
        obs_norm: bool = False,
    ):
        super().__init__()
        if distributional and (num_atoms < 2 or not v_min < v_max):
            raise ValueError(
                f"need num_atoms >= 2 and v_min < v_max, got {num_atoms}, {v_min}, {v_max}"
            )
        self.obs_shape = tuple(obs_shape)
        self.n_actions = int(n_actions)
        self.dueling = dueling
        self.noisy = noisy
        self.distributional = distributional
        self.num_atoms = int(num_atoms) if distributional else 1
        self.channels_last = bool(channels_last) and len(self.obs_shape) == 3
        if obs_norm and len(self.obs_shape) != 3:
            raise ValueError(
                f"obs_norm is for image observations [C, H, W] here; got obs_shape {self.obs_shape}"
            )
        self.init_obs_norm(self.obs_shape, obs_norm)
        self.torso = make_torso(
            self.obs_shape,
            out_dim=torso_dim,
            kind=torso_kind,
            layer_norm=layer_norm,
            channels=tuple(torso_channels),
        )
        feat = self.torso.out_dim

        def linear(i: int, o: int) -> nn.Module:
            return NoisyLinear(i, o, sigma0) if noisy else nn.Linear(i, o)

        def stream(out: int) -> nn.Module:
            if head_hidden:
                return nn.Sequential(linear(feat, head_hidden), nn.ReLU(), linear(head_hidden, out))
            return linear(feat, out)

        self.advantage = stream(self.n_actions * self.num_atoms)
        self.value = stream(self.num_atoms) if dueling else None
        if distributional:
            self.register_buffer("support", torch.linspace(v_min, v_max, num_atoms))
        else:
            self.support = None
        if self.channels_last:
            self.to(memory_format=torch.channels_last)
        use_precision(self, compute_dtype)

    def reset_noise(self, generator: torch.Generator | None = None) -> None:
        """Draw new noise in every ``NoisyLinear`` (no-op for ``noisy=False``)."""
        for m in self.modules():
            if isinstance(m, NoisyLinear):
                m.reset_noise(generator)

    def prepare(self, obs: torch.Tensor) -> torch.Tensor:
        """``obs`` as the torso takes it (channels-last, scaled to [0, 1] in the compute dtype, for
        a conv torso); ``forward`` on the result equals ``forward`` on ``obs``. A batch read
        several times (PQN's epochs) is converted once instead of once per minibatch."""
        obs = self._in(obs)
        return self.torso.prepare(obs) if isinstance(self.torso, ConvTorso) else obs

    def _in(self, obs: torch.Tensor) -> torch.Tensor:
        if self.channels_last and obs.dim() == 4:
            # The layout first, while the frames are uint8 (a quarter of the bytes): the
            # normalization keeps it.
            obs = to_channels_last(obs)
        return self.normalize_obs(obs)

    def _logits(self, obs: torch.Tensor) -> torch.Tensor:
        """``[B, A, num_atoms]``: per-atom logits (distributional) or Q-values (``num_atoms=1``)."""
        h = self.torso(self._in(obs))
        adv = self.advantage(h).view(-1, self.n_actions, self.num_atoms)
        if self.value is None:
            return adv
        val = self.value(h).view(-1, 1, self.num_atoms)
        return val + adv - adv.mean(dim=1, keepdim=True)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        """Q-values ``[B, A]``."""
        if self.distributional:
            return self.forward_dist(obs)[0]
        return self._logits(obs).squeeze(-1)

    def forward_dist(self, obs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """``(q [B, A], log_probs [B, A, num_atoms])`` of the C51 head."""
        if not self.distributional:
            raise RuntimeError("forward_dist needs distributional=True")
        log_probs = F.log_softmax(self._logits(obs), dim=-1)
        q = (log_probs.exp() * self.support).sum(-1)
        return q, log_probs
