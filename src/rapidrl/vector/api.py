"""The one vector-env API every backend implements.

Shapes: ``N = num_envs``, ``B = batch_size`` (``B == N`` unless the backend is asynchronous).

Every vector env is a ``gymnasium.vector.VectorEnv``: batched ``observation_space`` /
``action_space`` (``batch_space`` of the single spaces, ``N`` envs), ``metadata["autoreset_mode"]
== AutoresetMode.SAME_STEP``, ``np_random``, ``closed``, ``render_mode`` (``None``: no rendering
through the vector env), so gymnasium's vector wrappers and gymnasium-style training loops run on
it. They assume every ``step`` returns all ``N`` envs in id order: true whenever ``batch_size ==
N``. First-ready batches (``batch_size < N``) are for ``send``/``recv`` with ``env_ids``; a
gymnasium wrapper that keeps per-env state (``RecordEpisodeStatistics``, ``NormalizeReward``)
cannot tell which envs a batch holds.

Calls
-----
- ``reset(seed=None, options=None) -> (obs, infos)``: resets *all* envs; an int seeds env ``i``
  with ``seed + i``, a list of ``N`` ints (or ``None`` entries) seeds env ``i`` with ``seed[i]``
  (``None``: unseeded). ``options`` go to every env's ``reset`` (native Atari backends take none;
  partial resets, ``options["reset_mask"]``, are not supported: envs reset themselves on the step
  their episode ends). Returns ``obs [N, *obs_shape]`` and ``infos`` for all envs, env ids
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

gymnasium's same-step keys (what ``gymnasium.vector.SyncVectorEnv(autoreset_mode=SAME_STEP)``
returns, so code written for it reads them unchanged):

- ``_final_obs``      bool ``[B]``: ``terminated | truncated`` (which rows of ``final_obs`` hold a
  final observation; one shared read-only all-False array on a step where no episode ended)
- ``final_info`` / ``_final_info``: only on a step where an episode ended. The envs' own info
  dicts are not carried back from the workers; ``final_info`` holds the real episode statistics in
  the layout of gymnasium's ``RecordEpisodeStatistics``: ``{"episode": {"r": episode_return,
  "l": episode_length}, "_episode": episode_end}``; ``_final_info`` is ``terminated | truncated``.

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
from gymnasium.utils import seeding
from gymnasium.vector import AutoresetMode

INFO_KEYS = ("env_id", "final_obs", "episode_end", "episode_return", "episode_length")


class VectorEnvError(RuntimeError):
    """Base of every error a vector env raises about its envs or workers."""


class LayoutError(ValueError):
    """``make_vec``'s arguments do not make a vector env: the backend, counts, batch size or
    options do not fit together or do not fit the env (the message names which and the fix).
    Raised before any worker starts; a ValueError, as before it had its own class."""


class EnvWorkerError(VectorEnvError):
    """An env raised inside a worker; the message carries the env index and the traceback."""


class WorkerDiedError(VectorEnvError):
    """A worker process died (killed from outside, segfault) or stopped answering in time."""


class MainGuardError(VectorEnvError):
    """The worker processes re-ran a script that builds a vector env outside an
    ``if __name__ == "__main__":`` block (spawn start method); the message names the fix."""


class VectorEnv(gym.vector.VectorEnv):
    """Base class: a ``gymnasium.vector.VectorEnv`` holding the spaces and the shared argument
    checks. Backends fill in ``reset``/``send``/``recv``/``close`` and set ``_closed``."""

    # Same-step autoreset (module docstring): gymnasium's wrappers read this to know that a done
    # env's returned observation already starts its next episode.
    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.SAME_STEP, "render_modes": []}
    render_mode: str | None = None  # the envs run in workers: nothing renders through here
    num_envs: int
    batch_size: int
    single_observation_space: gym.Space
    single_action_space: gym.Space
    _closed: bool = True  # until a backend has built everything

    def set_spaces(self, single_observation_space: gym.Space, single_action_space: gym.Space):
        """The single spaces and gymnasium's batched ones (``num_envs`` must be set)."""
        from gymnasium.vector.utils import batch_space

        self.single_observation_space = single_observation_space
        self.single_action_space = single_action_space
        self.observation_space = batch_space(single_observation_space, self.num_envs)
        self.action_space = batch_space(single_action_space, self.num_envs)

    def reset(
        self, seed: int | list[int | None] | None = None, options: dict[str, Any] | None = None
    ) -> tuple[np.ndarray, dict[str, np.ndarray]]:
        raise NotImplementedError

    def send(self, actions: Any, env_ids: np.ndarray | None = None) -> None:
        raise NotImplementedError

    def recv(self):
        raise NotImplementedError

    def step(self, actions: Any):
        self.send(actions)
        obs, rewards, terminated, truncated, infos, _ = self.recv()
        return obs, rewards, terminated, truncated, infos

    def close(self, **kwargs: Any) -> None:
        """Stop every worker; idempotent. ``kwargs`` (gymnasium's ``close_extras`` arguments)
        are accepted for gymnasium's wrappers and ignored: shutdown has its own deadlines."""
        raise NotImplementedError

    def close_extras(self, **kwargs: Any) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @closed.setter
    def closed(self, value: bool) -> None:
        # gymnasium's base close() and its wrappers' ``closed`` setter write this attribute:
        # True closes for real (a flag alone would leave the workers running), False cannot
        # bring the workers back.
        if value:
            self.close()
        elif self._closed:
            raise ValueError("a closed vector env cannot be reopened: make a new one")

    def render(self):
        raise NotImplementedError(
            f"{type(self).__name__} does not render (render_mode is None): its envs run in "
            "worker processes or native threads. Record videos from a single env, e.g. "
            "rapidrl.envs.make_env(env_id, render_mode='rgb_array')"
        )

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

    def check_seed(self, seed: Any) -> int | list[int | None] | None:
        """``reset``'s seed as ``None``, an int (env ``i`` gets ``seed + i``) or a list of
        ``num_envs`` ints/``None`` (env ``i`` gets ``seed[i]``); a list of consecutive ints becomes
        the int it spells. Raises before any env is touched."""
        n = self.num_envs
        if seed is None:
            return None
        if _is_int(seed):
            return int(seed)
        if not isinstance(seed, (list, tuple, np.ndarray)):
            raise TypeError(f"seed must be None, an int or a list of {n} ints, got {seed!r}")
        seeds = seed.tolist() if isinstance(seed, np.ndarray) else list(seed)
        if len(seeds) != n:
            raise ValueError(
                f"reset(seed=[...]) takes one seed per env: got {len(seeds)} seeds for "
                f"num_envs={n}; pass {n} seeds, or one int (env i then gets seed + i)"
            )
        for i, s in enumerate(seeds):
            if s is not None and not _is_int(s):
                raise TypeError(f"reset(seed=[...]): seed[{i}] must be an int or None, got {s!r}")
            if s is not None and s < 0:
                raise ValueError(f"reset(seed=[...]): seed[{i}] must be >= 0, got {s}")
        out = [None if s is None else int(s) for s in seeds]
        if all(s is None for s in out):
            return None
        if None not in out and out == list(range(out[0], out[0] + n)):
            return out[0]
        return out

    def check_reset_options(self, options: Any) -> dict[str, Any] | None:
        """``reset``'s options (``None`` when empty); partial resets are refused."""
        if options is None:
            return None
        if not isinstance(options, dict):
            raise TypeError(f"reset options must be a dict, got {options!r}")
        if "reset_mask" in options:
            raise ValueError(
                "partial resets (options['reset_mask']) are not supported: every env resets "
                "itself on the step its episode ends (same-step autoreset); call reset() "
                "without it to reset all envs"
            )
        return options or None

    def seed_np_random(self, seed: int | list[int | None] | None) -> None:
        """Seed gymnasium's ``np_random`` (the vector env's own generator) from reset's seed."""
        if isinstance(seed, int):
            self._np_random, self._np_random_seed = seeding.np_random(seed)
        elif isinstance(seed, list):
            entropy = [s for s in seed if s is not None]
            self._np_random = np.random.Generator(np.random.PCG64(entropy))
            self._np_random_seed = -1  # gymnasium's value for "not one int seed"

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass


def _is_int(x: Any) -> bool:
    return isinstance(x, (int, np.integer)) and not isinstance(x, (bool, np.bool_))
