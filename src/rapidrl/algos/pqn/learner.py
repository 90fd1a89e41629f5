"""The PQN learner: everything a training loop (the local one in :mod:`rapidrl.algos.pqn.train`,
a future Ray one) shares besides collecting the rollout.

:class:`PQNLearner` holds the Q-network (LayerNorm after every layer), RAdam, the exploration and
minibatch generators, the counters, the row/checkpoint cadences, the episode tracker and the run
clock. It acts epsilon-greedily (:meth:`PQNLearner.act`), gives the max-Q of observations for the
bootstraps (:meth:`PQNLearner.max_q`), turns a rollout into Q(lambda) targets
(:func:`rollout_targets`), trains on it (:meth:`PQNLearner.train_on_rollout`: ``epochs`` passes of
``minibatches`` MSE steps), writes metrics rows and checkpoints, and restores all of it from the
newest checkpoint (:meth:`PQNLearner.start`).
"""

from __future__ import annotations

import time
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from rapidrl.algos.pqn.config import PQNConfig
from rapidrl.algos.pqn.returns import q_lambda_returns
from rapidrl.nets.actor_critic import orthogonal_init
from rapidrl.nets.exploration import epsilon_greedy_torch
from rapidrl.nets.q import QNetwork
from rapidrl.nets.torso import resolve_precision
from rapidrl.train.checkpoint import DEFAULT_IGNORE_FIELDS
from rapidrl.train.learner import RolloutLearner
from rapidrl.train.schedules import linear_schedule

__all__ = [
    "METRIC_COLUMNS",
    "RESUME_IGNORE_FIELDS",
    "PQNLearner",
    "epsilon_at",
    "q_lambda_at",
    "lr_at",
    "make_pqn_network",
    "rollout_targets",
]

# Fields that may change on resume without changing what the checkpoint means.
RESUME_IGNORE_FIELDS = (
    *DEFAULT_IGNORE_FIELDS,
    "max_minutes",
    "backend",
    "num_workers",
    "act_threads",
    "tensorboard",
    "score_window",
)

LOSS_KEYS = ("td_loss", "q_mean")
METRIC_COLUMNS = (
    "length_mean_100",
    "return_best_mean_100",
    *LOSS_KEYS,
    "epsilon",
    "lr",
    "steps",
    "updates",
    "grad_steps",
    "rollout_s",
    "update_s",
)

# Convert a rollout's frames once for all epochs when it holds at most this many elements
# (512 MB as float32: 4,096 stacks of 4 x 84 x 84, the paper's rollout, fit).
_PREPARE_MAX_ELEMENTS = 2**27


# --------------------------------------------------------------------------------------------
# Pieces: the network, the schedules, the targets
# --------------------------------------------------------------------------------------------
def make_pqn_network(
    cfg: PQNConfig, obs_shape: tuple[int, ...], n_actions: int, device: torch.device | str = "cpu"
) -> QNetwork:
    """PQN's Q-network: the config's torso with a LayerNorm after every layer, then a linear layer
    to the actions; CleanRL's initialization (orthogonal weights with gain sqrt(2) everywhere,
    zero biases). For ``device`` (which decides ``precision="auto"``; not moved there)."""
    net = QNetwork(
        tuple(obs_shape),
        int(n_actions),
        torso_kind=cfg.torso,
        layer_norm=True,
        channels_last=cfg.channels_last,
        compute_dtype=resolve_precision(cfg.precision, device),
    )
    # Initialized in the contiguous layout (orthogonal_ writes through a view that a
    # channels-last conv weight does not allow), then back to channels-last.
    orthogonal_init(net.to(memory_format=torch.contiguous_format))
    if net.channels_last:
        net.to(memory_format=torch.channels_last)
    return net


def schedule_frames(cfg: PQNConfig) -> int:
    """The frames the learning-rate and epsilon schedules span."""
    return cfg.schedule_frames or cfg.max_frames


def epsilon_at(cfg: PQNConfig, frames: int) -> float:
    """Epsilon at ``frames``: ``start_e`` -> ``end_e`` linearly over ``exploration_fraction`` of
    the schedule, then ``end_e``; with ``final_e`` set, then on to ``final_e`` linearly until
    ``final_e_fraction`` of the schedule, then ``final_e``."""
    duration = round(cfg.exploration_fraction * schedule_frames(cfg))
    if cfg.final_e is None or frames < duration:
        return linear_schedule(cfg.start_e, cfg.end_e, duration, frames)
    final = round(cfg.final_e_fraction * schedule_frames(cfg))
    return linear_schedule(cfg.end_e, cfg.final_e, final - duration, frames - duration)


def q_lambda_at(cfg: PQNConfig, frames: int) -> float:
    """Lambda of the Q(lambda) targets at ``frames``: ``start_q_lambda`` -> ``q_lambda`` linearly
    over ``q_lambda_fraction`` of the schedule, then ``q_lambda`` (``q_lambda`` throughout when
    ``start_q_lambda`` is None)."""
    if cfg.start_q_lambda is None:
        return cfg.q_lambda
    duration = round(cfg.q_lambda_fraction * schedule_frames(cfg))
    return linear_schedule(cfg.start_q_lambda, cfg.q_lambda, duration, frames)


def lr_at(cfg: PQNConfig, frames: int) -> float:
    """The learning rate at ``frames``: ``lr``, annealed linearly to 0 over the schedule with
    ``anneal_lr``."""
    if not cfg.anneal_lr:
        return cfg.lr
    return cfg.lr * max(0.0, 1.0 - frames / schedule_frames(cfg))


def rollout_targets(
    rewards: torch.Tensor,
    max_q: torch.Tensor,
    terminated: torch.Tensor,
    truncated: torch.Tensor,
    trunc_max_q: torch.Tensor,
    boot_max_q: torch.Tensor,
    gamma: float,
    lam: float,
) -> torch.Tensor:
    """Q(lambda) targets ``[T, N]`` of one synchronous rollout.

    ``max_q[t]``: the max-Q of the observation acted on at ``t`` (recorded when acting);
    ``trunc_max_q[t]``: the max-Q of ``infos["final_obs"]`` where ``truncated[t]``;
    ``boot_max_q [N]``: the max-Q of the observation each env holds after the rollout. So
    ``next_max_q[t]`` is ``max_q[t + 1]``, ``boot_max_q`` at the last step, ``trunc_max_q`` at a
    time limit; time limits and the last step end the lambda-trace (see
    :func:`rapidrl.algos.pqn.returns.q_lambda_returns`).
    """
    next_max_q = torch.cat([max_q[1:], boot_max_q[None].to(max_q.dtype)])
    next_max_q = torch.where(truncated, trunc_max_q, next_max_q)
    cut = truncated.clone()
    cut[-1] = True
    return q_lambda_returns(rewards, next_max_q, terminated, cut, gamma, lam)


# --------------------------------------------------------------------------------------------
# The learner
# --------------------------------------------------------------------------------------------
class PQNLearner(RolloutLearner):
    """PQN's Q-network, RAdam, acting, update and metric columns (see the module docstring);
    the run state, checkpoints, resume and how to build and start it: :class:`RolloutLearner`."""

    algo = "pqn"
    resume_ignore_fields = RESUME_IGNORE_FIELDS
    loss_keys = LOSS_KEYS

    def __init__(
        self, cfg: PQNConfig, obs_shape: tuple[int, ...], n_actions: int, device: torch.device
    ):
        super().__init__(cfg, device)
        self.n_actions = int(n_actions)
        self.net = make_pqn_network(cfg, obs_shape, n_actions, self.device).to(self.device)
        self.opt = torch.optim.RAdam(self.net.parameters(), lr=cfg.lr)

    # --- acting ---------------------------------------------------------------------------
    def epsilon(self) -> float:
        """The exploration rate now (:func:`epsilon_at` the learner's frames)."""
        return epsilon_at(self.cfg, self.frames)

    @torch.no_grad()
    def act(self, obs: torch.Tensor, epsilon: float) -> tuple[torch.Tensor, torch.Tensor]:
        """Epsilon-greedy actions for a batch of observations, and their max-Q (the bootstrap
        value of these observations): ``(actions [B] int64, max_q [B])``."""
        max_q, greedy = self.net(obs).max(dim=1)
        return epsilon_greedy_torch(greedy, epsilon, self.n_actions, self.act_gen), max_q

    @torch.no_grad()
    def max_q(self, obs: torch.Tensor) -> torch.Tensor:
        """``max_a Q(obs, a)`` ``[B]`` of the current network."""
        return self.net(obs).max(dim=1).values

    # --- learning -------------------------------------------------------------------------
    def q_lambda(self) -> float:
        """Lambda of this update's Q(lambda) targets (:func:`q_lambda_at` the learner's
        frames)."""
        return q_lambda_at(self.cfg, self.frames)

    def set_lr(self, frames: int) -> float:
        """Set and return the (annealed) learning rate at ``frames``."""
        lr = lr_at(self.cfg, frames)
        for group in self.opt.param_groups:
            group["lr"] = lr
        return lr

    def update(
        self, obs: torch.Tensor, actions: torch.Tensor, returns: torch.Tensor
    ) -> dict[str, float]:
        """``epochs`` passes of ``minibatches`` steps of MSE between ``Q(obs, actions)`` and
        ``returns`` over one flattened rollout (``obs [n, ...]``, ``actions [n]``, ``returns
        [n]``); return the mean ``td_loss`` and ``q_mean`` (Q of the taken actions) over the steps
        and ``grad_steps``."""
        cfg, net = self.cfg, self.net
        n = obs.shape[0]
        if obs.numel() <= _PREPARE_MAX_ELEMENTS:  # convert the frames once, not per minibatch
            obs = net.prepare(obs)
        sums = torch.zeros(2, dtype=torch.float64, device=self.device)
        steps = 0
        for _epoch in range(cfg.epochs):
            perm = torch.randperm(n, generator=self.mb_gen).to(self.device)
            for idx in perm.tensor_split(cfg.minibatches):
                q = net(obs[idx]).gather(1, actions[idx, None]).squeeze(1)
                loss = F.mse_loss(q, returns[idx])
                self.opt.zero_grad(set_to_none=True)
                loss.backward()
                if cfg.max_grad_norm is not None:
                    nn.utils.clip_grad_norm_(net.parameters(), cfg.max_grad_norm)
                self.opt.step()
                sums += torch.stack([loss.detach(), q.detach().mean()]).double()
                steps += 1
        td_loss, q_mean = (sums / max(steps, 1)).tolist()
        return {"td_loss": td_loss, "q_mean": q_mean, "grad_steps": steps}

    def train_on_rollout(
        self,
        obs: torch.Tensor,
        actions: torch.Tensor,
        returns: torch.Tensor,
        *,
        rollout_s: float,
        t_start: float,
    ) -> dict[str, float]:
        """The update on a ``[T, N]`` rollout and its targets, and the counters and metric sums
        (``update_s`` is measured from ``t_start``, the end of the rollout)."""
        stats = self.update(
            obs.reshape(-1, *obs.shape[2:]), actions.reshape(-1), returns.reshape(-1)
        )
        self.account(stats, rollout_s=rollout_s, update_s=time.perf_counter() - t_start)
        return stats

    # --- metrics --------------------------------------------------------------------------
    def algo_columns(self, frames: int) -> dict[str, Any]:
        """A row's PQN columns: the exploration rate at ``frames`` and the learning rate."""
        return {
            "epsilon": epsilon_at(self.cfg, frames),
            "lr": float(self.opt.param_groups[0]["lr"]),
        }
