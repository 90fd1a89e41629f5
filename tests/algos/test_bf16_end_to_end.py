"""bf16 training end to end, on every CPU: `precision auto` takes bf16 only where the CPU has it
natively (AMX, AVX-512 bf16), so a suite run on an AVX2-only CPU would otherwise never train in
bf16. Here bf16 is forced (emulated, slower, where it is not native): a tiny Pong run of each
algorithm with its Atari path as the presets run it (channels-last, the bf16 conv torso): the
convolutions do run in bf16 (their outputs are counted by dtype), the losses are finite, the
weights stay float32, a run stopped half-way is the uninterrupted run up to its checkpoint (the
whole checkpoint and the metrics rows, bit for bit) and goes on from it the same way every time
(a resume restarts the envs from seeds derived from the step counter, so the frames after the stop
are not the uninterrupted run's by design), and `rapidrl eval` plays the checkpoint in bf16."""

from __future__ import annotations

import dataclasses
import math
import shutil
from collections import Counter
from contextlib import contextmanager

import numpy as np
import pytest
import torch

from rapidrl.algos.dqn.config import PRESETS as DQN_PRESETS
from rapidrl.algos.dqn.train import train as train_dqn
from rapidrl.algos.eval import EvalConfig, evaluate
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


def _checkpoint(run, frames: int) -> dict:
    return torch.load(run / f"checkpoints/ckpt-{frames:012d}.pt", weights_only=True)


def _weights(run, frames: int) -> dict[str, torch.Tensor]:
    state = _checkpoint(run, frames)["state"]
    return state["net"] if "net" in state else state["q"]


def _assert_equal(a, b, where: str = "") -> None:
    """Two checkpoint payloads (nested dicts/lists of tensors, arrays and numbers) equal bit for
    bit, but for the run clock (wall time)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), where
        for k in a:
            if k != "clock":
                _assert_equal(a[k], b[k], f"{where}.{k}")
    elif isinstance(a, (list, tuple)):
        assert isinstance(b, (list, tuple)) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            _assert_equal(x, y, f"{where}[{i}]")
    elif isinstance(a, torch.Tensor):
        assert a.dtype == b.dtype and torch.equal(a, b), where
    elif isinstance(a, np.ndarray):
        assert np.array_equal(a, b), where
    elif isinstance(a, float) and math.isnan(a):
        assert isinstance(b, float) and math.isnan(b), where
    else:
        assert a == b, where


def _untimed(rows: list[dict]) -> list[dict]:
    """Metrics rows without their wall-time columns (seconds, fps, rollout_s, ...)."""
    timed = ("seconds", "fps")
    return [{k: v for k, v in r.items() if k not in timed and not k.endswith("_s")} for r in rows]


@contextmanager
def conv_output_dtypes():
    """Counts every Conv2d output by dtype while the block runs (any module, any net)."""
    seen: Counter = Counter()

    def hook(module, args, output):
        if isinstance(module, torch.nn.Conv2d):
            seen[output.dtype] += 1

    handle = torch.nn.modules.module.register_module_forward_hook(hook)
    try:
        yield seen
    finally:
        handle.remove()


@pytest.mark.parametrize("name", list(CASES))
def test_bf16_training_end_to_end(tmp_path, name):
    train, cfg, loss = CASES[name]
    full, part = tmp_path / "full", tmp_path / "part"
    with conv_output_dtypes() as convs:
        summary = train(dataclasses.replace(cfg, run_dir=str(full)))
    # bf16 ran: every convolution of the run (acting and updates) gave a bf16 output.
    assert convs[torch.bfloat16] > 0 and set(convs) == {torch.bfloat16}, convs
    assert summary["frames"] >= 256 and summary["stop_reason"] == "max_frames"
    header, rows = read_metrics(full / "metrics.csv")
    losses = [float(r[loss]) for r in rows if r.get(loss)]
    assert losses and all(math.isfinite(x) for x in losses), (loss, rows)
    # The weights stay float32 (the optimizer and heads see float32; the normalizers'
    # statistics are float64).
    ckpt = load_latest(full, read_only=True)
    assert ckpt.config["precision"] == "bf16"
    weights = _weights(full, 256)
    assert not any(v.dtype == torch.bfloat16 for v in weights.values())
    assert any(v.dtype == torch.float32 for v in weights.values())
    assert np.isfinite([float(v.float().sum()) for v in weights.values()]).all()
    # Stopped at 128 frames: the whole checkpoint (weights, optimizer, counters, generators,
    # normalizers) and the metrics rows are the uninterrupted run's, bit for bit (one thread,
    # the same CPU).
    train(dataclasses.replace(cfg, run_dir=str(part), max_frames=128))
    _assert_equal(_checkpoint(part, 128)["state"], _checkpoint(full, 128)["state"], "state")
    rows_128 = _untimed([r for r in rows if float(r["frames"]) <= 128])
    assert _untimed(read_metrics(part / "metrics.csv")[1]) == rows_128
    # And goes on from there: to the end, the same way every time (twin from the same files).
    twin = tmp_path / "twin"
    shutil.copytree(part, twin)
    for d in (part, twin):
        assert train(dataclasses.replace(cfg, resume=str(d)))["frames"] >= 256
    last = list_checkpoints(part / "checkpoints")[-1].name
    frames = int(last[5:17])
    assert frames >= 256
    _assert_equal(_checkpoint(part, frames)["state"], _checkpoint(twin, frames)["state"], "state")
    resumed_rows = _untimed(read_metrics(part / "metrics.csv")[1])
    assert resumed_rows[: len(rows_128)] == rows_128  # the rows before the stop, kept once
    assert float(resumed_rows[-1]["frames"]) >= 256
    # What `rapidrl eval` loads: the newest checkpoint, played with the torso in bf16.
    with conv_output_dtypes() as convs:
        result = evaluate(EvalConfig(str(full), episodes=1, max_steps=30))
    assert result["lengths"] == [30] and all(math.isfinite(x) for x in result["scores"])
    assert convs[torch.bfloat16] > 0 and set(convs) == {torch.bfloat16}, convs
