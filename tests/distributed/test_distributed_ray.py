"""RaySampler on a local Ray and on a simulated 2-node cluster (``ray.cluster_utils.Cluster``):
data from every node, actors killed mid-run are restarted, nothing left after shutdown.

Tests run in file order: the local-Ray test first (it starts and stops its own Ray), then the
cluster tests sharing one module-scoped cluster, the last of which shuts it down and checks that
no process is left. Each node has 1 CPU, so a 2-worker sampler puts one actor on each node.
"""

from __future__ import annotations

import functools
import os
import signal
import time

import numpy as np
import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from rapidrl.distributed import (  # noqa: E402
    RaySampler,
    RolloutWorker,
    RolloutWorkerError,
    concat_rollouts,
    make_actor_critic_policy,
    make_q_policy,
    weights_to_numpy,
)
from rapidrl.distributed.testing import ray_pids, wait_gone  # noqa: E402

Q_CARTPOLE = functools.partial(make_q_policy, (4,), 2)
AC_CARTPOLE = functools.partial(make_actor_critic_policy, (4,), 2)
STORE = 80 * 2**20  # the smallest object store Ray accepts is 75 MiB
QUIET = {"log_to_driver": False}

pytestmark = [
    pytest.mark.timeout(150),
    pytest.mark.xdist_group("ray"),
]  # Ray tests share one xdist process: scripts/test.sh


def test_local_ray_pong_and_shutdown_leaves_nothing():
    assert not ray.is_initialized()
    s = RaySampler(
        "pong",
        functools.partial(make_q_policy, (4, 84, 84), 6),
        num_workers="auto",
        ray_init_kwargs={"num_cpus": 1, "object_store_memory": STORE, **QUIET},
    )
    try:
        assert s.num_workers == 1  # "auto": the cluster's one CPU
        (b,) = s.next_transitions(4, timeout=60)
        assert b.obs.dtype == np.uint8 and b.obs.shape == (5, 1, 4, 84, 84)
        assert b.meta.frames == 16 and b.meta.node_id == s.node_ids[0] != "local"
        # A worker that cannot start (unknown env id) fails fast with its error.
        with pytest.raises(RolloutWorkerError, match="(?s)failed to start.*NoSuchEnv"):
            RaySampler("NoSuchEnv-v0", Q_CARTPOLE, 1, num_cpus_per_worker=0, start_timeout=60)
        pids = ray_pids()
        assert pids
    finally:
        s.shutdown()
    assert not ray.is_initialized()
    assert wait_gone(pids) == []
    s.shutdown()  # idempotent


def test_a_local_sampler_starts_its_own_ray_beside_another_cluster():
    """With no address the sampler starts a new local Ray even while another Ray cluster runs on
    this machine: ray.init(address=None) alone attaches to the newest one started here (and then
    refuses num_cpus with a ValueError)."""
    assert not ray.is_initialized()
    other = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False},
    )
    try:
        kwargs = {"num_cpus": 1, "object_store_memory": STORE, **QUIET}
        with RaySampler(
            "CartPole-v1", Q_CARTPOLE, num_workers=1, envs_per_worker=1, ray_init_kwargs=kwargs
        ) as s:
            assert ray.get_runtime_context().gcs_address != other.address
            assert s.num_workers == 1
        assert not ray.is_initialized()
    finally:
        other.shutdown()


@pytest.fixture(scope="module")
def cluster():
    if ray.is_initialized():
        ray.shutdown()
    c = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False},
    )
    c.add_node(num_cpus=1, object_store_memory=STORE)
    c.wait_for_nodes()
    yield c
    ray.shutdown()
    c.shutdown()


def _sampler(cluster, factory, **kw) -> RaySampler:
    return RaySampler(
        "CartPole-v1",
        factory,
        num_workers=2,
        envs_per_worker=2,
        address=cluster.address,
        seed=7,
        ray_init_kwargs=QUIET,
        **kw,
    )


def test_transitions_from_every_node_equal_serial(cluster):
    with _sampler(cluster, Q_CARTPOLE) as s:
        nodes = {n["NodeID"] for n in ray.nodes() if n["Alive"]}
        assert len(nodes) == 2 and set(s.node_ids) == nodes
        policy = Q_CARTPOLE()
        s.set_weights(policy, 0)
        got: dict[int, list] = {0: [], 1: []}
        while min(len(v) for v in got.values()) < 3:
            for b in s.next_transitions(16, timeout=60):
                got[b.meta.worker_id].append(b)
                assert 0 <= s.policy_lag(b) and b.meta.weights_version <= s.version
            s.set_weights(policy, s.version + 1)
        assert {b.meta.node_id for v in got.values() for b in v} == nodes
        assert s.batches_per_node.keys() == nodes
        for i, v in got.items():
            assert [b.meta.seq for b in v[:3]] == [0, 1, 2]
            assert np.allclose(v[0].epsilon, s.epsilons[i])
        # Ground truth: the same worker in-process gives the same first batch.
        w = RolloutWorker("CartPole-v1", Q_CARTPOLE, 2, worker_id=1, seed=7)
        w.set_weights(weights_to_numpy(policy), 0)
        ref = w.collect_transitions(16, s.epsilons[1])
        first = got[1][0]
        for name in ("obs", "actions", "rewards", "terminated", "final_obs", "epsilon"):
            assert np.array_equal(getattr(first, name), getattr(ref, name)), name
        w.close()
        # A bug inside a worker is raised with its name, not retried: a Q policy has no logprobs.
        with pytest.raises(RolloutWorkerError, match="rollout worker .* missing .*logprobs"):
            s.collect_rollouts(4, timeout=60)


def test_killed_actor_is_restarted_and_collection_completes(cluster):
    with _sampler(cluster, Q_CARTPOLE) as s:
        policy = Q_CARTPOLE()
        s.set_weights(policy, 0)
        first = {}
        while len(first) < 2:
            for b in s.next_transitions(16, timeout=60):
                first.setdefault(b.meta.worker_id, b)
        s.set_weights(policy, 5)
        old_pid = s.worker_info[0]["pid"]
        os.kill(old_pid, signal.SIGKILL)  # its request in flight dies with it
        after: list = []
        deadline = time.monotonic() + 90
        while sum(b.meta.worker_id == 0 and b.meta.pid != old_pid for b in after) < 2:
            assert time.monotonic() < deadline, s.stats()
            after += s.next_transitions(16, timeout=60)
        assert s.restarts == 1 and s.failures == 1 and s.dropped_batches >= 1
        new = [b for b in after if b.meta.worker_id == 0 and b.meta.pid != old_pid]
        assert [b.meta.seq for b in new[:2]] == [0, 1]  # a fresh actor: streams restart
        assert new[0].meta.weights_version == 5  # the latest weights were re-sent
        assert not np.array_equal(new[0].obs[0], first[0].obs[0])  # new seeds, no replay
        assert all(b.actions.shape == (16, 2) for b in after)  # only whole batches
        assert any(b.meta.worker_id == 1 for b in after)  # the other worker carried on


def test_rollouts_from_every_node_with_restart(cluster):
    with _sampler(cluster, AC_CARTPOLE) as s:
        policy = AC_CARTPOLE()
        s.set_weights(policy, 0)
        rs = s.collect_rollouts(12, timeout=60)
        assert [r.meta.worker_id for r in rs] == [0, 1]
        assert len({r.meta.node_id for r in rs}) == 2
        assert all(r.meta.weights_version == 0 for r in rs)
        s.set_weights(policy, 1)
        old_pid = s.worker_info[1]["pid"]
        ray.kill(s.actors[1], no_restart=False)
        # ray.kill returns before the actor dies: a collect sent meanwhile can still reach it.
        assert wait_gone({old_pid}, timeout=30) == []
        rs = s.collect_rollouts(12, timeout=90)
        assert [r.meta.weights_version for r in rs] == [1, 1]
        assert rs[0].meta.seq == 1 and rs[1].meta.seq == 0  # worker 1 was rebuilt
        assert s.restarts == 1
        r = concat_rollouts(rs)
        assert r.obs.shape == (12, 4, 4) and r.next_values().shape == (12, 4)


def test_cluster_shutdown_leaves_nothing(cluster):
    pids = ray_pids()
    assert pids  # the cluster's GCS, raylets, workers
    ray.shutdown()
    cluster.shutdown()
    assert wait_gone(pids) == []
    assert ray_pids() == set()  # nor any started since
