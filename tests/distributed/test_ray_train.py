"""``rapidrl train dqn|ppo --ray``: the trainers' Ray loops end to end.

Without Ray startup: the missing-Ray error, the config checks, ``--ray`` alone = local. Then, in
file order: the CLI on a local Ray (``--workers auto``, nothing left after it), and a simulated
2-node cluster (``ray.cluster_utils.Cluster``, 1 CPU per node, so the 2 workers of ``--workers
auto`` land one per node) shared by a DQN run (Ape-X: worker SIGKILLed mid-run, restarted; then
resumed from its checkpoint) and a PPO run (worker SIGKILLed mid-run, restarted); the last test
shuts the cluster down and checks that no Ray process is left.
"""

from __future__ import annotations

import dataclasses
import json
import os
import signal
import sys

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from rapidrl import cli  # noqa: E402
from rapidrl.algos.dqn.config import DQNConfig  # noqa: E402
from rapidrl.algos.dqn.train import parse_dqn_args  # noqa: E402
from rapidrl.algos.dqn.train import train as train_dqn  # noqa: E402
from rapidrl.algos.ppo.config import PRESETS as PPO_PRESETS  # noqa: E402
from rapidrl.algos.ppo.train import train as train_ppo  # noqa: E402
from rapidrl.distributed.testing import ray_pids, wait_gone  # noqa: E402
from rapidrl.train import list_checkpoints, load_latest, read_metrics  # noqa: E402

pytestmark = [
    pytest.mark.timeout(240),
    pytest.mark.xdist_group("ray"),
]  # Ray tests share one xdist process: scripts/test.sh

RUN = dict(
    log_every_seconds=0,
    checkpoint_every_seconds=1e9,
    no_progress=True,
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
    envs_per_worker=2,
    ray_batch_steps=16,
    ray_publish_every=2,
    log_every_frames=128,
    checkpoint_every_frames=1_024,
    max_frames=20_000,  # a cap: the tests stop the runs from on_log
    **RUN,
)
PPO_CARTPOLE = dataclasses.replace(
    PPO_PRESETS["cartpole"],
    num_steps=32,
    envs_per_worker=2,
    epochs=2,
    log_every_frames=128,
    checkpoint_every_frames=512,
    max_frames=20_000,
    tensorboard=False,
    **RUN,
)


STORE = 80 * 2**20  # the smallest object store Ray accepts is 75 MiB


def _metrics(run_dir):
    return read_metrics(os.path.join(run_dir, "metrics.csv"))


class KillThenStop:
    """``on_log``: SIGKILL worker 0 at the first metrics row; stop the run (return True) once a
    later row shows it restarted and ``rows_after`` more rows went by."""

    def __init__(self, rows_after: int = 2):
        self.killed_pid = None
        self.rows_after = rows_after
        self.seen_restart = 0

    def __call__(self, event) -> bool:
        if self.killed_pid is None:
            self.killed_pid = event.actor_pids[0]
            os.kill(self.killed_pid, signal.SIGKILL)
            return False
        if event.row["ray_restarts"] >= 1:
            assert event.actor_pids[0] != self.killed_pid
            self.seen_restart += 1
        return self.seen_restart > self.rows_after


# --------------------------------------------------------------------------------------------
# No Ray started
# --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("algo", ["dqn", "ppo"])
def test_without_ray_installed_a_clear_error(tmp_path, monkeypatch, capsys, algo):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError
    assert cli.main(["train", algo, "--env", "CartPole-v1", "--ray", "local"]) == 2
    err = capsys.readouterr().err
    assert (
        "Ray is not installed: pip install -e '.[ray]' in the rapidrl checkout" in err
        and "Traceback" not in err
    )
    assert not (tmp_path / "runs").exists()


@pytest.mark.parametrize(
    "algo, argv, message",
    [
        ("ppo", ["--recurrent"], "not supported yet"),
        ("ppo-lstm", [], "not supported yet"),
        ("ppo", ["--env-batch-size", "4"], "drop --env-batch-size"),
        ("dqn", ["--actor-processes", "1"], "drop --actor-processes"),
        ("dqn", ["--workers", "0"], "--workers must be 'auto' or an int >= 1"),
        ("ppo", ["--workers", "many"], "--workers must be 'auto' or an int >= 1"),
        ("dqn", ["--envs-per-worker", "0"], "--envs-per-worker must be an int >= 1"),
        ("dqn", ["--ray-publish-every", "0"], "--ray-publish-every must be an int >= 1"),
        ("ppo", ["--ray-cpus-per-worker", "0"], "--ray-cpus-per-worker must be > 0"),
    ],
)
def test_ray_config_errors(tmp_path, monkeypatch, capsys, algo, argv, message):
    monkeypatch.chdir(tmp_path)
    assert cli.main(["train", algo, "--ray", "local", *argv]) == 2
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err
    assert not (tmp_path / "runs").exists()


def test_ray_flag_alone_means_local():
    assert parse_dqn_args(["--ray"], "p", "fast").ray == "local"
    cfg = parse_dqn_args(["--ray", "--workers", "3"], "p", "fast")
    assert (cfg.ray, cfg.workers) == ("local", "3")
    assert parse_dqn_args(["--ray", "10.0.0.1:6379"], "p", "fast").ray == "10.0.0.1:6379"
    assert parse_dqn_args([], "p", "fast").ray is None


# --------------------------------------------------------------------------------------------
# A local Ray, through the command line
# --------------------------------------------------------------------------------------------
def test_cli_local_ray_leaves_nothing(tmp_path, capsys):
    assert not ray.is_initialized()
    run = tmp_path / "local"
    argv = ["train", "dqn", "--preset", "dqn", "--env", "CartPole-v1", "--ray"]
    argv += ["--workers", "2", "--ray-cpus-per-worker", "0.5"]  # fits any machine
    argv += ["--envs-per-worker", "2", "--learning-starts", "100", "--max-frames", "600"]
    argv += ["--ray-batch-steps", "16", "--no-progress", "--no-tensorboard"]
    argv += ["--torch-threads", "1", "--run-dir", str(run)]
    assert cli.main(argv) == 0
    assert "max_frames:" in capsys.readouterr().out
    s = json.loads((run / "summary.json").read_text())
    assert s["ray"]["address"] == "local" and s["ray"]["workers"] == 2
    assert s["frames"] >= 600 and s["updates"] > 0
    assert not ray.is_initialized()
    assert wait_gone(ray_pids()) == []  # the local Ray is gone with its workers


# --------------------------------------------------------------------------------------------
# A simulated 2-node cluster
# --------------------------------------------------------------------------------------------
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


def _check_both_nodes_and_restart(summary, run_dir):
    r = summary["ray"]
    assert r["workers"] == 2 and r["address"] != "local"  # --workers auto: 1 CPU per node
    assert len(r["frames_by_node"]) == 2  # data from both nodes
    assert all(f > 0 for f in r["frames_by_node"].values())
    assert r["restarts"] == 1 and r["failures"] == 1
    assert summary["stop_reason"] == "callback"
    header, rows = _metrics(run_dir)
    for col in ("policy_lag", "ray_restarts", "ray_nodes", "ray_workers"):
        assert col in header, col
    assert rows[0]["ray_restarts"] == "0" and rows[-1]["ray_restarts"] == "1"
    assert rows[-1]["ray_nodes"] == "2"
    assert (run_dir / "config.json").exists() and list_checkpoints(run_dir / "checkpoints")
    assert not ray.is_initialized()  # the sampler disconnected the driver


def test_dqn_apex_on_two_nodes_worker_killed_then_resume(cluster, tmp_path):
    run_dir = tmp_path / "dqn"
    cfg = dataclasses.replace(
        DQN_CARTPOLE, ray=cluster.address, run_dir=str(run_dir), save_replay=True
    )
    hook = KillThenStop()
    s = train_dqn(cfg, on_log=hook)
    _check_both_nodes_and_restart(s, run_dir)
    assert s["updates"] > 0 and s["episodes"] > 0
    # The replay ratio of the local loop: one update per steps_per_update steps after the prefill.
    assert abs(s["updates"] - (s["steps"] - cfg.learning_starts) / cfg.steps_per_update) <= 40
    assert sorted(s["ray"]["epsilons"]) == pytest.approx(sorted([0.4, 0.4**8]))
    _, rows = _metrics(run_dir)
    assert any(float(r["policy_lag"]) > 0 for r in rows)  # publish_every 2: the workers lag
    assert (run_dir / "tb").is_dir() and (run_dir / "summary.json").exists()

    # Resume the learner: same checkpoint format as local; the workers start again.
    ck = load_latest(run_dir)
    updates = ck.state["counters"]["updates"]
    resumed = dataclasses.replace(
        cfg, run_dir=None, resume=str(run_dir), max_frames=s["frames"] + 512
    )
    s2 = train_dqn(resumed)
    assert s2["stop_reason"] == "max_frames" and s2["frames"] >= s["frames"] + 512
    assert s2["updates"] > updates and s2["episodes"] >= s["episodes"]
    assert s2["ray"]["restarts"] == 0 and len(s2["ray"]["frames_by_node"]) == 2


def test_ppo_on_two_nodes_worker_killed(cluster, tmp_path):
    run_dir = tmp_path / "ppo"
    cfg = dataclasses.replace(PPO_CARTPOLE, ray=cluster.address, run_dir=str(run_dir))
    s = train_ppo(cfg, on_log=KillThenStop(rows_after=1))
    _check_both_nodes_and_restart(s, run_dir)
    assert s["updates"] >= 3 and s["steps"] == s["updates"] * 32 * 4  # T x workers x envs
    assert s["ray"]["policy_lag_mean"] == 0  # synchronous: every rollout had the latest weights
    _, rows = _metrics(run_dir)
    assert all(r["policy_lag"] == "0" for r in rows)
    assert all(r["approx_kl"] != "" for r in rows)


def test_cluster_shutdown_leaves_nothing(cluster):
    pids = ray_pids()
    assert pids
    ray.shutdown()
    cluster.shutdown()
    assert wait_gone(pids) == []
    assert ray_pids() == set()
