"""``gymnasium.make_vec`` reaches rapidrl's vector layouts through ``rapidrl/<id>`` ids.

Importing this module registers, in gymnasium's registry:

- ``rapidrl/<id>`` for every gymnasium id without a namespace registered at that moment
  (``rapidrl/CartPole-v1``, ``rapidrl/LunarLander-v3``, ...): ``rapidrl.envs.make_env(<id>)``;
- ``rapidrl/<Game>-v5`` for every ALE game (``rapidrl/Pong-v5``, ``rapidrl/SpaceInvaders-v5``):
  the rapidrl Atari stack (``AtariOptions``), i.e. ``make_env("pong")``.

Each spec's ``vector_entry_point`` is :func:`rapidrl.vector.make_vec`, so::

    import gymnasium as gym
    import rapidrl.vector.gym_envs  # noqa: F401  (registers the ids)

    envs = gym.make_vec("rapidrl/CartPole-v1", num_envs=8)             # backend="auto"
    envs = gym.make_vec("rapidrl/Pong-v5", num_envs=8, backend="ale")
    # or, without importing rapidrl yourself (gymnasium imports the module before the lookup):
    envs = gym.make_vec("rapidrl.vector.gym_envs:rapidrl/CartPole-v1", num_envs=8)

Keyword arguments named like ``make_vec``'s (``backend``, ``num_workers``, ``batch_size``,
``seed``, ``step_timeout``, ``restart_on_crash``, ``context``, ``copy``, ``inline``, ``spin``)
configure the layout; every other keyword is an env option (gymnasium passes them to the env),
e.g. ``max_episode_steps=100`` or ``frame_skip=4``. ``gym.make("rapidrl/<id>")`` makes one env.

Why a namespace and not gymnasium's own ids: ``vectorization_mode`` only takes gymnasium's
``"sync"``, ``"async"`` and ``"vector_entry_point"``, and the ``vector_entry_point`` of an existing
id (``CartPole-v1`` has gymnasium's own ``CartPoleVectorEnv``) is not rapidrl's to replace.
"""

from __future__ import annotations

import functools
import inspect
from typing import Any

import gymnasium as gym

NAMESPACE = "rapidrl"


def _make_vec_keywords() -> frozenset[str]:
    from rapidrl.vector import make_vec

    params = inspect.signature(make_vec).parameters
    return frozenset(params) - {"env", "num_envs", "env_options"}


def make_vec_entry(env_id: str, num_envs: int = 1, **kwargs: Any):
    """``vector_entry_point`` of a ``rapidrl/<id>`` spec: ``make_vec(env_id, num_envs, ...)``,
    ``backend="auto"`` unless given; keywords that are not ``make_vec``'s are env options."""
    from rapidrl.vector import make_vec

    own = _make_vec_keywords()
    layout = {k: v for k, v in kwargs.items() if k in own}
    options = {k: v for k, v in kwargs.items() if k not in own}
    layout.setdefault("backend", "auto")
    return make_vec(env_id, num_envs, env_options=options or None, **layout)


def make_env_entry(env_id: str, **kwargs: Any) -> gym.Env:
    """``entry_point`` of a ``rapidrl/<id>`` spec: one env, ``rapidrl.envs.make_env``."""
    from rapidrl.envs import make_env

    return make_env(env_id, **kwargs)


def _register(gym_id: str, env_id: str) -> None:
    if gym_id in gym.registry:  # imported twice (e.g. module:id after a plain import)
        return
    gym.register(
        gym_id,
        entry_point=functools.partial(make_env_entry, env_id),
        vector_entry_point=functools.partial(make_vec_entry, env_id),
        # make_env's env carries its own checker, order enforcing and time limit
        disable_env_checker=True,
        order_enforce=False,
    )


def register_envs() -> list[str]:
    """Register the ``rapidrl/<id>`` ids (module docstring); returns them. Idempotent; call it
    again after registering more gymnasium envs."""
    from gymnasium.envs.registration import parse_env_id

    ids = []
    for gym_id, spec in list(gym.registry.items()):
        ns, name, version = parse_env_id(gym_id)
        if ns is not None or str(spec.entry_point).startswith("ale_py"):
            continue  # namespaced ids do not nest; ALE ids come as games below
        ids.append((f"{NAMESPACE}/{gym_id}", gym_id))
    try:
        from ale_py.registration import rom_id_to_name

        from rapidrl.envs import atari_games
    except ImportError:  # no ale_py: no Atari games to register
        games = []
    else:
        games = [(f"{NAMESPACE}/{rom_id_to_name(rom)}-v5", rom) for rom in atari_games().values()]
    ids += games
    for gym_id, env_id in ids:
        _register(gym_id, env_id)
    return [gym_id for gym_id, _ in ids]


REGISTERED = register_envs()
