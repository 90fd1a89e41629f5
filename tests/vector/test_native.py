"""The native backends (``ale``, ``envpool``) under the vector API: shapes, same-step
autoreset with ``final_obs``, real unclipped episode statistics, life losses, batches; envpool's
MuJoCo tasks against Gymnasium's, step by step."""

from __future__ import annotations

import sys

import numpy as np
import pytest

from rapidrl.vector import INFO_KEYS, make_vec
from rapidrl.vector.testing import assert_trajectories_equal, collect_trajectories

pytestmark = pytest.mark.timeout(90)

try:
    import envpool  # noqa: F401

    BACKENDS = ["ale", "envpool"]
except ImportError:
    BACKENDS = ["ale", pytest.param("envpool", marks=pytest.mark.skip("envpool not installed"))]

SHORT = {"max_episode_frames": 160}  # Pong truncates after 40 agent steps


def _fresh(obs: np.ndarray) -> bool:
    """A reset observation: every frame but the newest equal (ale: zeros, envpool: copies)."""
    return bool((obs[:-1] == obs[0]).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_shapes_autoreset_and_stats(backend):
    with make_vec("pong", 2, backend, env_options=SHORT) as venv:
        assert venv.single_observation_space.shape == (4, 84, 84)
        assert venv.single_action_space.n == 6
        obs, infos = venv.reset(seed=5)
        assert obs.shape == (2, 4, 84, 84) and obs.dtype == np.uint8
        assert set(INFO_KEYS) <= set(infos)
        rng = np.random.default_rng(0)
        for step in range(1, 46):
            last = obs
            obs, rewards, terminated, truncated, infos = venv.step(rng.integers(0, 6, 2))
            np.testing.assert_array_equal(infos["env_id"], [0, 1])
            assert set(np.unique(rewards)) <= {-1.0, 0.0, 1.0}
            if step < 40:
                assert not (terminated | truncated).any() and not infos["episode_end"].any()
                continue
            if step == 40:
                assert truncated.all() and not terminated.any()
                assert infos["episode_end"].all()
                np.testing.assert_array_equal(infos["episode_length"], [40, 40])
                assert (np.abs(infos["episode_return"]) <= 21).all()
                for i in range(2):
                    assert _fresh(obs[i]) and not _fresh(infos["final_obs"][i])
                    # the final observation continues the previous one by one frame
                    np.testing.assert_array_equal(infos["final_obs"][i][:-1], last[i][1:])


@pytest.mark.parametrize("backend", BACKENDS)
def test_first_ready_batches_equal_synchronous(backend):
    """Groups of batch_size envs: per-env trajectories identical to one synchronous vectorizer."""
    acts = np.random.default_rng(1).integers(0, 6, size=(4, 45))
    with make_vec("pong", 4, backend, env_options=SHORT) as venv:
        ref = collect_trajectories(venv, acts, seed=11)
    with make_vec("pong", 4, backend, batch_size=2, env_options=SHORT) as venv:
        assert venv.batch_size == 2
        got = collect_trajectories(venv, acts, seed=11)
    assert_trajectories_equal(ref, got, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_rewards_clipped_but_scores_real(backend):
    """Space Invaders scores 5-30 per hit: clipped rewards, unclipped episode returns."""
    acts = np.random.default_rng(2).choice([1, 4, 5], size=(1, 101))  # FIRE, RIGHT/LEFTFIRE
    runs = {}
    for clip in (False, True):
        opts = {"max_episode_frames": 400, "clip_rewards": clip, "episodic_life": False}
        with make_vec("space_invaders", 1, backend, env_options=opts) as venv:
            runs[clip] = collect_trajectories(venv, acts, seed=3)[1][0]
    raw = np.array([s["reward"] for s in runs[False]])
    clipped = np.array([s["reward"] for s in runs[True]])
    assert raw.max() > 1, "no score in 100 steps: pick another seed"
    np.testing.assert_array_equal(clipped, np.sign(raw))
    end = [s for s in runs[True] if s["episode_end"]]
    assert len(end) == 1 and end[0]["episode_return"] == raw[: end[0]["episode_length"]].sum()


@pytest.mark.parametrize("backend", BACKENDS)
def test_episodic_life(backend):
    """Breakout: a lost life is terminated=True but not a real episode end; game over is."""
    with make_vec("breakout", 1, backend, env_options={"episodic_life": True}) as venv:
        obs, _ = venv.reset(seed=0)
        rng = np.random.default_rng(0)
        life_losses, steps, clipped_sum = 0, 0, 0.0
        for _ in range(2000):
            obs, rewards, terminated, truncated, infos = venv.step(rng.integers(0, 4, 1))
            steps += 1
            clipped_sum += rewards[0]
            if infos["episode_end"][0]:
                assert terminated[0] and infos["episode_length"][0] == steps
                assert infos["episode_return"][0] >= clipped_sum  # bricks score 1..7
                break
            if terminated[0]:
                life_losses += 1
        else:
            pytest.fail("no game over in 2000 steps")
    assert life_losses == 4  # 5 lives


def test_clear_errors(monkeypatch):
    with pytest.raises(ValueError, match="Atari games only"):
        make_vec("CartPole-v1", 2, "ale")
    with pytest.raises(ValueError, match="multiple of batch_size"):
        make_vec("pong", 4, "ale", batch_size=3)
    with pytest.raises(ValueError, match="grayscale=False"):
        make_vec("pong", 2, "ale", env_options={"grayscale": False})
    monkeypatch.setitem(sys.modules, "envpool", None)  # as if not installed
    with pytest.raises(ImportError, match=r"pip install -e '\.\[envpool\]'"):
        make_vec("pong", 2, "envpool")


# --------------------------------------------------------------------------------------------
# envpool's MuJoCo tasks
# --------------------------------------------------------------------------------------------
def _needs_envpool_mujoco():
    pytest.importorskip("envpool")
    pytest.importorskip("mujoco")


def _steps(venv, actions, seed):
    """Every env's steps under ``actions [N, T, A]`` (synchronous step), as arrays per key."""
    obs, _ = venv.reset(seed=seed)
    out = {k: [] for k in ("obs", "reward", "terminated", "truncated", "final_obs", "ret", "len")}
    reset_obs = obs.copy()
    for t in range(actions.shape[1]):
        obs, rewards, terminated, truncated, infos = venv.step(actions[:, t])
        end = terminated | truncated
        out["obs"].append(obs.copy())
        out["reward"].append(rewards.copy())
        out["terminated"].append(terminated.copy())
        out["truncated"].append(truncated.copy())
        out["final_obs"].append(np.where(end[:, None], infos["final_obs"], 0.0))
        out["ret"].append(infos["episode_return"].copy())
        out["len"].append(infos["episode_length"].copy())
    return reset_obs, {k: np.array(v) for k, v in out.items()}


@pytest.mark.parametrize("task", ["Hopper-v5", "Walker2d-v5"])
def test_envpool_mujoco_steps_as_gymnasium(task):
    """With the initial-state noise off, envpool's task steps to Gymnasium's observations,
    rewards, ends (falls and the time limit) and episode statistics under the same actions."""
    _needs_envpool_mujoco()
    n, steps = 2, 120
    opts = {"reset_noise_scale": 0.0, "max_episode_steps": 20}
    with make_vec(task, n, "serial", env_options=opts) as venv:
        act_dim = venv.single_action_space.shape[0]
        actions = np.random.default_rng(0).uniform(-1, 1, (n, steps, act_dim)).astype(np.float32)
        ref_reset, ref = _steps(venv, actions, seed=1)
        ref_spaces = (venv.single_observation_space, venv.single_action_space)
    with make_vec(task, n, "envpool", env_options=opts) as venv:
        assert (venv.single_observation_space, venv.single_action_space) == ref_spaces
        got_reset, got = _steps(venv, actions, seed=1)
    assert ref["terminated"].any() and ref["truncated"].any()  # falls and time limits
    if task == "Hopper-v5":  # and a fall on the limit's step: terminated and truncated
        assert (ref["terminated"] & ref["truncated"]).any()
    np.testing.assert_allclose(got_reset, ref_reset, atol=1e-9)
    # A fall on the limit's very step: Gymnasium says terminated and truncated, envpool only
    # truncated (module docstring); every other step's flags agree.
    both = ref["terminated"] & ref["truncated"]
    np.testing.assert_array_equal(
        got["terminated"], ref["terminated"] & ~both, err_msg="terminated"
    )
    for key in ("truncated", "len"):
        np.testing.assert_array_equal(got[key], ref[key], err_msg=key)
    for key, atol in (("obs", 1e-6), ("final_obs", 1e-6), ("reward", 1e-5), ("ret", 1e-4)):
        np.testing.assert_allclose(got[key], ref[key], atol=atol, err_msg=key)


def test_envpool_mujoco_batches_equal_synchronous():
    """Groups of batch_size envs: per-env trajectories identical to one synchronous pool."""
    _needs_envpool_mujoco()
    acts = np.random.default_rng(4).uniform(-1, 1, size=(4, 30, 3)).astype(np.float32)
    opts = {"max_episode_steps": 10}
    with make_vec("Hopper-v5", 4, "envpool", env_options=opts) as venv:
        ref = collect_trajectories(venv, acts, seed=7)
    with make_vec("Hopper-v5", 4, "envpool", batch_size=2, env_options=opts) as venv:
        assert venv.batch_size == 2
        got = collect_trajectories(venv, acts, seed=7)
    assert_trajectories_equal(ref, got, "envpool Hopper-v5 batch 2")


def test_envpool_mujoco_clear_errors():
    _needs_envpool_mujoco()
    with pytest.raises(ValueError, match="Atari games and Gymnasium's MuJoCo tasks"):
        make_vec("CartPole-v1", 2, "envpool")
    with pytest.raises(ValueError, match="does not render"):
        make_vec("Hopper-v5", 2, "envpool", env_options={"render_mode": "rgb_array"})
    with pytest.raises(ValueError, match="envpool's Hopper-v5 does not take the options"):
        make_vec("Hopper-v5", 2, "envpool", env_options={"no_such_option": 1})
