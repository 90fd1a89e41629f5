"""``--track wandb``: what a run hands Weights & Biases (checked against a stand-in module: the
config, every metrics row at its frame count, the summary, the learning curve, the end), and a
real offline W&B run written under the run dir (with the wandb extra)."""

from __future__ import annotations

import dataclasses
import json
import sys
import types

import pytest

from rapidrl import cli
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.train import train
from rapidrl.train import read_metrics

pytestmark = pytest.mark.timeout(180)

CARTPOLE = dataclasses.replace(
    PRESETS["cartpole"], num_steps=32, max_frames=256, log_every_seconds=0,
    log_every_frames=64, no_progress=True, tensorboard=False, torch_threads=1, seed=4,
)  # fmt: skip


class _FakeRun:
    def __init__(self, calls):
        self.calls, self.summary = calls, {}

    def log(self, data, step=None):
        self.calls.append(("log", dict(data), step))

    def finish(self):
        self.calls.append(("finish", dict(self.summary), None))


def _fake_wandb(calls):
    mod = types.ModuleType("wandb")

    def init(**kwargs):
        calls.append(("init", kwargs, None))
        return _FakeRun(calls)

    mod.init = init
    mod.Image = lambda path: ("image", path)
    return mod


def test_a_tracked_run_sends_config_rows_summary_and_curve(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setitem(sys.modules, "wandb", _fake_wandb(calls))
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("WANDB_API_KEY", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc: not logged in
    run = tmp_path / "run"
    cfg = dataclasses.replace(CARTPOLE, run_dir=str(run), track="wandb", track_group="sweep-a")
    summary = train(cfg)
    init = calls[0][1]
    assert (init["project"], init["group"], init["name"]) == ("rapidrl", "sweep-a", "run")
    assert init["mode"] == "offline" and init["dir"] == str(run) and init["resume"] == "allow"
    assert init["config"]["lr"] == cfg.lr and init["config"]["track"] == "wandb"
    _, rows = read_metrics(run / "metrics.csv")
    logged = [(step, data) for kind, data, step in calls if kind == "log" and step is not None]
    assert [step for step, _ in logged] == [int(r["frames"]) for r in rows]  # every row, in order
    assert all(data["return_mean_100"] == pytest.approx(float(r["return_mean_100"]))
               for (_, data), r in zip(logged, rows) if r["return_mean_100"])  # fmt: skip
    images = [data for kind, data, step in calls if kind == "log" and step is None]
    assert images == [{"learning_curve": ("image", str(run / "learning_curve.png"))}]
    kind, final, _ = calls[-1]
    assert kind == "finish" and final["frames"] == summary["frames"] == 256
    # Resumed: the same W&B run id (derived from the run dir).
    again = dataclasses.replace(cfg, run_dir=None, resume=str(run), max_frames=384)
    train(again)
    inits = [c[1] for c in calls if c[0] == "init"]
    assert len(inits) == 2 and inits[0]["id"] == inits[1]["id"]


def test_track_without_wandb_is_a_clear_error(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    argv = ["train", "ppo", "--preset", "cartpole", "--track", "wandb", "--max-frames", "64"]
    assert cli.main([*argv, "--run-dir", str(tmp_path / "r"), "--no-progress"]) == 2
    assert "pip install 'rapidrl[wandb]'" in capsys.readouterr().err


def test_a_real_offline_wandb_run(tmp_path, monkeypatch):
    pytest.importorskip("wandb")  # the wandb extra
    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    run = tmp_path / "run"
    train(dataclasses.replace(CARTPOLE, run_dir=str(run), track="wandb"))
    (offline,) = (run / "wandb").glob("offline-run-*")
    (log,) = offline.glob("run-*.wandb")
    data = log.read_bytes()
    for key in ("return_mean_100", "policy_loss", "learning_curve"):
        assert key.encode() in data, key
    assert json.loads((run / "summary.json").read_text())["frames"] == 256
