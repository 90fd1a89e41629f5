"""The Stable-Baselines3 adapter: SB3's VecEnv contract over rapidrl's vector envs, and SB3's PPO
training on it."""

from __future__ import annotations

import warnings
from typing import Any

import gymnasium as gym
import numpy as np
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_checker import check_env as sb3_check_env  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402
from stable_baselines3.common.vec_env import VecCheckNan, VecEnv  # noqa: E402

from rapidrl.envs import make_env  # noqa: E402
from rapidrl.integrations.sb3 import SB3VecEnv, make_sb3_vec  # noqa: E402
from rapidrl.vector import make_vec  # noqa: E402

pytestmark = pytest.mark.timeout(180)

# CartPole cut at 20 steps: random play gives both kinds of end within a few dozen steps (falls
# before step 20 are terminations, the rest truncations).
CARTPOLE = dict(env_options={"max_episode_steps": 20})


@pytest.fixture(autouse=True)
def _sb3_logs_in_tmp_path(tmp_path, monkeypatch):
    # SB3's learn() makes a log folder even with verbose=0: $SB3_LOGDIR, else a new
    # /tmp/SB3-<date> per call that nothing removes.
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path / "sb3"))


def test_step_follows_sb3_contract_and_matches_rapidrl():
    n, seed, steps = 4, 3, 80
    actions = np.random.default_rng(0).integers(0, 2, size=(steps, n))
    ref = make_vec("CartPole-v1", n, **CARTPOLE)
    env = make_sb3_vec("CartPole-v1", n, **CARTPOLE)
    try:
        assert isinstance(env, VecEnv) and env.num_envs == n
        assert env.observation_space == ref.single_observation_space
        assert env.action_space == ref.single_action_space
        env.seed(seed)
        ref_obs, _ = ref.reset(seed=seed)
        np.testing.assert_array_equal(env.reset(), ref_obs)
        seen = {"terminated": 0, "truncated": 0, "episodes": 0}
        for t in range(steps):
            r_obs, r_rew, r_term, r_trunc, r_infos = ref.step(actions[t])
            obs, rewards, dones, infos = env.step(actions[t])
            np.testing.assert_array_equal(obs, r_obs)
            assert rewards.dtype == np.float32 and dones.dtype == bool
            np.testing.assert_array_equal(rewards, r_rew.astype(np.float32))
            np.testing.assert_array_equal(dones, r_term | r_trunc)
            assert isinstance(infos, list) and len(infos) == n
            for i, info in enumerate(infos):
                where = f"step {t}, env {i}"
                assert info["TimeLimit.truncated"] == bool(r_trunc[i] and not r_term[i]), where
                if dones[i]:
                    np.testing.assert_array_equal(
                        info["terminal_observation"], r_infos["final_obs"][i], err_msg=where
                    )
                else:
                    assert "terminal_observation" not in info, where
                if r_infos["episode_end"][i]:
                    assert info["episode"]["r"] == r_infos["episode_return"][i], where
                    assert info["episode"]["l"] == r_infos["episode_length"][i], where
                    assert info["episode"]["r"] == info["episode"]["l"]  # CartPole: 1 per step
                    seen["episodes"] += 1
                else:
                    assert "episode" not in info, where
            seen["terminated"] += int(r_term.sum())
            seen["truncated"] += int((r_trunc & ~r_term).sum())
        # The comparison above means something only if both kinds of end happened.
        assert seen["terminated"] and seen["truncated"] and seen["episodes"], seen
    finally:
        env.close()
        ref.close()


def test_seeds_reach_the_envs_once_and_must_be_consecutive():
    env = make_sb3_vec("CartPole-v1", 3)
    ref = make_vec("CartPole-v1", 3)
    try:
        assert env.seed(11) == [11, 12, 13]
        np.testing.assert_array_equal(env.reset(), ref.reset(seed=11)[0])
        assert env._seeds == [None] * 3, "SB3 seeds apply to the next reset only"
        env.reset()  # unseeded: continues from the envs' generators, no error

        env._seeds = [1, 5, 9]  # what a user-built per-env seed list could be
        with pytest.raises(ValueError, match="must be consecutive"):
            env.reset()
        env._seeds = [None] * 3
        env.set_options({"low": -0.1})
        with pytest.raises(NotImplementedError, match="env_options"):
            env.reset()
    finally:
        env.close()
        ref.close()


def test_attributes_methods_and_wrappers():
    env = make_sb3_vec("CartPole-v1", 3)
    try:
        assert env.render_mode is None
        assert env.get_attr("render_mode") == [None] * 3
        assert env.get_attr("action_space", indices=[0, 2]) == [env.action_space] * 2
        assert env.has_attr("observation_space") and not env.has_attr("gravity")
        with pytest.raises(AttributeError, match="make_env"):
            env.get_attr("gravity")
        with pytest.raises(NotImplementedError, match="env_options"):
            env.set_attr("gravity", 1.0)
        with pytest.raises(NotImplementedError, match="'get_action_meanings'"):
            env.env_method("get_action_meanings")
        # Monitor: the adapter writes its info["episode"]; other wrappers cannot be inspected.
        assert env.env_is_wrapped(Monitor) == [True] * 3
        assert env.env_is_wrapped(gym.wrappers.TimeLimit, indices=1) == [False]
        with pytest.raises(RuntimeError, match="step_async"):
            env.step_wait()
    finally:
        env.close()
    env.close()  # closing twice is harmless


class _FakeVec:
    """Just the attributes SB3VecEnv checks before it touches the env."""

    def __init__(self, **attrs: Any) -> None:
        self.num_envs = 4
        self.single_observation_space = gym.spaces.Box(-1, 1, (2,))
        self.single_action_space = gym.spaces.Discrete(2)
        self.__dict__.update(attrs)


def test_rejects_first_ready_batches_and_views():
    with pytest.raises(ValueError, match="synchronous backend"):
        SB3VecEnv(_FakeVec(batch_size=2))
    with pytest.raises(ValueError, match="copy=True"):
        SB3VecEnv(_FakeVec(batch_size=4, copy=False))
    with pytest.raises(ValueError, match="copy=True"):
        make_sb3_vec("CartPole-v1", 2, copy=False)


def test_vec_check_nan_and_sb3_env_checker():
    env = VecCheckNan(make_sb3_vec("CartPole-v1", 2, **CARTPOLE), raise_exception=True)
    try:
        env.reset()
        rng = np.random.default_rng(1)
        for _ in range(50):  # episodes end on the way: terminal observations are checked too
            env.step(rng.integers(0, 2, size=2))
    finally:
        env.close()
    # SB3's own checker on the single Atari envs the adapter serves (both implementations).
    for implementation in ("lean", "wrappers"):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # SB3 reports its findings as warnings
            sb3_check_env(make_env("pong", implementation=implementation))


def test_ppo_mlp_cartpole_over_worker_processes():
    # The hybrid backend: envs in worker processes, as a user would run it for speed.
    env = make_sb3_vec("CartPole-v1", 4, backend="hybrid", num_workers=2)
    try:
        model = PPO("MlpPolicy", env, n_steps=32, batch_size=64, n_epochs=2, seed=0, device="cpu")
        model.learn(total_timesteps=512)
        assert model.num_timesteps >= 512
        episodes = list(model.ep_info_buffer)
        assert episodes, "SB3 saw no info['episode']: rollout/ep_rew_mean would stay empty"
        assert all(ep["r"] == ep["l"] > 0 for ep in episodes)
    finally:
        env.close()


def test_ppo_cnn_pong():
    # 400-frame games (~100 agent steps): a few whole games within a short run.
    env = make_sb3_vec("pong", 2, env_options={"max_episode_frames": 400})
    try:
        assert env.observation_space == gym.spaces.Box(0, 255, (4, 84, 84), np.uint8)
        model = PPO("CnnPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0, device="cpu")
        # Channels-first uint8 frames are images to SB3 as they are: no VecTransposeImage.
        assert model.get_env() is env
        model.learn(total_timesteps=512)
        assert model.num_timesteps >= 512
        episodes = list(model.ep_info_buffer)
        assert episodes, "expected whole 400-frame games in 256 steps per env"
        for ep in episodes:  # the real game score and length, not clipped or per life
            assert -21 <= ep["r"] <= 21 and float(ep["r"]).is_integer()
            assert 90 <= ep["l"] <= 100
    finally:
        env.close()
