"""Samplers: many :class:`RolloutWorker` s behind one learner-facing API, on Ray or in-process.

Both samplers have the same calls::

    sampler.set_weights(policy, version)        # publish (ONE ray.put every `publish_every`)
    batches = sampler.next_transitions(64)      # DQN / Ape-X: whatever batches completed (>= 1)
    rollouts = sampler.collect_rollouts(128)    # PPO: one rollout from every worker, synchronous
    sampler.shutdown()

``RaySampler`` keeps exactly one request in flight per actor: when a batch arrives the actor gets
its next request at once (with the latest published weights if its own are older), so actors never
wait for the learner. Weights are published as ``{name: np.ndarray}`` with one ``ray.put`` and the
``ObjectRef`` is passed to each stale actor with its next request (Ray moves the object once per
node). Each batch carries the weights version that acted; ``sampler.policy_lag(batch)`` is the
learner's version minus that.

Faults: an actor that dies (killed, OOM, segfault, node lost) is restarted by Ray
(``max_restarts=-1``); the request it was running is dropped whole (``RayActorError``: nothing of
it reaches the learner), ``failures`` / ``dropped_batches`` count it, the worker is asked again
with backoff (requests sent while Ray rebuilds it fail fast with ``ActorUnavailableError``) and its
next request carries the latest weights (a rebuilt actor starts from the factory's); ``restarts``
counts the rebuilt workers that delivered again (new pid). A worker that delivers nothing for
``restart_timeout`` seconds after failing raises :class:`WorkerFailedError`; an exception *inside*
a worker (env or policy bug) is not retried: it raises :class:`RolloutWorkerError` with the
worker's traceback. Every wait has a timeout.

``SerialSampler`` runs the same workers one after the other in this process (no Ray): the ground
truth, and the single-process figure of the benchmark.
"""

from __future__ import annotations

import logging
import math
import time
from collections import Counter
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import torch

from rapidrl.distributed.batches import RolloutBatch, TransitionBatch
from rapidrl.distributed.policy import apex_epsilons, weights_to_numpy
from rapidrl.distributed.worker import RolloutWorker

__all__ = [
    "RaySampler",
    "RolloutWorkerError",
    "SerialSampler",
    "WorkerFailedError",
    "require_ray",
]

log = logging.getLogger("rapidrl.distributed")

RAY_MISSING = "Ray is not installed: pip install -e '.[ray]' in the rapidrl checkout"


def require_ray():
    """Import and return ``ray``, or raise ImportError with the install command."""
    try:
        import ray
    except ImportError as exc:
        raise ImportError(RAY_MISSING) from exc
    return ray


def _cause(exc: BaseException) -> str:
    """``Type: message`` of the exception a Ray task raised (without Ray's wrapping)."""
    cause = getattr(exc, "cause", None) or exc
    return f"{type(cause).__name__}: {cause}"


class RolloutWorkerError(RuntimeError):
    """Code inside a rollout worker raised (env, policy); the message names the worker."""


class WorkerFailedError(RuntimeError):
    """A worker failed and delivered nothing for ``restart_timeout`` seconds."""


class _SamplerBase:
    """Weights versioning, epsilons and the counters both samplers share."""

    num_workers: int
    envs_per_worker: int

    def _init_common(self, publish_every: int, epsilons: Any) -> None:
        if publish_every < 1:
            raise ValueError(f"publish_every must be >= 1, got {publish_every}")
        self.publish_every = int(publish_every)
        self.version = -1  # latest version given to set_weights
        self.published_version: int | None = None  # latest version the workers may fetch
        self.epsilons = (
            apex_epsilons(self.num_workers) if epsilons is None else np.asarray(epsilons, float)
        )
        if self.epsilons.shape[:1] != (self.num_workers,):
            raise ValueError(
                f"epsilons must have one entry (or row) per worker ({self.num_workers}), "
                f"got shape {self.epsilons.shape}"
            )
        self.batches = 0
        self.env_steps = 0
        self.frames = 0
        self.bytes_received = 0
        self.weight_puts = 0
        self.weight_bytes = 0  # bytes of one published weights object
        self.failures = 0  # incidents: a worker's requests started failing
        self.restarts = 0  # failed workers that delivered again (rebuilt: new pid)
        self.dropped_batches = 0  # requests whose data was lost to a failure
        self.batches_per_node: Counter[str] = Counter()
        self.batches_per_worker: Counter[int] = Counter()

    def _due(self, version: int, force: bool) -> bool:
        self.version = version
        return (
            force
            or self.published_version is None
            or version - self.published_version >= self.publish_every
        )

    def policy_lag(self, batch: TransitionBatch | RolloutBatch) -> int:
        """Learner version (last ``set_weights``) minus the version that acted in ``batch``."""
        return self.version - batch.meta.weights_version

    def _account(self, batch: TransitionBatch | RolloutBatch) -> None:
        self.batches += 1
        self.env_steps += batch.meta.env_steps
        self.frames += batch.meta.frames
        self.bytes_received += batch.nbytes
        self.batches_per_node[batch.meta.node_id] += 1
        self.batches_per_worker[batch.meta.worker_id] += 1

    def stats(self) -> dict[str, Any]:
        """Counters for logging (``ray/...`` names)."""
        return {
            "ray/workers": self.num_workers,
            "ray/batches": self.batches,
            "ray/env_steps": self.env_steps,
            "ray/frames": self.frames,
            "ray/bytes_received": self.bytes_received,
            "ray/weight_puts": self.weight_puts,
            "ray/failures": self.failures,
            "ray/restarts": self.restarts,
            "ray/dropped_batches": self.dropped_batches,
            "ray/nodes": len(self.batches_per_node),
        }

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.shutdown()

    def shutdown(self) -> None:
        raise NotImplementedError


class SerialSampler(_SamplerBase):
    """``num_workers`` :class:`RolloutWorker` s in this process, served round robin.

    Same calls as :class:`RaySampler`. ``next_transitions`` returns one batch per call (the next
    worker in turn); published weights are loaded into every worker at once.
    """

    def __init__(
        self,
        env: Any,
        policy_factory: Callable[[], torch.nn.Module],
        num_workers: int = 1,
        envs_per_worker: int = 1,
        *,
        backend: str = "serial",
        env_options: Any = None,
        vec_kwargs: Mapping[str, Any] | None = None,
        seed: int = 0,
        publish_every: int = 1,
        epsilons: Any = None,
        torch_threads: int | None = None,
    ):
        if num_workers < 1 or envs_per_worker < 1:
            raise ValueError("num_workers and envs_per_worker must be >= 1")
        self.num_workers, self.envs_per_worker = int(num_workers), int(envs_per_worker)
        self._init_common(publish_every, epsilons)
        self.workers: list[RolloutWorker] = []
        try:
            for i in range(self.num_workers):
                self.workers.append(
                    RolloutWorker(
                        env,
                        policy_factory,
                        self.envs_per_worker,
                        backend=backend,
                        env_options=env_options,
                        vec_kwargs=vec_kwargs,
                        worker_id=i,
                        seed=seed,
                        torch_threads=torch_threads,
                    )
                )
        except BaseException:
            self.shutdown()
            raise
        self._next = 0

    @property
    def pids(self) -> list[int]:
        """No processes of their own: the workers run in this one."""
        return []

    def set_weights(self, weights: Any, version: int | None = None, *, force: bool = False) -> bool:
        """Publish ``weights`` (module or state dict) as ``version`` (default: last + 1) if due."""
        version = self.version + 1 if version is None else int(version)
        if not self._due(version, force):
            return False
        arrays = weights_to_numpy(weights)
        for w in self.workers:
            w.set_weights(arrays, version)  # load_state_dict copies: later updates do not leak
        self.published_version = version
        self.weight_puts += 1
        self.weight_bytes = sum(a.nbytes for a in arrays.values())
        return True

    def next_transitions(
        self, num_steps: int, timeout: float | None = None
    ) -> list[TransitionBatch]:
        i = self._next
        self._next = (i + 1) % self.num_workers
        batch = self.workers[i].collect_transitions(num_steps, self.epsilons[i])
        self._account(batch)
        return [batch]

    def collect_rollouts(self, num_steps: int, timeout: float | None = None) -> list[RolloutBatch]:
        out = [w.collect_rollout(num_steps) for w in self.workers]
        for b in out:
            self._account(b)
        return out

    def shutdown(self) -> None:
        for w in self.workers:
            try:
                w.close()
            except Exception:
                pass
        self.workers = []


class RaySampler(_SamplerBase):
    """``num_workers`` Ray actors, each a :class:`RolloutWorker` with ``envs_per_worker`` envs.

    Args:
        env, policy_factory, backend, env_options, vec_kwargs, seed: as :class:`RolloutWorker`.
        num_workers: an int, or ``"auto"``: fill the cluster's CPUs
            (``cluster CPUs // num_cpus_per_worker``).
        envs_per_worker: envs in each actor's vector env.
        num_cpus_per_worker: Ray CPUs each actor reserves (also its torch threads).
        resources: extra Ray resources per actor (e.g. ``{"actor_node": 1}``).
        address: Ray cluster to attach to (``"auto"``, ``"ray://..."``, a GCS address); None
            or ``"local"`` starts a new local Ray unless one is running in this process already
            (``ray.init(address=None)`` itself would attach to the newest Ray cluster started on
            this machine, e.g. another user's or test's, and then refuse ``num_cpus``).
        publish_every: put the weights in the object store once per this many versions.
        epsilons: per-worker exploration for ``next_transitions`` (default Ape-X's
            ``0.4 ** (1 + 7 i / (N - 1))``); may be changed any time (``sampler.epsilons``).
        spread: schedule actors with the ``SPREAD`` strategy (over all nodes).
        restart_timeout: seconds a failed worker may take to deliver again before
            :class:`WorkerFailedError` (its requests are retried with backoff meanwhile).
        start_timeout: seconds for all actors to be built (waits for cluster resources).
        ray_init_kwargs: extra ``ray.init`` arguments when this sampler starts/attaches Ray.

    ``shutdown()`` kills the actors and, if this sampler called ``ray.init``, ``ray.shutdown()``
    (a local Ray leaves no process behind).
    """

    def __init__(
        self,
        env: Any,
        policy_factory: Callable[[], torch.nn.Module],
        num_workers: int | str = "auto",
        envs_per_worker: int = 1,
        *,
        backend: str = "serial",
        env_options: Any = None,
        vec_kwargs: Mapping[str, Any] | None = None,
        num_cpus_per_worker: float = 1.0,
        resources: Mapping[str, float] | None = None,
        address: str | None = None,
        seed: int = 0,
        publish_every: int = 1,
        epsilons: Any = None,
        spread: bool = True,
        restart_timeout: float = 120.0,
        start_timeout: float = 180.0,
        ray_init_kwargs: Mapping[str, Any] | None = None,
    ):
        ray = require_ray()
        self._ray = ray
        self._actors: list = []
        self._owns_ray = False
        if envs_per_worker < 1:
            raise ValueError(f"envs_per_worker must be >= 1, got {envs_per_worker}")
        if ray.is_initialized():
            if address is not None:
                log.info("Ray is already initialized in this process; address=%r unused", address)
        else:
            kwargs = {"include_dashboard": False, "log_to_driver": True}
            kwargs.update(ray_init_kwargs or {})
            ray.init(address=address or "local", **kwargs)
            self._owns_ray = True
        try:
            if num_workers == "auto":
                cpus = ray.cluster_resources().get("CPU", 0.0)
                num_workers = max(1, int(cpus // num_cpus_per_worker))
                log.info("--workers auto: %d actors for %g cluster CPUs", num_workers, cpus)
            if not isinstance(num_workers, int) or num_workers < 1:
                raise ValueError(
                    f"num_workers must be a positive int or 'auto', got {num_workers!r}"
                )
            self.num_workers, self.envs_per_worker = num_workers, int(envs_per_worker)
            self._init_common(publish_every, epsilons)
            actor_cls = ray.remote(max_restarts=-1, max_task_retries=0)(RolloutWorker)
            opts: dict[str, Any] = {"num_cpus": num_cpus_per_worker}
            if resources:
                opts["resources"] = dict(resources)
            if spread:
                opts["scheduling_strategy"] = "SPREAD"
            threads = max(1, math.floor(num_cpus_per_worker))
            self._actors = [
                actor_cls.options(**opts).remote(
                    env,
                    policy_factory,
                    self.envs_per_worker,
                    backend=backend,
                    env_options=env_options,
                    vec_kwargs=vec_kwargs,
                    worker_id=i,
                    seed=seed,
                    torch_threads=threads,
                )
                for i in range(self.num_workers)
            ]
            self._weights_ref = None
            self._actor_version: list[int | None] = [None] * self.num_workers
            self.restart_timeout = float(restart_timeout)
            self._failures = [0] * self.num_workers  # failed requests in a row, per worker
            self._down_since = [0.0] * self.num_workers
            self._retry_at = [0.0] * self.num_workers
            self._inflight: dict[Any, tuple[int, str]] = {}  # ObjectRef -> (worker, kind)
            self.worker_info = self._get_all(
                [a.info.remote() for a in self._actors], start_timeout, "start"
            )
            self._pids = [info["pid"] for info in self.worker_info]
        except BaseException:
            self.shutdown()
            raise

    # --- helpers -------------------------------------------------------------------------------
    def _get_all(self, refs: list, timeout: float, what: str) -> list:
        ray = self._ray
        ready, pending = ray.wait(refs, num_returns=len(refs), timeout=timeout)
        if pending:
            cpus = ray.cluster_resources().get("CPU", 0.0)
            raise TimeoutError(
                f"{len(pending)} of {len(refs)} rollout workers did not {what} within "
                f"{timeout:g}s (cluster has {cpus:g} CPUs; each worker asks for its num_cpus)"
            )
        out = []
        for i, ref in enumerate(refs):
            try:
                out.append(ray.get(ref))
            except (ray.exceptions.RayTaskError, ray.exceptions.RayActorError) as exc:
                # An exception in the constructor (bad env id, policy factory) kills the actor.
                raise RolloutWorkerError(f"rollout worker {i} failed to {what}: {exc}") from exc
        return out

    @property
    def actors(self) -> list:
        """The Ray actor handles, index = worker id (tests kill them)."""
        return list(self._actors)

    @property
    def node_ids(self) -> list[str]:
        """Node of each worker when it started."""
        return [info["node_id"] for info in self.worker_info]

    @property
    def pids(self) -> list[int]:
        """Process id of each worker as of its latest batch (a restarted actor's new pid once it
        delivered)."""
        return list(self._pids)

    def set_weights(self, weights: Any, version: int | None = None, *, force: bool = False) -> bool:
        """Publish ``weights`` (module or state dict) as ``version`` (default: last + 1).

        Only every ``publish_every``-th version (or with ``force``) is put in the object store,
        as one ``ray.put``; returns whether it was. Actors pick it up with their next request.
        """
        version = self.version + 1 if version is None else int(version)
        if not self._due(version, force):
            return False
        arrays = weights_to_numpy(weights)
        self._weights_ref = self._ray.put(arrays)  # copies: later in-place updates do not leak
        self.published_version = version
        self.weight_puts += 1
        self.weight_bytes = sum(a.nbytes for a in arrays.values())
        return True

    def _submit(self, i: int, kind: str, num_steps: int) -> None:
        weights = version = None
        if self._weights_ref is not None and self._actor_version[i] != self.published_version:
            weights, version = self._weights_ref, self.published_version
            self._actor_version[i] = version
        actor = self._actors[i]
        if kind == "transitions":
            eps = self.epsilons[i]
            ref = actor.collect_transitions.remote(num_steps, eps, weights, version)
        else:
            ref = actor.collect_rollout.remote(num_steps, weights, version)
        self._inflight[ref] = (i, kind)

    def _pump(self, kind: str, num_steps: int, workers) -> float:
        """Send a request to each of ``workers`` that has none in flight and is not backing off
        after a failure; returns when the next backing-off worker may be asked again."""
        now = time.monotonic()
        busy = {i for i, _ in self._inflight.values()}
        next_retry = math.inf
        for i in workers:
            if i in busy:
                continue
            if self._retry_at[i] <= now:
                self._submit(i, kind, num_steps)
            else:
                next_retry = min(next_retry, self._retry_at[i])
        return next_retry

    def _result(self, ref: Any) -> TransitionBatch | RolloutBatch | None:
        """The batch of a finished request; None if its actor died (the batch is dropped)."""
        ray = self._ray
        i, kind = self._inflight.pop(ref)
        try:
            batch = ray.get(ref)
        except (ray.exceptions.RayActorError, ray.exceptions.ObjectLostError) as exc:
            # Died while running it (ActorDiedError), unreachable while Ray restarts it
            # (ActorUnavailableError) or its result lost with a node (ObjectLostError): nothing
            # of this request reaches the learner.
            now = time.monotonic()
            self.dropped_batches += 1
            if self._failures[i] == 0:
                self.failures += 1
                self._down_since[i] = now
                log.warning(
                    "rollout worker %d failed (%s); Ray restarts it, its batch is dropped",
                    i,
                    type(exc).__name__,
                )
            self._failures[i] += 1
            self._actor_version[i] = None  # a rebuilt actor has the factory's weights
            self._retry_at[i] = now + min(0.05 * 2 ** self._failures[i], 2.0)
            if now - self._down_since[i] > self.restart_timeout:
                raise WorkerFailedError(
                    f"rollout worker {i} has not delivered a batch for "
                    f"{now - self._down_since[i]:.0f}s after it failed ({self._failures[i]} "
                    f"failed requests); last error: {exc}"
                ) from exc
            return None
        except ray.exceptions.RayTaskError as exc:
            raise RolloutWorkerError(
                f"rollout worker {i} raised during {kind}: {_cause(exc)} "
                "(the worker's traceback is in the chained exception)"
            ) from exc
        self._failures[i] = 0
        if batch.meta.pid != self._pids[i]:  # Ray rebuilt this worker
            self.restarts += 1
            self._pids[i] = batch.meta.pid
            log.warning("rollout worker %d is back (restarts so far: %d)", i, self.restarts)
        self._account(batch)
        return batch

    def _wait(self, kind: str, num_steps: int, workers, deadline: float) -> list:
        """Requests (refs) of ``kind`` that finished, after keeping ``workers`` busy."""
        ray = self._ray
        while True:
            next_retry = self._pump(kind, num_steps, workers)
            now = time.monotonic()
            if now >= deadline:
                raise TimeoutError(
                    f"no rollout worker delivered a {kind} batch in time ({len(self._inflight)} "
                    "requests in flight); are the actors stuck or the cluster out of resources?"
                )
            until = min(deadline, next_retry)
            refs = list(self._inflight)
            if not refs:
                time.sleep(max(0.0, until - now))
                continue
            ready, _ = ray.wait(refs, num_returns=1, timeout=max(0.0, until - now))
            if ready:
                more, _ = ray.wait(refs, num_returns=len(refs), timeout=0)
                return list(dict.fromkeys([*ready, *more]))

    # --- collection ----------------------------------------------------------------------------
    def next_transitions(
        self, num_steps: int, timeout: float | None = 300.0
    ) -> list[TransitionBatch]:
        """Batches of ``num_steps`` steps x ``envs_per_worker`` envs, as they complete (>= 1).

        Keeps one request in flight per actor: each returned batch's actor has already been sent
        its next request (with the latest weights if its own are older). ``timeout``: seconds to
        wait for at least one batch (None: forever).
        """
        if any(kind != "transitions" for _, kind in self._inflight.values()):
            raise RuntimeError("rollout requests are in flight; finish collect_rollouts first")
        workers = range(self.num_workers)
        deadline = time.monotonic() + (math.inf if timeout is None else timeout)
        while True:
            out = []
            for ref in self._wait("transitions", num_steps, workers, deadline):
                batch = self._result(ref)
                if batch is not None:
                    out.append(batch)
            self._pump("transitions", num_steps, workers)
            if out:
                return out

    def collect_rollouts(self, num_steps: int, timeout: float | None = 600.0) -> list[RolloutBatch]:
        """One rollout of ``num_steps`` steps from every worker, in worker order (synchronous).

        All of them acted with the latest published weights. A worker that dies is asked again
        (its restarted actor starts fresh episodes) until it delivers.
        """
        if self._inflight:
            self.drain()
        results: list[RolloutBatch | None] = [None] * self.num_workers
        deadline = time.monotonic() + (math.inf if timeout is None else timeout)
        while True:
            missing = [i for i, r in enumerate(results) if r is None]
            if not missing:
                return results  # type: ignore[return-value]
            for ref in self._wait("rollout", num_steps, missing, deadline):
                i = self._inflight[ref][0]
                batch = self._result(ref)
                if batch is not None:
                    results[i] = batch

    def drain(self, timeout: float = 60.0) -> None:
        """Wait for the requests in flight and drop their batches (e.g. before switching mode)."""
        refs = list(self._inflight)
        if refs:
            self._ray.wait(refs, num_returns=len(refs), timeout=timeout)
        self._inflight.clear()

    def shutdown(self) -> None:
        """Kill the actors; ``ray.shutdown()`` if this sampler started Ray. Idempotent."""
        ray = self._ray
        self._inflight = {}
        if ray.is_initialized():
            for a in self._actors:
                try:
                    ray.kill(a, no_restart=True)
                except Exception:
                    pass
        self._actors = []
        if self._owns_ray and ray.is_initialized():
            ray.shutdown()
        self._owns_ray = False
