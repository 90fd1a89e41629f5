"""The DQN family on Ray, Ape-X style: what ``train(cfg)`` runs when ``cfg.ray`` is set.

Layout. ``workers`` Ray actors (:class:`rapidrl.distributed.RolloutWorker`) each step
``envs_per_worker`` envs with an acting copy of the Q-network and a fixed exploration rate of their
own (Ape-X: ``eps_i = 0.4 ** (1 + 7 i / (workers - 1))``; all 0 when the config turns epsilon off
with ``epsilon_start = epsilon_end = 0``, e.g. noisy nets). This process is the learner: it takes
the workers' batches as they complete (:meth:`RaySampler.next_transitions`), appends them to its
replay (one stream per worker env; a restarted worker's streams are cut, so n-step returns never
join two actor lives) and runs the updates that are due at the replay ratio of the local loop: one
update of ``batch_size x steps_per_update`` transitions per ``steps_per_update`` agent steps
collected (after the prefill of ``learning_starts``). The workers cannot outrun the learner: each
has one request in flight and gets the next one only when the learner takes its batch, so the
ratio holds however many workers there are. The online weights go to the object store every
``ray_publish_every`` updates (one ``ray.put``); a worker loads the newest with its next request.
Every batch carries the weights version that acted: the ``policy_lag`` column is the mean of
learner updates minus that version.

The run is the local loop's: the same run directory (config.json, metrics.csv + TensorBoard,
checkpoints, summary.json, learning curve), target sync by agent steps, metric rows and
checkpoints by seconds and/or frames, stop on solved / max_frames / max_minutes / Ctrl-C / an
``on_log`` callback. Extra columns: ``ray_workers``, ``ray_nodes`` (nodes that delivered data
this session), ``ray_restarts`` (failed workers that Ray rebuilt and that delivered again),
``ray_failures``, ``ray_dropped_batches``; ``summary.json`` gains a ``ray`` section
(``frames_by_node``, ``frames_by_worker``, epsilons, bytes, weight puts, mean policy lag).

Faults. A worker that dies (killed, OOM, node lost) is rebuilt by Ray; the batch it was
collecting is lost, its next batch starts new episodes with the newest weights, and the run goes
on meanwhile with the other workers. A worker that stays away ``restart_timeout`` (120 s) ends
the run with :class:`rapidrl.distributed.WorkerFailedError`; an exception inside a worker (env or
policy bug) with :class:`rapidrl.distributed.RolloutWorkerError`.

Checkpoints and resume: the learner's checkpoint is the local loop's (nets, optimizer, counters,
episode window, clock, RNGs, and with ``save_replay`` the replay). On resume the workers are simply
started again, with the restored weights and env seeds derived from the step counter (fresh
episodes). The Ray fields may change on resume (another cluster, other worker counts); a replay
saved with another number of streams (``workers x envs_per_worker``) is not loaded (warning) and
refills. Not reproducible step for step: which worker's batch arrives first depends on timing.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np

from rapidrl.algos.dqn.config import DQNConfig
from rapidrl.algos.dqn.learner import METRIC_COLUMNS, DQNLearner, make_q_network
from rapidrl.config import ConfigError
from rapidrl.distributed.policy import QPolicy, apex_epsilons
from rapidrl.distributed.sampler import WorkerFailedError
from rapidrl.distributed.training import RayDriver, acting_config, ray_algorithm
from rapidrl.train.runner import run_training
from rapidrl.train.session import LogEvent

__all__ = ["actor_policy", "train_ray"]


def actor_policy(cfg: DQNConfig, obs_shape: tuple[int, ...], n_actions: int) -> QPolicy:
    """The acting policy of a Ray worker: the config's Q-network (channels_last off: it acts on
    small batches), epsilon-greedy. Module-level so that ``functools.partial`` of it pickles."""
    return QPolicy(make_q_network(acting_config(cfg), obs_shape, n_actions), n_actions)


def worker_epsilons(cfg: DQNConfig, num_workers: int) -> np.ndarray:
    """Ape-X epsilons, or zeros when the config switches epsilon off (noisy-net exploration)."""
    if cfg.epsilon_start == 0 and cfg.epsilon_end == 0:
        return np.zeros(num_workers)
    return apex_epsilons(num_workers)


def train_ray(cfg: DQNConfig, *, on_log: Callable[[LogEvent], bool | None] | None = None) -> dict:
    """Train with Ray workers (see the module docstring); return the summary. The run loop
    (:func:`rapidrl.train.runner.run_training`) calls :func:`iterate` once per batch."""
    algo = ray_algorithm(
        "dqn", "DQN", METRIC_COLUMNS,
        learner=lambda cfg, env, device: DQNLearner(
            cfg, env.obs_shape, env.obs_space.dtype, env.n_actions, device
        ),
        source=RaySource, start=_start, iterate=iterate, grad_steps=False,
    )  # fmt: skip
    return run_training(cfg, algo, on_log=on_log)


class RaySource(RayDriver):
    """The Ray workers (each with its Ape-X epsilon), their statistics, and the batches taken
    from them that the learner has not consumed yet."""

    def __init__(self, cfg: DQNConfig, env: Any, lrn: DQNLearner, env_seed: int):
        self.policy = QPolicy(lrn.q, env.n_actions)  # what is published: q's weights under "q."
        self.start(
            cfg, env, functools.partial(actor_policy, cfg, lrn.obs_shape, env.n_actions),
            seed=env_seed, publish_every=cfg.ray_publish_every,
        )  # fmt: skip
        try:
            self.sampler.epsilons = worker_epsilons(cfg, self.sampler.num_workers)
            self.streams = self.sampler.num_workers * self.sampler.envs_per_worker
            _check_streams(cfg, self.streams)
        except BaseException:
            self.close()
            raise
        self.eps = float(np.mean(self.sampler.epsilons))
        self.pending: list[Any] = []

    def row(self, lrn: DQNLearner, frames: int) -> dict[str, Any]:
        """The learner's row (with the workers' mean epsilon), then the Ray columns."""
        return {**lrn.metrics_row(frames, self.eps), **self.stats.columns()}

    def summary(self) -> dict[str, Any]:
        """The ``ray`` section of summary.json, with each worker's epsilon."""
        return {**self.stats.summary(), "epsilons": self.sampler.epsilons.tolist()}


def _start(lrn: DQNLearner, source: RaySource) -> None:
    lrn.attach_replay(source.streams)  # one stream per worker env
    # Weights to the workers after every update (sent every ray_publish_every).
    sampler = source.sampler
    lrn.on_update = lambda updates: sampler.set_weights(source.policy, version=updates)
    sampler.set_weights(source.policy, version=lrn.counters.updates, force=True)


def iterate(lrn: DQNLearner, source: RaySource, session: Any) -> None:
    """One worker batch into the replay, and the updates due for it."""
    cfg, sampler = lrn.cfg, source.sampler
    # 1. The batches that completed (each worker has been sent its next request).
    if not source.pending:
        try:
            source.pending = sampler.next_transitions(
                cfg.ray_batch_steps, timeout=cfg.actor_timeout_s
            )
        except TimeoutError as exc:  # alive but stuck (or starved of CPUs)
            raise WorkerFailedError(f"{exc} (--actor-timeout-s)") from exc
    batch = source.pending.pop(0)
    # 2. Into the replay; learn the updates due; count (target sync).
    lag = sampler.policy_lag(batch)
    batch.add_to(lrn.rb)
    lrn.observe(batch.meta.env_steps)
    meta = batch.meta
    lrn.tracker.add_episodes(
        meta.episode_returns, meta.episode_lengths, lrn.frames, lrn.clock.seconds
    )
    lrn.add_lag(lag)
    source.stats.add(batch, lag)
    session.bar.update(lrn.frames, lrn.tracker, eps=source.eps, upd=lrn.counters.updates, lag=lag)


def _check_streams(cfg: DQNConfig, streams: int) -> None:
    """The local loop's replay checks, for ``streams = workers x envs_per_worker``."""
    slots = math.ceil(cfg.buffer_size / streams)
    if slots < cfg.n_step + 1:
        raise ConfigError(
            f"--buffer-size {cfg.buffer_size} over {streams} Ray envs (--workers x "
            f"--envs-per-worker) leaves {slots} transitions per env, fewer than --n-step "
            f"{cfg.n_step} + 1; raise --buffer-size or use fewer envs"
        )
    if cfg.learning_starts and cfg.learning_starts < streams * cfg.n_step:
        raise ConfigError(
            f"--learning-starts ({cfg.learning_starts}) must be >= the {streams} Ray envs "
            f"(--workers x --envs-per-worker) x --n-step ({streams * cfg.n_step}) so that the "
            "first batch can be sampled"
        )
