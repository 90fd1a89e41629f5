"""A vector env of rapidrl Atari envs gives exactly what the same envs give stepped one by one
(the groups write lean-env observations in place, not through ``step``)."""

from __future__ import annotations

import numpy as np
import pytest

from rapidrl.envs import make_env
from rapidrl.vector import make_vec

pytestmark = pytest.mark.timeout(120)

N, T, SEED = 3, 400, 11
OPTIONS = {"max_episode_frames": 600, "noop_max": 30}


@pytest.mark.parametrize("backend", ["serial", "hybrid"])
def test_vector_lean_atari_equals_envs_stepped_by_hand(backend: str):
    actions = np.random.default_rng(SEED).integers(0, 6, size=(T, N))
    envs = [make_env("pong", **OPTIONS) for _ in range(N)]
    ref_obs = np.stack([e.reset(seed=SEED + i)[0] for i, e in enumerate(envs)])
    kw = {"num_workers": 2, "inline": True} if backend == "hybrid" else {}
    with make_vec("pong", N, backend, env_options=OPTIONS, **kw) as venv:
        obs, _ = venv.reset(seed=SEED)
        np.testing.assert_array_equal(obs, ref_obs)
        ends = 0
        for t in range(T):
            obs, rewards, terminated, truncated, infos = venv.step(actions[t])
            for i, env in enumerate(envs):
                o, r, te, tr, info = env.step(int(actions[t, i]))
                assert (rewards[i], terminated[i], truncated[i]) == (r, te, tr), f"t={t} env {i}"
                assert infos["episode_end"][i] == ("episode" in info)
                if "episode" in info:
                    assert infos["episode_return"][i] == info["episode"]["r"]
                    assert infos["episode_length"][i] == info["episode"]["l"]
                if te or tr:
                    ends += 1
                    np.testing.assert_array_equal(infos["final_obs"][i], o, err_msg=f"t={t}")
                    o, _ = env.reset()
                np.testing.assert_array_equal(obs[i], o, err_msg=f"t={t} env {i}")
            if not (terminated | truncated).any():  # zeros, shared and read-only
                assert not infos["final_obs"].any() and not infos["final_obs"].flags.writeable
        assert ends >= N, "expected every env to reach its frame limit at least once"
