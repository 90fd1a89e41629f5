"""Running mean and variance as a module, for input and value normalization (rl_games'
``normalize_input`` / ``normalize_value``, SB3's ``VecNormalize``).

The statistics are buffers, so they travel with the network: checkpoints, ``rapidrl eval`` and
the Ray workers' weights carry them. They change only through :meth:`RunningMeanStd.update`
(called by the learner once per rollout), never in ``forward``: acting and the loss of one update
see the same statistics.

:class:`NormalizedActorCritic` is where the actor-critics (feed-forward and recurrent) build and
apply them: one place for what "normalized input" and "values in the return scale" mean.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "OBS_CLIP",
    "REWARD_CLIP",
    "VECTOR_OBS_CLIP",
    "NormalizedActorCritic",
    "NormalizedInput",
    "RunningMeanStd",
    "scale_rewards",
]

OBS_CLIP = 5.0  # normalized pixels are clamped to +-OBS_CLIP (rl_games)
VECTOR_OBS_CLIP = 10.0  # normalized vector observations (MuJoCo): SB3's VecNormalize, CleanRL
REWARD_CLIP = 10.0  # scaled rewards: SB3's VecNormalize, CleanRL's NormalizeReward


class RunningMeanStd(nn.Module):
    """Mean and variance of every element of ``shape`` over all samples seen so far.

    ``update(x)`` merges a batch ``x [n, *shape]`` with the parallel-variance formula of Chan et
    al. (the batch's mean and population variance, weighted by counts), in float64. It starts
    from mean 0, variance 1 and a count of ``eps`` (as SB3 and rl_games), so the first batch
    sets the statistics almost alone.

    ``normalize(x)`` = ``(x - mean) / sqrt(var + eps)``, clamped to ``[-clip, clip]`` when
    ``clip`` is set; ``denormalize`` is its inverse (without the clamp).
    """

    mean: torch.Tensor
    var: torch.Tensor
    count: torch.Tensor

    def __init__(self, shape: tuple[int, ...] = (), eps: float = 1e-5, clip: float | None = None):
        super().__init__()
        self.shape = tuple(shape)
        self.eps = float(eps)
        self.clip = clip
        self.register_buffer("mean", torch.zeros(self.shape, dtype=torch.float64))
        self.register_buffer("var", torch.ones(self.shape, dtype=torch.float64))
        self.register_buffer("count", torch.tensor(1e-4, dtype=torch.float64))

    @torch.no_grad()
    def update(self, x: torch.Tensor) -> None:
        """Merge the samples ``x [n, *shape]`` (any dtype) into the statistics."""
        if tuple(x.shape[1:]) != self.shape:
            raise ValueError(
                f"RunningMeanStd.update: samples of shape {tuple(x.shape[1:])}, expected "
                f"{self.shape} (x is [n, *shape])"
            )
        n = x.shape[0]
        if n == 0:
            return
        s1, s2 = _sums(x, self.mean.device)
        b_mean = s1 / n
        b_var = (s2 / n - b_mean.square()).clamp_(min=0.0)
        total = self.count + n
        delta = b_mean - self.mean
        self.mean += delta * (n / total)
        m2 = self.var * self.count + b_var * n + delta.square() * (self.count * n / total)
        self.var.copy_(m2 / total)
        self.count.copy_(total)

    def normalize(self, x: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """``(x - mean) / sqrt(var + eps)`` computed in float32 (clamped to ``±clip`` if set),
        returned in ``dtype`` (e.g. a bf16 torso's input: one rounding of the float32 result)
        and in ``x``'s memory format (channels-last frames stay channels-last).

        Computed in place over chunks of ~2 MB of rows: a rollout of frame stacks (PPO's
        ``prepare``, e.g. 8,192 x [2, 52, 52]) then makes no rollout-sized float32 temporaries
        (the out-of-place form took 3x the time there, in page faults and memory traffic);
        the same operations in the same order, so the same values bit for bit."""
        mean = self.mean.to(torch.float32)
        std = (self.var + self.eps).sqrt().to(torch.float32)
        if (
            x.dim() == 4
            and not x.is_contiguous()
            and x.is_contiguous(memory_format=torch.channels_last)
        ):
            # The statistics in the frames' own layout: broadcast across layouts, the
            # element-wise loops are strided (a replay batch of 256 x [2, 52, 52] channels-last
            # took 4.4 ms instead of 0.9 on a 2-core Zen 3); the same values either way.
            mean = mean.unsqueeze(0).contiguous(memory_format=torch.channels_last)
            std = std.unsqueeze(0).contiguous(memory_format=torch.channels_last)
        rows_of = x if x.dim() else x.reshape(1)  # a 0-d tensor as one row
        out = torch.empty_like(rows_of, dtype=dtype)
        rows = max(1, 2**19 // max(1, rows_of[0].numel()))
        for i in range(0, rows_of.shape[0], rows):
            if dtype == torch.float32:  # in place in the output: no chunk-sized temporary
                y = out[i : i + rows]
                y.copy_(rows_of[i : i + rows])
            else:
                y = rows_of[i : i + rows].to(torch.float32, copy=True)
            y.sub_(mean).div_(std)
            if self.clip is not None:
                y.clamp_(-self.clip, self.clip)
            if dtype != torch.float32:
                out[i : i + rows] = y
        return out.reshape(x.shape)

    def denormalize(self, y: torch.Tensor) -> torch.Tensor:
        """``y * sqrt(var + eps) + mean`` in float32."""
        std = (self.var + self.eps).sqrt().to(torch.float32)
        return y.to(torch.float32) * std + self.mean.to(torch.float32)

    def extra_repr(self) -> str:
        return f"shape={self.shape}, clip={self.clip}"


# 8-bit samples are summed in float32 over blocks of this many rows: every partial sum of
# squares stays below 2**24 (256 x 255**2 = 16,646,400), so each is an exact integer and the
# float64 totals equal float64 sums bit for bit, at ~25x the speed (a replay batch of 256 x
# [2, 52, 52] uint8: 0.6 ms against 15.5 ms on a 2-core Zen 3).
_EXACT_ROWS_8BIT = 256


def _sums(x: torch.Tensor, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """Sums and sums of squares of the samples ``x [n, *shape]`` over ``n``, in float64 on
    ``device``. 8-bit integers exactly through float32 blocks, over ``x`` as ``[n, d]`` (a
    reduction over the first of four dims is ~2.5x slower); any other dtype in float64 over
    blocks of ~4M elements (a rollout of frame stacks is never copied whole to float64)."""
    n, shape = x.shape[0], x.shape[1:]
    if x.dtype in (torch.uint8, torch.int8):
        x, wide, rows = x.reshape(n, -1), torch.float32, _EXACT_ROWS_8BIT
    else:
        wide, rows = torch.float64, max(1, 2**22 // max(1, x[0].numel()))
    s1 = torch.zeros(x.shape[1:], dtype=torch.float64, device=device)
    s2 = torch.zeros_like(s1)
    for chunk in x.split(rows):
        c = chunk.to(device, wide, copy=True)  # squared in place below: never the input
        s1 += c.sum(0)
        s2 += c.square_().sum(0)  # in place: one block-sized temporary, not two
    return s1.reshape(shape), s2.reshape(shape)


class NormalizedInput:
    """Input normalization (a mixin of ``nn.Module`` subclasses: the actor-critics and
    :class:`rapidrl.nets.q.QNetwork`), with ``obs_norm``:

    - frame stacks ``[C, H, W]``: each pixel normalized by its running mean and standard
      deviation (``obs_rms``, clamped to +-5) instead of scaled to [0, 1] (rl_games'
      ``normalize_input``). A uint8 input is a raw frame stack and is normalized; a float one
      is taken as already normalized (what ``prepare`` returns).
    - vectors ``[D]`` (MuJoCo): each coordinate normalized the same way, clamped to +-10 (SB3's
      ``VecNormalize``, CleanRL's ``NormalizeObservation``); every input is raw.

    ``obs_rms`` is a buffer (checkpoints, ``rapidrl eval``, actor and Ray weights carry it),
    changed only by ``obs_rms.update``, which the learner calls."""

    obs_rms: RunningMeanStd | None

    def init_obs_norm(self, obs_shape: tuple[int, ...], obs_norm: bool) -> None:
        """Set ``obs_rms`` (None where off); call after ``nn.Module.__init__``. ``obs_norm`` on
        an observation that is neither ``[C, H, W]`` nor ``[D]`` is a ValueError."""
        obs_shape = tuple(obs_shape)
        if obs_norm and len(obs_shape) not in (1, 3):
            raise ValueError(
                "obs_norm is for image [C, H, W] or vector [D] observations; got obs_shape "
                f"{obs_shape}"
            )
        self.obs_images = len(obs_shape) == 3
        clip = OBS_CLIP if self.obs_images else VECTOR_OBS_CLIP
        self.obs_rms = RunningMeanStd(obs_shape, clip=clip) if obs_norm else None

    def normalize_obs(self, obs: torch.Tensor, dtype: torch.dtype = torch.float32) -> torch.Tensor:
        """The torso's input: with ``obs_norm`` a raw (uint8) frame stack or any vector
        normalized (in ``dtype``); anything else as it is."""
        if self.obs_rms is None or (self.obs_images and obs.dtype != torch.uint8):
            return obs
        return self.obs_rms.normalize(obs, dtype)


class NormalizedActorCritic(NormalizedInput):
    """Input and value normalization of an actor-critic ``nn.Module`` (a mixin of
    :class:`rapidrl.nets.actor_critic.ActorCritic` and
    :class:`rapidrl.nets.recurrent.RecurrentActorCritic`).

    ``obs_norm``: see :class:`NormalizedInput`.

    ``value_norm``: the critic head predicts returns normalized by their running mean and
    standard deviation (``value_rms``; rl_games' ``normalize_value``). What the net hands to
    acting code (rollouts, GAE's bootstrap, the Ray workers) is in the return scale
    (:meth:`value_out`); what ``evaluate`` hands to the loss is the head's output, in the
    normalized scale of the normalized returns it is compared with.

    Both are buffers (checkpoints, ``rapidrl eval`` and Ray weights carry them), changed only by
    ``obs_rms.update`` / ``value_rms.update``: the PPO learner calls them once per rollout.
    """

    value_rms: RunningMeanStd | None
    reward_rms: RunningMeanStd | None

    def init_normalizers(
        self,
        obs_shape: tuple[int, ...],
        *,
        obs_norm: bool,
        value_norm: bool,
        reward_norm: bool = False,
    ) -> None:
        """Set ``obs_rms``, ``value_rms`` and ``reward_rms`` (None where off); call after
        ``nn.Module.__init__``. ``obs_norm`` on an observation that is neither an image nor a
        vector is a ValueError."""
        self.init_obs_norm(obs_shape, obs_norm)
        self.value_rms = RunningMeanStd(()) if value_norm else None
        # The running statistics of the discounted return the rewards are scaled by
        # (scale_rewards); a buffer so that checkpoints carry it.
        self.reward_rms = RunningMeanStd(()) if reward_norm else None

    def value_out(self, v: torch.Tensor) -> torch.Tensor:
        """The critic head's output in the return scale."""
        return v if self.value_rms is None else self.value_rms.denormalize(v)


@torch.no_grad()
def scale_rewards(
    rewards: torch.Tensor,
    ends: torch.Tensor,
    valid: torch.Tensor,
    running: torch.Tensor,
    gamma: float,
    rms: RunningMeanStd,
    clip: float = REWARD_CLIP,
) -> torch.Tensor:
    """Rewards ``[T, N]`` divided by the running standard deviation of the discounted return,
    clamped to ``+-clip`` (SB3's ``VecNormalize(norm_reward=True)``, CleanRL's
    ``NormalizeReward``): the return scale the value and policy losses see stays near 1 whatever
    the task's reward scale.

    ``running [N]`` is each env's discounted return so far (``r_t + gamma * running``), carried
    from rollout to rollout and updated here in place; it restarts at 0 after a step that ended
    an episode (``ends [T, N]``: terminated or truncated). ``valid [T, N]``: the steps each env
    holds (False past an env's length in a first-ready rollout). ``rms`` takes every valid
    step's return at once, then scales the whole rollout (rl_games' order, once per rollout;
    SB3 updates per step)."""
    returns = torch.zeros_like(rewards, dtype=torch.float64)
    for t in range(rewards.shape[0]):
        step = valid[t]
        updated = running * gamma + rewards[t].double()
        running.copy_(torch.where(step, updated, running))
        returns[t] = running
        running.masked_fill_(step & ends[t], 0.0)
    rms.update(returns[valid])
    std = (rms.var + rms.eps).sqrt().to(rewards.dtype)
    return (rewards / std).clamp_(-clip, clip)
