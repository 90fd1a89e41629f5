"""Vector envs: one API (:mod:`rapidrl.vector.api`), several backends, one factory.

>>> venv = make_vec("CartPole-v1", 8, backend="hybrid", num_workers=2)
>>> obs, infos = venv.reset(seed=0)
>>> obs, rewards, terminated, truncated, infos = venv.step(actions)

Backends
--------
- ``serial``: every env in this process, one after the other (the ground truth in tests).
- ``subprocess``: one env per worker process; ``hybrid``: ``num_workers`` processes x M envs;
  ``async``: the hybrid layout with ``batch_size < num_envs`` (``recv`` returns the first-ready
  worker groups). One implementation (:mod:`rapidrl.vector.process`): data in shared memory,
  pipes carry only commands. ``inline=True`` runs the last group in the calling process: it
  steps inside ``send()`` while the worker processes step theirs, so the caller's core does env
  work instead of waiting on pipes (on 2 cores: one worker process + the caller).
- ``ale``: ``ale_py.AtariVectorEnv`` (C++ threads), Atari env ids only; ``envpool``: ``envpool``
  (C++ threads), Atari and Gymnasium's MuJoCo tasks; see :mod:`rapidrl.vector.native`.
- ``auto``: the layout the autotuner (:mod:`rapidrl.vector.autotune`; ``rapidrl bench envs
  --autotune``) stored for this machine, env and ``num_envs``
  (:mod:`rapidrl.vector.autotune_cache`), else :func:`default_layout`: ``hybrid``
  with one env group per core, the last one ``inline``, ``spin`` 2 ms. A stored layout that no
  longer builds (stale or hand-edited) gives a ``RuntimeWarning`` and the default layout.

Every backend returns a ``gymnasium.vector.VectorEnv`` (same-step autoreset), so gymnasium's
vector wrappers and gymnasium-style loops run on it; ``import rapidrl.vector.gym_envs`` registers
``rapidrl/<id>`` ids for ``gymnasium.make_vec`` (see there).
"""

from rapidrl.vector.api import (
    INFO_KEYS,
    EnvWorkerError,
    LayoutError,
    MainGuardError,
    VectorEnv,
    VectorEnvError,
    WorkerDiedError,
)
from rapidrl.vector.make import BACKENDS, default_layout, make_vec

__all__ = [
    "BACKENDS",
    "INFO_KEYS",
    "EnvWorkerError",
    "LayoutError",
    "MainGuardError",
    "VectorEnv",
    "VectorEnvError",
    "WorkerDiedError",
    "default_layout",
    "make_vec",
]
