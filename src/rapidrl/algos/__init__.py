"""The algorithms, one folder each; what every ``rapidrl train ALGO`` command runs by default.

``DEFAULT_PRESETS`` is the one place that says which preset a trainer (and ``bench solve``,
``bench atari``, ``sweep``) takes when none is named; its keys are the trainers' names.
"""

from __future__ import annotations

__all__ = ["ALGOS", "DEFAULT_PRESETS", "default_preset"]

DEFAULT_PRESETS: dict[str, str] = {
    # lean: the recipe of the Atari suite's table (docs/results/atari_ppo_lean_zen5) and the
    # fastest Pong solve on every CPU measured (docs/presets.md#ppo-lean).
    "ppo": "lean",
    # ppo-lstm: CleanRL's ppo_atari_lstm.py settings, the only recurrent recipe measured to learn.
    "ppo-lstm": "ppo-lstm",
    # lean: Pong solved in a sixth of fast's time on a 2-core Zen 3 without bf16
    # (docs/presets.md#dqn-lean).
    "dqn": "lean",
    # rainbow-lean: the first Rainbow to solve Pong within 20 minutes on 2 cores (a Zen 4 with
    # bf16, median of 3; docs/presets.md#dqn-rainbow-lean).
    "rainbow": "rainbow-lean",
    "pqn": "fast",
    # sac: CleanRL's sac_continuous_action.py settings, the reference; sac-fast is measured on
    # HalfCheetah-v5 alone so far (docs/presets.md#sac-sac-fast).
    "sac": "sac",
}
ALGOS: tuple[str, ...] = tuple(DEFAULT_PRESETS)


def default_preset(algo: str, env: str | None = None) -> str:
    """The preset ``rapidrl train ALGO --env ENV`` takes without ``--preset``: the algorithm's
    default, except PPO on an env with continuous actions (``mujoco``), as the trainer decides."""
    if algo == "ppo" and env is not None and _has_continuous_actions(env):
        return "mujoco"
    return DEFAULT_PRESETS[algo]


def _has_continuous_actions(env_id: str) -> bool:
    import gymnasium as gym

    from rapidrl.envs import make_env, resolve_env

    try:
        if resolve_env(env_id).is_atari:
            return False
        env = make_env(env_id)
    except Exception:  # an unknown or broken env: the trainer's own start says what is wrong
        return False
    try:
        return isinstance(env.action_space, gym.spaces.Box)
    finally:
        env.close()
