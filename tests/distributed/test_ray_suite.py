"""``rapidrl bench atari --ray``: a tiny suite (two CartPole runs, one CPU each) on a simulated
2-node cluster (``ray.cluster_utils.Cluster``, one CPU per node, so one run per node). The node
holding one run is removed once that run has a checkpoint: Ray starts the run again on the other
node, where it resumes from its checkpoint (the out dir is shared, as on an NFS), and the other
run is not touched. Nothing is lost: both records, one table."""

from __future__ import annotations

import threading
import time

import pytest

ray = pytest.importorskip("ray")

from ray.cluster_utils import Cluster  # noqa: E402

from rapidrl.bench.atari import BenchAtariConfig, bench_atari  # noqa: E402
from rapidrl.train import list_checkpoints  # noqa: E402

pytestmark = [
    pytest.mark.timeout(300),
    pytest.mark.xdist_group("ray"),
]  # Ray tests share one xdist process: scripts/test.sh

STORE = 80 * 1024 * 1024


def test_suite_survives_a_lost_node(tmp_path):
    if ray.is_initialized():
        ray.shutdown()
    cluster = Cluster(
        initialize_head=True,
        head_node_args={"num_cpus": 1, "object_store_memory": STORE, "include_dashboard": False},
    )
    doomed = cluster.add_node(num_cpus=1, object_store_memory=STORE)
    cluster.wait_for_nodes()
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        b = BenchAtariConfig(
            games="CartPole-v1", algos="ppo:cartpole", seeds="1,2", max_frames=60_000,
            out_dir=str(tmp_path / "suite"), ray=cluster.address, cpus_per_run=1, retries=2,
        )  # fmt: skip
        extra = [
            "--no-tensorboard",
            "--checkpoint-every-frames",
            "4096",
            "--log-every-seconds",
            "0",
        ]
        result: dict = {}
        suite = threading.Thread(target=lambda: result.update(bench_atari(b, extra)), daemon=True)
        suite.start()

        # Find the run on the doomed node; remove the node once that run has a checkpoint.
        specs = {s.seed: s for s in b.runs()}
        victim = None
        deadline = time.monotonic() + 120
        while victim is None and time.monotonic() < deadline:
            for seed, spec in specs.items():
                node_file = spec.run_dir(b.out_dir).parent / f"seed-{seed}.node"
                ckpts = list_checkpoints(spec.run_dir(b.out_dir) / "checkpoints")
                if node_file.exists() and doomed.node_id in node_file.read_text() and ckpts:
                    victim = seed
            time.sleep(0.1)
        assert victim is not None, "no run reached a checkpoint on the second node"
        cluster.remove_node(doomed)

        suite.join(timeout=240)
        assert not suite.is_alive(), "the suite did not finish after the node was lost"
        runs = {r["seed"]: r for r in result["runs"]}
        assert sorted(runs) == [1, 2]
        assert all("failed" not in r for r in runs.values()), result["runs"]
        assert all(
            r["frames"] >= 60_000 and r["stop_reason"] == "max_frames" for r in runs.values()
        )
        # The lost run went on from its checkpoint on the surviving node ...
        victim_dir = specs[victim].run_dir(b.out_dir)
        assert "resumed" in (victim_dir.parent / f"seed-{victim}.log").read_text()
        assert doomed.node_id not in runs[victim]["node"]
        # ... and the other run ran once, untouched.
        other = 3 - victim
        assert "resumed" not in (victim_dir.parent / f"seed-{other}.log").read_text()
        assert result["summary"][0]["seeds"] == 2 and result["summary"][0]["failed"] == 0
    finally:
        ray.shutdown()
        cluster.shutdown()
