"""What a rollout worker sends back: plain numpy arrays plus who/when made them.

Index conventions are those of the vector API (:mod:`rapidrl.vector.api`, same-step autoreset):
``T`` agent steps of the worker's ``N`` envs, step ``t`` acted on ``obs[t]``. Observations keep
the env's dtype (uint8 frames for Atari: never float frames on the wire).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

import numpy as np

__all__ = ["BatchMeta", "RolloutBatch", "TransitionBatch", "concat_rollouts"]


@dataclass
class BatchMeta:
    """Provenance and counts carried by every batch."""

    worker_id: int
    """Index of the worker (stable across actor restarts)."""
    node_id: str
    """Ray node the worker ran on (``ray.get_runtime_context().get_node_id()``); "local" without
    Ray."""
    pid: int
    """Process id of the worker (changes when Ray restarts the actor)."""
    weights_version: int
    """Version of the weights that acted (``-1``: the factory's initial weights). Policy lag at
    the learner = learner updates - ``weights_version``."""
    seq: int
    """Batch number of this actor life: ``0`` = first batch after the worker was (re)built, whose
    ``obs[0]`` does not continue any earlier batch (a learner's per-env streams must restart)."""
    env_steps: int
    """Agent steps in this batch (``T * N``)."""
    frames: int
    """Emulator frames in this batch (``env_steps * frames_per_step``; = env_steps off Atari)."""
    collect_seconds: float
    """Wall time the worker spent collecting it."""
    episode_returns: np.ndarray = field(default_factory=lambda: np.zeros(0, np.float64))
    """Real (unclipped) returns of the episodes that ended in this batch, in order."""
    episode_lengths: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    """Agent steps of those episodes."""


def _nbytes(obj) -> int:
    return int(
        sum(
            getattr(obj, f.name).nbytes
            for f in dataclasses.fields(obj)
            if isinstance(getattr(obj, f.name), np.ndarray)
        )
    )


@dataclass
class TransitionBatch:
    """``T`` steps of ``N`` envs for off-policy learners (DQN, Ape-X).

    ``obs`` has ``T + 1`` rows: ``obs[t + 1]`` is what step ``t`` returned, i.e. the next
    episode's first observation where step ``t`` ended one; the last observation of the ended
    episode is in ``final_obs`` (only for the ``K`` ended steps, to keep the batch small).
    :meth:`next_obs` puts both together.
    """

    obs: np.ndarray  # [T + 1, N, *obs_shape]
    actions: np.ndarray  # [T, N, *action_shape]
    rewards: np.ndarray  # [T, N] float32
    terminated: np.ndarray  # [T, N] bool
    truncated: np.ndarray  # [T, N] bool
    final_obs: np.ndarray  # [K, *obs_shape]: last obs of each episode that ended, in (t, env) order
    final_t: np.ndarray  # [K] int64: step of each of them
    final_env: np.ndarray  # [K] int64: env (0..N-1) of each of them
    epsilon: np.ndarray  # [N] float32: exploration of each env
    meta: BatchMeta

    @property
    def num_steps(self) -> int:
        return int(self.actions.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.actions.shape[1])

    @property
    def stream_ids(self) -> np.ndarray:
        """Global env ids ``worker_id * N + [0..N-1]`` (the replay buffer's ``env_ids``)."""
        n = self.num_envs
        return np.arange(self.meta.worker_id * n, (self.meta.worker_id + 1) * n, dtype=np.int64)

    @property
    def nbytes(self) -> int:
        return _nbytes(self)

    def next_obs(self) -> np.ndarray:
        """``[T, N, *obs_shape]``: the next observation *of the same episode* for every step."""
        nxt = self.obs[1:].copy()
        nxt[self.final_t, self.final_env] = self.final_obs
        return nxt

    def add_to(self, buffer) -> None:
        """Append to a :class:`rapidrl.buffers.ReplayBuffer` with ``num_envs = workers * N``.

        On a worker's first batch (``meta.seq == 0``: a fresh or restarted actor) the buffer's
        streams of these envs are cut first (``truncate_streams``), so n-step returns never run
        from the old actor's unfinished episodes into the new one's.
        """
        ids = self.stream_ids
        if self.meta.seq == 0:
            buffer.truncate_streams(ids)
        nxt = self.next_obs()
        for t in range(self.num_steps):
            buffer.add(
                self.obs[t],
                self.actions[t],
                self.rewards[t],
                self.terminated[t],
                self.truncated[t],
                nxt[t],
                env_ids=ids,
            )


@dataclass
class RolloutBatch:
    """``T`` steps of ``N`` envs for on-policy learners (PPO), all acted by one weights version.

    ``final_values[t, i]`` is ``V(final_obs)`` where step ``t`` of env ``i`` was truncated and
    not terminated (the time-limit bootstrap), 0 elsewhere. ``last_obs``/``last_values``: the
    observation after the rollout (the next rollout starts there) and its value.
    """

    obs: np.ndarray  # [T, N, *obs_shape]
    actions: np.ndarray  # [T, N, *action_shape]
    logprobs: np.ndarray  # [T, N] float32
    values: np.ndarray  # [T, N] float32
    rewards: np.ndarray  # [T, N] float32
    terminated: np.ndarray  # [T, N] bool
    truncated: np.ndarray  # [T, N] bool
    final_values: np.ndarray  # [T, N] float32
    last_obs: np.ndarray  # [N, *obs_shape]
    last_values: np.ndarray  # [N] float32
    meta: BatchMeta

    @property
    def num_steps(self) -> int:
        return int(self.actions.shape[0])

    @property
    def num_envs(self) -> int:
        return int(self.actions.shape[1])

    @property
    def nbytes(self) -> int:
        return _nbytes(self)

    def next_values(self) -> np.ndarray:
        """``[T, N]`` float32: the ``next_values`` argument of :func:`rapidrl.algos.ppo.gae.gae`.

        ``V(s_{t+1})`` of the same episode: ``values[t + 1]`` (``last_values`` at ``T - 1``),
        replaced by ``final_values`` where step ``t`` was truncated (``terminated`` steps are
        ignored by ``gae``).
        """
        nxt = np.concatenate([self.values[1:], self.last_values[None]], axis=0)
        trunc = self.truncated & ~self.terminated
        return np.where(trunc, self.final_values, nxt).astype(np.float32)


def concat_rollouts(batches: list[RolloutBatch]) -> RolloutBatch:
    """Stack rollouts of equal ``T`` along the env axis (``[T, sum N]``), in the given order.

    ``meta`` of the result: the first batch's ids, the smallest weights version, summed counts,
    all episodes.
    """
    if not batches:
        raise ValueError("concat_rollouts needs at least one batch")
    steps = {b.num_steps for b in batches}
    if len(steps) != 1:
        raise ValueError(f"rollouts have different lengths {sorted(steps)}")
    out = {}
    for f in dataclasses.fields(RolloutBatch):
        if f.name == "meta":
            continue
        axis = 0 if f.name in ("last_obs", "last_values") else 1
        out[f.name] = np.concatenate([getattr(b, f.name) for b in batches], axis=axis)
    m0 = batches[0].meta
    meta = dataclasses.replace(
        m0,
        weights_version=min(b.meta.weights_version for b in batches),
        env_steps=sum(b.meta.env_steps for b in batches),
        frames=sum(b.meta.frames for b in batches),
        collect_seconds=max(b.meta.collect_seconds for b in batches),
        episode_returns=np.concatenate([b.meta.episode_returns for b in batches]),
        episode_lengths=np.concatenate([b.meta.episode_lengths for b in batches]),
    )
    return RolloutBatch(**out, meta=meta)
