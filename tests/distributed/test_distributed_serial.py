"""RolloutWorker / SerialSampler in-process (no Ray needed): batch layout, bootstrap values,
replay plumbing, weights versions, the missing-Ray error."""

from __future__ import annotations

import functools
import sys

import numpy as np
import pytest
import torch

from rapidrl.buffers.replay import ReplayBuffer
from rapidrl.distributed import (
    RAY_MISSING,
    RolloutBatch,
    RolloutWorker,
    SerialSampler,
    apex_epsilons,
    concat_rollouts,
    make_actor_critic_policy,
    make_q_policy,
    require_ray,
    weights_to_numpy,
)
from rapidrl.distributed.batches import BatchMeta

pytestmark = pytest.mark.xdist_group("ray")  # Ray tests share one xdist process: scripts/test.sh

Q_CARTPOLE = functools.partial(make_q_policy, (4,), 2)
AC_CARTPOLE = functools.partial(make_actor_critic_policy, (4,), 2)


def test_missing_ray_error(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # import ray -> ImportError
    with pytest.raises(ImportError) as e:
        require_ray()
    assert (
        str(e.value)
        == "Ray is not installed: pip install -e '.[ray]' in the rapidrl checkout"
        == RAY_MISSING
    )
    from rapidrl.distributed import RaySampler

    with pytest.raises(ImportError, match=r"pip install -e '\.\[ray\]'"):
        RaySampler("CartPole-v1", Q_CARTPOLE, 1)


def test_apex_epsilons():
    assert apex_epsilons(1).tolist() == [0.4]
    eps = apex_epsilons(8)
    assert eps[0] == pytest.approx(0.4) and eps[-1] == pytest.approx(0.4**8)
    assert np.all(np.diff(eps) < 0)


def test_transitions_layout_and_next_obs():
    w = RolloutWorker("CartPole-v1", Q_CARTPOLE, 3, seed=1)
    b = w.collect_transitions(120, epsilon=[1.0, 0.5, 0.0])
    t, n = 120, 3
    assert b.obs.shape == (t + 1, n, 4) and b.actions.shape == (t, n)
    assert b.actions.dtype == np.int64 and b.rewards.dtype == np.float32
    assert b.epsilon.tolist() == [1.0, 0.5, 0.0]
    assert (b.meta.worker_id, b.meta.node_id, b.meta.seq, b.meta.weights_version) == (
        0,
        "local",
        0,
        -1,
    )
    assert b.meta.env_steps == b.meta.frames == t * n
    done = b.terminated | b.truncated
    assert done.sum() == len(b.final_obs) == len(b.meta.episode_returns) > 0
    nxt = b.next_obs()
    assert np.array_equal(nxt[~done], b.obs[1:][~done])
    # An ended CartPole episode's last observation is out of bounds; the next one's first is not.
    x, theta = nxt[done][:, 0], nxt[done][:, 2]
    assert np.all((np.abs(x) > 2.4) | (np.abs(theta) > 0.2095))
    assert np.all(np.abs(b.obs[1:][done]) <= 0.05)
    # The next batch continues where this one stopped.
    b2 = w.collect_transitions(5, 0.0)
    assert b2.meta.seq == 1 and np.array_equal(b2.obs[0], b.obs[-1])
    w.close()


def test_transitions_into_replay_buffer():
    workers = [RolloutWorker("CartPole-v1", Q_CARTPOLE, 2, worker_id=i, seed=3) for i in range(2)]
    buf = ReplayBuffer(1000, (4,), num_envs=4, obs_dtype=np.float32, validate=True)
    for _ in range(2):
        for w in workers:
            b = w.collect_transitions(30, 0.3)
            assert b.stream_ids.tolist() == [2 * w.worker_id, 2 * w.worker_id + 1]
            b.add_to(buf)  # validate=True: every obs continues its stream
    assert len(buf) == 2 * 2 * 30 * 2
    s = buf.sample(16, rng=np.random.default_rng(0))
    assert s["obs"].shape == (16, 4)
    # A rebuilt worker (seq 0 again) cuts its streams instead of failing validation.
    fresh = RolloutWorker("CartPole-v1", Q_CARTPOLE, 2, worker_id=1, seed=4)
    fresh.collect_transitions(10, 0.3).add_to(buf)


def test_rollout_bootstrap_values():
    w = RolloutWorker("CartPole-v1", AC_CARTPOLE, 2, seed=0, env_options={"max_episode_steps": 7})
    policy = AC_CARTPOLE()
    with torch.no_grad():  # V(s) = 7 everywhere
        policy.net.critic.weight.zero_()
        policy.net.critic.bias.fill_(7.0)
    w.set_weights(weights_to_numpy(policy), version=3)
    r = w.collect_rollout(20)
    assert r.meta.weights_version == 3
    assert r.obs.shape == (20, 2, 4) and r.last_obs.shape == (2, 4)
    boot = r.truncated & ~r.terminated
    assert boot.any()  # 7-step time limit within 20 steps
    assert np.all(r.final_values[boot] == 7.0) and np.all(r.final_values[~boot] == 0.0)
    assert np.allclose(r.values, 7.0) and np.allclose(r.last_values, 7.0)
    assert np.allclose(r.logprobs, np.log(0.5), atol=0.05)  # near-uniform initial actor
    assert np.all(r.rewards == 1.0)


def test_rollout_next_values_by_hand():
    meta = BatchMeta(0, "local", 0, 0, 0, 6, 6, 0.0)
    f = np.zeros((3, 2), bool)
    term, trunc = f.copy(), f.copy()
    term[0, 0] = True  # terminated: value ignored by gae, keep values[t + 1]
    trunc[1, 1] = True  # truncated: bootstrap from V(final_obs)
    values = np.arange(6, dtype=np.float32).reshape(3, 2)
    r = RolloutBatch(
        obs=np.zeros((3, 2, 1), np.float32),
        actions=np.zeros((3, 2), np.int64),
        logprobs=np.zeros((3, 2), np.float32),
        values=values,
        rewards=np.zeros((3, 2), np.float32),
        terminated=term,
        truncated=trunc,
        final_values=np.where(trunc, 100.0, 0.0).astype(np.float32),
        last_obs=np.zeros((2, 1), np.float32),
        last_values=np.array([-1.0, -2.0], np.float32),
        meta=meta,
    )
    assert r.next_values().tolist() == [[2.0, 3.0], [4.0, 100.0], [-1.0, -2.0]]
    both = concat_rollouts([r, r])
    assert both.values.shape == (3, 4) and both.last_values.shape == (4,)
    assert both.meta.env_steps == 12


def test_serial_sampler_versions_and_lag():
    s = SerialSampler("CartPole-v1", Q_CARTPOLE, num_workers=2, envs_per_worker=2, publish_every=2)
    policy = Q_CARTPOLE()
    assert s.set_weights(policy, 0)
    assert not s.set_weights(policy, 1)  # not due: one put per 2 versions
    assert s.set_weights(policy, 2) and s.weight_puts == 2
    s.set_weights(policy, 3)
    (b0,) = s.next_transitions(8)
    (b1,) = s.next_transitions(8)
    assert (b0.meta.worker_id, b1.meta.worker_id) == (0, 1)
    assert b0.meta.weights_version == 2 and s.policy_lag(b0) == 1
    assert b0.epsilon[0] == pytest.approx(0.4) and b1.epsilon[0] == pytest.approx(0.4**8)
    assert s.stats()["ray/batches"] == 2 and s.frames == 2 * 8 * 2
    s.shutdown()


def test_pong_worker_uint8():
    w = RolloutWorker("pong", functools.partial(make_q_policy, (4, 84, 84), 6), 1, seed=0)
    b = w.collect_transitions(6, 1.0)
    assert b.obs.dtype == np.uint8 and b.obs.shape == (7, 1, 4, 84, 84)
    assert b.final_obs.dtype == np.uint8
    assert b.meta.frames == 6 * 4  # frame skip 4
    w.close()


class _ActOnly(torch.nn.Module):
    """An actor-critic policy with ``act`` alone (the protocol's minimum)."""

    def __init__(self):
        super().__init__()
        self.inner = AC_CARTPOLE()

    def act(self, obs, epsilon=None):
        return self.inner.act(obs, epsilon)


def test_bootstrap_pass_draws_no_actions():
    # Two rollouts of 10 steps act exactly as one of 20: the bootstrap pass between them takes
    # values() alone and leaves the worker's random stream where the 10th action left it.
    torch.manual_seed(0)
    weights = weights_to_numpy(AC_CARTPOLE())
    split, whole = (RolloutWorker("CartPole-v1", AC_CARTPOLE, 2, seed=5) for _ in range(2))
    for w in (split, whole):
        w.set_weights(weights, version=1)
    a, b = split.collect_rollout(10), split.collect_rollout(10)
    one = whole.collect_rollout(20)
    assert np.array_equal(np.concatenate([a.actions, b.actions]), one.actions)
    assert np.array_equal(np.concatenate([a.obs, b.obs]), one.obs)
    # A policy without values() bootstraps from act()["values"]: the same values.
    bare = RolloutWorker("CartPole-v1", _ActOnly, 2, seed=5)
    bare.set_weights({f"inner.{k}": v for k, v in weights.items()}, version=1)
    c = bare.collect_rollout(10)
    assert np.array_equal(c.actions, a.actions)
    np.testing.assert_allclose(c.last_values, a.last_values, rtol=1e-6)
