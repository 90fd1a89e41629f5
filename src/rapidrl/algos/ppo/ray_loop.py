"""PPO on Ray, synchronous: what ``train(cfg)`` runs when ``cfg.ray`` is set.

Each update: (1) set the annealed learning rate; (2) publish the weights (one ``ray.put``) and
collect one rollout of ``num_steps`` steps from every env of every Ray worker
(:meth:`RaySampler.collect_rollouts`: all acted with these weights, so there is no policy lag;
the ``policy_lag`` column shows it) and stack them along the env axis
(:func:`rapidrl.distributed.concat_rollouts`: ``[num_steps, workers x envs_per_worker]``);
(3) GAE (:func:`rapidrl.algos.ppo.gae.gae`) with ``next_values`` from the batch, so a time limit
bootstraps from ``V(final_obs)`` computed by the worker and the rollout's last step from the value
of the observation after it; (4) the local loop's update phase,
:meth:`rapidrl.algos.ppo.learner.PPOLearner.train_on_rollout` (epochs x minibatches of shuffled
steps);
(5) log, checkpoint, check the stop conditions -- all as in the local loop, with the same run
directory and checkpoints, plus the ``ray_*`` columns and the ``ray`` section of ``summary.json``
(see :mod:`rapidrl.algos.dqn.ray_loop`).

The workers act with their own copy of the config's feed-forward network
(:class:`rapidrl.distributed.ActorCriticPolicy` around :func:`make_policy`): discrete actions, or
a Gaussian policy's over a bounded ``Box`` (sampled actions kept, clipped to the bounds where the
worker sends them, as in the local loop; with ``--reward-norm`` the driver scales the rewards by
the running discounted return of each env, carried from rollout to rollout); recurrent PPO is not
supported on Ray yet (``ConfigError``). Faults and resume: as every Ray driver's
(:mod:`rapidrl.distributed.training`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rapidrl.algos.ppo.config import PPOConfig
from rapidrl.algos.ppo.gae import gae
from rapidrl.algos.ppo.learner import METRIC_COLUMNS, PPOLearner, TrainBatch, make_policy
from rapidrl.config import ConfigError
from rapidrl.distributed.policy import ActorCriticPolicy
from rapidrl.distributed.training import RayDriver, acting_config, ray_algorithm
from rapidrl.nets.normalize import scale_rewards
from rapidrl.train.runner import run_training
from rapidrl.train.session import LogEvent

__all__ = ["actor_policy", "train_ray"]


def actor_policy(
    cfg: PPOConfig, obs_shape: tuple[int, ...], n_actions: int, continuous: bool = False
) -> ActorCriticPolicy:
    """The acting policy of a Ray worker: the config's feed-forward actor-critic (channels_last
    off: it acts on small batches), sampling its actions (``continuous``: a Gaussian policy over
    ``n_actions`` dims). Module-level so that a ``functools.partial`` of it pickles."""
    net = make_policy(acting_config(cfg), obs_shape, n_actions, continuous=continuous)
    return ActorCriticPolicy(net)


def train_ray(cfg: PPOConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train with rollouts from Ray workers (see the module docstring); return the summary.
    The run loop (:func:`rapidrl.train.runner.run_training`) calls :func:`iterate` once per
    update."""
    algo = ray_algorithm(
        "ppo", "PPO", (*METRIC_COLUMNS, "policy_lag"), learner=PPOLearner.for_env,
        source=RaySource, iterate=iterate, recurrent=False, continuous=not cfg.recurrent,
    )  # fmt: skip
    return run_training(cfg, algo, on_log=on_log)


class RaySource(RayDriver):
    """The Ray workers and what the driver keeps of them: the sampler, its statistics, the
    policy lag of each worker rollout since the last row, and whether each env's last step ended
    its episode (the next rollout's ``starts[0]``)."""

    def __init__(self, cfg: PPOConfig, env: Any, lrn: PPOLearner, env_seed: int):
        self.policy = ActorCriticPolicy(lrn.net)  # what is published: net's weights under "net."
        self.start(
            cfg,
            env,
            functools.partial(actor_policy, cfg, env.obs_shape, env.n_actions, env.continuous),
            seed=env_seed,
        )
        n_envs = self.sampler.num_workers * self.sampler.envs_per_worker
        if cfg.num_steps * n_envs < cfg.minibatches:
            self.close()
            raise ConfigError(
                f"--minibatches ({cfg.minibatches}) exceeds the rollout's --num-steps x --workers "
                f"x --envs-per-worker ({cfg.num_steps * n_envs}) agent steps"
            )
        self.last_done = np.ones(n_envs, dtype=bool)
        self.lags: list[float] = []
        # --reward-norm: each env's discounted return so far (the local loop's running returns).
        self.running_returns = torch.zeros(n_envs, dtype=torch.float64, device=lrn.device)

    def row(self, lrn: PPOLearner, frames: int) -> dict[str, Any]:
        """The learner's row, the mean policy lag of the rollouts since the last, the Ray columns."""
        lags, self.lags = self.lags, []
        row = {**lrn.metrics_row(frames), "policy_lag": sum(lags) / len(lags) if lags else 0.0}
        return {**row, **self.stats.columns()}


def iterate(lrn: PPOLearner, source: RaySource, session: Any) -> None:
    """One PPO update on a rollout from the Ray workers."""
    cfg = lrn.cfg
    # 1. Learning rate, annealed linearly to 0 over lr_anneal_frames.
    lrn.set_lr(lrn.frames)
    # 2. Rollout: num_steps of every env of every worker, all with these weights.
    t0 = time.perf_counter()
    r, lags = source.collect(lrn, cfg.num_steps)
    source.lags += lags
    rollout_s = time.perf_counter() - t0
    # 3. Advantages: GAE with the workers' bootstrap values (truncation: V(final_obs); the last
    #    step: V of the observation after the rollout).
    t1 = time.perf_counter()
    rewards = None
    if getattr(lrn.net, "reward_rms", None) is not None:  # --reward-norm, as the local loop
        raw = torch.from_numpy(r.rewards).to(lrn.device)
        ends = torch.from_numpy(r.terminated | r.truncated).to(lrn.device)
        valid = torch.ones_like(ends)
        rewards = scale_rewards(
            raw, ends, valid, source.running_returns, cfg.gamma, lrn.net.reward_rms
        )
    batch = _to_batch(r, source.last_done, lrn.device, cfg.gamma, cfg.gae_lambda, rewards)
    source.last_done = r.terminated[-1] | r.truncated[-1]
    # 4. PPO epochs: the local loop's update phase.
    lrn.train_on_rollout(batch, rollout_s=rollout_s, t_start=t1)
    session.bar.update(lrn.frames, lrn.tracker, upd=lrn.counters.updates)


def _to_batch(
    r, last_done: np.ndarray, device, gamma: float, lam: float, rewards: torch.Tensor | None = None
) -> TrainBatch:
    """A stacked :class:`rapidrl.distributed.RolloutBatch` -> the trainer's
    :class:`rapidrl.algos.ppo.learner.TrainBatch` on ``device``, with GAE advantages and returns
    (of ``rewards [T, N]`` on ``device`` where given: the scaled ones, else the batch's). Every env holds
    ``num_steps`` steps (``valid`` all True). ``starts[t]``: ``obs[t]`` opens an episode
    (``starts[0]`` from ``last_done``, the previous rollout's last step; unused by the
    feed-forward update). Actions: ``[T, N]`` int64, or ``[T, N, A]`` float32 as sampled."""
    t_len, n = r.rewards.shape

    def dev(x: np.ndarray) -> torch.Tensor:
        return torch.from_numpy(np.ascontiguousarray(x)).to(device)

    values = dev(r.values)
    terminated, truncated = dev(r.terminated), dev(r.truncated)
    advantages, returns = gae(
        dev(r.rewards) if rewards is None else rewards,
        values,
        dev(r.next_values()),
        terminated,
        truncated,
        gamma,
        lam,
    )
    done = terminated | truncated
    starts = torch.empty_like(done)
    starts[0] = dev(last_done) if len(last_done) == n else True
    starts[1:] = done[:-1]
    return TrainBatch(
        dev(r.obs),
        dev(r.actions) if r.actions.dtype.kind == "f" else dev(r.actions).long(),
        dev(r.logprobs),
        values,
        advantages,
        returns,
        starts,
        torch.ones((t_len, n), dtype=torch.bool, device=device),
        torch.full((n,), t_len, dtype=torch.int64),
        None,
    )
