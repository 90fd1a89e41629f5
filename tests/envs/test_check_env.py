"""gymnasium's own env checker on our envs, and rebuilding an env from its ``spec``."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.envs.registration import EnvSpec
from gymnasium.utils.env_checker import check_env

from rapidrl.envs import atari_games, make_env
from rapidrl.envs.atari_wrappers import EpisodeStats

pytestmark = pytest.mark.timeout(300)

IMPLEMENTATIONS = ("lean", "wrappers")

# Games whose action 0 is FIRE: the no-op steps of NoopReset and EpisodicLife need action 0 to be
# NOOP, so make_env refuses them with the defaults and names these two options as the fix.
NO_NOOP_OPTIONS = {"backgammon": dict(noop_max=0, episodic_life=False)}
NO_NOOP_OPTIONS["video_checkers"] = NO_NOOP_OPTIONS["backgammon"]

# The default stage checks one case per distinct code path (~1-2 s per check_env);
# `pytest -m exhaustive` checks every game (below). Pong: FIRE reset, no lives. Freeway: no FIRE
# in its action set.
# Backgammon: action 0 is FIRE, so no no-ops and no episodic life. The option-heavy Breakout:
# lives (episodic life), RGB frames, a rectangular screen, no stacking, sticky actions, the full
# action set and rgb_array rendering (check_env then also checks render()). Both implementations
# where the spec machinery differs most (Pong with the defaults, the option-heavy Breakout); the
# two give the same frames (test_atari.py), so one implementation for each other path.
REPRESENTATIVE: list[tuple[str, dict[str, Any], str]] = [
    ("pong", {}, "lean"),
    ("pong", {}, "wrappers"),
    ("freeway", {}, "lean"),
    ("backgammon", NO_NOOP_OPTIONS["backgammon"], "wrappers"),
    *[
        (
            "breakout",
            dict(
                grayscale=False,
                screen_size=(80, 64),
                frame_stack=1,
                repeat_action_probability=0.25,
                full_action_space=True,
                render_mode="rgb_array",
            ),
            implementation,
        )
        for implementation in IMPLEMENTATIONS
    ],
]


def _check(env_id: str, implementation: str, **options: Any) -> None:
    env = make_env(env_id, implementation=implementation, **options)
    try:
        with warnings.catch_warnings():
            # check_env warns that a wrapper chain is not its unwrapped env: that is the point of
            # checking the chain as make_env returns it. Any other warning is a failure (the
            # filter added last wins).
            warnings.simplefilter("error")
            warnings.filterwarnings("ignore", message=".*different from the unwrapped version")
            check_env(env)
    finally:
        env.close()


@pytest.mark.parametrize(
    "env_id, options, implementation",
    REPRESENTATIVE,
    ids=[f"{g}-{impl}{'-options' * bool(o)}" for g, o, impl in REPRESENTATIVE],
)
def test_check_env_representative(env_id: str, options: dict[str, Any], implementation: str):
    _check(env_id, implementation, **options)


def test_check_env_non_atari_pass_through():
    # make_env's gym.make branch: what CartPole gives must pass the checker too (CartPole's own
    # unbounded Box draws warnings from gymnasium: only errors count here; its renderer needs
    # pygame, which rapidrl does not install).
    env = make_env("CartPole-v1", max_episode_steps=50)
    check_env(env, skip_render_check=True)
    assert gym.make(env.spec).spec == env.spec


@pytest.mark.exhaustive
@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
@pytest.mark.parametrize("game", sorted(atari_games().values()))
def test_check_env_every_atari_game(game: str, implementation: str):
    # Every id `rapidrl envs` lists: 104 games x 2 implementations took 417 s on 2 cores, more
    # than CI's whole budget for the slow stage, so it runs on request (`pytest -m exhaustive`);
    # CI checks the representative games above, one per code path.
    _check(game, implementation, **NO_NOOP_OPTIONS.get(game, {}))


def _rollout(env: gym.Env, seed: int, steps: int = 60) -> list[Any]:
    obs, info = env.reset(seed=seed)
    out: list[Any] = [obs, info]
    rng = np.random.default_rng(seed)
    for _ in range(steps):
        obs, reward, terminated, truncated, info = env.step(int(rng.integers(env.action_space.n)))
        out += [obs, reward, terminated, truncated, info]
        if terminated or truncated:
            out += list(env.reset())
    return out


def _assert_same(a: list[Any], b: list[Any]) -> None:
    assert len(a) == len(b)
    for t, (x, y) in enumerate(zip(a, b)):
        if isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=f"item {t}")
        else:
            assert x == y, f"item {t}: {x!r} != {y!r}"


@pytest.mark.parametrize("implementation", IMPLEMENTATIONS)
def test_gym_make_spec_rebuilds_an_equal_env(implementation: str):
    options = dict(noop_max=7, frame_skip=3, screen_size=(72, 60), max_episode_frames=2_000)
    env = make_env("breakout", implementation=implementation, **options)
    assert env.spec is not None, "make_env must give every env a spec"
    rebuilt = gym.make(env.spec)
    # Same classes, same chain: the vector envs rely on the bare LeanAtariEnv (step_into).
    assert str(rebuilt) == str(env)
    assert rebuilt.spec == env.spec
    assert (
        rebuilt.observation_space
        == env.observation_space
        == gym.spaces.Box(0, 255, (4, 72, 60), np.uint8)
    )
    # A spec saved as JSON (run configs, checkpoints) rebuilds the same env too.
    from_json = gym.make(EnvSpec.from_json(env.spec.to_json()))
    expected = _rollout(env, seed=5)
    _assert_same(_rollout(rebuilt, seed=5), expected)
    _assert_same(_rollout(from_json, seed=5), expected)


def test_wrapper_chain_spec_records_every_wrapper():
    env = make_env("pong", implementation="wrappers", noop_max=3, frame_stack=2)
    assert isinstance(env, EpisodeStats)
    wrappers = {w.name: w.kwargs for w in env.spec.additional_wrappers}
    assert None not in wrappers.values(), f"wrappers without recorded arguments: {wrappers}"
    assert wrappers["NoopReset"] == {"noop_max": 3}
    assert wrappers["FrameStack"] == {"k": 2}
    # AtariOptions allows no "human" mode; check_env rebuilds the env in every declared mode.
    assert env.metadata["render_modes"] == ["rgb_array"]
