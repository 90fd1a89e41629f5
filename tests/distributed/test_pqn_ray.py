"""PQN on the Ray driver, with its workers in this process (``--ray serial``: no Ray needed):
what the workers record for the Q(lambda) targets, a run and its exact resume, and that the
targets are the local loop's function of the same rollout."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
import torch

from rapidrl.algos.pqn.config import PRESETS
from rapidrl.algos.pqn.learner import make_pqn_network, rollout_targets
from rapidrl.algos.pqn.train import train
from rapidrl.config import ConfigError
from rapidrl.distributed.policy import QLambdaPolicy
from rapidrl.distributed.training import RAY_COLUMNS
from rapidrl.distributed.worker import RolloutWorker
from rapidrl.train import list_checkpoints, read_metrics
from rapidrl.train.checkpoint import load_latest

pytestmark = pytest.mark.timeout(180)

CARTPOLE = dataclasses.replace(
    PRESETS["cartpole"],
    ray="serial",
    workers="2",
    envs_per_worker=2,
    num_steps=16,
    log_every_seconds=0,
    log_every_frames=64,
    checkpoint_every_seconds=1e9,
    checkpoint_every_frames=128,
    keep_checkpoints=10,
    max_frames=256,
    schedule_frames=256,  # the schedules do not depend on where a run stops
    no_progress=True,
    tensorboard=False,
    torch_threads=1,
    precision="fp32",
    seed=3,
)


def _worker(epsilon: float, seed: int = 0) -> tuple[RolloutWorker, QLambdaPolicy]:
    cfg = dataclasses.replace(CARTPOLE, channels_last=False)
    torch.manual_seed(0)
    policy = QLambdaPolicy(make_pqn_network(cfg, (4,), 2), 2)
    policy.epsilon.fill_(epsilon)
    worker = RolloutWorker("CartPole-v1", lambda: policy, num_envs=3, seed=seed)
    return worker, policy


def test_workers_record_the_max_q_the_targets_bootstrap_from():
    worker, policy = _worker(epsilon=0.0)
    try:
        batch = worker.collect_rollout(24)
    finally:
        worker.close()
    with torch.no_grad():
        q = policy.q(torch.as_tensor(batch.obs.reshape(-1, 4))).reshape(24, 3, 2)
        last_q = policy.q(torch.as_tensor(batch.last_obs))
    # Acted on 3 observations a call, recomputed here 72 at once: float32 rounding apart.
    np.testing.assert_allclose(batch.values, q.max(-1).values.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(
        batch.last_values, last_q.max(-1).values.numpy(), rtol=1e-5, atol=1e-6
    )
    # epsilon 0: every action greedy.
    np.testing.assert_array_equal(batch.actions, q.argmax(-1).numpy())


def test_the_published_epsilon_is_what_the_workers_explore_with():
    worker, policy = _worker(epsilon=1.0)
    try:
        batch = worker.collect_rollout(64)
    finally:
        worker.close()
    with torch.no_grad():
        greedy = policy.q(torch.as_tensor(batch.obs.reshape(-1, 4))).argmax(-1).numpy()
    # Uniform over 2 actions: about half the actions differ from the greedy ones.
    assert 0.3 < np.mean(batch.actions.reshape(-1) != greedy) < 0.7
    # The rate travels with the weights (a buffer): a fresh policy loaded from them has it.
    other = QLambdaPolicy(make_pqn_network(CARTPOLE, (4,), 2), 2)
    other.load_state_dict(policy.state_dict())
    assert other.epsilon.item() == 1.0


def test_pqn_serial_driver_trains_and_resumes_exactly(tmp_path):
    run = tmp_path / "run"
    summary = train(dataclasses.replace(CARTPOLE, run_dir=str(run)))
    # 2 workers x 2 envs x 16 steps = 64 agent steps an update.
    assert summary["frames"] == 256 and summary["updates"] == 4
    assert summary["algo"] == "pqn" and summary["ray"]["frames_by_worker"]
    header, rows = read_metrics(run / "metrics.csv")
    assert set(RAY_COLUMNS) <= set(header) and [int(r["frames"]) for r in rows] == [
        64,
        128,
        192,
        256,
    ]
    assert all(float(r["td_loss"]) > 0 for r in rows)
    # Stopped at 128 frames and resumed: the checkpoint at 128 is the uninterrupted run's.
    part = tmp_path / "part"
    train(dataclasses.replace(CARTPOLE, run_dir=str(part), max_frames=128))
    resumed = train(dataclasses.replace(CARTPOLE, resume=str(part), max_frames=256))
    assert resumed["frames"] == 256
    full = {p.name: p for p in list_checkpoints(run / "checkpoints")}
    mine = torch.load(part / "checkpoints" / "ckpt-000000000128.pt", weights_only=True)
    theirs = torch.load(full["ckpt-000000000128.pt"], weights_only=True)
    for k, v in theirs["state"]["net"].items():
        torch.testing.assert_close(mine["state"]["net"][k], v, rtol=0, atol=0)
    assert load_latest(part, read_only=True).frames == 256
    with open(part / "summary.json") as f:
        assert json.load(f)["frames"] == 256


def test_targets_are_the_local_loops_function_of_the_rollout():
    """The driver feeds rollout_targets the workers' arrays: max-Q of each observation, of the
    final observation where truncated, and of the observation after the rollout."""
    worker, _ = _worker(epsilon=0.5, seed=1)
    try:
        batch = worker.collect_rollout(40)
    finally:
        worker.close()
    t = lambda x: torch.as_tensor(x)  # noqa: E731
    targets = rollout_targets(
        t(batch.rewards).float(), t(batch.values), t(batch.terminated), t(batch.truncated),
        t(batch.final_values), t(batch.last_values), 0.99, 0.65,
    )  # fmt: skip
    # One step of lambda = 0 by hand: r + gamma * next max-Q where not terminated.
    one_step = rollout_targets(
        t(batch.rewards).float(), t(batch.values), t(batch.terminated), t(batch.truncated),
        t(batch.final_values), t(batch.last_values), 0.99, 0.0,
    )  # fmt: skip
    nxt = np.where(
        batch.truncated & ~batch.terminated,
        batch.final_values,
        np.concatenate([batch.values[1:], batch.last_values[None]]),
    )
    expected = batch.rewards + 0.99 * nxt * ~batch.terminated
    np.testing.assert_allclose(one_step.numpy(), expected, rtol=1e-5, atol=1e-6)
    assert targets.shape == (40, 3) and not torch.equal(targets, one_step)


def test_pqn_ray_refuses_what_it_does_not_do(tmp_path):
    with pytest.raises(ConfigError, match="--envs-per-worker"):
        train(dataclasses.replace(CARTPOLE, envs_per_worker=0, run_dir=str(tmp_path / "r")))
    assert not (tmp_path / "r").exists()
