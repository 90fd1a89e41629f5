"""Memory tasks for recurrent policies: CartPole with the velocities hidden.

``rapidrl/CartPoleNoVel-v1`` is ``CartPole-v1`` (500-step limit, reward threshold 475) whose
observation keeps only the cart position and the pole angle, ``[x / 2.4, theta / 0.2095]`` (each in
units of the bound where the episode fails); the two velocities are dropped. A memoryless policy sees where the pole is but not where it is going, so it can only
react to the angle; a recurrent policy can infer the velocities from consecutive observations.
This is the classic partial-observability check of recurrent PPO implementations.

Importing :mod:`rapidrl.envs` registers the id with gymnasium, so ``rapidrl.envs.make_env`` (in
this process and in every vector-env worker, which builds its envs through it) and
``gymnasium.make`` build it like any other id. :class:`MemoryEnvFactory` is a picklable factory of
one such env for code that hands factories to a vector env.
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

__all__ = [
    "CARTPOLE_NO_VEL",
    "MEMORY_ENV_IDS",
    "HideVelocities",
    "MemoryEnvFactory",
    "is_memory_env",
    "register_memory_envs",
]

CARTPOLE_NO_VEL = "rapidrl/CartPoleNoVel-v1"
MEMORY_ENV_IDS = (CARTPOLE_NO_VEL,)


class HideVelocities(gym.ObservationWrapper):
    """Keep only the observation entries ``keep`` (CartPole: 0 = cart position, 2 = pole angle),
    divided by ``scale`` (1: unchanged)."""

    def __init__(
        self,
        env: gym.Env,
        keep: tuple[int, ...] = (0, 2),
        scale: tuple[float, ...] | None = None,
    ):
        super().__init__(env)
        self.keep = np.asarray(keep, dtype=np.int64)
        space = env.observation_space
        self.scale = np.ones(len(keep), space.dtype) if scale is None else np.asarray(scale)
        self.scale = self.scale.astype(space.dtype)
        self.observation_space = gym.spaces.Box(
            low=space.low[self.keep] / self.scale,
            high=space.high[self.keep] / self.scale,
            dtype=space.dtype,
        )

    def observation(self, observation: np.ndarray) -> np.ndarray:
        return np.asarray(observation)[self.keep] / self.scale


def make_cartpole_no_vel(**kwargs: Any) -> gym.Env:
    """Entry point of ``rapidrl/CartPoleNoVel-v1`` (kwargs go to ``CartPoleEnv``)."""
    from gymnasium.envs.classic_control.cartpole import CartPoleEnv

    env = CartPoleEnv(**kwargs)
    # Both entries in units of their failure bounds (|x| < 2.4, |theta| < 12 degrees), so one
    # step's change of the angle (what the velocities would tell) is not a tiny number.
    return HideVelocities(env, (0, 2), (env.x_threshold, env.theta_threshold_radians))


def register_memory_envs() -> None:
    """Register the memory envs with gymnasium (idempotent)."""
    if CARTPOLE_NO_VEL not in gym.registry:
        gym.register(
            id=CARTPOLE_NO_VEL,
            entry_point="rapidrl.envs.memory:make_cartpole_no_vel",
            max_episode_steps=500,
            reward_threshold=475.0,
        )


def is_memory_env(env_id: str) -> bool:
    return env_id in MEMORY_ENV_IDS


class MemoryEnvFactory:
    """Picklable env factory for process vector envs: registers the memory envs in the worker,
    then ``rapidrl.envs.make_env(env_id, **options)``."""

    def __init__(self, env_id: str, options: dict[str, Any] | None = None):
        self.env_id, self.options = env_id, dict(options or {})

    def __call__(self) -> gym.Env:
        from rapidrl.envs.registry import make_env

        register_memory_envs()
        return make_env(self.env_id, **self.options)

    def __repr__(self) -> str:
        return f"MemoryEnvFactory({self.env_id!r}, {self.options!r})"


register_memory_envs()
