"""Environments: the env registry (``make_env``) and the rapidrl Atari stack.

``make_env("pong")`` gives Pong with the Nature-DQN preprocessing protocol (see
``AtariOptions`` for every step and its switch); ``make_env("CartPole-v1")`` gives
``gym.make("CartPole-v1")``. Importing this package registers rapidrl's own ids with gymnasium
(``rapidrl/CartPoleNoVel-v1``, :mod:`rapidrl.envs.memory`).
"""

from rapidrl.envs import memory  # noqa: F401  (registers rapidrl/CartPoleNoVel-v1)
from rapidrl.envs.errors import InvalidOptionError, UnknownEnvError
from rapidrl.envs.options import AtariOptions
from rapidrl.envs.registry import EnvInfo, atari_games, list_options, make_env, resolve_env

__all__ = [
    "AtariOptions",
    "EnvInfo",
    "InvalidOptionError",
    "UnknownEnvError",
    "atari_games",
    "list_options",
    "make_env",
    "resolve_env",
]
