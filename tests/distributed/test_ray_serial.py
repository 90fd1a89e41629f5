"""The trainers' Ray drivers with ``--ray serial``: the same driver code as on a cluster, its
workers (:class:`rapidrl.distributed.SerialSampler`) in this process, no Ray needed. Compared
with the local loop on the same seed: the same initial network, the same run directory (plus the
``ray_*`` columns and the ``ray`` section), the same counters, metrics and weights for the same
frame budget (PPO, its worker given the local loop's seeds), the replay ratio of the local loop
(DQN), and resume."""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys

import pytest
import torch

from rapidrl.algos.dqn.config import DQNConfig
from rapidrl.algos.dqn.train import train as train_dqn
from rapidrl.algos.ppo.config import PRESETS as PPO_PRESETS
from rapidrl.algos.ppo.learner import make_policy
from rapidrl.algos.ppo.train import train as train_ppo
from rapidrl.config import ConfigError
from rapidrl.distributed import sampler as sampler_module
from rapidrl.distributed.policy import ActorCriticPolicy
from rapidrl.distributed.training import RAY_COLUMNS
from rapidrl.distributed.worker import RolloutWorker
from rapidrl.train import list_checkpoints, read_metrics
from rapidrl.train.seeding import seed_of

RUN = dict(
    log_every_seconds=0,
    checkpoint_every_seconds=1e9,
    no_progress=True,
    tensorboard=False,
    torch_threads=1,
    seed=5,
)
DQN_CARTPOLE = DQNConfig(
    env="CartPole-v1",
    n_step=2,
    double=True,
    batch_size=16,
    steps_per_update=4,
    buffer_size=4_000,
    learning_starts=200,
    target_sync_steps=200,
    ray_batch_steps=16,
    ray_publish_every=2,
    log_every_frames=256,
    checkpoint_every_frames=1_024,
    max_frames=2_048,
    **RUN,
)
PPO_CARTPOLE = dataclasses.replace(
    PPO_PRESETS["cartpole"],
    num_envs=2,
    num_steps=32,
    envs_per_worker=2,
    epochs=2,
    log_every_frames=64,
    checkpoint_every_frames=128,
    max_frames=320,
    **RUN,
)


def _rows(run_dir):
    return read_metrics(os.path.join(run_dir, "metrics.csv"))


def _first_weights(run_dir, key):
    """The weights of the run's oldest kept checkpoint (``keep_checkpoints`` large)."""
    path = list_checkpoints(os.path.join(run_dir, "checkpoints"))[0]
    return torch.load(path, weights_only=True)["state"][key]


class _LocalLoopSeededWorker(RolloutWorker):
    """A :class:`RolloutWorker` that draws its random numbers as the PPO local loop does.

    The two drivers draw them differently, by design, in two places:

    - seeds: a worker derives its env seed and its action generator's seed from
      ``SeedSequence([seed, worker_id])`` (independent streams per Ray worker); the local loop
      resets its envs with ``seed`` (env ``i``: ``seed + i``) and samples actions with the
      learner's ``act_gen`` (``seed_of(seed, 1)``). This worker takes the local loop's seeds.
    - the bootstrap pass: after a rollout the worker gets ``V(last_obs)`` from ``policy.act``,
      which also samples (and discards) actions, so its generator moves on; the local loop calls
      ``net.value`` and draws nothing. This worker restores its generator around that pass.

    Everything else, including the driver's batch assembly, GAE and update, is the real thing.
    """

    def __init__(self, *args, seed: int = 0, **kwargs):
        super().__init__(*args, seed=seed, **kwargs)
        self._rng_state = torch.Generator().manual_seed(seed_of(seed, 1)).get_state()
        self.obs, _ = self.venv.reset(seed=seed)

    def collect_rollout(self, num_steps, *args, **kwargs):
        act, calls = self._act, 0

        def act_then_bootstrap(obs, epsilon):
            nonlocal calls
            calls += 1
            if calls <= num_steps:  # a step of the rollout
                return act(obs, epsilon)
            state = self._rng_state  # the bootstrap pass after the last step
            out = act(obs, epsilon)
            self._rng_state = state
            return out

        self._act = act_then_bootstrap
        try:
            return super().collect_rollout(num_steps, *args, **kwargs)
        finally:
            del self._act


PPO_HOPPER = dataclasses.replace(
    PPO_PRESETS["mujoco"],
    num_envs=2,
    num_steps=32,
    envs_per_worker=2,
    minibatches=4,
    epochs=2,
    log_every_frames=64,
    checkpoint_every_frames=128,
    max_frames=320,
    lr_anneal_frames=320,
    **RUN,
)


@pytest.mark.parametrize("base", ["cartpole", "hopper"])
def test_ppo_serial_driver_matches_the_local_loop(tmp_path, monkeypatch, base):
    """With the local loop's random numbers (:class:`_LocalLoopSeededWorker`) the Ray driver
    takes the same steps, so every metrics row (timings aside) and the network and Adam state
    after every update are exactly the local loop's. Both build and train their network on one
    torch thread: the Ray driver builds it before it sets its learner threads, and the
    orthogonal init rounds differently on another thread count (~2e-7). Hopper: continuous
    actions (the Gaussian's samples, clipped where the worker sends them), input and reward
    normalization (the driver's running returns) all equal the local loop's."""
    if base == "hopper":
        pytest.importorskip("mujoco")
    monkeypatch.setattr(sampler_module, "RolloutWorker", _LocalLoopSeededWorker)
    cfg = dataclasses.replace(
        PPO_CARTPOLE if base == "cartpole" else PPO_HOPPER,
        precision="fp32",
        checkpoint_every_frames=64,
        keep_checkpoints=10,
    )
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        local = train_ppo(dataclasses.replace(cfg, run_dir=str(tmp_path / "local")))
        serial = train_ppo(
            dataclasses.replace(cfg, ray="serial", workers="1", run_dir=str(tmp_path / "serial"))
        )
    finally:
        torch.set_num_threads(threads)
    # The same budget gives the same counters: 5 rollouts of 2 envs x 32 steps, 2 epochs x 4.
    for key in ("frames", "steps", "updates", "grad_steps", "episodes"):
        assert serial[key] == local[key], key
    assert local["updates"] == 5 and local["grad_steps"] == 5 * 2 * 4
    assert serial["ray"]["workers"] == 1 and serial["ray"]["frames_by_node"] == {"local": 320}
    header_l, rows_l = _rows(tmp_path / "local")
    header_s, rows_s = _rows(tmp_path / "serial")
    assert header_s == [*header_l, "policy_lag", *RAY_COLUMNS]
    # One row per update: the episodes, returns and losses of each are the local loop's.
    assert [r["updates"] for r in rows_l] == ["1", "2", "3", "4", "5"]
    assert int(rows_l[-1]["episodes"]) > 5  # episodes ended: returns are compared
    timings = {"seconds", "fps", "rollout_s", "update_s"}
    for row_l, row_s in zip(rows_l, rows_s, strict=True):
        assert {k: row_s[k] for k in header_l if k not in timings} == {
            k: v for k, v in row_l.items() if k not in timings
        }, row_l["updates"]
    # Synchronous: every rollout acted with the latest weights.
    assert all(float(r["policy_lag"]) == 0 for r in rows_s)
    # The network and the optimizer after every update (a checkpoint each), the final included.
    ckpts_l = list_checkpoints(os.path.join(tmp_path / "local", "checkpoints"))
    ckpts_s = list_checkpoints(os.path.join(tmp_path / "serial", "checkpoints"))
    assert [os.path.basename(p) for p in ckpts_s] == [os.path.basename(p) for p in ckpts_l]
    assert len(ckpts_l) == 5
    for path_l, path_s in zip(ckpts_l, ckpts_s):
        state_l = torch.load(path_l, weights_only=True)["state"]
        state_s = torch.load(path_s, weights_only=True)["state"]
        where = os.path.basename(path_l)
        assert state_l["net"].keys() == state_s["net"].keys()
        for k in state_l["net"]:
            assert torch.equal(state_l["net"][k], state_s["net"][k]), f"{where}: net.{k}"
        torch.testing.assert_close(
            state_s["optim"]["state"],
            state_l["optim"]["state"],
            rtol=0,
            atol=0,
            msg=lambda m, where=where: f"{where}: {m}",
        )


def test_ppo_serial_driver_with_value_norm_acts_in_the_return_scale(tmp_path):
    """--value-norm under the Ray driver: the workers' values (``ActorCriticPolicy`` over the
    net's forward) are in the return scale, as the local loop's ``act``, and the learner's
    statistics count every step of every rollout."""
    cfg = dataclasses.replace(PPO_CARTPOLE, value_norm=True)
    net = make_policy(cfg, (4,), 2)
    net.value_rms.update(torch.tensor([5.0, 9.0, 20.0]))
    obs = torch.randn(6, 4)
    with torch.no_grad():
        torch.testing.assert_close(ActorCriticPolicy(net).act(obs)["values"], net.act(obs).value)
    run = tmp_path / "serial"
    summary = train_ppo(dataclasses.replace(cfg, ray="serial", workers="1", run_dir=str(run)))
    assert summary["steps"] == 320
    path = list_checkpoints(os.path.join(run, "checkpoints"))[-1]
    state = torch.load(path, weights_only=True)["state"]["net"]
    assert float(state["value_rms.count"]) == pytest.approx(320, abs=1e-3)


@pytest.mark.parametrize("algo", ["ppo", "dqn"])
def test_serial_driver_starts_from_the_local_loops_network(tmp_path, algo):
    """Same seed, same initial network. At a learning rate of 1e-12 the few updates of a short
    run move no weight by more than 1e-9, so the final checkpoints of both drivers hold their
    initial networks. They agree to float rounding (~2e-7: the Ray driver builds its network
    before it knows its learner thread count, and the orthogonal init's QR rounds differently
    on another thread count); another seed gives another network altogether."""
    if algo == "ppo":
        train, key = train_ppo, "net"
        base = dataclasses.replace(PPO_CARTPOLE, max_frames=64, lr=1e-12, anneal_lr=False)
        local = {}
    else:
        train, key = train_dqn, "q"
        base = dataclasses.replace(DQN_CARTPOLE, max_frames=512, lr=1e-12)
        local = {"num_envs": 2, "backend": "serial"}
    base = dataclasses.replace(base, checkpoint_every_frames=None)
    train(dataclasses.replace(base, run_dir=str(tmp_path / "local"), **local))
    train(dataclasses.replace(base, ray="serial", workers="1", run_dir=str(tmp_path / "serial")))
    net_l = _first_weights(tmp_path / "local", key)
    net_s = _first_weights(tmp_path / "serial", key)
    assert net_l.keys() == net_s.keys()
    for k in net_l:
        torch.testing.assert_close(net_l[k], net_s[k], rtol=0, atol=1e-5)


def test_dqn_serial_driver_keeps_the_replay_ratio(tmp_path):
    cfg = dataclasses.replace(
        DQN_CARTPOLE,
        ray="serial",
        workers="2",
        envs_per_worker=2,
        run_dir=str(tmp_path / "serial"),
    )
    summary = train_dqn(cfg)
    header, rows = _rows(tmp_path / "serial")
    assert header[-len(RAY_COLUMNS) :] == list(RAY_COLUMNS)
    assert summary["ray"]["workers"] == 2 and summary["ray"]["frames_by_node"]
    # Ape-X epsilons: one per worker, fixed.
    assert len(summary["ray"]["epsilons"]) == 2
    # One update of batch x k per k agent steps after the prefill, as in the local loop; the
    # learner takes whole batches of 16 steps x 2 envs, so the count is exact at batch ends.
    steps = summary["steps"]
    assert steps >= cfg.max_frames
    expected = (steps - cfg.learning_starts) // cfg.steps_per_update
    assert abs(summary["updates"] - expected) <= 32 // cfg.steps_per_update
    local = train_dqn(
        dataclasses.replace(
            DQN_CARTPOLE, num_envs=4, backend="serial", run_dir=str(tmp_path / "local")
        )
    )
    assert abs(summary["updates"] - local["updates"]) <= 32 // cfg.steps_per_update


def test_dqn_serial_driver_resumes(tmp_path):
    run = tmp_path / "run"
    cfg = dataclasses.replace(
        DQN_CARTPOLE, ray="serial", workers="1", envs_per_worker=2, run_dir=str(run)
    )
    first = train_dqn(dataclasses.replace(cfg, max_frames=1_024))
    again = train_dqn(dataclasses.replace(cfg, run_dir=None, resume=str(run), max_frames=2_048))
    assert again["frames"] >= 2_048 > first["frames"] >= 1_024
    assert again["updates"] > first["updates"]
    with open(run / "summary.json") as f:
        assert json.load(f)["frames"] == again["frames"]


def test_serial_needs_no_ray_and_checks_its_fields(tmp_path):
    """A serial run never imports Ray (checked in a fresh interpreter: Ray is installed here,
    and other tests may have imported it into this one)."""
    code = (
        "import dataclasses, sys\n"
        "from rapidrl.algos.ppo.config import PRESETS\n"
        "from rapidrl.algos.ppo.train import train\n"
        "cfg = dataclasses.replace(PRESETS['cartpole'], ray='serial', workers='1', num_steps=16,\n"
        "    envs_per_worker=2, max_frames=64, no_progress=True, tensorboard=False,\n"
        f"    run_dir={str(tmp_path / 'run')!r})\n"
        "summary = train(cfg)\n"
        "assert summary['updates'] == 2, summary['updates']\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    with pytest.raises(ConfigError, match="--workers"):
        train_ppo(dataclasses.replace(PPO_CARTPOLE, ray="serial", workers="none"))


def test_a_refused_layout_leaves_no_run_dir(tmp_path):
    """Checks that need the workers (the rollout size, the replay per env) come before the run
    dir is made: a refused start leaves nothing on disk, as the local loops."""
    run = str(tmp_path / "runs" / "x")
    # Accepted by validate() (8 envs x 2 steps), refused for 1 worker x 2 envs x 2 steps.
    ppo = dataclasses.replace(
        PPO_CARTPOLE, ray="serial", workers="1", num_envs=8, num_steps=2, minibatches=8, run_dir=run
    )
    with pytest.raises(ConfigError, match=r"--num-steps x --workers"):
        train_ppo(ppo)
    # Accepted for 1 env, refused for 2 workers x 4 envs (2 transitions per env < n-step + 1).
    dqn = dataclasses.replace(
        DQN_CARTPOLE, ray="serial", workers="2", envs_per_worker=4, buffer_size=16,
        learning_starts=8, run_dir=run,
    )  # fmt: skip
    with pytest.raises(ConfigError, match="over 8 Ray envs"):
        train_dqn(dqn)
    assert not (tmp_path / "runs").exists()
