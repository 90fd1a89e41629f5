"""bf16 training end to end, on every CPU: `precision auto` takes bf16 only where the CPU has it
natively (AMX, AVX-512 bf16), so a suite run on an AVX2-only CPU would otherwise never train in
bf16. Here bf16 is forced (emulated, slower, where it is not native): a tiny Pong run of each
algorithm with its Atari path as the presets run it (channels-last, the bf16 conv torso), finite
losses, its checkpoint, an exact stop-and-go, and what `rapidrl eval` loads."""

from __future__ import annotations

import dataclasses
import math
import shutil

import numpy as np
import pytest
import torch

from rapidrl.algos.dqn.config import PRESETS as DQN_PRESETS
from rapidrl.algos.dqn.train import train as train_dqn
from rapidrl.algos.ppo.config import PRESETS as PPO_PRESETS
from rapidrl.algos.ppo.train import train as train_ppo
from rapidrl.algos.pqn.config import PRESETS as PQN_PRESETS
from rapidrl.algos.pqn.train import train as train_pqn
from rapidrl.train import list_checkpoints, read_metrics
from rapidrl.train.checkpoint import load_latest

pytestmark = pytest.mark.timeout(300)

RUN = dict(
    env="pong",
    precision="bf16",
    channels_last=True,
    obs_size=42,
    frame_stack=2,
    backend="serial",
    num_envs=2,
    log_every_seconds=0,
    log_every_frames=128,
    checkpoint_every_seconds=1e9,
    checkpoint_every_frames=128,
    keep_checkpoints=4,
    max_frames=256,
    no_progress=True,
    tensorboard=False,
    torch_threads=1,
    seed=11,
)

CASES = {
    "ppo-lean": (
        train_ppo,
        dataclasses.replace(PPO_PRESETS["lean"], num_steps=16, minibatches=2, epochs=2, **RUN),
        "policy_loss",
    ),
    "pqn-fast": (
        train_pqn,
        dataclasses.replace(
            PQN_PRESETS["fast"], num_steps=16, minibatches=2, epochs=1, schedule_frames=256, **RUN
        ),
        "td_loss",
    ),
    "dqn-fast": (
        train_dqn,
        dataclasses.replace(
            DQN_PRESETS["fast"],
            batch_size=8,
            steps_per_update=2,
            buffer_size=512,
            learning_starts=32,
            target_sync_steps=32,
            **RUN,
        ),
        "loss",
    ),
}


def _weights(run, frames: int) -> dict[str, torch.Tensor]:
    state = torch.load(run / f"checkpoints/ckpt-{frames:012d}.pt", weights_only=True)["state"]
    return state["net"] if "net" in state else state["q"]


@pytest.mark.parametrize("name", list(CASES))
def test_bf16_training_end_to_end(tmp_path, name):
    train, cfg, loss = CASES[name]
    full, part = tmp_path / "full", tmp_path / "part"
    summary = train(dataclasses.replace(cfg, run_dir=str(full)))
    assert summary["frames"] >= 256 and summary["stop_reason"] == "max_frames"
    header, rows = read_metrics(full / "metrics.csv")
    losses = [float(r[loss]) for r in rows if r.get(loss)]
    assert losses and all(math.isfinite(x) for x in losses), (loss, rows)
    # The convolutions ran in bf16; the weights stay float32 (the optimizer and heads see
    # float32; the normalizers' statistics are float64).
    ckpt = load_latest(full, read_only=True)
    assert ckpt.config["precision"] == "bf16"
    weights = _weights(full, 256)
    assert not any(v.dtype == torch.bfloat16 for v in weights.values())
    assert any(v.dtype == torch.float32 for v in weights.values())
    # Stopped at 128 frames: the checkpoint is the uninterrupted run's, bit for bit (one
    # thread, the same CPU); the stopped run goes on from it to the end.
    train(dataclasses.replace(cfg, run_dir=str(part), max_frames=128))
    for k, v in _weights(full, 128).items():
        assert torch.equal(_weights(part, 128)[k], v), k
    twin = tmp_path / "twin"
    shutil.copytree(part, twin)
    for d in (part, twin):
        assert train(dataclasses.replace(cfg, resume=str(d)))["frames"] >= 256
    last = list_checkpoints(part / "checkpoints")[-1].name
    frames = int(last[5:17])
    for k, v in _weights(part, frames).items():
        assert torch.equal(_weights(twin, frames)[k], v), k
    assert np.isfinite([float(v.float().sum()) for v in weights.values()]).all()
