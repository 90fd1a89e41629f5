"""The SAC learner: the actor, the twin critics and their targets, the temperature, one Adam, the
replay, the counters, cadences, tracker and clock (:class:`rapidrl.train.learner.RolloutLearner`
keeps those, checkpoints and restores them).

The local loop (:mod:`rapidrl.algos.sac.train`) feeds it through
:class:`rapidrl.train.replay_source.VectorSource`: :meth:`SACLearner.act` (uniformly random
actions until ``learning_starts`` agent steps, then samples of the policy),
:meth:`SACLearner.learn` (one critic step per ``steps_per_update`` agent steps, the actor and the
temperature every ``policy_frequency`` critic steps), and ``rb``.

One Adam holds three parameter groups (critics at ``q_lr``; actor and temperature at
``policy_lr``); each loss's backward reaches only its own group (the critics are frozen while the
actor's loss goes through them, the target is computed without gradients), and Adam leaves a
parameter without a gradient untouched, so one optimizer steps each part on its own schedule.
"""

from __future__ import annotations

import contextlib
import copy
import math
import sys
import time
from typing import Any

import numpy as np
import torch
from torch import nn

from rapidrl.algos.sac.config import SACConfig
from rapidrl.algos.sac.losses import (
    actor_loss,
    critic_loss,
    critic_target,
    soft_update,
    temperature_loss,
)
from rapidrl.buffers import ReplayBuffer
from rapidrl.hardware import require_memory
from rapidrl.nets.sac import QEnsemble, SquashedGaussianActor
from rapidrl.nets.torso import resolve_precision
from rapidrl.train.checkpoint import DEFAULT_IGNORE_FIELDS, replay_refill_notice
from rapidrl.train.learner import RolloutLearner
from rapidrl.train.loop import num_threads
from rapidrl.train.seeding import seed_of

__all__ = ["METRIC_COLUMNS", "RESUME_IGNORE_FIELDS", "SACLearner", "SACNets", "make_sac_nets"]

# Fields that may change on resume without changing what the checkpoint means.
RESUME_IGNORE_FIELDS = (
    *DEFAULT_IGNORE_FIELDS,
    "max_minutes",
    "save_replay",
    "backend",
    "num_workers",
    "tensorboard",
    "score_window",
)

LOSS_KEYS = ("q_loss", "actor_loss", "alpha_loss", "q_mean", "entropy")
METRIC_COLUMNS = ("length_mean_100", "return_best_mean_100", *LOSS_KEYS, "alpha", "buffer")


class SACNets(nn.Module):
    """Everything SAC learns, as one module (one checkpoint entry): ``actor``, ``critic`` (an
    ensemble of 2), ``critic_target``, ``log_alpha``, and the action bounds as buffers
    (``action_center``, ``action_half``: env action ``= center + half * tanh(u)``)."""

    def __init__(
        self,
        obs_dim: int,
        act_dim: int,
        hidden: tuple[int, ...],
        alpha: float,
        low: np.ndarray | None = None,
        high: np.ndarray | None = None,
    ):
        super().__init__()
        self.actor = SquashedGaussianActor(obs_dim, act_dim, hidden)
        self.critic = QEnsemble(obs_dim, act_dim, hidden, n=2)
        self.critic_target = copy.deepcopy(self.critic)
        self.critic_target.requires_grad_(False)
        self.log_alpha = nn.Parameter(torch.tensor(math.log(alpha)))
        low = np.full(act_dim, -1.0) if low is None else np.asarray(low, dtype=np.float64)
        high = np.full(act_dim, 1.0) if high is None else np.asarray(high, dtype=np.float64)
        self.register_buffer("action_center", torch.tensor((high + low) / 2, dtype=torch.float32))
        self.register_buffer("action_half", torch.tensor((high - low) / 2, dtype=torch.float32))

    def policy(
        self, obs: torch.Tensor, generator: torch.Generator | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """A sampled env action ``[B, A]`` and its log-probability ``[B]`` (of the env action:
        the squashed sample's, less ``sum log half``)."""
        a, logp = self.actor.sample(obs, generator)
        return self.action_center + self.action_half * a, logp - self.action_half.log().sum()

    def mode(self, obs: torch.Tensor) -> torch.Tensor:
        """The deterministic env action ``center + half * tanh(mean)`` ``[B, A]`` (evaluation)."""
        return self.action_center + self.action_half * self.actor.deterministic(obs)


def make_sac_nets(
    cfg: SACConfig,
    obs_shape: tuple[int, ...],
    act_dim: int,
    device: Any = "cpu",
    action_space: Any = None,
    **_: Any,
) -> SACNets:
    """The networks of a config for flat observations ``obs_shape`` and ``act_dim`` actions,
    bounded by ``action_space`` (None: placeholders, as ``restore_for_eval``'s ``make_net`` is
    called; a checkpoint's own bounds are restored with its weights)."""
    if len(obs_shape) != 1:
        from rapidrl.config import ConfigError

        raise ConfigError(f"SAC takes flat (vector) observations; got shape {tuple(obs_shape)}")
    low, high = (None, None) if action_space is None else (action_space.low, action_space.high)
    return SACNets(int(obs_shape[0]), int(act_dim), tuple(cfg.hidden), cfg.alpha, low, high)


class SACLearner(RolloutLearner):
    """SAC's learner-side state and steps (see the module docstring). Build it after
    ``seed_everything(cfg.seed)``; then :meth:`start` with the run directory (everything, the
    replay too with ``save_replay``, restored from the newest checkpoint when resuming)."""

    algo = "sac"
    resume_ignore_fields = RESUME_IGNORE_FIELDS
    loss_keys = LOSS_KEYS

    def __init__(self, cfg: SACConfig, obs_shape: tuple[int, ...], action_space: Any, device: Any):
        super().__init__(cfg, device)
        self.obs_shape = tuple(obs_shape)
        self.act_dim = int(action_space.shape[0])
        nets = make_sac_nets(cfg, self.obs_shape, self.act_dim, self.device, action_space)
        self.net = nets.to(self.device)
        self.low = np.asarray(action_space.low, dtype=np.float32)
        self.high = np.asarray(action_space.high, dtype=np.float32)
        self.opt = torch.optim.Adam(
            [
                {"params": nets.critic.parameters(), "lr": cfg.q_lr},
                {"params": nets.actor.parameters(), "lr": cfg.policy_lr},
                {"params": [nets.log_alpha], "lr": cfg.policy_lr},
            ],
            fused=cfg.fused_adam,
        )
        self.target_entropy = (
            -float(self.act_dim) if cfg.target_entropy is None else float(cfg.target_entropy)
        )
        self.alpha = float(cfg.alpha)
        self.compute_dtype = resolve_precision(cfg.precision, self.device)
        # Random prefill actions (NumPy) and the update's noise (torch, on the learner's device);
        # the acting noise comes from RolloutLearner's act_gen.
        self.act_rng = np.random.default_rng([cfg.seed, 1])
        self.update_gen = torch.Generator(device=self.device).manual_seed(seed_of(cfg.seed, 3))
        # Checked before the buffer is made: a store larger than memory and swap can fail its
        # allocation outright (a bare MemoryError) where the check names the fix.
        store = dict(
            num_envs=cfg.num_envs,
            obs_dtype=np.float32,
            action_shape=(self.act_dim,),
            action_dtype=np.float32,
        )
        require_memory(
            ReplayBuffer.nbytes_for(cfg.buffer_size, self.obs_shape, **store),
            f"the replay (--buffer-size {cfg.buffer_size})",
            "lower --buffer-size",
        )
        self.rb = ReplayBuffer(
            cfg.buffer_size,
            self.obs_shape,
            **store,
            gamma=cfg.gamma,
            n_step=1,
            seed=[cfg.seed, 2],
        )

    # --- checkpoints: RolloutLearner's, plus the update generator, the NumPy generators and,
    # with save_replay, the replay -----------------------------------------------------------
    def checkpoint_state(self) -> dict[str, Any]:
        state = super().checkpoint_state()
        state["generators"]["update"] = self.update_gen.get_state()
        state["alpha"] = self.alpha
        return state

    def checkpoint_extras(self) -> dict[str, Any]:
        return {
            "arrays": self.rb.state_dict() if self.cfg.save_replay else None,
            "np_rng": {"act": self.act_rng, "replay": self.rb.rng},
        }

    def on_restore(self, state: Any) -> None:
        self.update_gen.set_state(state.state["generators"]["update"])
        self.alpha = float(state.state["alpha"])
        arrays = state.load_arrays()
        if not arrays:
            print(
                replay_refill_notice(self.cfg.learning_starts, self.cfg.buffer_size),
                file=sys.stderr,
            )
        else:
            self.rb.load_state_dict(arrays)
            self.rb.truncate_streams()  # the envs restart: the stored episodes end here
        state.restore_rng({"act": self.act_rng, "replay": self.rb.rng})

    # --- acting -------------------------------------------------------------------------------
    def epsilon(self) -> float:
        """The share of uniformly random actions now: 1 during the prefill, then 0."""
        return 1.0 if self.counters.steps < self.cfg.learning_starts else 0.0

    def act(self, obs: np.ndarray, epsilon: float) -> np.ndarray:
        """Env actions ``[B, A]`` (float32) for observations ``[B, D]``: uniform within the
        bounds while ``epsilon`` is 1 (the prefill), else sampled from the policy."""
        if epsilon >= 1.0:
            u = self.act_rng.random((len(obs), self.act_dim), dtype=np.float32)
            return self.low + u * (self.high - self.low)
        # A small batch gains nothing from more threads on CPU, and contended threads stall.
        with num_threads(1), torch.no_grad():
            x = torch.as_tensor(np.asarray(obs, dtype=np.float32), device=self.device)
            actions, _ = self.net.policy(x, self.act_gen)
        # tanh can round to exactly +-1 in float32: the bounds hold, clip for the last ulp.
        return np.clip(actions.cpu().numpy(), self.low, self.high)

    # --- learning -----------------------------------------------------------------------------
    def _autocast(self) -> Any:
        """The update's forward passes: autocast to bf16 with ``precision`` bf16 (else none)."""
        if self.compute_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(self.device.type, dtype=self.compute_dtype)

    def learn(self, new_steps: int) -> None:
        """The critic steps due after ``new_steps`` more agent steps (none during the prefill);
        the steps themselves are counted by the loop (``steps_done``)."""
        cfg, c = self.cfg, self.counters
        # A resumed run without its replay refills learning_starts transitions first.
        if len(self.rb) < cfg.learning_starts or self.rb.num_sampleable == 0:
            return
        c.pending += new_steps
        while c.pending >= cfg.steps_per_update:
            self.update()
            c.pending -= cfg.steps_per_update

    def update(self) -> None:
        """One critic step on ``batch_size`` transitions, the soft target update, and every
        ``policy_frequency`` critic steps ``policy_steps`` (default: as many) actor and
        temperature steps."""
        cfg, c, nets, device = self.cfg, self.counters, self.net, self.device
        t0 = time.perf_counter()
        batch = self.rb.sample(cfg.batch_size)
        obs = torch.from_numpy(batch["obs"]).to(device)
        next_obs = torch.from_numpy(batch["next_obs"]).to(device)
        actions = torch.from_numpy(batch["actions"]).to(device)
        rewards = torch.from_numpy(batch["rewards"]).to(device)
        discounts = torch.from_numpy(batch["discounts"]).to(device)
        with torch.no_grad(), self._autocast():
            next_actions, next_logp = nets.policy(next_obs, self.update_gen)
            y = critic_target(
                rewards, discounts, nets.critic_target(next_obs, next_actions), next_logp,
                self.alpha,
            )  # fmt: skip
        with self._autocast():
            q = nets.critic(obs, actions)  # [2, B], float32
        q_loss = critic_loss(q, y)
        self.opt.zero_grad(set_to_none=True)
        q_loss.backward()
        self.opt.step()
        c.updates += 1
        c.grad_steps += 1
        stats = {"q_loss": q_loss.item(), "q_mean": q.detach().mean().item()}
        if c.updates % cfg.policy_frequency == 0:
            nets.critic.requires_grad_(False)  # the actor's loss goes through them: no grads
            for _ in range(cfg.policy_steps or cfg.policy_frequency):
                with self._autocast():
                    pi_actions, logp = nets.policy(obs, self.update_gen)
                    q_pi = nets.critic(obs, pi_actions)
                loss = actor_loss(q_pi, logp, self.alpha)
                stats["actor_loss"] = loss.item()
                stats["entropy"] = -logp.detach().mean().item()
                if cfg.autotune:
                    a_loss = temperature_loss(nets.log_alpha, logp, self.target_entropy)
                    loss = loss + a_loss
                    stats["alpha_loss"] = a_loss.item()
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                self.opt.step()
                c.grad_steps += 1
                if cfg.autotune:
                    self.alpha = nets.log_alpha.exp().item()
            nets.critic.requires_grad_(True)
        soft_update(nets.critic_target, nets.critic, cfg.tau)
        acc = c.acc
        for k, v in stats.items():
            acc[k] += v
            acc["n_" + k] += 1
        acc["n"] += 1
        acc["update_s"] += time.perf_counter() - t0

    # --- metrics ------------------------------------------------------------------------------
    def zero_acc(self) -> dict[str, float]:
        """The row's sums: each loss term and a count of the updates that produced it (the
        actor's terms come every ``policy_frequency`` critic steps), and the update seconds."""
        acc = super().zero_acc()
        acc.update({"n_" + k: 0 for k in LOSS_KEYS})
        return acc

    def metrics_row(self, frames: int) -> dict[str, Any]:
        """One metrics row at ``frames`` (each loss term's mean over the updates that produced
        it since the previous row); resets the sums. No ``rollout_s``: acting is not timed."""
        acc = self.counters.acc
        for k in LOSS_KEYS:  # means over the updates that had the term
            n_k = acc["n_" + k]
            acc[k] = acc[k] / n_k * acc["n"] if n_k else math.nan
        row = super().metrics_row(frames)
        row.pop("rollout_s", None)
        return row

    def algo_columns(self, frames: int) -> dict[str, Any]:
        return {"alpha": self.alpha, "buffer": len(self.rb)}
