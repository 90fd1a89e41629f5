"""The rapidrl Atari stack: lean == wrappers frame for frame, and the protocol's semantics."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from rapidrl.envs import make_env

pytestmark = pytest.mark.timeout(120)

NOOP, FIRE = 0, 1


def _rollout(env, seed: int, actions: np.ndarray) -> list[tuple[Any, ...]]:
    """Reset with ``seed``, play ``actions`` (resetting after every end), record everything."""
    obs, info = env.reset(seed=seed)
    records: list[tuple[Any, ...]] = [("reset", obs, info)]
    for action in actions:
        obs, reward, terminated, truncated, info = env.step(int(action))
        records.append(("step", obs, reward, terminated, truncated, info))
        if terminated or truncated:
            obs, info = env.reset()
            records.append(("reset", obs, info))
    return records


def _assert_same(lean: list, ref: list) -> None:
    assert len(lean) == len(ref)
    for t, (a, b) in enumerate(zip(lean, ref)):
        assert a[0] == b[0], f"record {t}: {a[0]} vs {b[0]}"
        np.testing.assert_array_equal(a[1], b[1], err_msg=f"obs differ at record {t} ({a[0]})")
        assert a[1].dtype == b[1].dtype == np.uint8
        assert a[2:] == b[2:], f"record {t}: {a[2:]} != {b[2:]}"
        for x in a[2:]:  # no numpy scalars leak into rewards/flags
            assert type(x) in (float, bool, dict)


def _episodes(records: list) -> list[dict]:
    return [r[5]["episode"] for r in records if r[0] == "step" and "episode" in r[5]]


def _compare(game: str, seed: int, steps: int, **options: Any) -> list:
    n_actions = make_env(game, **options).action_space.n
    actions = np.random.default_rng(seed).integers(0, n_actions, size=steps)
    lean = _rollout(make_env(game, implementation="lean", **options), seed, actions)
    ref = _rollout(make_env(game, implementation="wrappers", **options), seed, actions)
    _assert_same(lean, ref)
    return lean


def test_lean_equals_wrappers_pong_game_over_and_truncation():
    # ~1,000 agent steps per game: random Pong sometimes loses 21-0 before the limit, else it is
    # truncated; both kinds of real end must match frame for frame.
    records = _compare("pong", seed=3, steps=3000, clip_rewards=False, max_episode_frames=3600)
    ends = [r for r in records if r[0] == "step" and "episode" in r[5]]
    assert any(r[3] for r in ends), "expected at least one game over"
    assert any(r[4] and not r[3] for r in ends), "expected at least one truncation"
    for r in ends:
        assert isinstance(r[5]["episode"]["r"], float) and isinstance(r[5]["episode"]["l"], int)


def test_lean_equals_wrappers_breakout_lives_fire_episodic():
    records = _compare("breakout", seed=7, steps=2000)
    steps = [r for r in records if r[0] == "step"]
    life_losses = [r for r in steps if r[3] and "episode" not in r[5]]
    assert len(life_losses) >= 4, "episodic life: life losses must terminate"
    assert len(_episodes(records)) >= 2, "expected several real game ends"
    assert all(r[2] in (-1.0, 0.0, 1.0) for r in steps)


@pytest.mark.parametrize(
    "game, options",
    [
        ("breakout", dict(repeat_action_probability=0.25, full_action_space=True, noop_max=5)),
        (
            "pong",
            dict(
                grayscale=False, frame_skip=3, max_pool=False, screen_size=(64, 48), frame_stack=2
            ),
        ),
        # The cheaper-torso frame sizes (PPO/PQN --obs-size): the lean stack resizes straight to
        # them, frame for frame what the wrapper chain's WarpFrame gives.
        ("pong", dict(screen_size=64)),
        ("pong", dict(screen_size=42)),
        (
            "space_invaders",
            dict(
                noop_max=0,
                fire_reset=False,
                episodic_life=False,
                frame_stack=1,
                clip_rewards=False,
                frame_skip=1,
                max_episode_frames=300,
            ),
        ),
    ],
)
def test_lean_equals_wrappers_other_options(game: str, options: dict):
    records = _compare(game, seed=11, steps=400, **options)
    assert records[0][1].shape == make_env(game, **options).observation_space.shape


def test_obs_shape_dtype_and_frame_stack_order():
    env = make_env("pong")
    obs, info = env.reset(seed=0)
    assert obs.shape == (4, 84, 84) and obs.dtype == np.uint8
    assert env.observation_space.contains(obs)
    assert set(info) == {"lives", "episode_frame_number"}
    assert all((obs[i] == obs[0]).all() for i in range(4)), "reset frame fills every slot"
    prev = obs.copy()
    for _ in range(6):
        obs, *_ = env.step(2)
        assert obs.shape == (4, 84, 84)
        np.testing.assert_array_equal(obs[:3], prev[1:])  # oldest first, newest last
        prev = obs.copy()
    rgb = make_env("pong", grayscale=False)
    assert rgb.reset(seed=0)[0].shape == (12, 84, 84)


def test_lean_returns_fresh_observations():
    env = make_env("pong")
    obs0, _ = env.reset(seed=0)
    keep = obs0.copy()
    obs1, *_ = env.step(2)
    env.step(3)
    np.testing.assert_array_equal(obs0, keep)
    assert not np.shares_memory(obs0, obs1)


def test_episode_stats_at_frame_limit_scripted_actions():
    """Scripted play until the frame limit: the real episode end carries the real return."""
    env = make_env("pong", clip_rewards=False, max_episode_frames=2000)
    env.reset(seed=5)
    script = [2, 2, 2, 3, 3, 3, 0, 1]
    rewards: list[float] = []
    for t in range(1000):
        _, reward, terminated, truncated, info = env.step(script[t % len(script)])
        rewards.append(reward)
        assert "episode" not in info or truncated or terminated
        if terminated or truncated:
            break
    assert truncated and not terminated
    assert 2000 <= info["episode_frame_number"] < 2000 + 4
    assert info["episode"] == {"r": sum(rewards), "l": len(rewards)}
    assert sum(rewards) != 0  # something was scored, so r is a real check
    # The next reset starts a new game.
    _, info = env.reset()
    assert info["episode_frame_number"] <= 30 + 8  # no-ops + FIRE presses


def test_episode_stats_game_over_pong():
    """Never moving loses Pong 0-21: terminated, r = -21 (clipped or not), l = all steps."""
    env = make_env("pong", implementation="lean")
    env.reset(seed=1)
    steps = 0
    while True:
        _, reward, terminated, truncated, info = env.step(NOOP)
        steps += 1
        if terminated or truncated:
            break
    assert terminated and not truncated
    assert info["episode"] == {"r": -21.0, "l": steps}


def test_breakout_episodic_life_continues_game_and_counts_all_lives():
    env = make_env("breakout", clip_rewards=False)
    _, info = env.reset(seed=2)
    assert info["lives"] == 5
    steps, life_ends, score = 0, 0, 0.0
    while True:
        _, reward, terminated, truncated, info = env.step(NOOP)  # never moves: loses each life
        steps += 1
        score += reward
        if "episode" in info:
            break
        if terminated:
            life_ends += 1
            frames, lives = info["episode_frame_number"], info["lives"]
            _, info = env.reset()
            # Same game: lives kept, emulator frames keep counting (no-op + FIRE presses).
            assert info["lives"] == lives
            assert frames < info["episode_frame_number"] <= frames + 3 * 4
    assert terminated and life_ends == 4 and info["lives"] == 0
    assert info["episode"] == {"r": score, "l": steps}
    _, info = env.reset()
    assert info["lives"] == 5 and info["episode_frame_number"] <= 30 + 8


def test_reset_without_life_loss_starts_new_game():
    env = make_env("breakout")
    env.reset(seed=0)
    for _ in range(20):
        env.step(2)
    _, info = env.reset()
    assert info["episode_frame_number"] <= 30 + 8


def test_seeded_reset_is_reproducible_and_seeds_differ():
    env = make_env("breakout")
    a, _ = env.reset(seed=4)
    actions = [1, 2, 3, 2, 3, 1] * 10
    run_a = [env.step(x)[0] for x in actions]
    b, _ = env.reset(seed=4)
    run_b = [env.step(x)[0] for x in actions]
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(np.stack(run_a), np.stack(run_b))
    pong = make_env("pong")
    noops = {pong.reset(seed=s)[1]["episode_frame_number"] for s in range(8)}
    assert len(noops) > 1, "the no-op count must depend on the seed"


@pytest.mark.parametrize("implementation", ["lean", "wrappers"])
def test_reward_clipping(implementation: str):
    """Space Invaders scores 5-30 per invader: clipped rewards are their sign."""
    actions = np.random.default_rng(0).integers(0, 6, size=300)
    clipped = make_env("space_invaders", implementation=implementation)
    raw = make_env("space_invaders", implementation=implementation, clip_rewards=False)
    a = _rollout(clipped, 0, actions)
    b = _rollout(raw, 0, actions)
    r_clipped = np.array([r[2] for r in a if r[0] == "step"])
    r_raw = np.array([r[2] for r in b if r[0] == "step"])
    assert np.abs(r_raw).max() > 1
    np.testing.assert_array_equal(r_clipped, np.sign(r_raw))
    assert set(np.unique(r_clipped)) <= {-1.0, 0.0, 1.0}
    # Episode statistics are unclipped either way.
    assert _episodes(a) == _episodes(b)


@pytest.mark.parametrize("implementation", ["lean", "wrappers"])
def test_render_rgb_array(implementation: str):
    env = make_env("pong", implementation=implementation, render_mode="rgb_array")
    env.reset(seed=0)
    frame = env.render()
    assert frame.shape == (210, 160, 3) and frame.dtype == np.uint8


def test_invalid_action_is_rejected():
    for implementation in ("lean", "wrappers"):
        env = make_env("pong", implementation=implementation)
        env.reset(seed=0)
        with pytest.raises(ValueError, match="action must be in"):
            env.step(6)
        with pytest.raises(ValueError, match="action must be in"):
            env.step(-1)
        with pytest.raises(TypeError):
            env.step(1.5)
        env.step(np.int64(1))


def test_fire_reset_only_in_games_with_fire():
    # Freeway has no FIRE: reset is just the no-ops (lean and wrappers agree).
    _compare("freeway", seed=1, steps=50)
    env = make_env("freeway", noop_max=0)
    _, info = env.reset(seed=0)
    assert info["episode_frame_number"] == 0
    env = make_env("breakout", noop_max=0)
    _, info = env.reset(seed=0)
    assert info["episode_frame_number"] == 8  # FIRE + action 2, 4 frames each


def test_step_into_writes_what_step_returns():
    """The vector envs' in-place path gives the observation, reward, flags and info of ``step``."""
    a = make_env("pong", max_episode_frames=2000)
    b = make_env("pong", max_episode_frames=2000)
    out = np.full(a.observation_space.shape, 7, np.uint8)
    obs_a, _ = a.reset(seed=5)
    obs_b, _ = b.reset(seed=5)
    np.testing.assert_array_equal(obs_a, obs_b)
    ends = 0
    for t, action in enumerate(np.random.default_rng(5).integers(0, 6, size=1200)):
        obs_a, *rest_a = a.step(int(action))
        rest_b = b.step_into(int(action), out)
        np.testing.assert_array_equal(out, obs_a, err_msg=f"step {t}")
        assert tuple(rest_a) == rest_b, f"step {t}"
        if rest_b[1] or rest_b[2]:
            ends += 1
            np.testing.assert_array_equal(a.reset()[0], b.reset()[0])
    assert ends >= 1, "expected an episode end (frame limit) to exercise reset"
