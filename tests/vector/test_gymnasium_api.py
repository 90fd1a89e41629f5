"""rapidrl vector envs are ``gymnasium.vector.VectorEnv``s: spaces, metadata, reset arguments,
gymnasium's own vector wrappers, a CleanRL-style PPO loop written against plain gymnasium, and
``gymnasium.make_vec`` through rapidrl-registered ids."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space
from gymnasium.wrappers.vector import (
    ClipReward,
    NormalizeObservation,
    RecordEpisodeStatistics,
    TransformObservation,
)

from rapidrl.vector import make_vec

pytestmark = pytest.mark.timeout(120)

N = 4
# Every layout a gymnasium loop can drive. It needs all N envs back from each step, so the async
# backend runs with batch_size == num_envs here, which is the plain hybrid layout (2 processes x
# 2 envs): first-ready batches return fewer envs, in varying order, which no gymnasium wrapper or
# loop expects (see the api module docstring).
LAYOUTS = {
    "serial": {},
    "subprocess": {},
    "hybrid-inline": {"num_workers": 2, "inline": True},
    "async": {"num_workers": 2, "batch_size": N},
}


def _make(layout: str, env: str = "CartPole-v1", n: int = N, **kwargs):
    backend = layout.split("-")[0]
    return make_vec(env, n, backend, **LAYOUTS.get(layout, {}), **kwargs)


@pytest.fixture(scope="module", params=list(LAYOUTS))
def venv(request):
    v = _make(request.param)
    yield v
    v.close()


def test_is_a_gymnasium_vector_env(venv):
    assert isinstance(venv, gym.vector.VectorEnv)
    assert venv.num_envs == N
    assert venv.observation_space == batch_space(venv.single_observation_space, N)
    assert venv.action_space == gym.spaces.MultiDiscrete([2] * N)
    assert venv.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
    assert venv.render_mode is None
    obs, _ = venv.reset(seed=3)
    assert obs in venv.observation_space
    assert venv.np_random_seed == 3 and isinstance(venv.np_random, np.random.Generator)
    assert venv.action_space.sample() in venv.action_space


def test_reset_seed_forms_and_options(venv):
    by_int, _ = venv.reset(seed=7)
    by_list, _ = venv.reset(seed=[7, 8, 9, 10])
    np.testing.assert_array_equal(by_list, by_int)
    swapped, _ = venv.reset(seed=[8, 7, 10, 9])
    np.testing.assert_array_equal(swapped, by_int[[1, 0, 3, 2]])
    single = gym.make("CartPole-v1")
    np.testing.assert_array_equal(swapped[0], single.reset(seed=8)[0])
    # options reach every env's reset (CartPole's "low"/"high" bound its initial state)
    obs, _ = venv.reset(seed=0, options={"low": -0.001, "high": 0.001})
    assert np.abs(obs).max() <= 0.001
    with pytest.raises(ValueError, match="num_envs=4"):
        venv.reset(seed=[1, 2])
    with pytest.raises(ValueError, match="reset_mask"):
        venv.reset(options={"reset_mask": np.ones(N, bool)})
    obs, *_ = venv.step(np.zeros(N, np.int64))  # still usable after refused arguments
    assert obs.shape == (N, 4)


def test_gymnasium_wrappers_agree_with_our_episode_stats(venv):
    envs = ClipReward(RecordEpisodeStatistics(venv), min_reward=0.0, max_reward=0.5)
    obs, _ = envs.reset(seed=1)
    rng = np.random.default_rng(0)
    ends = 0
    for _ in range(120):
        last = obs
        obs, rewards, terminated, truncated, infos = envs.step(rng.integers(0, 2, N))
        np.testing.assert_array_equal(rewards, 0.5)  # ClipReward applied
        done = terminated | truncated
        np.testing.assert_array_equal(infos["_final_obs"], done)
        np.testing.assert_array_equal(infos["episode_end"], done)  # CartPole: every end is real
        if not done.any():
            assert "episode" not in infos and "final_info" not in infos
            continue
        ends += int(done.sum())
        np.testing.assert_array_equal(infos["_episode"], done)
        np.testing.assert_array_equal(infos["episode"]["r"][done], infos["episode_return"][done])
        np.testing.assert_array_equal(infos["episode"]["l"][done], infos["episode_length"][done])
        np.testing.assert_array_equal(infos["_final_info"], done)
        final_info = infos["final_info"]
        np.testing.assert_array_equal(final_info["_episode"], done)
        np.testing.assert_array_equal(final_info["episode"]["r"][done], infos["episode"]["r"][done])
        # final_obs continues the previous observation; obs is a fresh episode's first
        i = int(np.flatnonzero(done)[0])
        assert np.abs(infos["final_obs"][i] - last[i]).max() < 0.5
        assert np.abs(obs[i]).max() <= 0.05
    assert ends >= N
    assert len(envs.env.return_queue) == ends  # RecordEpisodeStatistics' own bookkeeping


def test_closed_follows_gymnasium():
    venv = _make("serial")
    envs = RecordEpisodeStatistics(venv)
    assert not envs.closed and not venv.closed
    envs.close()
    assert envs.closed and venv.closed
    envs.close()  # idempotent, as gymnasium's
    with pytest.raises(RuntimeError, match="closed"):
        venv.reset()


def test_observation_wrappers_refuse_same_step_exactly_as_for_gymnasiums_own_env():
    """gymnasium 1.4's VectorObservationWrapper (TransformObservation, NormalizeObservation)
    refuses every same-step env, gymnasium's own SyncVectorEnv included: same error here."""
    ours = _make("serial")
    theirs = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1")] * N, autoreset_mode=AutoresetMode.SAME_STEP
    )
    for wrap in (NormalizeObservation, lambda e: TransformObservation(e, lambda o: o * 2)):
        errors = []
        for env in (theirs, ours):
            with pytest.raises(ValueError, match="NEXT_STEP") as info:
                wrap(env)
            errors.append(str(info.value))
        assert errors[0] == errors[1]
    ours.close()
    theirs.close()


@pytest.mark.parametrize("backend", ["ale", "envpool"])
def test_native_atari_backends_under_gymnasium_wrappers(backend):
    if backend == "envpool":
        pytest.importorskip("envpool")  # an optional extra; ale_py is a core dependency
    options = {"max_episode_frames": 160, "clip_rewards": False}  # 40 agent steps
    with make_vec("pong", 2, backend, env_options=options) as venv:
        assert isinstance(venv, gym.vector.VectorEnv)
        assert venv.observation_space == gym.spaces.Box(0, 255, (2, 4, 84, 84), np.uint8)
        assert venv.action_space == gym.spaces.MultiDiscrete([6, 6])
        assert venv.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        with pytest.raises(ValueError, match=f"{backend}.*options"):
            venv.reset(seed=0, options={"anything": 1})
        if backend == "envpool":  # seeds are fixed per pool: only consecutive lists fit
            with pytest.raises(ValueError, match="consecutive"):
                venv.reset(seed=[3, 1])
        else:  # (an envpool rebuilds its pool on a seeded reset: one is enough here)
            by_int, _ = venv.reset(seed=5)
            venv.reset(seed=[3, 1])
            np.testing.assert_array_equal(venv.reset(seed=[5, 6])[0], by_int)
        envs = RecordEpisodeStatistics(venv)
        obs, _ = envs.reset(seed=[5, 6])
        rng = np.random.default_rng(0)
        for _ in range(40):
            obs, rewards, terminated, truncated, infos = envs.step(rng.integers(0, 6, 2))
        assert truncated.all() and infos["_episode"].all() and infos["episode_end"].all()
        np.testing.assert_array_equal(infos["episode"]["r"], infos["episode_return"])
        np.testing.assert_array_equal(infos["episode"]["l"], [40, 40])
        assert obs in venv.observation_space


# --- a CleanRL-style PPO loop that knows nothing of rapidrl ---------------------------------------
def cleanrl_ppo(envs, seed: int = 1, num_steps: int = 32, iterations: int = 2, log_steps: int = 40):
    """CleanRL's ppo.py loop, shortened: only the plain gymnasium vector API is used. Returns the
    observations of the first ``log_steps`` steps, the episode returns RecordEpisodeStatistics
    reported, and the last loss (to compare runs exactly)."""
    import torch
    from torch import nn
    from torch.distributions.categorical import Categorical

    torch.manual_seed(seed)
    n_envs = envs.num_envs
    obs_dim = int(np.prod(envs.single_observation_space.shape))
    n_actions = int(envs.single_action_space.n)

    def layer(i, o, std=2**0.5):
        lin = nn.Linear(i, o)
        nn.init.orthogonal_(lin.weight, std)
        nn.init.constant_(lin.bias, 0.0)
        return lin

    critic = nn.Sequential(layer(obs_dim, 64), nn.Tanh(), layer(64, 1, 1.0))
    actor = nn.Sequential(layer(obs_dim, 64), nn.Tanh(), layer(64, n_actions, 0.01))
    params = list(critic.parameters()) + list(actor.parameters())
    opt = torch.optim.Adam(params, lr=2.5e-4, eps=1e-5)

    obs_buf = torch.zeros((num_steps, n_envs, obs_dim))
    act_buf = torch.zeros((num_steps, n_envs), dtype=torch.long)
    logp_buf, rew_buf, done_buf, val_buf = (torch.zeros((num_steps, n_envs)) for _ in range(4))
    next_obs, _ = envs.reset(seed=seed)
    next_obs, next_done = torch.as_tensor(next_obs), torch.zeros(n_envs)
    seen_obs, returns, loss = [], [], None
    for _ in range(iterations):
        for t in range(num_steps):
            obs_buf[t], done_buf[t] = next_obs, next_done
            with torch.no_grad():
                dist = Categorical(logits=actor(next_obs))
                action = dist.sample()
                logp_buf[t], val_buf[t] = dist.log_prob(action), critic(next_obs).flatten()
            act_buf[t] = action
            next_obs, reward, terminations, truncations, infos = envs.step(action.numpy())
            if len(seen_obs) < log_steps:
                seen_obs.append(np.array(next_obs))
            rew_buf[t] = torch.as_tensor(reward, dtype=torch.float32)
            next_done = torch.as_tensor(
                np.logical_or(terminations, truncations), dtype=torch.float32
            )
            next_obs = torch.as_tensor(next_obs)
            if "episode" in infos:
                returns += infos["episode"]["r"][infos["_episode"]].tolist()
        with torch.no_grad():  # GAE
            next_value = critic(next_obs).flatten()
            adv, last = torch.zeros_like(rew_buf), 0
            for t in reversed(range(num_steps)):
                nonterminal = 1.0 - (next_done if t == num_steps - 1 else done_buf[t + 1])
                value_next = next_value if t == num_steps - 1 else val_buf[t + 1]
                delta = rew_buf[t] + 0.99 * value_next * nonterminal - val_buf[t]
                adv[t] = last = delta + 0.99 * 0.95 * nonterminal * last
            ret = adv + val_buf
        b_obs, b_act, b_logp = (
            obs_buf.reshape(-1, obs_dim),
            act_buf.reshape(-1),
            logp_buf.reshape(-1),
        )
        b_adv, b_ret = adv.reshape(-1), ret.reshape(-1)
        for idx in torch.randperm(len(b_obs)).split(len(b_obs) // 4):
            dist = Categorical(logits=actor(b_obs[idx]))
            ratio = (dist.log_prob(b_act[idx]) - b_logp[idx]).exp()
            a = (b_adv[idx] - b_adv[idx].mean()) / (b_adv[idx].std() + 1e-8)
            pg = torch.max(-a * ratio, -a * ratio.clamp(0.8, 1.2)).mean()
            v = 0.5 * ((critic(b_obs[idx]).flatten() - b_ret[idx]) ** 2).mean()
            loss = pg + 0.5 * v - 0.01 * dist.entropy().mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
    envs.close()
    return np.stack(seen_obs), returns, float(loss.detach())


@pytest.fixture(scope="module")
def gymnasium_reference():
    envs = gym.vector.SyncVectorEnv(
        [lambda: gym.make("CartPole-v1")] * N, autoreset_mode=AutoresetMode.SAME_STEP
    )
    return cleanrl_ppo(RecordEpisodeStatistics(envs))


def test_cleanrl_ppo_runs_unchanged_and_matches_gymnasium(venv, gymnasium_reference):
    # the last test of each layout's vector env: the loop closes it, as CleanRL's does
    obs, returns, loss = cleanrl_ppo(RecordEpisodeStatistics(venv))
    ref_obs, ref_returns, ref_loss = gymnasium_reference
    assert obs.shape == ref_obs.shape == (40, N, 4)
    np.testing.assert_array_equal(obs, ref_obs)  # same seeds, same actions: same trajectories
    assert returns == ref_returns and len(returns) >= N
    assert loss == ref_loss


# --- gymnasium.make_vec -------------------------------------------------------------------------
def test_gymnasium_make_vec_reaches_rapidrl_layouts():
    import rapidrl.vector.gym_envs as gym_envs

    assert "rapidrl/CartPole-v1" in gym.registry and "rapidrl/Pong-v5" in gym.registry
    layout = {"backend": "hybrid", "num_workers": 2, "inline": True}  # one worker process
    with gym.make_vec("rapidrl/CartPole-v1", num_envs=2, **layout) as v:
        assert v.unwrapped.name == "hybrid vector env" and v.unwrapped.worker_pids[0]
        assert v.spec.id == "rapidrl/CartPole-v1"
        assert v.metadata["autoreset_mode"] is AutoresetMode.SAME_STEP
        v.reset(seed=0)
    # env keyword arguments become env options, as gymnasium passes them to the env
    with gym.make_vec(
        "rapidrl/CartPole-v1", num_envs=2, backend="serial", max_episode_steps=3
    ) as v:
        v.reset(seed=0)
        truncated = [v.step(np.zeros(2, np.int64))[3] for _ in range(3)]
        assert truncated[-1].all() and not truncated[0].any()
    # the module:id form imports the registrations itself
    v = gym.make_vec(f"{gym_envs.__name__}:rapidrl/Pong-v5", num_envs=2, backend="ale")
    assert v.single_observation_space.shape == (4, 84, 84)
    v.close()
    single = gym.make("rapidrl/CartPole-v1")  # the single-env entry point works too
    assert single.reset(seed=0)[0].shape == (4,)
