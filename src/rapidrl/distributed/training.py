"""What the trainers' Ray loops share (:mod:`rapidrl.algos.dqn.ray_loop`,
:mod:`rapidrl.algos.ppo.ray_loop`, :mod:`rapidrl.algos.pqn.ray_loop`): a Ray driver's
:class:`Algorithm` for the one run loop (:func:`ray_algorithm`), its experience source
(:class:`RayDriver`: starting a :class:`RaySampler` from a config's Ray fields -- ``ray``,
``workers``, ``envs_per_worker``, ``ray_cpus_per_worker``, ``backend``, ``num_workers`` --, the
synchronous rollout of PPO and PQN, the learner's torch threads), the workers' copy of the
config (:func:`acting_config`), and the accounting behind the ``ray_*`` metric columns and the
``ray`` section of ``summary.json``.

Faults and resume, the same in every driver: a worker that dies is rebuilt by Ray and asked again
until it delivers (its next batch or rollout starts new episodes); one that stays away 120 s ends
the run with :class:`WorkerFailedError`. The learner's checkpoint is the local loop's; on resume
the workers are started again with the restored weights and env seeds derived from the step
counter. The Ray fields may change on resume (another cluster, other worker counts: the rollout
size follows).

Importing this module does not import Ray.
"""

from __future__ import annotations

import dataclasses
import math
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from rapidrl.config import RAY_SERIAL, ConfigError, ray_workers
from rapidrl.distributed.batches import RolloutBatch, TransitionBatch, concat_rollouts
from rapidrl.distributed.sampler import (
    RaySampler,
    SerialSampler,
    WorkerFailedError,
    require_ray,
)
from rapidrl.train.runner import Algorithm

T = TypeVar("T")

__all__ = [
    "RAY_COLUMNS",
    "RayDriver",
    "RayStats",
    "acting_config",
    "check_ray",
    "check_ray_config",
    "learner_threads",
    "ray_algorithm",
    "start_sampler",
    "worker_backend",
]

RAY_COLUMNS = ("ray_workers", "ray_nodes", "ray_restarts", "ray_failures", "ray_dropped_batches")
"""Metric columns of a Ray run (see :meth:`RayStats.columns`)."""


def check_ray(address: str | None = None) -> None:
    """``ConfigError`` naming the install command when Ray is missing (checked before a run
    directory is made). ``--ray serial`` needs no Ray."""
    if address == RAY_SERIAL:
        return
    try:
        require_ray()
    except ImportError as exc:
        raise ConfigError(f"--ray: {exc}") from exc


def check_ray_config(cfg: Any) -> None:
    """A Ray driver's ``Algorithm.check``: ``cfg.ray`` set, and Ray there unless serial."""
    if cfg.ray is None:
        raise ConfigError("a Ray driver needs cfg.ray ('local', 'serial' or a cluster address)")
    check_ray(cfg.ray)


def ray_algorithm(name: str, label: str, columns: tuple[str, ...], **parts: Any) -> Algorithm:
    """A Ray driver's :class:`Algorithm` (see :func:`rapidrl.train.runner.run_training`):
    ``columns`` then the ``ray_*`` ones (:data:`RAY_COLUMNS`); ``parts`` the algorithm's own
    (``learner``, ``source``: a :class:`RayDriver`, ``iterate``, ...). The rows, the loop's
    threads, the progress bar's word and the ``ray`` section of summary.json are the source's
    (:meth:`RayDriver.row`, ...); Ray is checked before anything is built."""
    return Algorithm(
        name=name, label=label, title=f"{label} {{env}} (Ray)", columns=(*columns, *RAY_COLUMNS),
        row=lambda lrn, source, frames: source.row(lrn, frames),
        loop_threads=lambda cfg, source: source.loop_threads(cfg),
        describe=lambda source: source.describe(),
        extra=lambda source: {"ray": source.summary()},
        check=check_ray_config, **parts,
    )  # fmt: skip


def acting_config(cfg: T) -> T:
    """The config a Ray worker builds its acting network from: ``cfg`` with channels_last off
    (a worker acts on small batches)."""
    return dataclasses.replace(cfg, channels_last=False)


class RayDriver:
    """What every Ray driver's experience source holds and shows the run loop: the sampler,
    its statistics, the env processes' pids, the learner's threads beside the workers, the
    progress bar's word for the workers, the metrics row and summary, and shutting them down."""

    sampler: RaySampler | SerialSampler
    stats: RayStats
    policy: Any
    """What the learner publishes to the workers (its network, under the policy's prefix)."""

    def start(
        self, cfg: Any, env: Any, policy_factory: Callable[[], Any], *, seed: int, **kwargs: Any
    ) -> None:
        """Start the workers on ``cfg.env`` (:func:`start_sampler`; ``env``: the probe env, for
        its options; ``policy_factory()``: a worker's acting policy, picklable) and their
        statistics."""
        self.sampler = start_sampler(
            cfg, cfg.env, policy_factory, env_options=env.options, seed=seed, **kwargs
        )
        self.stats = RayStats(self.sampler, cfg.ray)

    def row(self, lrn: Any, frames: int) -> dict[str, Any]:
        """The metrics row at ``frames``: the learner's, then the ``ray_*`` columns."""
        return {**lrn.metrics_row(frames), **self.stats.columns()}

    def summary(self) -> Mapping[str, Any]:
        """The ``ray`` section of summary.json."""
        return self.stats.summary()

    @property
    def pids(self) -> list[int | None]:
        return self.sampler.pids

    def loop_threads(self, cfg: Any) -> int:
        return learner_threads(self.sampler, cfg.torch_threads, cfg.ray_cpus_per_worker)

    def describe(self) -> str:
        return f"ray x{self.sampler.num_workers}"

    def collect(self, lrn: Any, num_steps: int) -> tuple[RolloutBatch, list[float]]:
        """One synchronous rollout (PPO, PQN): ``self.policy`` (the learner's current weights)
        published, then ``num_steps`` steps of every env of every worker stacked along the env
        axis (``[num_steps, workers x envs_per_worker]``); its steps and episodes counted by
        ``lrn.episodes_done``; returns it and each worker's policy lag (also in the stats). All
        is acted with these weights (no policy lag); the slowest worker sets the pace."""
        self.sampler.set_weights(self.policy, version=lrn.counters.updates, force=True)
        try:
            rollouts = self.sampler.collect_rollouts(num_steps)
        except TimeoutError as exc:  # alive but stuck (or starved of CPUs)
            raise WorkerFailedError(str(exc)) from exc
        r = concat_rollouts(rollouts)
        lrn.episodes_done(r.meta.env_steps, r.meta.episode_returns, r.meta.episode_lengths)
        lags = []
        for part in rollouts:
            lags.append(self.sampler.policy_lag(part))
            self.stats.add(part, lags[-1])
        return r, lags

    def close(self) -> None:
        self.sampler.shutdown()


def worker_backend(backend: str) -> str:
    """The vector-env backend inside a Ray worker: ``auto`` -> ``serial`` (a worker owns
    ``ray_cpus_per_worker`` CPUs; env processes of its own would oversubscribe them), any other
    backend as given (e.g. ``ale``: ale_py's C++ vectorizer)."""
    return "serial" if backend == "auto" else backend


def start_sampler(
    cfg: Any,
    env: Any,
    policy_factory: Callable[[], Any],
    *,
    env_options: Any,
    seed: int,
    publish_every: int = 1,
) -> RaySampler | SerialSampler:
    """A :class:`RaySampler` for ``cfg`` (a DQN, PPO or PQN config with ``cfg.ray`` set).

    ``cfg.ray == "local"`` starts a new Ray instance on this machine (``ray.init(address=
    "local")``, stopped again by ``sampler.shutdown()``); ``"serial"`` gives a
    :class:`SerialSampler` (the same workers in this process, no Ray; ``workers auto`` = 1); any
    other value is the address of a running cluster. Failures a user can fix (no connection, not
    enough CPUs for the workers) raise ``ConfigError``.
    """
    vec_kwargs = {"num_workers": cfg.num_workers} if cfg.num_workers is not None else None
    if cfg.ray == RAY_SERIAL:
        workers = ray_workers(cfg.workers)
        return SerialSampler(
            env,
            policy_factory,
            1 if workers == "auto" else workers,
            cfg.envs_per_worker,
            backend=worker_backend(cfg.backend),
            env_options=env_options,
            vec_kwargs=vec_kwargs,
            seed=seed,
            publish_every=publish_every,
        )
    try:
        return RaySampler(
            env,
            policy_factory,
            ray_workers(cfg.workers),
            cfg.envs_per_worker,
            backend=worker_backend(cfg.backend),
            env_options=env_options,
            vec_kwargs=vec_kwargs,
            num_cpus_per_worker=cfg.ray_cpus_per_worker,
            address=cfg.ray,
            seed=seed,
            publish_every=publish_every,
        )
    except ConnectionError as exc:
        raise ConfigError(f"--ray {cfg.ray}: cannot connect to the Ray cluster: {exc}") from exc
    except TimeoutError as exc:
        raise ConfigError(
            f"{exc}; lower --workers or --ray-cpus-per-worker, or add nodes to the cluster"
        ) from exc


def learner_threads(
    sampler: RaySampler | SerialSampler, requested: int, cpus_per_worker: float
) -> int:
    """Torch threads of the learner: ``requested`` if set, else this machine's CPUs minus those
    reserved by the workers that run on this node (at least 1); every CPU with a
    :class:`SerialSampler` (its workers take turns with the learner)."""
    from rapidrl.hardware import cpu_count

    if requested:
        return int(requested)
    if isinstance(sampler, SerialSampler):
        return cpu_count()
    ray = require_ray()
    try:
        here = ray.get_runtime_context().get_node_id()
    except Exception:  # e.g. Ray client mode: assume the workers run elsewhere
        here = None
    local = sum(node == here for node in sampler.node_ids) * cpus_per_worker
    return max(1, cpu_count() - math.ceil(local))


class RayStats:
    """This session's data by node and by worker, the policy lag, and the sampler's counters.

    ``add(batch, lag)`` for every batch the learner takes; ``columns()`` gives the ``ray_*``
    metric columns (workers, nodes that delivered, restarts of failed workers, failures, batches
    dropped with a dead worker); ``summary()`` the ``ray`` section of ``summary.json``
    (``frames_by_node``: emulator frames each Ray node delivered).
    """

    def __init__(self, sampler: RaySampler | SerialSampler, address: str):
        self.sampler = sampler
        self.address = address
        self.frames_by_node: Counter[str] = Counter()
        self.frames_by_worker: Counter[int] = Counter()
        self.lag_sum = 0.0
        self.lag_n = 0

    def add(self, batch: TransitionBatch | RolloutBatch, lag: float) -> None:
        m = batch.meta
        self.frames_by_node[m.node_id] += int(m.frames)
        self.frames_by_worker[int(m.worker_id)] += int(m.frames)
        self.lag_sum += float(lag)
        self.lag_n += 1

    def columns(self) -> dict[str, int]:
        s = self.sampler
        return {
            "ray_workers": s.num_workers,
            "ray_nodes": len(self.frames_by_node),
            "ray_restarts": s.restarts,
            "ray_failures": s.failures,
            "ray_dropped_batches": s.dropped_batches,
        }

    def summary(self) -> dict[str, Any]:
        s = self.sampler
        return {
            "address": self.address,
            "workers": s.num_workers,
            "envs_per_worker": s.envs_per_worker,
            "nodes": len(self.frames_by_node),
            "frames_by_node": dict(self.frames_by_node),
            "frames_by_worker": {str(k): v for k, v in sorted(self.frames_by_worker.items())},
            "batches": s.batches,
            "bytes_received": s.bytes_received,
            "weight_puts": s.weight_puts,
            "weight_bytes": s.weight_bytes,
            "restarts": s.restarts,
            "failures": s.failures,
            "dropped_batches": s.dropped_batches,
            "policy_lag_mean": self.lag_sum / self.lag_n if self.lag_n else None,
        }
