"""Checkpoints: round trip, atomicity/fallback, corrupt and mismatch error text, RNG, Ctrl-C."""

from __future__ import annotations

import os
import random
import signal
from dataclasses import dataclass, field

import numpy as np
import pytest
import torch
from torch import nn

from rapidrl.train import (
    Checkpointer,
    CheckpointError,
    CheckpointMismatchError,
    EpisodeTracker,
    RunClock,
    StopOnInterrupt,
    get_rng_states,
    list_checkpoints,
    load_latest,
    seed_everything,
    set_rng_states,
)


@dataclass(frozen=True)
class Net:
    hidden: int = 16


@dataclass(frozen=True)
class Cfg:
    env_id: str = "CartPole-v1"
    net: Net = field(default_factory=Net)
    lr: float = 1e-3
    total_frames: int = 1000


def make(hidden=16):
    net = nn.Sequential(nn.Linear(4, hidden), nn.ReLU(), nn.Linear(hidden, 2))
    opt = torch.optim.Adam(net.parameters(), lr=1e-3)
    net(torch.randn(3, 4)).sum().backward()
    opt.step()
    return net, opt


def test_save_load_restore_round_trip(tmp_path):
    net, opt = make()
    tracker = EpisodeTracker(stop_at_score=1.0)
    tracker.add_episode(5.0, 10, 100, 1.0)
    ck = Checkpointer(tmp_path, algo="dqn", config=Cfg(), keep=2)
    replay = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    for frames in (100, 200, 300):
        ck.save(
            frames,
            {
                "model": net,
                "optim": opt,
                "tracker": tracker,
                "clock": RunClock(7.0),
                "counters": {"updates": np.int64(frames // 4), "epsilon": 0.5},
            },
            arrays={"obs": replay},
        )
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "ckpt-000000000200.npz",
        "ckpt-000000000200.pt",
        "ckpt-000000000300.npz",
        "ckpt-000000000300.pt",
        "latest",
    ]
    assert (tmp_path / "latest").read_text().strip() == "ckpt-000000000300.pt"

    net2, opt2 = make()
    tracker2, clock2 = EpisodeTracker(stop_at_score=1.0), RunClock()
    got = Checkpointer(tmp_path, algo="dqn", config=Cfg(total_frames=5000)).load_latest()
    assert got.frames == 300 and got.state["counters"] == {"updates": 75, "epsilon": 0.5}
    got.restore(model=net2, optim=opt2, tracker=tracker2, clock=clock2)
    for a, b in zip(net.parameters(), net2.parameters()):
        assert torch.equal(a, b)
    assert opt2.state_dict()["state"][0]["exp_avg"].equal(opt.state_dict()["state"][0]["exp_avg"])
    assert tracker2.episodes == 1
    # The run clock resumes from the time it had when saved (it was created at 7.0 s).
    saved_seconds = got.state["clock"]["seconds"]
    assert clock2.offset == saved_seconds and int(saved_seconds) == 7
    np.testing.assert_array_equal(got.load_arrays()["obs"], replay)
    with pytest.raises(CheckpointError, match="no state 'target'"):
        got.restore(target=net2)


def test_truncated_newest_falls_back_with_warning(tmp_path):
    net, _ = make()
    ck = Checkpointer(tmp_path, algo="dqn", keep=3)
    ck.save(100, {"model": net})
    good = ck.save(200, {"model": net})
    # a crash mid-write (or a half-copied file) leaves a truncated newest checkpoint
    data = good.read_bytes()
    bad = tmp_path / "ckpt-000000000300.pt"
    bad.write_bytes(data[: len(data) // 2])
    (tmp_path / ".ckpt-000000000400.pt.abc.tmp").write_bytes(data[:10])  # stray temp file
    with pytest.warns(RuntimeWarning, match=r"ckpt-000000000300\.pt is corrupt or truncated"):
        got = load_latest(tmp_path)
    assert got.frames == 200
    assert (tmp_path / "ckpt-000000000300.pt.corrupt").exists()
    assert [p.name for p in list_checkpoints(tmp_path)][-1] == "ckpt-000000000200.pt"
    assert (tmp_path / "latest").read_text().strip() == "ckpt-000000000200.pt"


def test_truncated_arrays_fall_back(tmp_path):
    ck = Checkpointer(tmp_path, algo="dqn")
    ck.save(100, {"x": 1}, arrays={"a": np.zeros(1000)})
    ck.save(200, {"x": 2}, arrays={"a": np.ones(1000)})
    npz = tmp_path / "ckpt-000000000200.npz"
    npz.write_bytes(npz.read_bytes()[:100])
    with pytest.warns(RuntimeWarning, match="truncated or lost"):
        got = load_latest(tmp_path)
    assert got.state["x"] == 1 and got.load_arrays()["a"].sum() == 0


def test_only_corrupt_checkpoint_error_text(tmp_path):
    (tmp_path / "checkpoints").mkdir()
    bad = tmp_path / "checkpoints" / "ckpt-000000000100.pt"
    bad.write_bytes(b"PK\x03\x04 not really a zip")
    with pytest.raises(CheckpointError) as e:
        load_latest(tmp_path)  # a run dir works as well as its checkpoints/
    msg = str(e.value)
    assert str(bad) in msg and "corrupt or truncated" in msg and "start fresh" in msg
    with pytest.raises(CheckpointError, match="no checkpoint"):
        load_latest(tmp_path / "empty")


def test_mismatch_error_names_fields(tmp_path):
    net, _ = make()
    Checkpointer(tmp_path, algo="dqn", config=Cfg()).save(100, {"model": net})
    other = Cfg(env_id="Acrobot-v1", net=Net(hidden=64), lr=5e-4, total_frames=9)
    with pytest.raises(CheckpointMismatchError) as e:
        Checkpointer(tmp_path, algo="dqn", config=other).load_latest()
    msg = str(e.value)
    assert "env_id: checkpoint 'CartPole-v1', now 'Acrobot-v1'" in msg
    assert "net.hidden: checkpoint 16, now 64" in msg and "lr:" in msg
    assert "total_frames" not in msg  # run control, ignored by default
    assert {d[0] for d in e.value.diffs} == {"env_id", "net.hidden", "lr"}
    # only the fields that matter to this trainer
    ok = Checkpointer(tmp_path, algo="dqn", config=Cfg(lr=0.1), match_fields=("env_id", "net"))
    assert ok.load_latest().frames == 100
    with pytest.raises(CheckpointMismatchError, match="algo: checkpoint 'dqn', now 'ppo'"):
        Checkpointer(tmp_path, algo="ppo", config=Cfg()).load_latest()


@dataclass(frozen=True)
class CfgWithNewField(Cfg):
    new_switch: bool = False  # a field added after the checkpoint below was written


def test_a_field_added_since_the_checkpoint_counts_as_its_default(tmp_path):
    net, _ = make()
    Checkpointer(tmp_path, algo="dqn", config=Cfg()).save(100, {"model": net})
    same = Checkpointer(tmp_path, algo="dqn", config=CfgWithNewField())
    assert same.load_latest().frames == 100  # the default: the behaviour the run had
    with pytest.raises(CheckpointMismatchError, match="new_switch: checkpoint False, now True"):
        Checkpointer(tmp_path, algo="dqn", config=CfgWithNewField(new_switch=True)).load_latest()


def test_save_refuses_unloadable_values_by_key(tmp_path):
    ck = Checkpointer(tmp_path, algo="dqn")
    with pytest.raises(TypeError, match=r"counters\.buf is a ndarray.*torch.from_numpy"):
        ck.save(1, {"counters": {"buf": np.zeros(3)}})
    assert list_checkpoints(tmp_path) == []


def test_rng_round_trip_reproduces_numbers(tmp_path):
    gen = seed_everything(123)
    states = get_rng_states({"replay": gen})
    first = (random.random(), np.random.rand(), torch.rand(3), gen.integers(1 << 30, size=4))
    random.random(), np.random.randn(), torch.rand(5), gen.random()  # move every RNG on
    set_rng_states(states, {"replay": gen})
    second = (random.random(), np.random.rand(), torch.rand(3), gen.integers(1 << 30, size=4))
    assert first[0] == second[0] and first[1] == second[1]
    assert torch.equal(first[2], second[2]) and np.array_equal(first[3], second[3])

    # and through a checkpoint file (weights_only load)
    ck = Checkpointer(tmp_path, algo="dqn")
    ck.save(10, {}, np_rng=gen)
    want = (random.random(), np.random.rand(), torch.rand(2), gen.random())
    seed_everything(999)
    other = np.random.default_rng(5)
    load_latest(tmp_path).restore_rng(other)
    assert (random.random(), np.random.rand()) == want[:2]
    assert torch.equal(torch.rand(2), want[2]) and other.random() == want[3]


def test_checkpoint_due(tmp_path):
    ck = Checkpointer(tmp_path, algo="dqn", every_frames=100)
    assert not ck.due(0) and not ck.due(99) and ck.due(100)
    ck.save(100, {})
    assert not ck.due(150) and ck.due(200)


def test_stop_on_interrupt_flag_then_abort():
    before = signal.getsignal(signal.SIGINT)
    with StopOnInterrupt(message="") as stop:
        assert not stop.requested
        os.kill(os.getpid(), signal.SIGINT)
        assert stop.requested  # the first Ctrl-C only sets the flag
        with pytest.raises(KeyboardInterrupt):
            os.kill(os.getpid(), signal.SIGINT)  # the second aborts
    assert signal.getsignal(signal.SIGINT) is before


def files_of(directory) -> dict[str, bytes]:
    """Every file under ``directory`` with its bytes: a snapshot to prove nothing changed."""
    return {
        str(p.relative_to(directory)): p.read_bytes()
        for p in sorted(directory.rglob("*"))
        if p.is_file()
    }


def test_read_only_load_leaves_unreadable_checkpoints_in_place(tmp_path):
    net, _ = make()
    ck = Checkpointer(tmp_path, algo="dqn", keep=3)
    good = ck.save(100, {"model": net})
    (tmp_path / "ckpt-000000000200.pt").write_bytes(good.read_bytes()[:50])
    (tmp_path / "latest").write_text("ckpt-000000000200.pt\n")  # as if the pt had landed whole
    before = files_of(tmp_path)
    with pytest.warns(RuntimeWarning) as rec:
        got = load_latest(tmp_path, read_only=True)
    assert got.frames == 100
    assert files_of(tmp_path) == before  # nothing renamed, ``latest`` not rewritten
    msg = str(rec[0].message)
    assert "ckpt-000000000200.pt" in msg and "ckpt-000000000100.pt" in msg
    assert "left in place" in msg and "resum" not in msg and ".corrupt" not in msg
    # none readable: a clear error, still nothing touched, and no talk of --resume
    (tmp_path / "ckpt-000000000100.pt").write_bytes(b"garbage")
    before = files_of(tmp_path)
    with pytest.raises(CheckpointError) as e:
        load_latest(tmp_path, read_only=True)
    assert "none of the 2 checkpoint(s)" in str(e.value) and "--resume" not in str(e.value)
    assert files_of(tmp_path) == before


class Smuggled:
    """Stands for any object a hand-made (or tampered) checkpoint could carry."""


def test_unsafe_checkpoint_message_never_suggests_weights_only_false(tmp_path):
    path = tmp_path / "ckpt-000000000100.pt"
    torch.save({"format": 1, "state": {"x": Smuggled()}}, path)
    with pytest.raises(CheckpointError) as e:
        load_latest(tmp_path)
    msg = str(e.value)
    assert str(path) in msg and "Smuggled" in msg
    assert "not written by rapidrl" in msg and "tampered" in msg
    for advice in ("weights_only=False", "add_safe_globals", "safe_globals", "trust"):
        assert advice not in msg


@pytest.mark.parametrize("where", ["parent", "absolute", "subdir", "dotdot"])
def test_arrays_file_outside_the_checkpoint_folder_is_refused(tmp_path, where):
    ckpts = tmp_path / "checkpoints"
    ckpts.mkdir()
    outside = tmp_path / "secret.npz"
    np.savez(outside, a=np.arange(3))
    name = {
        "parent": "../secret.npz",
        "absolute": str(outside),
        "subdir": "sub/secret.npz",
        "dotdot": "..",
    }[where]
    if where == "subdir":
        (ckpts / "sub").mkdir()
        np.savez(ckpts / "sub" / "secret.npz", a=np.arange(3))
    size = outside.stat().st_size if where != "dotdot" else 0
    pt = ckpts / "ckpt-000000000100.pt"
    torch.save(
        {"format": 1, "frames": 100, "state": {}, "arrays": {"file": name, "bytes": size}}, pt
    )
    with pytest.raises(CheckpointError) as e:
        load_latest(tmp_path)
    msg = str(e.value)
    assert repr(name) in msg and "plain file name" in msg and str(ckpts) in msg


def test_restore_names_missing_unexpected_and_mismatched_weights(tmp_path):
    net, _ = make(hidden=16)
    Checkpointer(tmp_path, algo="dqn").save(100, {"model": net})
    got = load_latest(tmp_path)
    wider, _ = make(hidden=32)
    with pytest.raises(CheckpointError) as e:
        got.restore(model=wider)
    msg = str(e.value)
    assert "ckpt-000000000100.pt" in msg and "'model'" in msg
    assert "0.weight: checkpoint (16, 4), network (32, 4)" in msg
    deeper = nn.Sequential(nn.Linear(4, 16), nn.ReLU(), nn.Linear(16, 2), nn.Linear(2, 2))
    with pytest.raises(CheckpointError, match=r"missing from the checkpoint: 3\.bias, 3\.weight"):
        got.restore(model=deeper)
    with pytest.raises(CheckpointError, match=r"not in the network: 2\.bias, 2\.weight"):
        got.restore(model=nn.Sequential(nn.Linear(4, 16)))
    # a missing entry, looked up directly, names what the checkpoint holds
    with pytest.raises(CheckpointError, match=r"has no state 'q'; it holds \['model'\]"):
        got.state["q"]
