"""Adapters that let other RL libraries train on rapidrl's vector envs.

- :mod:`rapidrl.integrations.sb3`: ``SB3VecEnv`` / ``make_sb3_vec``, a Stable-Baselines3
  ``VecEnv`` (install with ``pip install -e '.[sb3]' in the rapidrl checkout``).

Each adapter lives in its own module and imports its library only there, so ``import rapidrl``
never needs any of them.
"""
