"""``--track wandb``: what a run hands Weights & Biases (checked against a stand-in module: the
config, every metrics row at its frame count once a checkpoint covers it, the summary, the
learning curve, the end), the run id kept in the run dir, the start-up check without wandb, the
login state as wandb sees it, an unreachable server, and real offline W&B runs written under the
run dir (with the wandb extra): one to its end, one killed with SIGKILL and resumed, read back
from W&B's own files."""

from __future__ import annotations

import dataclasses
import json
import os
import re
import shutil
import signal
import struct
import subprocess
import sys
import time
import types
from pathlib import Path

import pytest

from rapidrl import cli
from rapidrl.algos.ppo.config import PRESETS
from rapidrl.algos.ppo.train import train
from rapidrl.train import read_metrics
from rapidrl.train.run import list_checkpoints

pytestmark = pytest.mark.timeout(180)

CARTPOLE = dataclasses.replace(
    PRESETS["cartpole"], num_steps=32, max_frames=256, log_every_seconds=0,
    log_every_frames=64, no_progress=True, tensorboard=False, torch_threads=1, seed=4,
)  # fmt: skip
"""128 frames an update (4 envs x 32 steps), a row after each."""


class _FakeRun:
    """A W&B run; ``held``: the steps the W&B server holds of it (online: its resume goes on at
    the step after the last; a step behind it is dropped); ``lose_after``: the steps past it are
    lost on the way (the last seconds of a killed run)."""

    def __init__(self, calls, held=None, lose_after=None):
        self.calls, self.summary = calls, {}
        self.held = [] if held is None else held
        self.starting_step = self.held[-1] + 1 if self.held else 0
        self.lose_after = lose_after

    def log(self, data, step=None, commit=None):
        self.calls.append(("log", dict(data), step))
        if step is None:  # W&B's own next step: not a row of ours
            return
        lost = self.lose_after is not None and step > self.lose_after
        if not lost and (not self.held or step > self.held[-1]):
            self.held.append(step)

    def finish(self, exit_code=None):
        self.calls.append(("finish", dict(self.summary), exit_code))


def _fake_wandb(calls, *, api_key=None, unreachable=()):
    """A stand-in wandb module that records its calls; ``init`` fails in the ``unreachable``
    modes as a network failure does. ``mod.server``: run id -> the steps it holds;
    ``mod.lose_after``: see :class:`_FakeRun`."""
    mod = types.ModuleType("wandb")
    mod.server, mod.lose_after = {}, None

    def init(**kwargs):
        calls.append(("init", kwargs, None))
        if kwargs["mode"] in unreachable:
            raise ConnectionError("could not reach api.wandb.ai")
        return _FakeRun(calls, mod.server.setdefault(kwargs["id"], []), mod.lose_after)

    mod.init = init
    mod.Image = lambda path: ("image", path)
    mod.api = types.SimpleNamespace(api_key=api_key)  # an older wandb's login state
    return mod


@pytest.fixture
def no_login(tmp_path, monkeypatch):
    """No W&B credentials anywhere, no WANDB_MODE, wandb's own files under tmp_path."""
    for name in ("WANDB_MODE", "WANDB_API_KEY", "WANDB_BASE_URL", "NETRC"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))  # no ~/.netrc
    for name in ("WANDB_CONFIG_DIR", "WANDB_CACHE_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_SILENT", "true")


def _steps(calls):
    return [step for kind, _, step in calls if kind == "log"]


def _ids(calls):
    return [kwargs["id"] for kind, kwargs, _ in calls if kind == "init"]


def test_a_tracked_run_sends_config_rows_summary_and_curve(tmp_path, monkeypatch, no_login):
    calls = []
    monkeypatch.setitem(sys.modules, "wandb", _fake_wandb(calls))
    run = tmp_path / "run"
    cfg = dataclasses.replace(CARTPOLE, run_dir=str(run), track="wandb", track_group="sweep-a")
    summary = train(cfg)
    init = calls[0][1]
    assert (init["project"], init["group"], init["name"]) == ("rapidrl", "sweep-a", "run")
    assert init["mode"] == "offline" and init["dir"] == str(run) and init["resume"] == "allow"
    assert init["config"]["lr"] == cfg.lr and init["config"]["track"] == "wandb"
    _, rows = read_metrics(run / "metrics.csv")
    logged = [(step, data) for kind, data, step in calls if kind == "log"]
    assert [step for step, _ in logged] == [int(r["frames"]) for r in rows]  # every row, in order
    assert all(data["return_mean_100"] == pytest.approx(float(r["return_mean_100"]))
               for (_, data), r in zip(logged, rows) if r["return_mean_100"])  # fmt: skip
    kind, final, exit_code = calls[-1]
    assert kind == "finish" and exit_code is None
    assert final["frames"] == summary["frames"] == 256
    assert final["learning_curve"] == ("image", str(run / "learning_curve.png"))
    # Resumed: the same W&B run id.
    again = dataclasses.replace(cfg, run_dir=None, resume=str(run), max_frames=384)
    train(again)
    ids = _ids(calls)
    assert len(ids) == 2 and ids[0] == ids[1]


def test_the_final_eval_reaches_the_wandb_runs_summary(tmp_path, monkeypatch, no_login):
    """--eval-episodes plays after the W&B run ended with the training: the same W&B run is
    opened again, its summary gets the eval's numbers, and it ends; no row is sent twice."""
    calls = []
    monkeypatch.setitem(sys.modules, "wandb", _fake_wandb(calls))
    run = tmp_path / "run"
    summary = train(dataclasses.replace(CARTPOLE, run_dir=str(run), track="wandb", eval_episodes=2))
    ids = _ids(calls)
    assert len(ids) == 2 and ids[0] == ids[1]  # the training's W&B run, opened again
    finishes = [data for kind, data, _ in calls if kind == "finish"]
    assert len(finishes) == 2 and "eval_mean" not in finishes[0]
    assert finishes[1] == {
        "eval_mean": summary["eval_mean"],
        "eval_std": summary["eval_std"],
        "eval_episodes": 2.0,
    }
    _, rows = read_metrics(run / "metrics.csv")
    assert _steps(calls) == [int(r["frames"]) for r in rows]  # each row once
    # A W&B that fails then is a warning: the run, its summary and eval.json stand.
    calls.clear()
    broken = _fake_wandb(calls, unreachable={"offline"})
    monkeypatch.setitem(sys.modules, "wandb", broken)
    from rapidrl.algos.eval import final_eval

    cfg = dataclasses.replace(CARTPOLE, run_dir=str(run), track="wandb", eval_episodes=2)
    with pytest.warns(UserWarning, match="W&B did not get the final eval"):
        again = final_eval({**summary, "stop_reason": "max_frames"}, cfg)
    assert again["eval_mean"] == summary["eval_mean"]
    assert json.loads((run / "summary.json").read_text())["eval_mean"] == summary["eval_mean"]


# --------------------------------------------------------------------------------------------
# Issue 47.3: after a crash and --resume, W&B holds metrics.csv's rows, each once
# --------------------------------------------------------------------------------------------
class _Crash(Exception):
    pass


def test_after_a_crash_and_resume_wandb_holds_every_row_once(tmp_path, monkeypatch, no_login):
    """A session that fails past its newest checkpoint (here an exception; a full disk, a kill),
    its W&B process having lost its last rows on the way (as a killed one does): the resumed
    session logs the rows after the checkpoint again, as metrics.csv does, so W&B must not have
    had them from the failed one, and it first sends the rows W&B lacks (online: past the step
    the server resumes at)."""
    calls = []
    wandb = _fake_wandb(calls, api_key="k" * 40)
    monkeypatch.setitem(sys.modules, "wandb", wandb)
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)  # online
    run = tmp_path / "run"
    cfg = dataclasses.replace(
        CARTPOLE, run_dir=str(run), track="wandb", max_frames=1024, checkpoint_every_frames=256
    )

    def crash_at_640(event):
        if event.frames == 640:  # rows at 128 ... 640 written, the newest checkpoint at 512
            raise _Crash

    wandb.lose_after = 256  # what was sent after step 256 never reaches the server
    with pytest.raises(_Crash):
        train(cfg, on_log=crash_at_640)
    assert _steps(calls) == [128, 256, 384, 512]  # what its checkpoints covered
    assert calls[-1][0] == "finish" and calls[-1][2] == 1  # the failed session's W&B run: failed
    (held,) = wandb.server.values()
    assert held == [128, 256]
    wandb.lose_after = None
    train(dataclasses.replace(cfg, run_dir=None, resume=str(run)))
    _, rows = read_metrics(run / "metrics.csv")
    frames = [int(r["frames"]) for r in rows]
    assert frames == list(range(128, 1025, 128))
    assert held == frames  # each row once, W&B's steps only going up
    assert _steps(calls)[4:] == frames[2:]  # the resume sent 384 and 512 again, then its own


# --------------------------------------------------------------------------------------------
# Issue 47.4: the run id lives in the run dir
# --------------------------------------------------------------------------------------------
def test_the_wandb_run_id_is_kept_in_the_run_dir(tmp_path, monkeypatch, no_login):
    calls = []
    monkeypatch.setitem(sys.modules, "wandb", _fake_wandb(calls))
    run = tmp_path / "run"
    cfg = dataclasses.replace(CARTPOLE, run_dir=str(run), track="wandb")
    train(cfg)
    # The dir reused by a fresh run (its checkpoints cleared): another run, another W&B run.
    shutil.rmtree(run / "checkpoints")
    train(cfg)
    first, second = _ids(calls)
    assert second != first, "a fresh run in a reused run dir appended to the old W&B run"
    assert (run / "wandb_run_id").read_text().strip() == second
    # A copied (or moved) run dir resumes in its own W&B run; so does the original.
    copy = tmp_path / "elsewhere" / "copy"
    shutil.copytree(run, copy)
    train(dataclasses.replace(cfg, run_dir=None, resume=str(copy), max_frames=384))
    train(dataclasses.replace(cfg, run_dir=None, resume=str(run), max_frames=384))
    assert _ids(calls)[2:] == [second, second]


def test_a_fresh_untracked_run_forgets_the_id_of_a_reused_dir(tmp_path, monkeypatch, no_login):
    run = tmp_path / "run"
    run.mkdir()
    (run / "wandb_run_id").write_text("someoldrun12\n")  # left by an earlier run in this dir
    train(dataclasses.replace(CARTPOLE, run_dir=str(run)))
    assert not (run / "wandb_run_id").exists()


# --------------------------------------------------------------------------------------------
# Issue 47.5: checked first; wandb's own login state; an unreachable server
# --------------------------------------------------------------------------------------------
def test_track_without_wandb_is_refused_before_anything_is_written(tmp_path, monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "wandb", None)  # import wandb -> ImportError
    run = tmp_path / "r"
    argv = ["train", "ppo", "--preset", "cartpole", "--track", "wandb", "--max-frames", "64"]
    assert cli.main([*argv, "--run-dir", str(run), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "pip install -e '.[wandb]' in the rapidrl checkout" in err and "Traceback" not in err
    assert not run.exists(), sorted(p.name for p in run.rglob("*"))  # no run dir, no config


def _mode_chosen(tmp_path, monkeypatch) -> str:
    """The mode ``--track wandb`` starts the real wandb in (its init stood in for)."""
    import wandb

    from rapidrl.train.track import WandbTracker

    got = {}

    def init(**kwargs):
        got.update(kwargs)
        return _FakeRun([])

    monkeypatch.setattr(wandb, "init", init)
    run = tmp_path / "run"
    run.mkdir(exist_ok=True)
    WandbTracker(dataclasses.replace(CARTPOLE, track="wandb"), run)
    return got["mode"]


def test_the_login_state_is_wandbs_own(tmp_path, monkeypatch, no_login, capsys):
    """Online where wandb itself finds credentials (asked without a prompt or the network): the
    netrc file that NETRC names, a self-hosted server's entry, WANDB_API_KEY; else offline."""
    pytest.importorskip("wandb")  # the wandb extra
    key = "0123456789abcdef0123456789abcdef01234567"
    assert _mode_chosen(tmp_path, monkeypatch) == "offline"
    netrc = tmp_path / "secrets" / "netrc"
    netrc.parent.mkdir()
    netrc.write_text(f"machine api.wandb.ai\n  login user\n  password {key}\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    assert _mode_chosen(tmp_path, monkeypatch) == "online", "the netrc file NETRC names"
    netrc.write_text(f"machine wandb.example.com\n  login user\n  password {key}\n")
    assert _mode_chosen(tmp_path, monkeypatch) == "offline"  # no entry for api.wandb.ai
    monkeypatch.setenv("WANDB_BASE_URL", "https://wandb.example.com")
    assert _mode_chosen(tmp_path, monkeypatch) == "online", "a self-hosted server's entry"
    monkeypatch.delenv("NETRC")
    monkeypatch.delenv("WANDB_BASE_URL")
    monkeypatch.setenv("WANDB_API_KEY", key)
    assert _mode_chosen(tmp_path, monkeypatch) == "online"
    monkeypatch.setenv("WANDB_MODE", "offline")  # WANDB_MODE overrides
    assert _mode_chosen(tmp_path, monkeypatch) == "offline"
    # A key wandb cannot use: refused at the start, before anything is written.
    monkeypatch.delenv("WANDB_MODE")
    monkeypatch.setenv("WANDB_API_KEY", "not a key")
    run = tmp_path / "bad-key"
    argv = ["train", "ppo", "--preset", "cartpole", "--track", "wandb", "--max-frames", "64"]
    assert cli.main([*argv, "--run-dir", str(run), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "W&B credentials are unusable" in err and "Traceback" not in err
    assert not run.exists()


def test_an_unreachable_wandb_server_goes_on_offline(tmp_path, monkeypatch, no_login, capsys):
    calls = []
    monkeypatch.setitem(
        sys.modules, "wandb", _fake_wandb(calls, api_key="k" * 40, unreachable={"online"})
    )
    monkeypatch.setenv("WANDB_API_KEY", "k" * 40)  # logged in
    run = tmp_path / "run"
    with pytest.warns(UserWarning, match="W&B did not start online .*could not reach"):
        summary = train(dataclasses.replace(CARTPOLE, run_dir=str(run), track="wandb"))
    assert [c[1]["mode"] for c in calls if c[0] == "init"] == ["online", "offline"]
    assert summary["frames"] == 256 and _steps(calls) == [128, 256]
    # Not logged in, and offline fails as well: a clear error, no traceback.
    calls.clear()
    monkeypatch.delenv("WANDB_API_KEY")
    monkeypatch.setitem(sys.modules, "wandb", _fake_wandb(calls, unreachable={"online", "offline"}))
    argv = ["train", "ppo", "--preset", "cartpole", "--track", "wandb", "--max-frames", "64"]
    assert cli.main([*argv, "--run-dir", str(tmp_path / "r2"), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert "W&B did not start (offline): could not reach" in err and "Traceback" not in err


def test_a_real_wandb_that_cannot_reach_its_server_goes_on_offline(tmp_path, monkeypatch, no_login):
    wandb = pytest.importorskip("wandb")  # the wandb extra
    from rapidrl.train.track import WandbTracker

    monkeypatch.setenv("WANDB_API_KEY", "0123456789abcdef0123456789abcdef01234567")
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")  # nothing listens there
    monkeypatch.setenv("WANDB_INIT_TIMEOUT", "3")
    wandb.teardown()  # wandb reads its settings once a process: these, not an earlier test's
    run = tmp_path / "run"
    run.mkdir()
    with pytest.warns(UserWarning, match=r"(?s)W&B did not start online .*127\.0\.0\.1:9"):
        tracker = WandbTracker(dataclasses.replace(CARTPOLE, track="wandb"), run)
    tracker.log(128, {"return_mean_100": 9.5})
    tracker.finish({"frames": 128})
    wandb.teardown()  # the next test reads its own settings
    (offline,) = _segments(run)
    assert [(r["_step"], r["return_mean_100"]) for r in _history(offline)] == [(128, 9.5)]


# --------------------------------------------------------------------------------------------
# Real offline W&B runs, read back from W&B's own transaction log
# --------------------------------------------------------------------------------------------
_BLOCK = 32768  # the log's block size; a record header: crc32, length, type


def _history(offline: Path) -> list[dict[str, float]]:
    """The history rows (with ``_step``) in an offline run's ``run-*.wandb``: W&B's log of
    protobuf records, the file ``wandb sync`` uploads."""
    from wandb.proto import wandb_internal_pb2 as pb

    (log,) = offline.glob("run-*.wandb")
    data = log.read_bytes()
    ident, magic, _version = struct.unpack("<4sHB", data[:7])
    assert (ident, magic) == (b":W&B", 0xBEE1), log
    rows, pos, record = [], 7, b""
    while True:
        if _BLOCK - pos % _BLOCK < 7:  # a block's tail too short for a header: zeros
            pos += _BLOCK - pos % _BLOCK
        if pos + 7 > len(data):
            break
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        body = data[pos + 7 : pos + 7 + length]
        if kind == 0 or len(body) < length:  # the end, or the torn tail of a killed writer
            break
        pos += 7 + length
        record = body if kind in (1, 2) else record + body  # full/first, middle/last
        if kind not in (1, 4):
            continue
        rec = pb.Record()
        rec.ParseFromString(record)
        if rec.WhichOneof("record_type") != "history":
            continue
        row = {}
        for item in rec.history.item:
            key = item.key or ".".join(item.nested_key)
            which = item.WhichOneof("value")
            row[key] = json.loads(item.value_json) if which is None else getattr(item, which)
        rows.append(row)
    return rows


def _segments(run: Path) -> list[Path]:
    """The offline W&B segments of a run dir, oldest first (one per session)."""
    return sorted((run / "wandb").glob("offline-run-*"))


@pytest.fixture
def offline_wandb(tmp_path, monkeypatch, no_login):
    pytest.importorskip("wandb")  # the wandb extra
    monkeypatch.setenv("WANDB_MODE", "offline")


def test_a_real_offline_wandb_run(tmp_path, offline_wandb):
    run = tmp_path / "run"
    train(dataclasses.replace(CARTPOLE, run_dir=str(run), track="wandb"))
    # wandb's service writes its log out on its own schedule (every 15 s), all of it when it
    # stops: as it does at this process's exit, before `wandb sync` reads the files.
    import wandb

    wandb.teardown()
    (offline,) = _segments(run)
    data = next(offline.glob("run-*.wandb")).read_bytes()
    for key in ("return_mean_100", "policy_loss", "learning_curve"):
        assert key.encode() in data, key
    _, rows = read_metrics(run / "metrics.csv")
    assert [int(r["_step"]) for r in _history(offline)] == [int(r["frames"]) for r in rows]
    assert json.loads((run / "summary.json").read_text())["frames"] == 256
    assert offline.name.endswith("-" + (run / "wandb_run_id").read_text().strip())


def _gone(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.filterwarnings("ignore:run directory .* taking over the lock")  # of the killed one
@pytest.mark.parametrize("flush", [None, "0.1"], ids=["wandb-flush-15s", "wandb-flush-0.1s"])
def test_a_killed_offline_wandb_run_resumed_holds_every_metrics_row_once(
    tmp_path, offline_wandb, flush
):
    """The issue's case: a run SIGKILLed some rows past its newest checkpoint, then resumed; read
    back from W&B's files (what ``wandb sync`` uploads, segment after segment), W&B holds every
    row of metrics.csv exactly once, with its values, its steps only going up (W&B drops a row
    whose step is behind). The killed run's W&B process writes its log out every 15 s (wandb's
    default: it had written little or nothing) or every 0.1 s (it had written what it got)."""
    run = tmp_path / "run"
    argv = [sys.executable, "-m", "rapidrl.cli", "train", "ppo", "--preset", "cartpole"]
    argv += ["--num-steps", "32", "--no-progress", "--torch-threads", "1", "--no-tensorboard"]
    argv += ["--log-every-frames", "128", "--checkpoint-every-frames", "2048", "--seed", "4"]
    argv += ["--max-frames", "100000000", "--track", "wandb", "--run-dir", str(run)]
    # Its own W&B process (not this one's, which WANDB_SERVICE names once this process started
    # one), in its own process group: found by it.
    env = {k: v for k, v in os.environ.items() if k != "WANDB_SERVICE"}
    if flush is not None:
        env["WANDB__TRANSACTION_LOG_FLUSH_INTERVAL"] = flush
    log = tmp_path / "log"
    with open(log, "w") as out:
        proc = subprocess.Popen(argv, start_new_session=True, stdout=out, stderr=out, env=env)
    try:
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:  # 4 rows past a checkpoint (16 updates apart)
            assert proc.poll() is None, log.read_text()
            ckpts = list_checkpoints(run / "checkpoints")
            _, rows = read_metrics(run / "metrics.csv")
            if ckpts and rows and int(rows[-1]["frames"]) >= int(ckpts[-1].stem[5:]) + 512:
                break
            time.sleep(0.02)
        proc.send_signal(signal.SIGKILL)  # the trainer alone: no checkpoint, no summary
        proc.wait(timeout=30)
        deadline = time.monotonic() + 60  # its wandb process writes what it got, then ends
        while not _gone(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.1)
    finally:
        if not _gone(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
    checkpoint = int(list_checkpoints(run / "checkpoints")[-1].stem[5:])
    _, rows = read_metrics(run / "metrics.csv")
    assert int(rows[-1]["frames"]) > checkpoint  # rows past the checkpoint: the case at hand
    (dead,) = _segments(run)
    # What its W&B process had not written out is lost: the killed session's segment holds some
    # or all of the rows its checkpoints covered, and none past them.
    held = [int(r["_step"]) for r in _history(dead)]
    assert held == [int(r["frames"]) for r in rows[: len(held)]]
    assert not held or held[-1] <= checkpoint, "rows past the checkpoint went to W&B"
    # Resumed to 512 frames past the checkpoint.
    more = ["--resume", str(run), "--max-frames", str(checkpoint + 512)]
    assert cli.main(["train", "ppo", *more]) == 0
    # This process's W&B service writes the resumed segment out on its own schedule, all of it
    # when it stops, as at the CLI's exit, before `wandb sync` reads the files: under load its
    # last rows were not yet on disk when read here.
    import wandb

    wandb.teardown()
    _, rows = read_metrics(run / "metrics.csv")
    segments = _segments(run)
    names = [re.fullmatch(r"offline-run-\d{8}_\d{6}-(\w+?)(-\d+)?", s.name) for s in segments]
    assert len(segments) == 2 and names[0][1] == names[1][1]  # two segments of one W&B run
    history = [row for segment in segments for row in _history(segment)]
    steps = [int(r["_step"]) for r in history]
    assert steps == [int(r["frames"]) for r in rows], "W&B's rows are not metrics.csv's"
    for got, want in zip(history, rows):
        for key in ("episodes", "return_mean_100", "policy_loss"):
            if want[key]:
                assert got[key] == pytest.approx(float(want[key]), rel=1e-6), (key, want)
    assert names[0][1] == (run / "wandb_run_id").read_text().strip()
