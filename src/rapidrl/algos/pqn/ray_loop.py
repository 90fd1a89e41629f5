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
by num_steps x envs agent steps per update, a small part of its span). Faults and resume: as every
Ray driver's (:mod:`rapidrl.distributed.training`).
"""

from __future__ import annotations

import functools
import time
from collections.abc import Callable
from typing import Any

import numpy as np
import torch

from rapidrl.algos.pqn.config import PQNConfig
from rapidrl.algos.pqn.learner import METRIC_COLUMNS, PQNLearner, make_pqn_network, rollout_targets
from rapidrl.distributed.policy import QLambdaPolicy
from rapidrl.distributed.training import RayDriver, acting_config, ray_algorithm
from rapidrl.train.runner import run_training
from rapidrl.train.session import LogEvent

__all__ = ["actor_policy", "train_ray"]


def actor_policy(cfg: PQNConfig, obs_shape: tuple[int, ...], n_actions: int) -> QLambdaPolicy:
    """The acting policy of a Ray worker: the config's Q-network (channels_last off: it acts on
    small batches), epsilon-greedy at the rate the learner publishes. Module-level so that a
    ``functools.partial`` of it pickles."""
    return QLambdaPolicy(make_pqn_network(acting_config(cfg), obs_shape, n_actions), n_actions)


def train_ray(cfg: PQNConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train with rollouts from Ray workers (see the module docstring); return the summary."""
    algo = ray_algorithm(
        "pqn", "PQN", METRIC_COLUMNS, learner=PQNLearner.for_env, source=RaySource, iterate=iterate
    )
    return run_training(cfg, algo, on_log=on_log)


class RaySource(RayDriver):
    """The Ray workers, their statistics, and the policy the learner publishes to them (its
    network under ``q.``, the exploration rate as a buffer)."""

    def __init__(self, cfg: PQNConfig, env: Any, lrn: PQNLearner, env_seed: int):
        self.policy = QLambdaPolicy(lrn.net, env.n_actions).to(lrn.device)
        self.start(
            cfg,
            env,
            functools.partial(actor_policy, cfg, env.obs_shape, env.n_actions),
            seed=env_seed,
        )


def iterate(lrn: PQNLearner, source: RaySource, session: Any) -> None:
    """One PQN update on a rollout from the Ray workers."""
    cfg, device = lrn.cfg, lrn.device
    # 1. Learning rate (annealed over schedule_frames) and this update's exploration rate.
    lrn.set_lr(lrn.frames)
    eps = lrn.epsilon()
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
        dev(r.last_values, torch.float32), cfg.gamma, lrn.q_lambda(),
    )  # fmt: skip
    # 4. epochs x minibatches of MSE regression of Q(s, a) to the targets.
    actions = dev(r.actions, torch.long)
    lrn.train_on_rollout(dev(r.obs), actions, returns, rollout_s=rollout_s, t_start=t1)
