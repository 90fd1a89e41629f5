"""Every Python backend gives the serial backend's results: same seeds and actions -> identical
observations, rewards, flags, final observations and episode statistics (first-ready backends
compared per env id)."""

from __future__ import annotations

import functools
import os
import time

import numpy as np
import pytest

from rapidrl.vector import INFO_KEYS, make_vec
from rapidrl.vector.testing import CountingEnv, assert_trajectories_equal, collect_trajectories

pytestmark = pytest.mark.timeout(90)

N, T = 4, 30


def _env_fns(delays=None):
    """Two plain envs and two that report episodes themselves (Atari-like lives)."""
    delays = delays or [0.0] * N
    return [
        functools.partial(CountingEnv, min_len=2, max_len=5, lives=1 if i < 2 else 2, delay=d)
        for i, d in enumerate(delays)
    ]


@pytest.fixture(scope="module")
def actions():
    return np.random.default_rng(123).integers(0, 3, size=(N, T))


@pytest.fixture(scope="module")
def reference(actions):
    with make_vec(_env_fns(), N, "serial") as venv:
        return collect_trajectories(venv, actions, seed=7)


def test_reference_is_rich(reference):
    """The test env really exercises terminations, truncations and both kinds of stats."""
    _, traj = reference
    steps = [s for t in traj for s in t]
    assert any(s["terminated"] for s in steps) and any(s["truncated"] for s in steps)
    # env 2 (two lives): a termination that is not an episode end, and an end with stats
    t2 = traj[2]
    assert any(s["terminated"] and not s["episode_end"] for s in t2)
    assert any(s["episode_end"] and s["episode_length"] > 0 for s in t2)
    # accumulated stats of a plain env equal its rewards since the last end
    t0, ret, length = traj[0], 0.0, 0
    for s in t0:
        ret, length = ret + s["reward"], length + 1
        if s["terminated"] or s["truncated"]:
            assert s["episode_end"] and s["episode_return"] == ret and s["episode_length"] == length
            ret, length = 0.0, 0


def test_serial_same_step_autoreset(reference):
    _, traj = reference
    for t in traj:
        for s in t:
            if s["terminated"] or s["truncated"]:
                assert s["obs"][2] == 0  # step counter of the new episode
                assert s["final_obs"][2] > 0 and s["final_obs"][1] == s["obs"][1] - 1


@pytest.mark.parametrize(
    "backend, kwargs",
    [
        ("subprocess", {}),
        ("hybrid", {"num_workers": 2}),
        ("async", {"num_workers": 4, "batch_size": 2}),
        ("async", {"num_workers": 2, "batch_size": 2, "copy": False}),
        ("hybrid", {"num_workers": 2, "inline": True}),
        ("async", {"num_workers": 4, "batch_size": 2, "inline": True}),
        ("async", {"num_workers": 2, "batch_size": 2, "inline": True, "copy": False}),
        ("hybrid", {"num_workers": 2, "spin": 0.002}),
        ("async", {"num_workers": 2, "batch_size": 2, "inline": True, "spin": 0.002}),
    ],
    ids=[
        "subprocess",
        "hybrid-2x2",
        "async-4x1-b2",
        "async-2x2-b2-nocopy",
        "hybrid-2x2-inline",
        "async-4x1-b2-inline",
        "async-2x2-b2-inline-nocopy",
        "hybrid-2x2-spin",
        "async-2x2-b2-inline-spin",
    ],  # fmt: skip
)
def test_process_backends_equal_serial(backend, kwargs, actions, reference):
    with make_vec(_env_fns(), N, backend, **kwargs) as venv:
        got = collect_trajectories(venv, actions, seed=7)
    assert_trajectories_equal(reference, got, f"{backend} {kwargs}")


@pytest.mark.parametrize("backend", ["serial", "hybrid"])
def test_step_and_per_env_sends_equal_the_reference(backend, actions, reference):
    """The synchronous ``step`` path, and actions sent in pieces, in another order, through the
    general ``send`` (one call per worker's envs, reversed), give the reference trajectories."""
    kw = {"num_workers": 2, "inline": True} if backend == "hybrid" else {}
    reset_ref, traj = reference
    with make_vec(_env_fns(), N, backend, **kw) as venv:
        obs, _ = venv.reset(seed=7)
        np.testing.assert_array_equal(obs, reset_ref)
        for t in range(T):
            if t % 2:
                obs, rewards, terminated, truncated, infos = venv.step(actions[:, t])
            else:
                for ids in (np.array([3, 2]), np.array([1, 0])):
                    venv.send(actions[ids, t], ids)
                obs, rewards, terminated, truncated, infos, ids = venv.recv()
                np.testing.assert_array_equal(ids, np.arange(N))
            for i in range(N):
                want = traj[i][t]
                np.testing.assert_array_equal(obs[i], want["obs"], err_msg=f"t={t} env {i}")
                assert rewards[i] == want["reward"] and terminated[i] == want["terminated"]
                assert truncated[i] == want["truncated"]
                assert infos["episode_return"][i] == want["episode_return"]
                if want["final_obs"] is not None:
                    np.testing.assert_array_equal(infos["final_obs"][i], want["final_obs"])


def test_sync_batch_layout_and_infos():
    """Synchronous batches: all envs in id order, every info key, fresh arrays with copy=True."""
    with make_vec(_env_fns(), N, "hybrid", num_workers=2) as venv:
        obs, infos = venv.reset(seed=0)
        assert obs.shape == (N, 4) and obs.dtype == np.float32
        assert set(INFO_KEYS) <= set(infos) and "worker_restarted" in infos
        first = venv.step(np.zeros(N, np.int64))
        kept = first[0].copy()
        obs, rewards, terminated, truncated, infos = venv.step(np.ones(N, np.int64))
        np.testing.assert_array_equal(first[0], kept)  # not overwritten by the next step
        np.testing.assert_array_equal(infos["env_id"], np.arange(N))
        assert rewards.dtype == np.float64 and terminated.dtype == bool
        assert infos["episode_return"].dtype == np.float64
        assert infos["episode_length"].dtype == np.int64
        assert infos["final_obs"].shape == obs.shape


class _GatedEnv(CountingEnv):
    """Each step waits (at most 20 s) until the file ``gate`` exists: a slow env, held up for as
    long as the test wants."""

    def __init__(self, gate: str, **kwargs):
        super().__init__(**kwargs)
        self.gate = gate

    def step(self, action):
        deadline = time.monotonic() + 20.0
        while not os.path.exists(self.gate) and time.monotonic() < deadline:
            time.sleep(0.001)
        return super().step(action)


def test_async_slow_env_does_not_stall_the_rest(tmp_path):
    """First-ready batches: while env 0's step is held up, the other envs keep stepping. A
    backend that waited for env 0 would return nothing until its step ends (the gate's 20 s
    bound), and env 0's result would come before the others had made their 20 steps."""
    gate = str(tmp_path / "gate")
    fns = [functools.partial(_GatedEnv, gate)] + _env_fns()[1:]
    with make_vec(fns, N, "async", num_workers=4, batch_size=1) as venv:
        _, infos = venv.reset(seed=0)
        ids = infos["env_id"]
        counts = np.zeros(N, np.int64)
        while counts[1:].min() < 20:
            venv.send(np.zeros(len(ids), np.int64), ids)
            *_, ids = venv.recv()
            counts[ids] += 1
            assert counts[0] == 0, counts  # env 0 is still in its first step
        open(gate, "w").close()  # let env 0's step end: its result comes next, then it flows
        while counts[0] < 2:
            venv.send(np.zeros(len(ids), np.int64), ids)
            *_, ids = venv.recv()
            counts[ids] += 1
    assert counts[0] == 2


class _MarkerEnv(CountingEnv):
    """Worker side: touches ``path`` when a step starts. Inline side: during its step, waits
    (bounded) for that file and records whether the worker's step had started."""

    def __init__(self, path: str, role: str):
        super().__init__()
        self.path, self.role, self.saw_worker_step, self.pid = path, role, [], os.getpid()

    def step(self, action):
        if self.role == "worker":
            with open(self.path, "a") as f:
                f.write("x")
        else:
            deadline = time.monotonic() + 10.0
            while not os.path.exists(self.path) and time.monotonic() < deadline:
                time.sleep(0.001)
            self.saw_worker_step.append(os.path.exists(self.path))
            if os.path.exists(self.path):
                os.remove(self.path)
        return super().step(action)


def test_inline_group_steps_in_this_process_after_the_workers_got_their_actions(tmp_path):
    """inline: the last group is stepped by the caller (no process), and only after the worker
    processes were sent their actions, so both step at the same time."""
    path = str(tmp_path / "worker-stepping")
    fns = [
        functools.partial(_MarkerEnv, path, "worker"),
        functools.partial(_MarkerEnv, path, "inline"),
    ]
    with make_vec(fns, 2, "hybrid", num_workers=2, inline=True) as venv:
        assert venv.worker_pids[0] is not None and venv.worker_pids[1] is None
        venv.reset(seed=0)
        for _ in range(5):
            venv.step(np.zeros(2, np.int64))
        inline_env = venv.workers[1].group.envs[0]
    assert inline_env.pid == os.getpid()
    assert inline_env.saw_worker_step == [True] * 5


def test_pong_serial_equals_hybrid():
    """The real Atari stack (make_env) through processes: identical to serial."""
    opts = {"max_episode_frames": 160}  # truncates after ~40 agent steps
    acts = np.random.default_rng(0).integers(0, 6, size=(2, 45))
    with make_vec("pong", 2, "serial", env_options=opts) as venv:
        ref = collect_trajectories(venv, acts, seed=3)
    with make_vec("pong", 2, "hybrid", num_workers=2, env_options=opts) as venv:
        got = collect_trajectories(venv, acts, seed=3)
    assert_trajectories_equal(ref, got, "pong")
    ends = [s for t in ref[1] for s in t if s["episode_end"]]
    assert ends and all(s["truncated"] and s["episode_length"] > 0 for s in ends)


def test_atari_life_loss_is_not_an_episode_end():
    """make_env's Atari stack reports real games itself: a lost life terminates the learner's
    episode, but only game over is an episode end, with the whole game's score and length."""
    with make_vec("breakout", 1, "serial") as venv:
        venv.reset(seed=0)
        rng = np.random.default_rng(0)
        terminations, steps = 0, 0
        for _ in range(3000):
            _, _, terminated, _, infos = venv.step(rng.integers(0, 4, 1))
            steps += 1
            terminations += int(terminated[0])
            if infos["episode_end"][0]:
                break
        else:
            pytest.fail("no game over in 3000 steps")
    assert terminations == 5  # one per life; the last one is the game over
    assert infos["episode_length"][0] == steps
