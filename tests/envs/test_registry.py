"""Env ids, aliases, options and their errors."""

from __future__ import annotations

import gymnasium as gym
import pytest

from rapidrl.envs import (
    AtariOptions,
    EnvInfo,
    InvalidOptionError,
    UnknownEnvError,
    list_options,
    make_env,
    resolve_env,
)
from rapidrl.envs.atari_lean import LeanAtariEnv
from rapidrl.envs.atari_wrappers import EpisodeStats


@pytest.mark.parametrize(
    "env_id",
    [
        "pong",
        "Pong",
        "PONG",
        "ALE/Pong-v5",
        "ale/pong-v5",
        "PongNoFrameskip-v4",
        "Pong-v4",
        "PongDeterministic-v4",
    ],
)
def test_pong_aliases(env_id: str):
    assert resolve_env(env_id) == EnvInfo("pong", True, "pong", "ALE/Pong-v5")


@pytest.mark.parametrize(
    "env_id", ["space_invaders", "spaceinvaders", "SpaceInvaders", "Space-Invaders"]
)
def test_multiword_aliases(env_id: str):
    info = resolve_env(env_id)
    assert info.env_id == "space_invaders" and info.gym_id == "ALE/SpaceInvaders-v5"


def test_make_env_implementations():
    assert isinstance(make_env("breakout"), LeanAtariEnv)  # the default
    assert isinstance(make_env("BreakoutNoFrameskip-v4", implementation="wrappers"), EpisodeStats)


def test_unknown_id_names_close_match():
    with pytest.raises(UnknownEnvError, match="did you mean 'pong'"):
        make_env("pongg")
    with pytest.raises(UnknownEnvError, match="did you mean 'breakout'"):
        make_env("ALE/Breakot-v5")
    with pytest.raises(UnknownEnvError, match="did you mean 'CartPole-v1'"):
        make_env("cartpole-v1")
    with pytest.raises(ValueError, match="unknown env id 'zzzz'"):
        make_env("zzzz")


def test_unknown_option_names_close_match():
    with pytest.raises(InvalidOptionError, match="did you mean 'frame_skip'"):
        make_env("pong", frameskip=4)
    with pytest.raises(InvalidOptionError, match="did you mean 'noop_max'"):
        make_env("pong", noopmax=30)


@pytest.mark.parametrize(
    "options, match",
    [
        (dict(frame_skip=0), "frame_skip must be an int >= 1"),
        (dict(frame_stack=2.0), "frame_stack must be an int"),
        (dict(grayscale="no"), "grayscale must be True or False"),
        (
            dict(repeat_action_probability=1.5),
            r"repeat_action_probability must be a float in \[0, 1\]",
        ),
        (dict(screen_size=(84,)), "screen_size must be"),
        (dict(render_mode="human"), "render_mode must be None or 'rgb_array'"),
        (dict(implementation="fast"), "implementation must be one of"),
        (dict(max_episode_frames=0), "max_episode_frames must be an int >= 1 or None"),
    ],
)
def test_wrong_option_value(options: dict, match: str):
    with pytest.raises(InvalidOptionError, match=match):
        make_env("pong", **options)


def test_cartpole_pass_through():
    env = make_env("CartPole-v1", max_episode_steps=10)
    assert resolve_env("CartPole-v1").is_atari is False
    assert type(env.unwrapped).__name__ == "CartPoleEnv"
    assert env.spec.max_episode_steps == 10
    env.reset(seed=0)
    for t in range(10):
        _, _, terminated, truncated, _ = env.step(t % 2)  # alternating keeps the pole up
        assert not terminated
    assert truncated
    with pytest.raises(InvalidOptionError, match="only to Atari envs"):
        make_env("CartPole-v1", frame_skip=4)
    with pytest.raises(InvalidOptionError, match="'bogus'"):
        make_env("CartPole-v1", bogus=1)
    assert isinstance(make_env("CartPole-v1", render_mode="rgb_array"), gym.Env)


def test_list_options():
    defaults = list_options()
    assert defaults == list_options("pong") == AtariOptions.defaults()
    assert defaults["noop_max"] == 30 and defaults["frame_skip"] == 4
    assert defaults["max_episode_frames"] == 108_000 and defaults["implementation"] == "lean"
    assert "max_episode_steps" in list_options("CartPole-v1")
    assert "frame_skip=4" in AtariOptions.describe()
