"""Stable-Baselines3 on rapidrl's vector envs: ``SB3VecEnv`` is an SB3 ``VecEnv``.

>>> from stable_baselines3 import PPO
>>> from rapidrl.integrations.sb3 import make_sb3_vec
>>> env = make_sb3_vec("pong", 8, backend="hybrid")  # any make_vec backend and options
>>> PPO("CnnPolicy", env, n_steps=128).learn(1_000_000)

What SB3 gets, per step (the contract of SB3's ``DummyVecEnv``):

- ``obs`` ``[N, *obs_shape]``: the observation after the step; where an episode ended, the first
  observation of the next one (rapidrl and SB3 both reset in the same step).
- ``rewards`` float32 ``[N]``; ``dones = terminated | truncated``.
- ``infos``: a list of ``N`` dicts. Each has ``"TimeLimit.truncated"`` (truncated and not
  terminated: SB3 then bootstraps from the value of ``"terminal_observation"``, which envs that
  ended have: rapidrl's ``infos["final_obs"][i]``). Where a *real* episode ended
  (``infos["episode_end"]``), ``"episode": {"r", "l", "t"}`` as SB3's ``Monitor`` writes it, so
  ``rollout/ep_rew_mean`` and ``evaluate_policy`` work without a ``Monitor``. For Atari that is
  the unclipped game score over all lives, once per game (a life loss is a ``done`` without
  ``"episode"``): the numbers SB3's ``Monitor`` under its ``AtariWrapper`` gives.

Observations: rapidrl's Atari frames are uint8 ``[frame_stack, 84, 84]``, channels first, so
SB3's ``CnnPolicy`` takes them as images (``is_image_space``) and adds no ``VecTransposeImage``.

Seeding: ``PPO(..., seed=s)`` calls ``env.seed(s)``; the next ``reset()`` then resets env ``i``
with seed ``s + i``, exactly what rapidrl's ``reset(seed=s)`` does. The envs themselves live
inside the rapidrl vector env (for most backends in worker processes), so ``get_attr``,
``set_attr`` and ``env_method`` cannot reach them: they raise, naming the way to do it instead.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import numpy as np

try:
    from stable_baselines3.common.monitor import Monitor
    from stable_baselines3.common.vec_env.base_vec_env import (
        VecEnv,
        VecEnvIndices,
        VecEnvStepReturn,
    )
except ImportError as exc:  # an optional dependency: say how to get it
    raise ImportError(
        "rapidrl.integrations.sb3 needs stable-baselines3, which is not installed: "
        "pip install -e '.[sb3]' in the rapidrl checkout (or pip install 'stable-baselines3>=2.3')"
    ) from exc

if TYPE_CHECKING:
    from rapidrl.vector import VectorEnv

__all__ = ["SB3VecEnv", "make_sb3_vec"]


class SB3VecEnv(VecEnv):
    """An SB3 ``VecEnv`` over a rapidrl vector env (see the module docstring).

    Args:
        venv: a synchronous rapidrl vector env (``batch_size == num_envs``) that returns fresh
            arrays (``copy=True``, the default of ``make_vec``). It is closed by ``close()``.
    """

    def __init__(self, venv: VectorEnv) -> None:
        n = int(venv.num_envs)
        batch_size = getattr(venv, "batch_size", n)
        if batch_size != n:
            raise ValueError(
                f"SB3 steps every env at once, but this vector env returns {batch_size} of its "
                f"{n} envs per step (first-ready batches); build it with batch_size=None and a "
                "synchronous backend ('serial', 'subprocess', 'hybrid', 'ale', 'envpool')"
            )
        if getattr(venv, "copy", True) is False:
            raise ValueError(
                "this vector env was built with copy=False: its observations are views that the "
                "next step overwrites, while SB3 keeps the last observation across the step; "
                "build it with copy=True (the default)"
            )
        self.venv = venv
        self._closed = False
        self._actions: np.ndarray | None = None
        self._t_start = time.time()  # Monitor's clock for "episode"["t"]
        super().__init__(n, venv.single_observation_space, venv.single_action_space)

    # --- the SB3 VecEnv API ----------------------------------------------------------------
    def reset(self) -> np.ndarray:
        seed = self._consecutive_seed()
        if any(self._options):
            raise NotImplementedError(
                f"per-reset options ({self._options[0]!r}, ...) are not supported by rapidrl "
                "vector envs; pass env options when building: make_sb3_vec(env_id, num_envs, "
                "env_options={...})"
            )
        obs, _ = self.venv.reset(seed=seed)
        # As SB3's own VecEnvs: seeds apply to the next reset only.
        self._reset_seeds()
        self._reset_options()
        self.reset_infos = [{} for _ in range(self.num_envs)]
        return obs

    def step_async(self, actions: np.ndarray) -> None:
        actions = np.asarray(actions)
        if isinstance(self.action_space, gym.spaces.Discrete) and actions.size == self.num_envs:
            # SB3 may hand Discrete actions as [N, 1] (e.g. from a replay buffer's layout).
            actions = actions.reshape(self.num_envs)
        self._actions = actions

    def step_wait(self) -> VecEnvStepReturn:
        if self._actions is None:
            raise RuntimeError("step_wait() needs a step_async(actions) before it")
        actions, self._actions = self._actions, None
        obs, rewards, terminated, truncated, infos = self.venv.step(actions)
        terminated = np.asarray(terminated, dtype=bool)
        truncated = np.asarray(truncated, dtype=bool)
        dones = terminated | truncated
        # DummyVecEnv sets "TimeLimit.truncated" on every info; SB3 code reads it with .get, but
        # user callbacks may index it.
        sb3_infos: list[dict[str, Any]] = [
            {"TimeLimit.truncated": False} for _ in range(self.num_envs)
        ]
        if dones.any():
            final_obs = infos["final_obs"]
            for i in np.flatnonzero(dones):
                info = sb3_infos[i]
                # A copy: SB3 and callbacks may keep it, and it need not pin the whole batch.
                info["terminal_observation"] = np.array(final_obs[i])
                info["TimeLimit.truncated"] = bool(truncated[i] and not terminated[i])
            restarted = infos.get("worker_restarted")
            if restarted is not None:
                for i in np.flatnonzero(restarted):
                    sb3_infos[i]["worker_restarted"] = True
            episode_end = infos["episode_end"]
            if episode_end.any():
                t = round(time.time() - self._t_start, 6)
                returns, lengths = infos["episode_return"], infos["episode_length"]
                for i in np.flatnonzero(episode_end):
                    sb3_infos[i]["episode"] = {"r": float(returns[i]), "l": int(lengths[i]), "t": t}
        return obs, np.asarray(rewards, dtype=np.float32), dones, sb3_infos

    def close(self) -> None:
        if not self._closed:
            self._closed = True
            self.venv.close()

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        n = len(list(self._get_indices(indices)))
        known = {
            # rapidrl vector envs do not render; SB3's VecEnv asks for this when built.
            "render_mode": None,
            "observation_space": self.observation_space,
            "action_space": self.action_space,
        }
        if attr_name in known:
            return [known[attr_name]] * n
        # AttributeError, as for an env without the attribute: SB3's has_attr relies on it.
        raise AttributeError(
            f"SB3VecEnv cannot read {attr_name!r} from its envs: they live inside the rapidrl "
            "vector env (in worker processes for most backends). Read it from one env built "
            "with rapidrl.envs.make_env(env_id, **env_options) instead."
        )

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        raise NotImplementedError(
            f"SB3VecEnv cannot set {attr_name!r} on its envs: they live inside the rapidrl "
            "vector env; pass settings as env options when building it "
            "(make_sb3_vec(env_id, num_envs, env_options={...}))."
        )

    def env_method(
        self, method_name: str, *method_args: Any, indices: VecEnvIndices = None, **method_kwargs
    ) -> list[Any]:
        raise NotImplementedError(
            f"SB3VecEnv cannot call {method_name!r} on its envs: they live inside the rapidrl "
            "vector env (in worker processes for most backends), which offers reset, step and "
            "close only. Call it on one env built with rapidrl.envs.make_env instead."
        )

    def env_is_wrapped(
        self, wrapper_class: type[gym.Wrapper], indices: VecEnvIndices = None
    ) -> list[bool]:
        # True for SB3's Monitor: this adapter writes Monitor's info["episode"], which is what
        # SB3 asks this for (evaluate_policy then takes the real episode statistics from it;
        # VecMonitor warns that it would count episodes twice). The envs themselves cannot be
        # inspected (worker processes), so any other wrapper class answers False.
        wrapped = issubclass(Monitor, wrapper_class)
        return [wrapped] * len(list(self._get_indices(indices)))

    # --- helpers ---------------------------------------------------------------------------
    def _consecutive_seed(self) -> int | None:
        """The one seed rapidrl's reset takes for the per-env seeds SB3 collected."""
        seeds = list(self._seeds)
        if all(s is None for s in seeds):
            return None
        first = seeds[0]
        if first is None or seeds != [first + i for i in range(self.num_envs)]:
            raise ValueError(
                f"rapidrl vector envs seed env i with seed + i, so per-env seeds must be "
                f"consecutive, got {seeds}; use env.seed(seed) (what SB3 does for seed=...)"
            )
        return int(first)

    def __repr__(self) -> str:
        return f"SB3VecEnv({self.venv!r})"


def make_sb3_vec(
    env_id: str | Callable[[], gym.Env] | Sequence[Callable[[], gym.Env]],
    num_envs: int,
    **make_vec_kwargs: Any,
) -> SB3VecEnv:
    """``SB3VecEnv(rapidrl.make_vec(env_id, num_envs, **make_vec_kwargs))``.

    ``make_vec_kwargs`` are ``make_vec``'s: ``backend`` (default ``"serial"``; ``"hybrid"``,
    ``"ale"`` or ``"auto"`` for speed), ``num_workers``, ``seed``, ``env_options``, ... The layout
    must be synchronous (no ``batch_size`` below ``num_envs``) and return fresh arrays.
    """
    from rapidrl.vector import make_vec

    if make_vec_kwargs.get("copy", True) is False:
        raise ValueError(
            "make_sb3_vec needs copy=True: SB3 keeps the last observation across the next step, "
            "which copy=False would overwrite"
        )
    venv = make_vec(env_id, num_envs, **make_vec_kwargs)
    try:
        return SB3VecEnv(venv)
    except BaseException:
        venv.close()  # e.g. an autotuned first-ready layout: never leave its workers behind
        raise
