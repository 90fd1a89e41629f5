"""The one vector-env API every backend implements.

Shapes: ``N = num_envs``, ``B = batch_size`` (``B == N`` unless the backend is asynchronous).

Calls
-----
- ``reset(seed=None) -> (obs, infos)``: resets *all* envs; env ``i`` is seeded with ``seed + i``
  (``None``: unseeded). Returns ``obs [N, *obs_shape]`` and ``infos`` for all envs, env ids
  ``0..N-1`` in order. After ``reset`` every env is waiting for an action.
- ``send(actions, env_ids=None)``: hand actions to the given envs (default: the envs of the last
  ``reset``/``recv``, in that order). ``actions [len(env_ids), *action_shape]``.
- ``recv() -> (obs, rewards, terminated, truncated, infos, env_ids)``: the next ``B`` envs whose
  step finished. Synchronous backends return all envs in id order; asynchronous ones return the
  first ready envs, so one slow env does not stall the batch.
- ``step(actions)`` = ``send(actions)`` then ``recv()`` without ``env_ids``: the gymnasium 5-tuple.
- ``close()``: stops every worker; never leaves a child process behind, also after a failure.

Autoreset rule (the same for every backend: "same-step")
--------------------------------------------------------
When env ``i`` ends an episode (``terminated`` or ``truncated``) on a step, that same step returns
the *first observation of the next episode* in ``obs[i]`` and the last observation of the ended
episode in ``infos["final_obs"][i]``. ``terminated`` (a true end: do not bootstrap) and
``truncated`` (a time limit: bootstrap from ``final_obs``) are kept apart.

``infos`` is a dict of arrays aligned with the returned batch (never a list of dicts):

- ``env_id``          int64 ``[B]``
- ``final_obs``       ``[B, *obs_shape]``; meaningful only where ``terminated | truncated``
  (rapidrl's Python backends: zeros elsewhere; on a step where no episode ended, one shared
  read-only zero array, so that the common step allocates nothing for it)
- ``episode_end``     bool ``[B]``: a *real* episode ended here (for Atari with episodic life,
  only at game over, not at a life loss)
- ``episode_return``  float64 ``[B]``: real, unclipped game score of that episode (where
  ``episode_end``)
- ``episode_length``  int64 ``[B]``: agent steps of that episode (where ``episode_end``)

Every rapidrl backend also returns (not in ``INFO_KEYS``, which stays the minimal contract):

- ``worker_restarted`` bool ``[B]``: with ``restart_on_crash``, the env's worker crashed, was killed
  or got stuck, and was restarted during this step. The episode was cut short: ``truncated`` is
  True, ``final_obs`` is the last observation before the crash, ``obs`` the first of a new episode,
  and it is not an ``episode_end`` (no statistics for a cut episode).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

INFO_KEYS = ("env_id", "final_obs", "episode_end", "episode_return", "episode_length")


class VectorEnvError(RuntimeError):
    """Base of every error a vector env raises about its envs or workers."""


class EnvWorkerError(VectorEnvError):
    """An env raised inside a worker; the message carries the env index and the traceback."""


class WorkerDiedError(VectorEnvError):
    """A worker process died (killed from outside, segfault) or stopped answering in time."""


class VectorEnv:
    """Base class: holds the spaces and the shared argument checks. Backends fill in the rest."""

    num_envs: int
    batch_size: int
    single_observation_space: gym.Space
    single_action_space: gym.Space

    def reset(self, seed: int | None = None) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        raise NotImplementedError

    def send(self, actions: Any, env_ids: np.ndarray | None = None) -> None:
        raise NotImplementedError

    def recv(self):
        raise NotImplementedError

    def step(self, actions: Any):
        self.send(actions)
        obs, rewards, terminated, truncated, infos, _ = self.recv()
        return obs, rewards, terminated, truncated, infos

    def close(self) -> None:
        raise NotImplementedError

    # --- shared helpers -------------------------------------------------------------------
    @property
    def obs_shape(self) -> tuple[int, ...]:
        return tuple(self.single_observation_space.shape)

    @property
    def obs_dtype(self) -> np.dtype:
        return np.dtype(self.single_observation_space.dtype)

    def check_actions(self, actions: Any, n: int) -> np.ndarray:
        """Validate and convert a batch of ``n`` actions, with a clear error on shape/dtype."""
        space = self.single_action_space
        actions = np.asarray(actions)
        if isinstance(space, gym.spaces.Discrete):
            if actions.shape != (n,):
                raise ValueError(
                    f"actions must have shape ({n},) for {n} envs with a Discrete action space, "
                    f"got shape {actions.shape}"
                )
            if actions.dtype.kind not in "iu":  # np.issubdtype(.., np.integer), 20x cheaper
                raise TypeError(
                    f"Discrete actions must be integers, got dtype {actions.dtype}; "
                    "use e.g. actions.astype(np.int64)"
                )
            if n and (actions.min() < space.start or actions.max() >= space.start + space.n):
                raise ValueError(
                    f"actions out of range [{space.start}, {space.start + space.n}): {actions}"
                )
            return actions.astype(np.int64, copy=False)
        if isinstance(space, gym.spaces.Box):
            want = (n, *space.shape)
            if actions.shape != want:
                raise ValueError(f"actions must have shape {want}, got {actions.shape}")
            return actions.astype(space.dtype, copy=False)
        raise TypeError(f"unsupported action space {space!r}")

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass
