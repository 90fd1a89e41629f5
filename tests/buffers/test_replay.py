"""ReplayBuffer: rebuilt observations equal what the env produced; n-step fields equal a slow loop."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode, SyncVectorEnv
from gymnasium.wrappers import FrameStackObservation, TimeLimit

from rapidrl.buffers import ReplayBuffer, nstep_returns

# --- reference ------------------------------------------------------------------------------


class Recorder:
    """Every transition as the env produced it, per env stream, keyed by a unique action id."""

    def __init__(self, num_envs):
        self.streams = [[] for _ in range(num_envs)]
        self.where = {}

    def add(self, env_ids, obs, actions, rewards, terminated, truncated, next_obs):
        for row, e in enumerate(env_ids):
            tr = dict(
                obs=obs[row].copy(),
                action=int(actions[row]),
                reward=float(rewards[row]),
                terminated=bool(terminated[row]),
                truncated=bool(truncated[row]),
                next_obs=next_obs[row].copy(),
            )
            self.where[tr["action"]] = (int(e), len(self.streams[e]))
            self.streams[e].append(tr)

    def expected(self, action_id, n, gamma):
        """Slow n-step reference: (return, discount, k, terminated, bootstrap obs)."""
        e, j = self.where[action_id]
        stream = self.streams[e]
        ret = 0.0
        for i in range(n):
            tr = stream[j + i]
            ret += gamma**i * tr["reward"]
            if tr["terminated"]:
                return ret, 0.0, i + 1, True, tr["next_obs"]
            if tr["truncated"]:
                return ret, gamma ** (i + 1), i + 1, False, tr["next_obs"]
        return ret, gamma**n, n, False, stream[j + n - 1]["next_obs"]


def check_batch(batch, rec, n, gamma):
    for row in range(len(batch["indices"])):
        a = int(batch["actions"][row])
        e, j = rec.where[a]
        tr = rec.streams[e][j]
        ret, disc, k, term, boot = rec.expected(a, n, gamma)
        np.testing.assert_array_equal(batch["obs"][row], tr["obs"])
        np.testing.assert_array_equal(batch["next_obs"][row], boot)
        assert batch["n_steps"][row] == k
        assert batch["terminated"][row] == term
        assert batch["rewards"][row] == pytest.approx(ret, rel=1e-5, abs=1e-5)
        assert batch["discounts"][row] == pytest.approx(disc, rel=1e-6)


def all_sampleable(buf):
    lo, hi = buf._sample_ranges()
    ids = [
        buf._ids_of(np.full(h - lo_, e), np.arange(lo_, h))
        for e, (lo_, h) in enumerate(zip(lo, hi))
    ]
    return np.concatenate(ids).astype(np.int64)


def check_everything(buf, rec, n, gamma):
    """Every sampleable transition rebuilt exactly; they are each stream's newest (bar the tail)."""
    ids = all_sampleable(buf)
    assert ids.size == buf.num_sampleable > 0
    batch = buf.get(ids)
    check_batch(batch, rec, n, gamma)
    # Per stream: a contiguous run ending n-1 before the newest transition.
    per_env = {}
    for a in batch["actions"]:
        e, j = rec.where[int(a)]
        per_env.setdefault(e, []).append(j)
    for e, js in per_env.items():
        js = sorted(js)
        assert js == list(range(js[0], js[-1] + 1))
        assert js[-1] == len(rec.streams[e]) - n
        assert len(js) <= buf.slots
    # And sample() draws from exactly that set.
    drawn = buf.sample(256, np.random.default_rng(1))
    assert np.isin(drawn["indices"], ids).all()
    check_batch(drawn, rec, n, gamma)


# --- a synthetic frame-stacking vector env (same-step autoreset, async subsets) -------------


class FakeStackedVecEnv:
    """``N`` envs of random frames; episodes of 1..max_len steps end terminated or truncated.

    ``pad``: how a new episode's stack is filled: "repeat" (first frame C times, the rapidrl /
    gymnasium default) or "zero" (zeros then the first frame).
    """

    def __init__(self, n, rng, c=4, frame=(7, 5), pad="repeat", max_len=12):
        self.n, self.rng, self.counters, self.frame, self.pad, self.max_len = (
            n,
            rng,
            c,
            frame,
            pad,
            max_len,
        )
        self.stacks = [self._start() for _ in range(n)]
        self.left = rng.integers(1, max_len + 1, n)

    def _frame(self):
        return self.rng.integers(0, 256, self.frame, dtype=np.uint8)

    def _start(self):
        f = self._frame()
        if self.pad == "repeat":
            return np.stack([f] * self.counters)
        return np.concatenate([np.zeros((self.counters - 1, *self.frame), np.uint8), f[None]])

    def reset(self):
        return np.stack(self.stacks)

    def step(self, env_ids):
        obs, rew, term, trunc, final = [], [], [], [], []
        for e in env_ids:
            nxt = np.concatenate([self.stacks[e][1:], self._frame()[None]])
            self.left[e] -= 1
            done = self.left[e] == 0
            te = bool(done and self.rng.random() < 0.5)
            tr = bool(done and not te)
            final.append(nxt)
            if done:
                nxt = self._start()
                self.left[e] = self.rng.integers(1, self.max_len + 1)
            self.stacks[e] = nxt
            obs.append(nxt)
            rew.append(self.rng.normal())
            term.append(te)
            trunc.append(tr)
        return (
            np.stack(obs),
            np.array(rew),
            np.array(term),
            np.array(trunc),
            {"final_obs": np.stack(final)},
        )


def drive_fake(buf, env, steps, rng, asynchronous=False, rec=None):
    rec = rec or Recorder(env.n)
    obs = env.reset()
    next_id = 0
    for _ in range(steps):
        if asynchronous:
            ids = rng.permutation(env.n)[: rng.integers(1, env.n + 1)]
        else:
            ids = np.arange(env.n)
        actions = np.arange(next_id, next_id + len(ids))
        next_id += len(ids)
        o, r, te, tr, infos = env.step(ids)
        done = te | tr
        # What a training loop does with a same-step-autoreset vector env.
        next_or_final = np.where(done[:, None, None, None], infos["final_obs"], o)
        buf.add(
            obs[ids], actions, r, te, tr, next_or_final, env_ids=None if not asynchronous else ids
        )
        rec.add(ids, obs[ids], actions, r, te, tr, next_or_final)
        obs[ids] = o
    return rec


@pytest.mark.parametrize("pad", ["repeat", "zero"])
@pytest.mark.parametrize("n_step", [1, 3])
@pytest.mark.parametrize("asynchronous", [False, True])
def test_rebuilt_stacks_match_env_through_wraparound(pad, n_step, asynchronous):
    rng = np.random.default_rng(0)
    env = FakeStackedVecEnv(3, rng, pad=pad)
    buf = ReplayBuffer(90, (4, 7, 5), 3, stacked=True, n_step=n_step, gamma=0.9, validate=True)
    rec = drive_fake(buf, env, 25, rng, asynchronous)  # not yet full
    check_everything(buf, rec, n_step, 0.9)
    drive_fake(buf, env, 200, rng, asynchronous, rec)  # wrapped several times
    check_everything(buf, rec, n_step, 0.9)


def test_long_episodes_keep_full_capacity():
    rng = np.random.default_rng(1)
    env = FakeStackedVecEnv(2, rng, max_len=1000)
    buf = ReplayBuffer(100, (4, 7, 5), 2, stacked=True, n_step=2)
    rec = drive_fake(buf, env, 300, rng)
    assert len(buf) == 100
    assert buf.num_sampleable == 100 - 2 * (2 - 1)
    check_everything(buf, rec, 2, buf.gamma)


def test_short_episodes_evict_by_frames_never_corrupt():
    rng = np.random.default_rng(2)
    env = FakeStackedVecEnv(1, rng, max_len=1)  # every step an episode: C + 1 frames each
    buf = ReplayBuffer(50, (4, 7, 5), 1, stacked=True, n_step=1)
    rec = drive_fake(buf, env, 120, rng)
    assert 0 < len(buf) < 50
    check_everything(buf, rec, 1, buf.gamma)


# --- real gymnasium wrappers and vector env ----------------------------------------------------


class NoiseImageEnv(gym.Env):
    """Random 12x10 uint8 frames; terminates with probability 0.08 per step."""

    def __init__(self):
        self.observation_space = gym.spaces.Box(0, 255, (12, 10), np.uint8)
        self.action_space = gym.spaces.Discrete(10**9)

    def reset(self, *, seed=None, options=None):
        super().reset(seed=seed)
        return self.np_random.integers(0, 256, (12, 10), dtype=np.uint8), {}

    def step(self, action):
        frame = self.np_random.integers(0, 256, (12, 10), dtype=np.uint8)
        return (
            frame,
            float(self.np_random.normal()),
            bool(self.np_random.random() < 0.08),
            False,
            {},
        )


def drive_gym_vec(venv, buf, steps, stacked):
    n = venv.num_envs
    rec = Recorder(n)
    obs, _ = venv.reset(seed=3)
    for t in range(steps):
        actions = np.arange(t * n, (t + 1) * n)
        o, r, te, tr, infos = venv.step(actions)
        nxt = o.copy()
        if "_final_obs" in infos:
            for i in np.flatnonzero(infos["_final_obs"]):
                nxt[i] = infos["final_obs"][i]
        buf.add(obs, actions, r, te, tr, nxt)
        rec.add(range(n), obs, actions, r, te, tr, nxt)
        obs = o
    return rec


@pytest.mark.parametrize("padding", ["reset", "zero"])
def test_gymnasium_framestack_same_step_autoreset(padding):
    def make():
        return FrameStackObservation(TimeLimit(NoiseImageEnv(), 15), 4, padding_type=padding)

    venv = SyncVectorEnv([make] * 3, autoreset_mode=AutoresetMode.SAME_STEP)
    buf = ReplayBuffer(150, (4, 12, 10), 3, stacked=True, n_step=3, gamma=0.95, validate=True)
    rec = drive_gym_vec(venv, buf, 120, stacked=True)
    venv.close()
    ends = [(t["terminated"], t["truncated"]) for s in rec.streams for t in s]
    assert any(te for te, _ in ends) and any(tr for _, tr in ends)
    check_everything(buf, rec, 3, 0.95)


def test_flat_obs_cartpole_same_step_autoreset():
    venv = gym.make_vec(
        "CartPole-v1",
        num_envs=2,
        vectorization_mode="sync",
        vector_kwargs={"autoreset_mode": AutoresetMode.SAME_STEP},
        wrappers=[lambda e: TimeLimit(e.unwrapped, 30)],
    )
    buf = ReplayBuffer(200, (4,), 2, obs_dtype=np.float32, n_step=3, validate=True)
    rec = Recorder(2)
    obs, _ = venv.reset(seed=0)
    rng = np.random.default_rng(0)
    for t in range(150):
        a = rng.integers(0, 2, 2)
        o, r, te, tr, infos = venv.step(a)
        nxt = o.copy()
        for i in np.flatnonzero(infos.get("_final_obs", np.zeros(2, bool))):
            nxt[i] = infos["final_obs"][i]
        ids = np.array([2 * t, 2 * t + 1])  # unique ids stored in place of the actions
        buf.add(obs, ids, r, te, tr, nxt)
        rec.add(range(2), obs, ids, r, te, tr, nxt)
        obs = o
    venv.close()
    ends = [(t["terminated"], t["truncated"]) for s in rec.streams for t in s]
    assert any(te for te, _ in ends) and any(tr for _, tr in ends)
    check_everything(buf, rec, 3, buf.gamma)
    # plain storage: one observation per step (+1 per episode start), no separate next_obs array
    assert buf._frames.shape == (2, buf.frame_slots, 4)


def test_real_pong_stack():
    import ale_py

    gym.register_envs(ale_py)
    from gymnasium.wrappers import AtariPreprocessing

    def make():
        env = gym.make("ALE/Pong-v5", frameskip=1, repeat_action_probability=0.0)
        env = AtariPreprocessing(env, frame_skip=4, noop_max=5)
        return FrameStackObservation(TimeLimit(env, 25), 4)

    venv = SyncVectorEnv([make] * 2, autoreset_mode=AutoresetMode.SAME_STEP)
    venv.action_space.seed(0)
    buf = ReplayBuffer(60, (4, 84, 84), 2, stacked=True, n_step=3, validate=True)
    rec = Recorder(2)
    obs, _ = venv.reset(seed=5)
    rng = np.random.default_rng(0)
    for t in range(70):
        o, r, te, tr, infos = venv.step(rng.integers(0, 6, 2))
        nxt = o.copy()
        for i in np.flatnonzero(infos.get("_final_obs", np.zeros(2, bool))):
            nxt[i] = infos["final_obs"][i]
        ids = np.array([2 * t, 2 * t + 1])
        buf.add(obs, ids, r, te, tr, nxt)
        rec.add(range(2), obs, ids, r, te, tr, nxt)
        obs = o
    venv.close()
    assert sum(t["truncated"] for s in rec.streams for t in s) >= 4
    check_everything(buf, rec, 3, buf.gamma)


# --- n-step function, memory, checkpoint, errors ------------------------------------------------


def test_nstep_returns_against_loop():
    rng = np.random.default_rng(4)
    b, n, gamma = 400, 5, 0.9
    r = rng.normal(size=(b, n))
    te = rng.random((b, n)) < 0.15
    tr = rng.random((b, n)) < 0.15
    ret, disc, k, term = nstep_returns(r, te, tr, gamma)
    for i in range(b):
        g, kk, ended_term = 0.0, n, False
        for j in range(n):
            g += gamma**j * r[i, j]
            if te[i, j] or tr[i, j]:
                kk, ended_term = j + 1, bool(te[i, j])
                break
        assert ret[i] == pytest.approx(g)
        assert k[i] == kk and term[i] == ended_term
        assert disc[i] == pytest.approx(0.0 if ended_term else gamma**kk)


def test_memory_one_frame_per_transition():
    buf = ReplayBuffer(100_000, (4, 84, 84), 8, stacked=True, n_step=3)
    per_transition = buf.storage_nbytes() / 100_000
    assert buf.storage_nbytes() < 800e6
    assert per_transition < 1.05 * 84 * 84 + 64
    assert per_transition * 1_000_000 < 8e9  # 1M Pong transitions (the store scales linearly)
    flat = ReplayBuffer(10_000, (4,), 1, obs_dtype=np.float32)
    assert flat.storage_nbytes() / 10_000 < 1.05 * 16 + 64


@pytest.mark.parametrize(
    "capacity, obs_shape, num_envs, kw",
    [
        (1_000_000, (2, 52, 52), 16, dict(stacked=True)),  # DQN lean
        (100_003, (4, 84, 84), 7, dict(stacked=True)),  # capacity not a multiple of the envs
        (10_000, (17,), 1, dict(obs_dtype=np.float32, action_shape=(6,), action_dtype=np.float32)),
    ],
)
def test_nbytes_for_is_what_the_buffer_allocates(capacity, obs_shape, num_envs, kw):
    """The size a run checks against the machine's memory before it builds the replay."""
    buf = ReplayBuffer(capacity, obs_shape, num_envs, **kw)
    assert ReplayBuffer.nbytes_for(capacity, obs_shape, num_envs=num_envs, **kw) == (
        buf.storage_nbytes()
    )


def test_state_dict_exact_resume(tmp_path):
    rng = np.random.default_rng(5)
    env = FakeStackedVecEnv(2, rng)
    kw = dict(stacked=True, n_step=3, seed=11)
    buf = ReplayBuffer(60, (4, 7, 5), 2, **kw)
    drive_fake(buf, env, 70, rng)
    np.savez(tmp_path / "buf.npz", **buf.state_dict())
    with np.load(tmp_path / "buf.npz") as z:
        loaded = ReplayBuffer(60, (4, 7, 5), 2, **kw)
        loaded.load_state_dict(dict(z))
    for b in (buf, loaded):  # the same future stream into both
        drive_fake(b, FakeStackedVecEnv(2, np.random.default_rng(6)), 40, np.random.default_rng(7))
    s1, s2 = buf.sample(64), loaded.sample(64)  # own generators, restored state
    for key in s1:
        np.testing.assert_array_equal(s1[key], s2[key])
    with pytest.raises(ValueError, match="config differs"):
        ReplayBuffer(61, (4, 7, 5), 2, **kw).load_state_dict(buf.state_dict())


def test_young_state_dict_is_small():
    buf = ReplayBuffer(100_000, (4, 84, 84), 1, stacked=True)
    o = np.zeros((1, 4, 84, 84), np.uint8)
    buf.add(o, [0], [1.0], [False], [False], o)
    assert buf.state_dict()["frames"].nbytes == 5 * 84 * 84


def test_truncate_streams_stops_nstep_chain():
    buf = ReplayBuffer(20, (2,), 1, obs_dtype=np.float32, n_step=3, gamma=0.5)
    for t in range(2):
        buf.add([[t, 0]], [t], [1.0], [False], [False], [[t + 1, 0]])
    buf.truncate_streams()  # env reset by hand: next add starts a new episode
    for t in range(2):
        buf.add([[10 + t, 0]], [10 + t], [1.0], [False], [False], [[11 + t, 0]])
    batch = buf.get(np.array([0, 1]))
    np.testing.assert_array_equal(batch["n_steps"], [2, 1])
    np.testing.assert_allclose(batch["rewards"], [1.5, 1.0])
    np.testing.assert_allclose(batch["discounts"], [0.25, 0.5])
    np.testing.assert_array_equal(batch["next_obs"], [[2, 0], [2, 0]])


def test_add_rejects_bad_input():
    buf = ReplayBuffer(20, (4, 3, 3), 2, stacked=True, validate=True)
    o = np.zeros((2, 4, 3, 3), np.uint8)
    nxt = np.ones((2, 4, 3, 3), np.uint8)  # not a shifted stack
    with pytest.raises(ValueError, match="frame stack"):
        buf.add(o, [0, 1], [0, 0], [0, 0], [0, 0], nxt)
    with pytest.raises(ValueError, match="env_ids"):
        buf.add(o[:1], [0], [0], [0], [0], o[:1])
    with pytest.raises(ValueError, match="unique"):
        buf.add(o, [0, 1], [0, 0], [0, 0], [0, 0], o, env_ids=[1, 1])
    with pytest.raises(ValueError, match="shape"):
        buf.add(o[:, :3], [0, 1], [0, 0], [0, 0], [0, 0], o[:, :3])
    buf.add(o, [0, 1], [0, 0], [0, 0], [0, 0], o)
    with pytest.raises(ValueError, match="continue"):
        buf.add(nxt, [0, 1], [0, 0], [0, 0], [0, 0], nxt)
    with pytest.raises(ValueError, match="nothing to sample"):
        ReplayBuffer(20, (3,), 1, n_step=2).sample(4)


def test_sample_into_preallocated_out():
    rng = np.random.default_rng(8)
    buf = ReplayBuffer(60, (4, 7, 5), 2, stacked=True, n_step=2)
    drive_fake(buf, FakeStackedVecEnv(2, rng), 40, rng)
    out = {k: np.empty((16, 4, 7, 5), np.uint8) for k in ("obs", "next_obs")}
    got = buf.sample(16, np.random.default_rng(0), out=out)
    ref = buf.sample(16, np.random.default_rng(0))
    assert got["obs"] is out["obs"] and got["next_obs"] is out["next_obs"]
    for k in ref:
        np.testing.assert_array_equal(got[k], ref[k])
    with pytest.raises(ValueError, match="out arrays"):
        buf.sample(8, out=out)


class _Tee:
    """Adds every step to several buffers."""

    def __init__(self, *bufs):
        self.bufs = bufs

    def add(self, *args, **kwargs):
        for b in self.bufs:
            b.add(*args, **kwargs)


@pytest.mark.parametrize("n_step", [1, 3])
def test_window_samples_as_a_replay_of_that_capacity(n_step):
    """A window of W in a larger replay draws the very transitions a replay of capacity W draws
    (same generator), before and after the small one wraps and evicts by frames; the large one
    keeps the rest."""
    rng = np.random.default_rng(3)
    env = FakeStackedVecEnv(3, rng)  # short episodes: the small one also evicts by frames
    small = ReplayBuffer(60, (4, 7, 5), 3, stacked=True, n_step=n_step, gamma=0.9)
    large = ReplayBuffer(3000, (4, 7, 5), 3, stacked=True, n_step=n_step, gamma=0.9)
    tee = _Tee(small, large)
    rec = None
    for steps in (10, 40, 120):  # under the window, just past it, wrapped several times
        rec = drive_fake(tee, env, steps, rng, rec=rec)
        a = small.sample(64, np.random.default_rng(steps))
        b = large.sample(64, np.random.default_rng(steps), window=60)
        for key in ("obs", "actions", "rewards", "next_obs", "terminated", "discounts", "n_steps"):
            np.testing.assert_array_equal(a[key], b[key], err_msg=key)
        check_batch(b, rec, n_step, 0.9)
    assert len(small) < 60 and len(large) == 3 * 170  # the small one lost some to its frames
    # Without the window the large replay reaches back past the small one's oldest transition.
    oldest = min(
        rec.where[int(x)][1] for x in large.sample(512, np.random.default_rng(0))["actions"]
    )
    assert oldest < 170 - 20
    with pytest.raises(ValueError, match="window must be >= 1"):
        large.sample(4, window=0)
