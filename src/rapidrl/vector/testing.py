"""Small deterministic envs for testing vector backends (exact expectations, no emulator).

They live in the package (not in ``tests/``) so worker processes can import them by name.
"""

from __future__ import annotations

import functools
import time

import gymnasium as gym
import numpy as np


class CountingEnv(gym.Env):
    """Short episodes that end by termination *or* truncation, fully determined by the seed.

    Observation ``float32 [4]``: ``(tag, episode index, step in episode, last action)`` where
    ``tag`` is drawn from the env's seeded RNG at every reset, so differently seeded envs differ.
    Each reset also draws the episode length (``min_len..max_len``) and whether the episode ends
    terminated or truncated. Reward ``= step + action / 8`` (exact in float64).

    Test knobs: ``delay`` sleeps that many seconds per step (a slow env); ``crash_at`` raises on
    that step count since construction (a crashing env); ``lives > 1`` emulates Atari with episodic
    life: every termination is a life loss, the game (and its reported episode) ends at the last
    life or at a truncation, and only then does ``info["episode"] = {"r", "l"}`` appear.
    """

    metadata: dict = {}

    def __init__(
        self,
        min_len: int = 2,
        max_len: int = 6,
        n_actions: int = 3,
        delay: float = 0.0,
        crash_at: int | None = None,
        lives: int = 1,
    ):
        self.observation_space = gym.spaces.Box(-1e6, 1e6, shape=(4,), dtype=np.float32)
        self.action_space = gym.spaces.Discrete(n_actions)
        self.min_len, self.max_len = min_len, max_len
        self.delay, self.crash_at, self.max_lives = delay, crash_at, lives
        self.reports_episode_stats = lives > 1
        self.total_steps = 0
        self.episode = -1
        self.lives = 0

    def _obs(self, action: int = 0) -> np.ndarray:
        return np.array([self.tag, self.episode, self.t, action], dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        if self.lives <= 0 or seed is not None:  # a new game (else: the next life)
            self.lives = self.max_lives
            self.game_return, self.game_length = 0.0, 0
        self.episode += 1
        self.t = 0
        self.tag = float(self.np_random.integers(0, 1000))
        self.length = int(self.np_random.integers(self.min_len, self.max_len + 1))
        self.truncates = bool(self.np_random.integers(0, 2))
        return self._obs(), {}

    def step(self, action):
        action = int(action)
        self.total_steps += 1
        if self.crash_at is not None and self.total_steps >= self.crash_at:
            raise RuntimeError(f"CountingEnv: deliberate crash at step {self.total_steps}")
        if self.delay:
            time.sleep(self.delay)
        self.t += 1
        reward = self.t + action / 8
        self.game_return += reward
        self.game_length += 1
        end = self.t >= self.length
        terminated, truncated = end and not self.truncates, end and self.truncates
        info = {}
        if terminated:
            self.lives -= 1
        if self.max_lives > 1 and (truncated or (terminated and self.lives == 0)):
            info["episode"] = {"r": self.game_return, "l": self.game_length}
            self.lives = 0
        return self._obs(action), reward, terminated, truncated, info


def counting_env_fns(n: int, **kwargs) -> list:
    """``n`` picklable factories of :class:`CountingEnv` (the same ``kwargs`` for each)."""
    return [functools.partial(CountingEnv, **kwargs) for _ in range(n)]


def collect_trajectories(venv, actions: np.ndarray, seed: int | None = 0):
    """Run ``venv`` until every env made ``T = actions.shape[1]`` steps; env ``i``'s ``k``-th step
    uses ``actions[i, k]``. Works for synchronous and first-ready backends alike (results are
    keyed by env id), so per-env trajectories of any two backends can be compared.

    Returns ``(reset_obs [N, ...], trajectories)``: ``trajectories[i]`` lists env ``i``'s first
    ``T`` steps as dicts (``final_obs`` is ``None`` unless the step ended an episode).
    """
    n, steps = actions.shape[:2]
    obs, infos = venv.reset(seed=seed)
    reset_obs = np.array(obs, copy=True)
    trajectories: list[list[dict]] = [[] for _ in range(n)]
    count = np.zeros(n, np.int64)
    ids = infos["env_id"]
    while (count < steps).any():
        venv.send(actions[ids, np.minimum(count[ids], steps - 1)], ids)
        obs, rewards, terminated, truncated, infos, ids = venv.recv()
        for k, i in enumerate(ids):
            if count[i] < steps:
                done = bool(terminated[k] or truncated[k])
                trajectories[i].append(
                    {
                        "obs": np.array(obs[k], copy=True),
                        "reward": float(rewards[k]),
                        "terminated": bool(terminated[k]),
                        "truncated": bool(truncated[k]),
                        "final_obs": np.array(infos["final_obs"][k], copy=True) if done else None,
                        "episode_end": bool(infos["episode_end"][k]),
                        "episode_return": float(infos["episode_return"][k]),
                        "episode_length": int(infos["episode_length"][k]),
                    }
                )
            count[i] += 1
    return reset_obs, trajectories


def assert_trajectories_equal(expected, actual, label: str = "") -> None:
    """Exact equality of two :func:`collect_trajectories` results, naming the first difference."""
    (obs_a, traj_a), (obs_b, traj_b) = expected, actual
    np.testing.assert_array_equal(obs_a, obs_b, err_msg=f"{label}: reset observations differ")
    for i, (ta, tb) in enumerate(zip(traj_a, traj_b)):
        assert len(ta) == len(tb), f"{label}: env {i} has {len(ta)} vs {len(tb)} steps"
        for k, (sa, sb) in enumerate(zip(ta, tb)):
            for key in sa:
                va, vb = sa[key], sb[key]
                where = f"{label}: env {i} step {k} {key}"
                if va is None or vb is None:
                    assert va is None and vb is None, f"{where}: {va} vs {vb}"
                else:
                    np.testing.assert_array_equal(va, vb, err_msg=where)


class BadObsEnv(gym.Env):
    """An env whose observations break its own space from a given step on (hole tests).

    Declares ``Box(shape=(4,), dtype=space_dtype)``; from env step ``bad_from`` on (0: already at
    ``reset``) it returns ``bad_obs`` (a fixed array) instead of a conforming observation.
    Episodes last ``episode_len`` steps (then ``terminated``).
    """

    metadata: dict = {}

    def __init__(
        self,
        bad_obs: np.ndarray | None = None,
        bad_from: int = 0,
        space_dtype: type = np.float32,
        episode_len: int = 1000,
    ):
        high = 255 if np.dtype(space_dtype).kind == "u" else 1e6
        self.observation_space = gym.spaces.Box(0, high, shape=(4,), dtype=space_dtype)
        self.action_space = gym.spaces.Discrete(2)
        self.bad_obs, self.bad_from, self.episode_len = bad_obs, bad_from, episode_len
        self.steps = 0
        self.t = 0

    def _obs(self):
        if self.bad_obs is not None and self.steps >= self.bad_from:
            return self.bad_obs
        return np.full(4, self.t, dtype=self.observation_space.dtype)

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        super().reset(seed=seed)
        self.t = 0
        return self._obs(), {}

    def step(self, action):
        self.steps += 1
        self.t += 1
        return self._obs(), 1.0, self.t >= self.episode_len, False, {}
