"""Config JSON round trip and the run directory."""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import datetime
from enum import Enum
from pathlib import Path
from typing import Literal

import pytest

from rapidrl.train import (
    RunDir,
    config_diff,
    config_from_dict,
    config_to_dict,
    load_config,
    save_config,
)
from rapidrl.train.lock import RunDirBusyError


class Mode(Enum):
    FAST = "fast"
    SLOW = "slow"


@dataclass(frozen=True)
class NetConfig:
    hidden: tuple[int, ...] = (512,)
    """Hidden layer sizes."""
    dueling: bool = False


@dataclass(frozen=True)
class Config:
    env_id: str = "PongNoFrameskip-v4"
    lr: float = 1e-4
    total_frames: int = 1_000_000
    stop_at_score: float | None = 18.0
    run_dir: str | None = None
    net: NetConfig = field(default_factory=NetConfig)
    pair: tuple[int, float] = (4, 0.5)
    heads: tuple[NetConfig, ...] = ()
    mode: Mode = Mode.FAST
    kind: Literal["a", "b"] = "a"
    out: Path = Path("runs")
    weights: dict[str, float] = field(default_factory=dict)
    maybe_net: NetConfig | None = None


def test_round_trip_nested_tuples_none():
    cfg = Config(
        lr=3,  # an int where a float is declared comes back as a float
        stop_at_score=None,
        net=NetConfig(hidden=(256, 128), dueling=True),
        heads=(NetConfig(), NetConfig(hidden=(8,))),
        mode=Mode.SLOW,
        kind="b",
        weights={"a": 1.5},
        maybe_net=NetConfig(hidden=()),
    )
    data = json.loads(json.dumps(config_to_dict(cfg)))
    assert data["net"] == {"hidden": [256, 128], "dueling": True}
    back = config_from_dict(Config, data)
    assert back == Config(**{**cfg.__dict__, "lr": 3.0})
    assert isinstance(back.lr, float)
    assert isinstance(back.net.hidden, tuple) and isinstance(back.heads[1], NetConfig)
    assert back.pair == (4, 0.5) and back.stop_at_score is None and back.mode is Mode.SLOW


def test_save_load_file(tmp_path):
    cfg = Config(net=NetConfig(hidden=(64, 64)))
    save_config(cfg, tmp_path / "config.json")
    assert load_config(Config, tmp_path / "config.json") == cfg


def test_unknown_field_named_missing_field_defaults():
    with pytest.raises(ValueError, match=r"unknown config field\(s\) \['hiden'\]"):
        config_from_dict(Config, {"net": {"hiden": [1]}})
    assert config_from_dict(Config, {"lr": 0.5}) == Config(lr=0.5)
    with pytest.raises(TypeError, match="net.dueling"):
        config_from_dict(Config, {"net": {"dueling": "yes"}})


def test_config_diff_names_fields():
    a, b = Config(), Config(env_id="Breakout", net=NetConfig(hidden=(256,)), total_frames=5)
    diffs = config_diff(a, b)
    assert [d[0] for d in diffs] == ["env_id", "net.hidden", "total_frames"]
    assert config_diff(a, b, ignore=("total_frames",))[1] == ("net.hidden", [512], [256])
    assert [d[0] for d in config_diff(a, b, fields=("net",))] == ["net.hidden"]
    # a plain name is ignored at any depth, a dotted path only there
    nested_a, nested_b = {"t": {"total_frames": 1, "x": 1}}, {"t": {"total_frames": 2, "x": 2}}
    assert config_diff(nested_a, nested_b, ignore=("total_frames",)) == [("t.x", 1, 2)]
    assert config_diff(nested_a, nested_b, ignore=("t",)) == []
    assert config_diff(nested_a, nested_b, ignore=("t.x",)) == [("t.total_frames", 1, 2)]


def test_run_dir_default_name_and_guards(tmp_path):
    now = datetime(2026, 11, 1, 12, 0, 0)
    run = RunDir.create(algo="dqn", env_id="ALE/Pong-v5", root=tmp_path, now=now)
    assert run.path == tmp_path / "dqn-ALE_Pong-v5-20261101-120000"
    assert run.checkpoints.is_dir()
    again = RunDir.create(algo="dqn", env_id="ALE/Pong-v5", root=tmp_path, now=now)
    assert again.path.name.endswith("-2")
    assert run.metrics_csv.name == "metrics.csv" and run.tb.name == "tb"
    assert run.summary_json.name == "summary.json"

    run.save_config(Config())
    assert run.load_config(Config) == Config()

    # `run` holds its directory: a second writer is refused, whatever it asks for.
    with pytest.raises(RunDirBusyError, match="in use by pid"):
        RunDir.create(run.path, algo="dqn", env_id="x")
    run.release()
    with pytest.raises(FileNotFoundError, match="nothing to resume"):
        RunDir.create(run.path, algo="dqn", env_id="x", resume=True)
    (run.checkpoints / "ckpt-000000000100.pt").write_bytes(b"x")
    with pytest.raises(FileExistsError, match="--resume"):
        RunDir.create(run.path, algo="dqn", env_id="x")
    resumed = RunDir.create(run.path, algo="dqn", env_id="x", resume=True)
    assert resumed.path == run.path
    resumed.release()
    with pytest.raises(ValueError, match="--run-dir"):
        RunDir.create(None, algo="dqn", env_id="x", resume=True)
