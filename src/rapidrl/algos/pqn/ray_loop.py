"""PQN on Ray, synchronous: what ``train(cfg)`` runs when ``cfg.ray`` is set.

Each update: (1) set the annealed learning rate and the exploration rate of this update; (2)
publish the weights with that rate (one ``ray.put``; :class:`rapidrl.distributed.QLambdaPolicy`
carries it as a buffer) and collect one rollout of ``num_steps`` steps from every env of every
Ray worker (:meth:`RaySampler.collect_rollouts`: all acted with these weights), stacked along the
env axis (``[num_steps, workers x envs_per_worker]``); the workers record the max-Q of every
observation they act on, of the final observation at a time limit and of the observation after
the rollout; (3) the local loop's Q(lambda) targets
(:func:`rapidrl.algos.pqn.learner.rollout_targets`) from them; (4) the local loop's update phase,
:meth:`rapidrl.algos.pqn.learner.PQNLearner.train_on_rollout`; (5) log, checkpoint, check the stop
conditions on the one run loop (:func:`rapidrl.train.runner.run_training`), with the ``ray_*``
columns and the ``ray`` section of ``summary.json`` (see :mod:`rapidrl.algos.dqn.ray_loop`).

One difference from the local loop: the exploration rate is the schedule's value at the start of
each update for the whole rollout (the local loop moves it every vector step; the schedule moves
by num_steps x envs agent steps per update, a small part of its span). The slowest worker sets
the pace of every update. A worker that dies is rebuilt by Ray and asked again until it delivers;
after 120 s without it the run stops with :class:`rapidrl.distributed.WorkerFailedError`.

Resume: the learner's checkpoint is the local loop's; on resume the workers are started again
with the restored weights and env seeds derived from the step counter. The Ray fields may change
on resume (another cluster, other worker counts: the rollout size follows).
"""

from __future__ import annotations

import dataclasses
import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rapidrl.algos.pqn.config import PQNConfig
from rapidrl.algos.pqn.learner import (
    METRIC_COLUMNS,
    PQNLearner,
    epsilon_at,
    make_pqn_network,
    q_lambda_at,
    rollout_targets,
)
from rapidrl.distributed.policy import QLambdaPolicy
from rapidrl.distributed.training import (
    RAY_COLUMNS,
    RayDriver,
    RayStats,
    check_ray_config,
    start_sampler,
)
from rapidrl.train.runner import Algorithm, run_training
from rapidrl.train.session import LogEvent

__all__ = ["actor_policy", "train_ray"]


def actor_policy(cfg: PQNConfig, obs_shape: tuple[int, ...], n_actions: int) -> QLambdaPolicy:
    """The acting policy of a Ray worker: the config's Q-network (channels_last off: it acts on
    small batches), epsilon-greedy at the rate the learner publishes. Module-level so that a
    ``functools.partial`` of it pickles."""
    cfg = dataclasses.replace(cfg, channels_last=False)
    return QLambdaPolicy(make_pqn_network(cfg, obs_shape, n_actions), n_actions)


def train_ray(cfg: PQNConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train with rollouts from Ray workers (see the module docstring); return the summary."""
    algo = Algorithm(
        name="pqn", label="PQN", title="PQN {env} (Ray)", columns=(*METRIC_COLUMNS, *RAY_COLUMNS),
        learner=lambda cfg, env, device: PQNLearner(cfg, env.obs_shape, env.n_actions, device),
        source=RaySource, iterate=iterate,
        row=lambda lrn, source, frames: {**lrn.metrics_row(frames), **source.stats.columns()},
        loop_threads=lambda cfg, source: source.loop_threads(cfg),
        describe=lambda source: source.describe(),
        extra=lambda source: {"ray": source.stats.summary()},
        check=check_ray_config,
    )  # fmt: skip
    return run_training(cfg, algo, on_log=on_log)


class RaySource(RayDriver):
    """The Ray workers, their statistics, and the policy the learner publishes to them (its
    network under ``q.``, the exploration rate as a buffer)."""

    def __init__(self, cfg: PQNConfig, env: Any, lrn: PQNLearner, env_seed: int):
        self.policy = QLambdaPolicy(lrn.net, env.n_actions).to(lrn.device)
        self.sampler = start_sampler(
            cfg,
            cfg.env,
            functools.partial(actor_policy, cfg, env.obs_shape, env.n_actions),
            env_options=env.options,
            seed=env_seed,
        )
        self.stats = RayStats(self.sampler, cfg.ray)


def iterate(lrn: PQNLearner, source: RaySource, session: Any) -> None:
    """One PQN update on a rollout from the Ray workers."""
    cfg, device = lrn.cfg, lrn.device
    # 1. Learning rate (annealed over schedule_frames) and this update's exploration rate.
    lrn.set_lr(lrn.frames)
    eps = epsilon_at(cfg, lrn.frames)
    source.policy.epsilon.fill_(eps)
    # 2. Rollout: num_steps of every env of every worker, all with these weights.
    t0 = time.perf_counter()
    r, _ = source.collect(lrn, cfg.num_steps)
    rollout_s = time.perf_counter() - t0
    session.bar.update(lrn.frames, lrn.tracker, upd=lrn.counters.updates, eps=eps)

    # 3. Q(lambda) targets from the workers' max-Q values.
    t1 = time.perf_counter()

    def dev(x: np.ndarray, dtype: torch.dtype | None = None) -> torch.Tensor:
        return torch.as_tensor(np.ascontiguousarray(x), dtype=dtype, device=device)

    returns = rollout_targets(
        dev(r.rewards, torch.float32) * cfg.reward_scale, dev(r.values, torch.float32),
        dev(r.terminated), dev(r.truncated), dev(r.final_values, torch.float32),
        dev(r.last_values, torch.float32), cfg.gamma, q_lambda_at(cfg, lrn.frames),
    )  # fmt: skip
    # 4. epochs x minibatches of MSE regression of Q(s, a) to the targets.
    actions = dev(r.actions, torch.long)
    lrn.train_on_rollout(dev(r.obs), actions, returns, rollout_s=rollout_s, t_start=t1)
