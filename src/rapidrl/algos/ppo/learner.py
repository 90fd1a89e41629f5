"""The PPO learner: everything the local loop (:mod:`rapidrl.algos.ppo.train`) and the Ray loop
(:mod:`rapidrl.algos.ppo.ray_loop`) share besides collecting the rollout.

Pure pieces: :func:`make_policy` (the actor-critic a config describes), :class:`TrainBatch` (one
rollout as the update takes it), :func:`rollout_advantages` (GAE over envs of different lengths),
:func:`update_policy` (``epochs`` x ``minibatches`` PPO steps), the learning-rate rules
(:func:`anneal_lr`, :func:`adapt_lr`), the entropy schedule (:func:`ent_coef_at`) and
:func:`explained_variance`.

:class:`PPOLearner` holds the network, Adam, the action-sampling and minibatch generators, the
counters, the row/checkpoint cadences, the episode tracker and the run clock; it trains on a
rollout (:meth:`PPOLearner.train_on_rollout`), writes metrics rows and checkpoints, and restores all
of it from the newest checkpoint (:meth:`PPOLearner.start`).
"""

from __future__ import annotations

import math
import time
from typing import Any, NamedTuple

import torch
from torch import nn

from rapidrl.algos.ppo.config import PPOConfig
from rapidrl.algos.ppo.gae import gae
from rapidrl.algos.ppo.losses import ppo_loss
from rapidrl.config import ConfigError
from rapidrl.nets.actor_critic import ActorCritic, orthogonal_init
from rapidrl.nets.compiled import compile_methods
from rapidrl.nets.recurrent import RecurrentActorCritic
from rapidrl.nets.torso import make_torso, resolve_precision, use_channels_last, use_precision
from rapidrl.train.checkpoint import DEFAULT_IGNORE_FIELDS
from rapidrl.train.learner import RolloutLearner
from rapidrl.train.schedules import linear_schedule

__all__ = [
    "LOSS_KEYS",
    "METRIC_COLUMNS",
    "RESUME_IGNORE_FIELDS",
    "PPOLearner",
    "TrainBatch",
    "adapt_lr",
    "anneal_lr",
    "ent_coef_at",
    "explained_variance",
    "lr_now",
    "make_policy",
    "normalize_values",
    "rollout_advantages",
    "update_policy",
]

# Fields that may change on resume without changing what the checkpoint means.
RESUME_IGNORE_FIELDS = (
    *DEFAULT_IGNORE_FIELDS,
    "max_minutes",
    "backend",
    "num_workers",
    "env_batch_size",
    "act_threads",
    "sequence_mode",  # the three modes compute the same function
    "fused_adam",  # the same Adam state either way
    "compile",  # the same net and state, compiled or not
    "tensorboard",
    "score_window",
    # Ray: another cluster or worker layout does not change what the learner's state means.
    "ray",
    "workers",
    "envs_per_worker",
    "ray_cpus_per_worker",
)

LOSS_KEYS = ("policy_loss", "value_loss", "entropy", "approx_kl", "old_approx_kl", "clipfrac")
METRIC_COLUMNS = (
    "length_mean_100",
    "return_best_mean_100",
    *LOSS_KEYS,
    "explained_variance",
    "lr",
    "ent_coef",
    "steps",
    "updates",
    "grad_steps",
    "rollout_s",
    "update_s",
)


# --------------------------------------------------------------------------------------------
# The network, the batch, the advantages
# --------------------------------------------------------------------------------------------
def make_policy(
    cfg: PPOConfig,
    obs_shape: tuple[int, ...],
    num_actions: int,
    device: torch.device | str = "cpu",
    *,
    continuous: bool = False,
) -> nn.Module:
    """The actor-critic a config describes: ``ActorCritic`` or ``RecurrentActorCritic``, for
    ``device`` (which decides ``precision="auto"``; not moved there: call ``.to(device)``).
    ``continuous``: a Gaussian policy over ``num_actions`` dims (feed-forward only)."""
    return use_precision(
        _make_policy(cfg, obs_shape, num_actions, continuous),
        resolve_precision(cfg.precision, device),
    )


def _make_policy(
    cfg: PPOConfig, obs_shape: tuple[int, ...], num_actions: int, continuous: bool
) -> nn.Module:
    obs_shape = tuple(obs_shape)
    if cfg.obs_norm and len(obs_shape) not in (1, 3):
        raise ConfigError(
            f"--obs-norm normalizes image frames or vectors; {cfg.env} gives observations of "
            f"shape {obs_shape}: drop --obs-norm"
        )
    if cfg.log_std_init != PPOConfig.log_std_init and not continuous:
        raise ConfigError(
            f"--log-std-init sets a Gaussian policy's starting noise; {cfg.env} has discrete "
            "actions: drop --log-std-init"
        )
    if continuous and cfg.recurrent:
        raise ConfigError(
            f"{cfg.env} has continuous actions; the recurrent net (ppo-lstm, --recurrent) has "
            "discrete ones only: use `rapidrl train ppo` without --recurrent"
        )
    if len(obs_shape) == 3 and (
        tuple(cfg.mlp_widths) != PPOConfig.mlp_widths
        or cfg.mlp_activation != PPOConfig.mlp_activation
    ):
        raise ConfigError(
            f"--mlp-widths and --mlp-activation shape the MLP torso of vector observations; "
            f"{cfg.env} gives images {obs_shape}: drop them (--torso and --torso-channels shape "
            "the image torso)"
        )
    # The config's torso, the first of the net's initial weights either way.
    torso = make_torso(
        obs_shape,
        out_dim=cfg.torso_dim,
        kind=cfg.torso,
        channels=cfg.torso_channels,
        mlp_widths=cfg.mlp_widths,
        mlp_activation=cfg.mlp_activation,
    )
    norms = {"obs_norm": cfg.obs_norm, "value_norm": cfg.value_norm}
    if cfg.recurrent:
        net = RecurrentActorCritic(
            obs_shape,
            int(num_actions),
            hidden_size=cfg.lstm_hidden,
            sequence_mode=cfg.sequence_mode,
            torso=torso,
            **norms,
        )
        orthogonal_init(net.torso)  # CleanRL's layer_init, as in the feed-forward net
        if cfg.channels_last and len(obs_shape) == 3:
            use_channels_last(net.torso)
        return net
    return ActorCritic(
        obs_shape,
        int(num_actions),
        torso=torso,
        shared_torso=cfg.shared_torso,
        orthogonal=cfg.ortho_init,
        channels_last=cfg.channels_last,
        reward_norm=cfg.reward_norm,
        continuous=continuous,
        log_std_init=cfg.log_std_init,
        **norms,
    )


class TrainBatch(NamedTuple):
    """One rollout as the update takes it (not the Ray workers' :class:`rapidrl.distributed.RolloutBatch`), time-major ``[T, N]`` (``T`` = the longest env sequence of the rollout)."""

    obs: torch.Tensor  # [T, N, *obs_shape]
    actions: torch.Tensor  # [T, N] int64; continuous: [T, N, A] float32 (unclipped)
    logprobs: torch.Tensor  # [T, N]
    values: torch.Tensor  # [T, N]
    advantages: torch.Tensor  # [T, N]
    returns: torch.Tensor  # [T, N]
    starts: torch.Tensor  # [T, N] bool: obs[t] opens an episode
    valid: torch.Tensor  # [T, N] bool: t < lengths[n] (False only with async envs)
    lengths: torch.Tensor  # [N] int64, on the CPU
    init_state: tuple[torch.Tensor, torch.Tensor] | None  # LSTM (h, c) [L, N, H] at t = 0


def rollout_advantages(
    rewards: torch.Tensor,
    values: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    trunc_values: torch.Tensor,
    lengths: torch.Tensor,
    boot_values: torch.Tensor,
    gamma: float,
    lam: float,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """GAE over ``[T, N]`` buffers where env ``n`` holds ``lengths[n] <= T`` steps.

    ``next_values[t]`` = ``V(s_{t+1})`` of the same episode: ``values[t + 1]``; at an env's last
    step ``boot_values[n]`` (the value of the observation it holds after the rollout); where
    ``truncated``, ``trunc_values`` (``V(final_obs)``). An env's last step ends its lambda-trace
    (marked as a cut for :func:`rapidrl.algos.ppo.gae`, which then bootstraps from
    ``next_values``). Returns ``(advantages, returns, valid)``; entries past an env's length are
    padding (``valid`` False) and hold no meaningful value.
    """
    t_len, n_env = values.shape
    env = torch.arange(n_env, device=values.device)
    last = lengths.to(values.device) - 1
    next_values = torch.zeros_like(values)
    next_values[:-1] = values[1:]
    next_values[last, env] = boot_values.to(values.dtype)
    next_values = torch.where(truncated, trunc_values, next_values)
    valid = torch.arange(t_len, device=values.device)[:, None] < lengths.to(values.device)[None]
    cut = truncated | ~valid
    cut[last, env] = True
    advantages, returns = gae(rewards, values, next_values, terminated, cut, gamma, lam)
    return advantages, returns, valid


def normalize_values(net: nn.Module, batch: TrainBatch) -> TrainBatch:
    """``batch`` with its values and returns in the critic's normalized scale, after merging
    its returns into ``net.value_rms`` (rl_games' order: the statistics include this
    rollout's returns); the batch unchanged for a net without value normalization."""
    rms = getattr(net, "value_rms", None)
    if rms is None:
        return batch
    rms.update(batch.returns[batch.valid].reshape(-1))
    return batch._replace(values=rms.normalize(batch.values), returns=rms.normalize(batch.returns))


_PREPARE_MAX_ELEMENTS = 2**27  # 512 MB as float32: e.g. 4,750 Atari frame stacks


def update_policy(
    net: nn.Module,
    opt: torch.optim.Optimizer,
    batch: TrainBatch,
    cfg: PPOConfig,
    generator: torch.Generator,
    ent_coef: float | None = None,
) -> dict[str, float]:
    """Run ``cfg.epochs`` passes of ``cfg.minibatches`` PPO steps; return the mean of each loss
    term over the steps taken and ``grad_steps``. ``ent_coef``: the entropy coefficient of
    this update (:func:`ent_coef_at`); None: ``cfg.ent_coef``. An epoch whose mean KL exceeds
    ``cfg.target_kl`` is the last.

    Feed-forward: minibatches of shuffled single steps (:func:`_step_minibatches`). Recurrent:
    minibatches of whole env sequences replayed from their stored initial state
    (:func:`_sequence_minibatches`). ``generator`` (CPU) draws the shuffles.
    """
    ent_coef = cfg.ent_coef if ent_coef is None else ent_coef
    minibatches = _sequence_minibatches if cfg.recurrent else _step_minibatches
    sums = dict.fromkeys(LOSS_KEYS, 0.0)
    steps = 0
    for _epoch, epoch in zip(range(cfg.epochs), minibatches(net, batch, cfg, generator)):
        kl_sum, kl_n = 0.0, 0
        for out, old in epoch:  # out: the net's evaluation; old: the rollout's, same steps
            losses = ppo_loss(
                out.logprob, old.logprobs, old.advantages, out.values, old.values, old.returns,
                out.entropy, clip_coef=cfg.clip, vf_coef=cfg.vf_coef, ent_coef=ent_coef,
                clip_vloss=cfg.clip_vloss, norm_adv=cfg.norm_adv,
            )  # fmt: skip
            opt.zero_grad(set_to_none=True)
            losses["loss"].backward()
            if cfg.max_grad_norm is not None:
                nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
            opt.step()
            for k in LOSS_KEYS:
                sums[k] += float(losses[k].detach())
            steps += 1
            kl = float(losses["approx_kl"])
            if cfg.kl_adaptive_lr is not None:
                adapt_lr(opt, cfg, kl)
            kl_sum, kl_n = kl_sum + kl, kl_n + 1
        if cfg.target_kl is not None and kl_sum / max(kl_n, 1) > cfg.target_kl:
            break
    out = {k: v / max(steps, 1) for k, v in sums.items()}
    out["grad_steps"] = steps
    return out


class _Old(NamedTuple):
    """The rollout's side of one minibatch: what the loss compares the net's new outputs with."""

    logprobs: torch.Tensor
    values: torch.Tensor
    advantages: torch.Tensor
    returns: torch.Tensor


def _step_minibatches(net: nn.Module, batch: TrainBatch, cfg: PPOConfig, generator):
    """Feed-forward: for each epoch, ``cfg.minibatches`` minibatches of shuffled single steps,
    each ``(net.evaluate(obs, actions), _Old)`` (the net evaluated lazily, as the loop asks)."""
    if bool(batch.valid.all()):
        flat = [x.reshape(-1, *x.shape[2:]) for x in batch[:6]]  # [T, N, ...] -> [T * N, ...]
    else:
        flat = [x[batch.valid] for x in batch[:6]]  # the valid steps of a first-ready rollout
    obs, actions, logprobs, values, adv, ret = flat
    n = obs.shape[0]
    # Convert the frames once for all epochs (channels-last, scaled, in the CNN's dtype) rather
    # than once per minibatch (the channels-last copy and the cast were a tenth of a
    # minibatch's time in a profile). Bounded, as the copy is 2-4x the uint8 rollout.
    if hasattr(net, "prepare") and obs.numel() <= _PREPARE_MAX_ELEMENTS:
        obs = net.prepare(obs)
    device = values.device

    def epoch(perm: torch.Tensor):
        for idx in perm.tensor_split(cfg.minibatches):
            yield (
                net.evaluate(obs[idx], actions[idx]),
                _Old(logprobs[idx], values[idx], adv[idx], ret[idx]),
            )

    while True:
        yield epoch(torch.randperm(n, generator=generator).to(device))


def _sequence_minibatches(net: nn.Module, batch: TrainBatch, cfg: PPOConfig, generator):
    """Recurrent: for each epoch, ``cfg.minibatches`` minibatches of whole env sequences
    (``num_envs / minibatches`` envs, shuffled), replayed from their stored initial LSTM state in
    ``net.sequence_mode``; padding past an env's length (first-ready rollouts) is masked out."""
    device = batch.values.device
    all_valid = bool(batch.valid.all())

    def epoch(envs_perm: torch.Tensor):
        for envs in envs_perm.tensor_split(cfg.minibatches):
            t_len = int(batch.lengths[envs].max())
            e = envs.to(device)
            out = net.evaluate(
                batch.obs[:t_len, e],
                batch.starts[:t_len, e],
                (batch.init_state[0][:, e], batch.init_state[1][:, e]),
                batch.actions[:t_len, e],
            )
            if all_valid:
                pick = torch.Tensor.flatten
            else:
                mask = batch.valid[:t_len, e]

                def pick(x, mask=mask):
                    return x[mask]

            yield (
                type(out)(**{k: pick(getattr(out, k)) for k in ("logprob", "entropy", "values")}),
                _Old(
                    pick(batch.logprobs[:t_len, e]),
                    pick(batch.values[:t_len, e]),
                    pick(batch.advantages[:t_len, e]),
                    pick(batch.returns[:t_len, e]),
                ),
            )

    while True:
        yield epoch(torch.randperm(batch.obs.shape[1], generator=generator))


def explained_variance(values: torch.Tensor, returns: torch.Tensor) -> float:
    """``1 - Var(R - V) / Var(R)``: 1 = the critic predicts the returns, <= 0 = no better than a
    constant (NaN when the returns do not vary)."""
    var = returns.var()
    if returns.numel() < 2 or float(var) == 0.0:
        return math.nan
    return float(1.0 - (returns - values).var() / var)


def adapt_lr(opt: torch.optim.Optimizer, cfg: PPOConfig, approx_kl: float) -> float:
    """The KL-adaptive rate after one minibatch step (``cfg.kl_adaptive_lr`` = the target KL):
    divided by 1.5 when ``approx_kl`` exceeded twice the target, multiplied by 1.5 when it was
    below half of it, clamped to ``[lr_min, lr_max]``. Set in the optimizer; returned."""
    target = cfg.kl_adaptive_lr
    lr = lr_now(opt)
    if target is None:
        return lr
    if approx_kl > 2.0 * target:
        lr = max(lr / 1.5, cfg.lr_min)
    elif approx_kl < 0.5 * target:
        lr = min(lr * 1.5, cfg.lr_max)
    for group in opt.param_groups:
        group["lr"] = lr
    return lr


def anneal_lr(opt: torch.optim.Optimizer, cfg: PPOConfig, frames: int) -> float:
    """Set and return the learning rate at ``frames``: ``cfg.lr``, with ``anneal_lr`` annealed
    linearly to 0 over ``lr_anneal_frames`` (default ``max_frames``). With ``kl_adaptive_lr``
    the rate is the optimizer's own (see :func:`adapt_lr`): returned unchanged."""
    if cfg.kl_adaptive_lr is not None:
        return lr_now(opt)
    lr = cfg.lr
    if cfg.anneal_lr:
        lr = cfg.lr * max(0.0, 1.0 - frames / (cfg.lr_anneal_frames or cfg.max_frames))
    for group in opt.param_groups:
        group["lr"] = lr
    return lr


def ent_coef_at(cfg: PPOConfig, frames: int) -> float:
    """The entropy coefficient at ``frames``: ``ent_coef``, or with ``ent_coef_end`` linearly
    from ``ent_coef`` to it over ``ent_anneal_frames`` (default: the learning rate's span,
    ``lr_anneal_frames`` or ``max_frames``), then ``ent_coef_end``."""
    if cfg.ent_coef_end is None:
        return cfg.ent_coef
    span = cfg.ent_anneal_frames or cfg.lr_anneal_frames or cfg.max_frames
    return linear_schedule(cfg.ent_coef, cfg.ent_coef_end, span, frames)


def lr_now(opt: torch.optim.Optimizer) -> float:
    return float(opt.param_groups[0]["lr"])


# --------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------
class PPOLearner(RolloutLearner):
    """PPO's network, Adam, update and metric columns (see the module docstring); the run state,
    checkpoints, resume and how to build and start it: :class:`RolloutLearner`."""

    algo = "ppo"
    resume_ignore_fields = RESUME_IGNORE_FIELDS
    loss_keys = LOSS_KEYS
    extra_sums = {"explained_variance": 0.0, "ev_n": 0}  # explained variance over the updates

    def __init__(
        self,
        cfg: PPOConfig,
        obs_shape: tuple[int, ...],
        n_actions: int,
        device: torch.device,
        *,
        continuous: bool = False,
    ):
        super().__init__(cfg, device)
        self.ent_coef = cfg.ent_coef  # of the latest update (ent_coef_at its frames)
        self.net = make_policy(cfg, obs_shape, n_actions, self.device, continuous=continuous)
        self.net = self.net.to(self.device)
        if cfg.compile:  # acting (forward) and the update's evaluate; value() stays eager
            compile_methods(self.net, "forward", "evaluate")
        self.opt = torch.optim.Adam(
            self.net.parameters(), lr=cfg.lr, eps=cfg.adam_eps, fused=cfg.fused_adam
        )

    @classmethod
    def for_env(cls, cfg: PPOConfig, env: Any, device: Any) -> PPOLearner:
        """The learner for the probe ``env``: discrete or (a Box) continuous actions."""
        return cls(cfg, env.obs_shape, env.n_actions, device, continuous=env.continuous)

    # --- learning -------------------------------------------------------------------------
    def set_lr(self, frames: int) -> float:
        """Set and return the learning rate at ``frames`` (see :func:`anneal_lr`)."""
        return anneal_lr(self.opt, self.cfg, frames)

    def train_on_rollout(self, batch: TrainBatch, *, rollout_s: float, t_start: float) -> None:
        """The PPO epochs on one rollout (:func:`update_policy`), the explained variance, and
        the counters and metric sums (``update_s`` is measured from ``t_start``, the end of the
        rollout)."""
        self.ent_coef = ent_coef_at(self.cfg, self.frames)
        ev = explained_variance(batch.values[batch.valid], batch.returns[batch.valid])
        stats = update_policy(
            self.net,
            self.opt,
            normalize_values(self.net, batch),
            self.cfg,
            self.mb_gen,
            self.ent_coef,
        )
        # The rollout was acted with the input statistics before it, and its update used the
        # same (its first PPO ratios are exactly 1); the next rollout sees them with it merged.
        obs_rms = getattr(self.net, "obs_rms", None)
        if obs_rms is not None:
            valid = batch.valid
            obs_rms.update(batch.obs.flatten(0, 1) if bool(valid.all()) else batch.obs[valid])
        update_s = time.perf_counter() - t_start
        self.account(stats, rollout_s=rollout_s, update_s=update_s)
        acc = self.counters.acc
        acc["explained_variance"] += 0.0 if math.isnan(ev) else ev
        acc["ev_n"] += 0 if math.isnan(ev) else 1

    # --- metrics --------------------------------------------------------------------------
    def algo_columns(self, frames: int) -> dict[str, Any]:
        """A row's PPO columns: the mean explained variance, the rate, the entropy coefficient."""
        acc = self.counters.acc
        ev = acc["explained_variance"] / acc["ev_n"] if acc["ev_n"] else math.nan
        return {"explained_variance": ev, "lr": lr_now(self.opt), "ent_coef": self.ent_coef}
