"""Same-seed runs for a before/after comparison of a refactor: five small CartPole configs (DQN
with every flag, plain DQN, PPO, PPO-LSTM, PQN), each writing its metrics rows (time columns
removed) and per-checkpoint weight sums to OUT/<name>.json.

    git worktree add /tmp/old <rev>
    PYTHONPATH=/tmp/old/src .venv/bin/python scripts/same_seed_runs.py /tmp/out_old
    .venv/bin/python scripts/same_seed_runs.py /tmp/out_new
    .venv/bin/python scripts/same_seed_runs.py --compare /tmp/out_old /tmp/out_new
"""

import dataclasses
import json
import os
import sys

import torch

from rapidrl.algos.dqn.config import PRESETS as DP
from rapidrl.algos.dqn.config import DQNConfig
from rapidrl.algos.dqn.train import train as train_dqn
from rapidrl.algos.ppo.config import PRESETS as PP
from rapidrl.algos.ppo.train import train as train_ppo
from rapidrl.algos.pqn.config import PRESETS as QP
from rapidrl.algos.pqn.train import train as train_pqn
from rapidrl.train import list_checkpoints, read_metrics

RUN = dict(
    log_every_seconds=0,
    checkpoint_every_seconds=1e9,
    no_progress=True,
    tensorboard=False,
    torch_threads=1,
)
cfgs = {
    "dqn_all": (
        train_dqn,
        DQNConfig(
            env="CartPole-v1",
            num_envs=2,
            backend="serial",
            n_step=3,
            double=True,
            dueling=True,
            noisy=True,
            prioritized=True,
            distributional=True,
            v_min=0.0,
            v_max=50.0,
            num_atoms=11,
            batch_size=8,
            steps_per_update=2,
            buffer_size=1000,
            learning_starts=100,
            target_sync_steps=60,
            epsilon_decay_steps=300,
            max_grad_norm=10.0,
            max_frames=1200,
            checkpoint_every_frames=300,
            log_every_frames=100,
            keep_checkpoints=10,
            save_replay=True,
            **RUN,
        ),
    ),
    "dqn_plain": (
        train_dqn,
        dataclasses.replace(
            DP["dqn"],
            env="CartPole-v1",
            num_envs=4,
            backend="serial",
            learning_starts=200,
            buffer_size=2000,
            max_frames=3000,
            log_every_frames=200,
            checkpoint_every_frames=1000,
            keep_checkpoints=10,
            **RUN,
        ),
    ),
    "ppo": (
        train_ppo,
        dataclasses.replace(
            PP["cartpole"],
            max_frames=4096,
            log_every_frames=512,
            checkpoint_every_frames=1024,
            keep_checkpoints=10,
            **RUN,
        ),
    ),
    "ppo_lstm": (
        train_ppo,
        dataclasses.replace(
            PP["cartpole"],
            recurrent=True,
            num_envs=4,
            minibatches=2,
            max_frames=2048,
            log_every_frames=512,
            checkpoint_every_frames=1024,
            keep_checkpoints=10,
            **RUN,
        ),
    ),
    "pqn": (
        train_pqn,
        dataclasses.replace(
            QP["cartpole"],
            max_frames=4096,
            log_every_frames=512,
            checkpoint_every_frames=1024,
            keep_checkpoints=10,
            **RUN,
        ),
    ),
}
# PQN in lockstep over a first-ready vector env: batches merged into whole vector steps.
cfgs["pqn_async"] = (
    train_pqn,
    dataclasses.replace(cfgs["pqn"][1], backend="async", num_workers=2, max_frames=2048),
)
TIME = {"seconds", "fps", "update_ms", "rollout_s", "update_s"}


def main() -> None:
    if sys.argv[1] == "--compare":
        for n in cfgs:
            a, b = (json.load(open(os.path.join(d, n + ".json"))) for d in sys.argv[2:4])
            print(
                f"{n}: rows equal {a['rows'] == b['rows']} ({len(a['rows'])}), "
                f"weights equal {a['weights'] == b['weights']} ({len(a['weights'])} checkpoints)"
            )
        return
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for name, (fn, cfg) in cfgs.items():
        rd = os.path.join(out, name)
        fn(dataclasses.replace(cfg, run_dir=rd))
        header, rows = read_metrics(os.path.join(rd, "metrics.csv"))
        rows = [{k: v for k, v in r.items() if k not in TIME} for r in rows]
        ws = []
        for p in list_checkpoints(os.path.join(rd, "checkpoints")):
            st = torch.load(p, weights_only=True)["state"]
            key = "q" if "q" in st else "net"
            ws.append({k: v.double().sum().item() for k, v in st[key].items()})
        json.dump({"rows": rows, "weights": ws}, open(os.path.join(out, name + ".json"), "w"))
        print(name, len(rows), "rows", len(ws), "ckpts")


if __name__ == "__main__":
    main()
